"""Read a run directory as every reader takes it: a specbench run (:func:`specbench.run.store.load_run`)
or a ``vllm bench sweep serve`` experiment directory read as one (:mod:`specbench.run.sweep`).

Above both, so the store knows nothing of sweeps and the sweep reader builds the store's records."""

from __future__ import annotations

from pathlib import Path

from specbench.run.store import MANIFEST, Run, load_run
from specbench.run.sweep import is_sweep_dir, load_sweep


def read_run(path: Path, *, resuming: bool = False) -> Run:
    """The run at ``path``; InputError naming the file for anything missing, corrupt or foreign."""
    path = Path(path)
    if path.is_dir() and not (path / MANIFEST).exists() and is_sweep_dir(path):
        return load_sweep(path)
    return load_run(path, resuming=resuming)
