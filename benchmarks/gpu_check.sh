#!/usr/bin/env bash
# The GPU half of the head switch, on a lent GPU machine: the tests that skip without CUDA, run so
# that a skip cannot read as a pass. Needs only python3 with torch (CUDA build), pytest and psutil
# (the machine has no vLLM, no pydantic, no internet); run from the repository root:
#   bash benchmarks/gpu_check.sh                  # python3 on PATH
#   PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh
# Prints one line per check (PASS/FAIL/SKIP) and exits non-zero when CUDA is absent (exit 11), a
# test fails, or any of them skipped. Takes ~2-4 min on one H100 (three Inductor/Triton compiles).
set -u
cd "$(dirname "$0")/.." || exit 12
PY="${PYTHON:-python3}"
"$PY" - <<'PY' || exit 11
import shutil, sys
try:
    import torch
except ImportError as exc:
    sys.exit(f"no CUDA: torch is not importable ({exc})")
print(f"python {sys.version.split()[0]} torch {torch.__version__} cuda {torch.version.cuda} "
      f"available {torch.cuda.is_available()} nvidia-smi {shutil.which('nvidia-smi')}")
if not torch.cuda.is_available():
    sys.exit("no CUDA: torch.cuda.is_available() is False, these checks would only skip")
print("device", torch.cuda.get_device_name(0))
PY
TESTS=(
  "tests/serve/plugin/test_select.py::test_a_compiled_graph_follows_in_place_switches_without_retracing[cuda]"
  "tests/serve/plugin/test_select.py::test_a_captured_cuda_graph_follows_in_place_switches"
  "tests/serve/plugin/test_select.py::test_a_compiled_and_captured_graph_follows_in_place_switches"
  "tests/serve/test_procs_release.py::test_a_real_gpu_process_is_listed_then_released"
)
# -o addopts="": one process, none of pyproject's xdist options; -p no:cacheprovider: writes nothing
REPORT=$("$PY" -m pytest -o addopts="" -p no:cacheprovider -q -rA "${TESTS[@]}" 2>&1)
rc=$?
echo "$REPORT" | grep -E "^(PASSED|FAILED|SKIPPED|ERROR) " | sed -E 's/^PASSED/PASS/; s/^FAILED/FAIL/; s/^SKIPPED/SKIP/'
if echo "$REPORT" | grep -qE "^SKIPPED "; then
  echo "a check skipped: not a pass"; exit 13
fi
[ "$rc" -eq 0 ] || { echo "$REPORT" | tail -40; echo "pytest exit status: $rc"; }
exit $rc
