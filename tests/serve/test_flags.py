"""specbench/serve/flags.py: the installed vLLM's own `vllm serve` parser says which flags exist."""

from __future__ import annotations

import json

import pytest

from specbench.serve import flags as sf


@pytest.mark.slow
@pytest.mark.imports_vllm  # importorskip("vllm") imports it into the worker
def test_probe_reads_the_installed_parser_and_caches_it(tmp_path, monkeypatch):
    pytest.importorskip("vllm")
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    sf.serve_flags.cache_clear()
    flags = sf.serve_flags()
    assert {
        "--per-request-spec-decode-metrics",
        "--speculative-config",
        "--enforce-eager",
        "--worker-extension-cls",
        "--tensor-parallel-size",
    } <= flags
    assert "--results-dir" not in flags
    cached = json.loads((tmp_path / "vllm-serve-flags.json").read_text())
    assert list(cached.values()) == [sorted(flags)]
    # a second process reads the cache instead of importing vLLM: prove it by changing the entry
    key = next(iter(cached))
    (tmp_path / "vllm-serve-flags.json").write_text(json.dumps({key: ["--only-this"]}))
    sf.serve_flags.cache_clear()
    assert sf.serve_flags() == frozenset({"--only-this"})
    sf.serve_flags.cache_clear()


def test_a_python_without_vllm_answers_none(tmp_path):
    sf.serve_flags.cache_clear()
    assert sf.serve_flags("/bin/false") is None
    sf.serve_flags.cache_clear()
