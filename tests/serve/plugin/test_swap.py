"""specbench/serve/plugin/swap.py: the module global both heads' variant classes build through."""

from __future__ import annotations

import threading
import types

import pytest

from specbench.serve.plugin import swap


class _Shipped:
    pass


class _Variant(_Shipped):
    pass


def _module():
    return types.SimpleNamespace(Layer=_Shipped)


def test_the_name_is_the_replacement_inside_and_the_original_after():
    mod, lock = _module(), threading.Lock()
    with swap.pointed_at(mod, "Layer", _Variant, _Shipped, lock):
        assert mod.Layer is _Variant
        assert lock.locked()  # one construction at a time
    assert mod.Layer is _Shipped
    assert not lock.locked()


def test_the_original_is_back_when_the_constructor_raises():
    mod, lock = _module(), threading.Lock()
    with pytest.raises(RuntimeError, match="vLLM's constructor failed"):
        with swap.pointed_at(mod, "Layer", _Variant, _Shipped, lock):
            raise RuntimeError("vLLM's constructor failed")
    assert mod.Layer is _Shipped
    assert not lock.locked()


def test_the_original_given_is_restored_not_what_was_there():
    # The heads pass vLLM's class as imported: a name another swap left behind is put right.
    mod, lock = types.SimpleNamespace(Layer=_Variant), threading.Lock()
    with swap.pointed_at(mod, "Layer", _Variant, _Shipped, lock):
        pass
    assert mod.Layer is _Shipped
