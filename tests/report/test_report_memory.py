"""`report` on a log holds its records, not the log: the file is never read whole as text, and the
bootstrap draws its resamples in bounded batches (the same draws as one matrix)."""

from pathlib import Path

import numpy as np

from specbench.analysis import bootstrap
from specbench.analysis.counts import Counts

LINE = ("(APIServer pid=7) INFO 12-02 13:26:42 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.70, "
        "Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: {a} tokens, Drafted: 9 tokens, "
        "Per-position acceptance rate: 0.500, 0.250, 0.125, Avg Draft acceptance rate: 55.6%\n")


def test_batched_resamples_are_the_one_matrix_draws(monkeypatch):
    rng = np.random.default_rng(0)
    units = [Counts(num_drafts=3, draft_tokens=9, accepted_tokens=int(a), accepted_per_position=[int(a), 0, 0])
             for a in rng.integers(0, 4, size=101)]
    whole = bootstrap.bootstrap(units, n_resamples=500, seed=3)
    monkeypatch.setattr(bootstrap, "_BATCH_ELEMENTS", 1000)  # 9 resamples per batch
    batched = bootstrap.bootstrap(units, n_resamples=500, seed=3)
    assert batched.keys() == whole.keys()
    for key in whole:  # equal to the last bit (nan where alpha_i divides by a zero p_(i-1))
        np.testing.assert_array_equal(batched[key], whole[key])
    m = np.arange(12.0).reshape(4, 3)
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    assert (bootstrap.resampled_sums(m, 7, rng_a) == bootstrap.resample_weights(4, 7, rng_b) @ m).all()


def test_report_never_reads_a_log_whole(tmp_path, monkeypatch):
    from specbench.report import inputs as report_inputs

    log = tmp_path / "server.log"
    log.write_text("".join(LINE.format(a=a) for a in range(5)) + "x" * 200_000 + "\n")
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or real(self, *a, **k))
    group = report_inputs.groups_from_files([log], [])[0]
    assert len(group.units) == 5
    assert log not in reads
