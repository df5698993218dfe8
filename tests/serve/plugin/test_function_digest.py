"""specbench/serve/plugin/switches.py function_digest: a head function's code, not its file or layout
(pure; no vLLM). What the releases hold is read by benchmarks/head_support.py."""

from __future__ import annotations

from specbench.serve.plugin.switches import function_digest

SOURCE = '''
class Layer:
    def __init__(self):
        self.x = 1

    @staticmethod
    def forward(a, b):
        """Docstring."""
        return torch.where(a == 0, 0, b)  # the mask
'''


def test_layout_and_comments_do_not_count_code_does():
    base = function_digest(SOURCE, "Layer.forward")
    assert base is not None and len(base) == 64
    wrapped = SOURCE.replace("torch.where(a == 0, 0, b)", "torch.where(\n            a == 0, 0, b\n        )")
    assert function_digest(wrapped, "Layer.forward") == base
    assert function_digest(SOURCE.replace("# the mask", "# another comment"), "Layer.forward") == base
    assert function_digest(SOURCE.replace("self.x = 1", "self.x = 2"), "Layer.forward") == base  # __init__ only
    assert function_digest(SOURCE.replace("a == 0", "a == 1"), "Layer.forward") != base
    assert function_digest(SOURCE.replace("    @staticmethod\n", ""), "Layer.forward") != base  # decorators count


def test_a_missing_function_or_class_is_none():
    assert function_digest(SOURCE, "Layer.backward") is None
    assert function_digest(SOURCE, "Other.forward") is None
