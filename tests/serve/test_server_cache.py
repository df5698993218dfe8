"""The model-inspection cache servers share (specbench/serve/server.py: shared_modelinfos_dir, link_modelinfos).

vLLM's own cache code (registry.py ``_LazyRegisteredModel``) reads and writes the entries here; the
start-up time it saves is measured in benchmarks/orchestration_overhead.py, not in the suite.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from specbench.run.runner import _remove_tree
from specbench.serve.server import MODELINFOS_ENV, VLLMServer, link_modelinfos, shared_modelinfos_dir


def _env(tmp_path: Path, cell_env: dict[str, str] | None = None, **kw) -> tuple[VLLMServer, dict[str, str]]:
    server = VLLMServer(["model"], cell_env, tmp_path / "server.log", state_dir=tmp_path / "state", **kw)
    return server, server._environment()


def test_private_cache_root_shares_only_modelinfos(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    monkeypatch.setenv(MODELINFOS_ENV, str(shared))
    server, env = _env(tmp_path)
    root = Path(env["VLLM_CACHE_ROOT"])
    assert root == tmp_path / "state" / "cache"  # the compile cache stays per server
    assert (root / "modelinfos").is_symlink() and (root / "modelinfos").resolve() == shared.resolve()
    assert server.modelinfos_dir == shared
    (root / "modelinfos" / "probe.json").write_text("{}")
    assert (shared / "probe.json").read_text() == "{}"
    # The runner removes each server's state dir after its cell: the shared entries must survive.
    _remove_tree(tmp_path / "state")
    assert (shared / "probe.json").is_file()


def test_state_dir_used_twice_keeps_its_link(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELINFOS_ENV, str(tmp_path / "shared"))
    _env(tmp_path)
    server, _ = _env(tmp_path)
    assert server.modelinfos_dir == tmp_path / "shared"


def test_cache_root_named_by_the_cell_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELINFOS_ENV, str(tmp_path / "shared"))
    own = tmp_path / "user-cache"
    server, env = _env(tmp_path, {"VLLM_CACHE_ROOT": str(own)})
    assert env["VLLM_CACHE_ROOT"] == str(own)
    assert not (own / "modelinfos").exists() and server.modelinfos_dir is None


def test_a_users_cache_root_is_keyed_per_head_variant(tmp_path, monkeypatch):
    """vLLM's compile-cache key ignores the plugin's variant: two variants sharing a user's
    VLLM_CACHE_ROOT would run each other's compiled graph. Each gets its own sub-directory; vLLM as
    shipped keeps the user's root."""
    own = str(tmp_path / "user-cache")
    roots = {}
    for name, switches in {
        "shipped": {},
        "off": {"SPECBENCH_OUTPUT_NORM": "off", "SPECBENCH_HEAD": "eagle"},
        "logits-only": {"SPECBENCH_OUTPUT_NORM": "logits-only", "SPECBENCH_HEAD": "eagle"},
        "control": {"SPECBENCH_HEAD_CONTROL": "1", "SPECBENCH_HEAD": "eagle"},
    }.items():
        roots[name] = _env(tmp_path, {"VLLM_CACHE_ROOT": own, **switches})[1]["VLLM_CACHE_ROOT"]
    assert roots["shipped"] == own
    assert len(set(roots.values())) == 4 and all(r.startswith(own + os.sep) for n, r in roots.items() if n != "shipped")


def test_sharing_off_gives_an_empty_private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELINFOS_ENV, str(tmp_path / "shared"))
    server, env = _env(tmp_path, share_modelinfos=False)
    assert not (Path(env["VLLM_CACHE_ROOT"]) / "modelinfos").exists() and server.modelinfos_dir is None


def test_env_off_turns_sharing_off(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELINFOS_ENV, "off")
    assert shared_modelinfos_dir() is None
    server, env = _env(tmp_path)
    assert not (Path(env["VLLM_CACHE_ROOT"]) / "modelinfos").exists() and server.modelinfos_dir is None


def test_a_real_directory_already_there_is_kept(tmp_path):
    root = tmp_path / "cache"
    (root / "modelinfos").mkdir(parents=True)
    assert link_modelinfos(root, tmp_path / "shared") is False
    assert not (root / "modelinfos").is_symlink()


def test_default_location_follows_specbench_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(MODELINFOS_ENV, raising=False)
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    assert shared_modelinfos_dir() == tmp_path / "vllm-modelinfos"
    monkeypatch.delenv("SPECBENCH_CACHE")
    assert shared_modelinfos_dir() == Path.home() / ".cache" / "specbench" / "vllm-modelinfos"


def test_suite_servers_use_a_session_cache_not_the_users(tmp_path):
    """conftest points every server of the session at one cache of its own (isolated, shared)."""
    shared = Path(os.environ[MODELINFOS_ENV])
    assert Path.home() / ".cache" not in shared.parents


WRITES = 150


def _hammer(root: str, worker: int, queue) -> None:
    """Write and read one entry through ``root`` (a private cache root linked to the shared dir)
    with vLLM's own cache code, as two servers starting at once would. Reports torn reads."""
    from vllm.model_executor.models import registry

    os.environ["VLLM_CACHE_ROOT"] = root  # vLLM reads it at each call
    entry = registry._LazyRegisteredModel("vllm.model_executor.models.llama", "LlamaForCausalLM")
    from vllm.model_executor.models.llama import LlamaForCausalLM

    info = registry._ModelInfo.from_model_cls(LlamaForCausalLM)
    # What a whole entry reads back as (the JSON round trip turns tuples into lists).
    whole = json.loads(json.dumps(asdict(info)))
    bad = 0
    for i in range(WRITES):
        entry._save_modelinfo_to_cache(info, f"hash-{worker}-{i}")
        for other in range(4):  # any writer's latest entry: read it back whole or not at all
            got = entry._load_modelinfo_from_cache(f"hash-{other}-{i}")
            bad += got is not None and json.loads(json.dumps(asdict(got))) != whole
        with open(Path(root) / "modelinfos" / entry._get_cache_filename(), encoding="utf-8") as fh:
            try:
                json.load(fh)
            except ValueError:
                bad += 1
    queue.put(bad)


@pytest.mark.slow  # imports vLLM into the worker
@pytest.mark.imports_vllm
def test_servers_writing_at_once_never_tear_an_entry(tmp_path):
    pytest.importorskip("vllm")
    # Import once, before forking: each worker then starts in milliseconds, so they overlap.
    from vllm.model_executor.models import registry  # noqa: F401
    from vllm.model_executor.models.llama import LlamaForCausalLM  # noqa: F401

    shared = tmp_path / "shared"
    roots = []
    for w in range(4):
        root = tmp_path / f"server{w}" / "cache"
        assert link_modelinfos(root, shared)
        roots.append(str(root))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(r, w, queue)) for w, r in enumerate(roots)]
    for p in procs:
        p.start()
    bad = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert all(p.exitcode == 0 for p in procs)
    assert bad == [0, 0, 0, 0]
    files = [p.name for p in shared.iterdir()]
    assert files == ["vllm-model_executor-models-llama-LlamaForCausalLM.json"]  # no temp files left
