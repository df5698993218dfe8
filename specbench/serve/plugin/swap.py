"""Build one of vLLM's classes with a module global of its constructor pointed at ours (pure; no vLLM import).

vLLM's draft models build their parts from module globals (``deepseek_eagle.DeepseekV2Model``,
``deepseek_mtp.DeepSeekMultiTokenPredictorLayer``). Pointing that name at the variant class while
vLLM's own constructor runs keeps its constructor (no copy of it here) and builds each part once,
as the variant, so attention layers register once and the compile wrapper captures the variant's
``forward``. Both heads' variant classes (:mod:`~specbench.serve.plugin.variants`,
:mod:`~specbench.serve.plugin.mtp_variants`) build through :func:`pointed_at`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def pointed_at(module: Any, name: str, replacement: Any, original: Any, lock: threading.Lock) -> Iterator[None]:
    """While the block runs (holding ``lock``: one construction at a time), ``module.name`` is
    ``replacement``; afterwards ``original`` again, whatever the block raised."""
    # setattr: swapping a module's class at run time is the point; mypy rightly refuses it as an assignment.
    with lock:
        setattr(module, name, replacement)
        try:
            yield
        finally:
            setattr(module, name, original)
