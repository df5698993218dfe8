"""``run``, ``run --dry-run`` and ``validate`` refuse exactly the same configs, with exit 2 and the
same one-line message (one pipeline: specbench/run/plan.py ``validated``). No vLLM is needed.

The inputs are the contract's (tests/contract/test_contract.py): every config in configs/ and
seeded damage of them (damage.py), plus head-switch values that ``--dry-run`` used to accept and
``run`` refused. ``run`` goes through the real CLI and the real ``new_plan`` (the run directory is
made); what follows validation is stood in for: ``execute`` (it would start vLLM servers), the
executor (Ray's presence is not a property of the config) and the fixture build (building the tiny
models takes minutes on a clean machine and decides nothing: refs resolve to the same paths either way).
"""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

import pytest
import yaml
from damage import dump, mutate_text, mutate_tree

from specbench.cli.main import run_cli

ROOT = Path(__file__).resolve().parents[2]
N_DAMAGED = 150


@pytest.fixture(autouse=True)
def _no_launch(monkeypatch, tmp_path):
    from specbench.cli import run_cmd
    from specbench.run import plan, runner
    from specbench.run.cells import default_resolver

    reached = []
    monkeypatch.setattr(runner, "execute", lambda p, display, executor: reached.append(p.run_dir) or "done")
    monkeypatch.setattr(run_cmd, "_executor", lambda *a: None)
    monkeypatch.setattr(plan, "fixture_resolver", lambda study: default_resolver)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("SPECBENCH_TIMINGS_FILE", "off")
    return reached


def _invoke(argv: list) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli([str(a) for a in argv])
    return code, [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]


def _three(cfg: Path, out_dir: Path) -> dict[str, tuple[int, list[str]]]:
    return {
        "validate": _invoke(["validate", cfg]),
        "dry-run": _invoke(["run", cfg, "--dry-run"]),
        "run": _invoke(["run", cfg, "--out", out_dir, "--quiet"]),
    }


def _agree(case: str, got: dict[str, tuple[int, list[str]]]) -> int:
    codes = {k: v[0] for k, v in got.items()}
    assert len(set(codes.values())) == 1 and codes["validate"] in (0, 2), f"[{case}] exit codes differ: {got}"
    msgs = {k: v[1] for k, v in got.items()}
    assert len({tuple(m) for m in msgs.values()}) == 1, f"[{case}] messages differ: {msgs}"
    if codes["validate"] == 2:
        assert len(msgs["validate"]) == 1, f"[{case}] {msgs}"
    return codes["validate"]


BAD_SWITCHES = [
    (
        "serve.env SPECBENCH_OUTPUT_NORM",
        lambda d: d["serve"].setdefault("env", {}).update(SPECBENCH_OUTPUT_NORM="sideways"),
    ),
    (
        "matrix env:SPECBENCH_POS0_MASK",
        lambda d: d.setdefault("matrix", {}).update({"env:SPECBENCH_POS0_MASK": ["maybe"]}),
    ),
    (
        "matrix env:SPECBENCH_HEAD_CONTROL",
        lambda d: d.setdefault("matrix", {}).update({"env:SPECBENCH_HEAD_CONTROL": ["2"]}),
    ),
    (
        "output_norm on an ngram server",
        lambda d: (
            d["serve"]["speculative"].update(method="ngram"),
            d.setdefault("matrix", {}).update(output_norm=["off"]),
            d["matrix"].pop("method", None),
        ),
    ),
]


@pytest.mark.parametrize("what, damage", BAD_SWITCHES, ids=[b[0] for b in BAD_SWITCHES])
def test_head_switch_values_run_refuses_are_refused_by_dry_run_and_validate_too(what, damage, tmp_path, _no_launch):
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    damage(data)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    got = _three(cfg, tmp_path / "out")
    assert _agree(what, got) == 2 and str(cfg) in got["run"][1][0]
    assert not _no_launch and not (tmp_path / "out").exists()  # refused before a run directory exists


@pytest.mark.heavy
def test_the_contract_configs_and_their_damage_get_the_same_answer_from_all_three(tmp_path, _no_launch):
    bases = [(p.name, yaml.safe_load(p.read_text())) for p in sorted((ROOT / "configs").glob("*.yaml"))]
    for name, data in bases:  # the undamaged configs pass all three, and run reaches execute
        cfg = tmp_path / name
        cfg.write_bytes(dump(data, "yaml"))
        assert _agree(name, _three(cfg, tmp_path / f"out-{name}")) == 0
    assert len(_no_launch) == len(bases)
    rng = random.Random(27)
    codes: dict[int, int] = {}
    for i in range(N_DAMAGED):
        name, data = rng.choice(bases)
        if rng.random() < 0.6:
            tree, what = mutate_tree(data, rng)
            raw = dump(tree, "yaml")
        else:
            raw, what = mutate_text(dump(data, "yaml"), rng, "yaml")
        cfg = tmp_path / f"c{i}.yaml"
        cfg.write_bytes(raw)
        code = _agree(f"seed=27 i={i} {name}: {what}", _three(cfg, tmp_path / f"out{i}"))
        codes[code] = codes.get(code, 0) + 1
    assert codes.get(2, 0) > N_DAMAGED // 3 and codes.get(0, 0) > 0, codes  # both answers are exercised
