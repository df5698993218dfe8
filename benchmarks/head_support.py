"""Which vLLM releases the head variants support, read in the released wheels: the code digest of
every function the variants re-implement (specbench.serve.plugin.switches.CHECKED_FUNCTIONS), per release.

Downloads each GPU wheel with ``pip download vllm==X --no-deps`` (~240 MB each, kept in --dir), reads
the two head files straight from the zip (nothing is installed or unpacked) and prints:

- the support table docs/gpu.md carries (release x head: supported, or refused naming the function
  that changed);
- with ``--check``: exit 1 when a release's digests disagree with CHECKED_FUNCTIONS's claim for it
  (a release it names whose code differs, or a known digest it attributes to the wrong releases).

    .venv/bin/python benchmarks/head_support.py                         # 0.29.0 .. 0.34.0
    .venv/bin/python benchmarks/head_support.py --versions 0.35.0 --check
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

from specbench.serve.plugin.switches import CHECKED_FUNCTIONS, function_digest

VERSIONS = ["0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0"]
HEADS = {"eagle": "EAGLE (deepseek_eagle.py)", "mtp": "MTP (deepseek_mtp.py)"}


def wheel(version: str, cache: Path) -> Path:
    found = sorted(cache.glob(f"vllm-{version}-*.whl"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps", "-d", str(cache), "-q"]
    subprocess.run(cmd, check=True)  # argv list, no shell
    return sorted(cache.glob(f"vllm-{version}-*.whl"))[0]


def digests(whl: Path) -> dict[str, dict[str, str | None]]:
    """head -> {function: digest (None: absent)} of the wheel's head files."""
    out: dict[str, dict[str, str | None]] = {}
    with zipfile.ZipFile(whl) as z:
        for head, (name, functions) in CHECKED_FUNCTIONS.items():
            source = z.read(f"vllm/model_executor/models/{name}").decode()
            out[head] = {q: function_digest(source, q) for q in functions}
    return out


def in_range(version: str, releases: str) -> bool:
    """Whether ``version`` lies in a ``"0.29.0-0.34.0"`` (or single-version) range."""

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    low, _, high = releases.partition("-")
    return key(low) <= key(version) <= key(high or low)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--versions", nargs="+", default=VERSIONS)
    ap.add_argument("--dir", type=Path, default=Path.home() / ".cache" / "specbench" / "wheels")
    ap.add_argument("--check", action="store_true", help="exit 1 where CHECKED_FUNCTIONS disagrees with a wheel")
    args = ap.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    rows, wrong = [], []
    for version in args.versions:
        found = digests(wheel(version, args.dir))
        cells = []
        for head, (name, functions) in CHECKED_FUNCTIONS.items():
            changed = [q for q, d in found[head].items() if d not in functions[q]]
            cells.append("supported" if not changed else f"refused: {', '.join(changed)} changed")
            for q, known in functions.items():
                d = found[head][q]
                claimed = any(in_range(version, r) for r in known.values())
                if (d in known and not in_range(version, known[d])) or (claimed and d not in known):
                    wrong.append(f"{version} {name} {q}: digest {str(d)[:12]} vs CHECKED_FUNCTIONS")
        rows.append(f"| {version} | " + " | ".join(cells) + " |")
    print("| vLLM | " + " | ".join(HEADS.values()) + " |")
    print("|---|" + "---|" * len(HEADS))
    print("\n".join(rows))
    print()
    print("functions pinned: " + "; ".join(f"{n}: {', '.join(f)}" for n, f in CHECKED_FUNCTIONS.values()))
    for line in wrong:
        print(f"MISMATCH {line}")
    return 1 if args.check and wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
