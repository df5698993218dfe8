"""Test and benchmark support: the committed runs of a checkout as populations of real requests,
simulated sides and runs, same-config rerun pairs, and the heads fixture's servers.

Not used by any command. tests/ and benchmarks/ import it as an installed package (``./setup.sh``
installs specbench editable), so neither puts a folder on ``sys.path``. What reads committed runs
reads them under ``CHECKOUT``: it works from a checkout, not from a wheel.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
BASELINES = CHECKOUT / "results" / "baselines"


def vllm_schedule_utils():
    """The installed vLLM's ``vllm/v1/spec_decode/dynamic/utils.py`` (its dynamic-K schedule
    validator and lookup), loaded from its file without importing vLLM; None without vLLM."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "v1" / "spec_decode" / "dynamic" / "utils.py"
    mod_spec = importlib.util.spec_from_file_location("vllm_dynamic_sd_utils", path)
    if mod_spec is None or mod_spec.loader is None:
        return None
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


def show_marked_blocks(tables: dict[str, str], script: str, write: Path | None) -> int:
    """A doc-table script's output: each table between ``<!-- SCRIPT NAME -->`` markers, printed,
    or put in place of the marked block of the page ``write`` (exactly one per name)."""
    import re

    if write is None:
        for name, block in tables.items():
            print(f"<!-- {script} {name} -->\n{block}\n<!-- /{script} {name} -->\n")
        return 0
    text = write.read_text()
    for name, block in tables.items():
        mark = re.compile(rf"(<!-- {re.escape(script)} {name} -->\n).*?(<!-- /{re.escape(script)} {name} -->)", re.S)
        text, n = mark.subn(_replacement(block), text)
        if n != 1:
            raise ValueError(f"{write}: {n} blocks named {name!r} (need exactly one)")
    write.write_text(text)
    return 0


def _replacement(block: str):
    def put(m) -> str:
        return f"{m.group(1)}{block}\n{m.group(2)}"

    return put
