"""The plugin's CPU synthetic kernels against vLLM's own Triton kernels, run from the installed source.

The oracle is the installed ``vllm/v1/sample/rejection_sampler.py`` itself: the bodies of
``rejection_greedy_sample_kernel`` and ``rejection_random_sample_kernel`` are taken from the file
(without ``@triton.jit``) and executed with a stand-in for ``triton.language`` whose pointers index
plain lists (``tl.load(p + i)``, ``tl.store(p + i, v)``, ``tl.program_id(0)`` = the request). So a
vLLM release that changes the synthetic rule changes the oracle, and the exact comparisons the plugin
mirrors are also asserted in the source. Random inputs include ties (``uniform == rate``: rejected,
the kernel's ``<``), rates 0 and 1, padded draft ids (-1) and requests with no draft tokens.
"""

from __future__ import annotations

import ast
import functools
import random
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from specbench.serve.plugin.synthetic import REFUSAL, greedy_rule, random_rule
from specbench.serve.spec_fields import current_vllm_root

ROOT = current_vllm_root()
SAMPLER = ROOT / "v1" / "sample" / "rejection_sampler.py" if ROOT else None
# The comparisons the plugin mirrors, as the installed kernels write them.
GREEDY_RULE = "accepted = (uniform_prob < rate) and draft_token_id >= 0"
RANDOM_RULE = "accepted = uniform_prob < rate"
NEEDS_VLLM = pytest.mark.skipif(SAMPLER is None or not SAMPLER.exists(), reason="no vLLM installed")


class _Ptr:
    """A Triton pointer into a Python list: ``p + i`` moves it, ``tl.load``/``tl.store`` read and write."""

    def __init__(self, data: list, offset: int = 0) -> None:
        self.data, self.offset = data, offset
        self.dtype = SimpleNamespace(element_ty="int32")

    def __add__(self, n: int) -> "_Ptr":
        return _Ptr(self.data, self.offset + int(n))

    def __sub__(self, n: int) -> "_Ptr":
        return _Ptr(self.data, self.offset - int(n))


class _Int(int):
    def to(self, _dtype: object) -> "_Int":
        return self


def _tl(program: list[int]) -> SimpleNamespace:
    def load(p: _Ptr):
        v = p.data[p.offset]
        return v if isinstance(v, (float, bool)) else _Int(v)

    def store(p: _Ptr, v) -> None:
        p.data[p.offset] = int(v)

    return SimpleNamespace(
        constexpr=object, int32="int32", program_id=lambda _axis: program[0], load=load, store=store,
        zeros=lambda _shape, dtype=None: _Int(0),
    )  # fmt: skip


@functools.cache
def _kernel_code(name: str):
    tree = ast.parse(SAMPLER.read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    fn.decorator_list = []
    return compile(textwrap.dedent(ast.unparse(fn)), str(SAMPLER), "exec")


def _kernel(name: str, program: list[int]):
    """The installed kernel ``name`` as a plain function over lists (no torch, no Triton)."""
    ns: dict = {"tl": _tl(program)}
    exec(_kernel_code(name), ns)
    return ns[name]


def _case(rng: random.Random, k: int) -> dict:
    batch = rng.randint(1, 6)
    n = [rng.choice([0, k, k, rng.randint(0, k)]) for _ in range(batch)]
    cu = [sum(n[: i + 1]) for i in range(batch)]
    tokens = cu[-1]
    rates = [rng.choice([0.0, 1.0, 0.25, rng.random()]) for _ in range(k)]
    uniform = [rng.random() for _ in range(tokens)]
    for start, end in zip([0, *cu[:-1]], cu):  # ties with the position's rate: the kernel's `<` rejects them
        for pos in range(end - start):
            if rng.random() < 0.2:
                uniform[start + pos] = rates[pos]
    return {
        "cu": cu,
        "draft": [rng.choice([-1, rng.randint(0, 9), rng.randint(0, 9)]) for _ in range(tokens)],
        "argmax": [rng.randint(0, 9) for _ in range(tokens)],
        "recovered": [rng.randint(0, 9) for _ in range(tokens)],
        "bonus": [rng.randint(0, 9) for _ in range(batch)],
        "greedy": [rng.random() < 0.5 for _ in range(batch)],
        "uniform": uniform,
        "rates": rates,
        "k": k,
    }


def _oracle(c: dict, greedy: bool, all_greedy: bool = False) -> list[list[int]]:
    program = [0]
    kernel = _kernel("rejection_greedy_sample_kernel" if greedy else "rejection_random_sample_kernel", program)
    k, batch = c["k"], len(c["cu"])
    out = [-1] * (batch * (k + 1))
    for req in range(batch):
        program[0] = req
        p = {name: _Ptr(c[name]) for name in ("cu", "draft", "argmax", "recovered", "bonus", "greedy", "uniform")}
        rates = _Ptr(c["rates"])
        if greedy:
            is_greedy = None if all_greedy else p["greedy"]
            kernel(_Ptr(out), p["cu"], p["draft"], p["argmax"], p["bonus"], is_greedy, k, p["uniform"], rates, True)
        else:
            kernel(
                _Ptr(out), p["cu"], p["draft"], None, None, p["bonus"], p["recovered"], p["uniform"],
                p["greedy"], k, 10, rates, True, True,
            )  # fmt: skip
    return [out[r * (k + 1) : (r + 1) * (k + 1)] for r in range(batch)]


def _ours(c: dict, greedy: bool, all_greedy: bool = False) -> list[list[int]]:
    out = [[-1] * (c["k"] + 1) for _ in c["cu"]]
    if greedy:
        is_greedy = None if all_greedy else c["greedy"]
        greedy_rule(out, c["cu"], c["draft"], c["argmax"], c["bonus"], is_greedy, c["uniform"], c["rates"])
    else:
        random_rule(out, c["cu"], c["draft"], c["bonus"], c["recovered"], c["uniform"], c["greedy"], c["rates"])
    return out


@NEEDS_VLLM
def test_the_installed_kernels_still_compare_as_the_plugin_does() -> None:
    text = SAMPLER.read_text(encoding="utf-8")
    assert GREEDY_RULE in text, "vLLM's greedy synthetic rule changed: re-read it and update the plugin"
    assert RANDOM_RULE in text, "vLLM's random synthetic rule changed: re-read it and update the plugin"
    assert "rate = tl.load(synthetic_conditional_rates_ptr + pos)" in text  # the rate of the position


@NEEDS_VLLM
@pytest.mark.parametrize("greedy", [True, False], ids=["greedy-kernel", "random-kernel"])
def test_cpu_rule_equals_the_installed_triton_kernel_on_random_inputs(greedy: bool) -> None:
    rng = random.Random(55)
    for trial in range(400):
        c = _case(rng, rng.randint(1, 5))
        all_greedy = greedy and trial % 3 == 0
        assert _ours(c, greedy, all_greedy) == _oracle(c, greedy, all_greedy), c


@NEEDS_VLLM
@pytest.mark.slow
@pytest.mark.imports_vllm  # torch, and vLLM's CPU kernel wrappers
def test_the_torch_wrappers_write_what_the_rule_gives_and_pass_other_calls_through() -> None:
    torch = pytest.importorskip("torch")
    from vllm.utils import cpu_triton_utils as cpu_tl

    from specbench.serve.plugin.synthetic import greedy_kernel, random_kernel, refuses_synthetic

    source = Path(cpu_tl.__file__).read_text(encoding="utf-8")
    refuses = REFUSAL in source
    assert refuses_synthetic(cpu_tl._rejection_greedy_sample_kernel_impl, random=False) is refuses
    assert refuses_synthetic(cpu_tl._rejection_random_sample_kernel_impl, random=True) is refuses
    c = _case(random.Random(7), 3)
    rates32 = torch.tensor(c["rates"], dtype=torch.float32)
    c["rates"] = rates32.to(torch.float64).tolist()  # what the worker holds (float32), widened as Triton does
    calls: list = []

    def spy(impl):  # vLLM's CPU wrapper's signature, recording instead of running
        return functools.wraps(impl)(lambda *a, **kw: calls.append(a))

    greedy_impl, random_impl = cpu_tl._rejection_greedy_sample_kernel_impl, cpu_tl._rejection_random_sample_kernel_impl
    out = torch.full((len(c["cu"]), 4), -1, dtype=torch.int32)
    i32 = lambda name: torch.tensor(c[name], dtype=torch.int32)  # noqa: E731
    greedy_kernel(spy(greedy_impl))(
        out, i32("cu"), i32("draft"), torch.tensor(c["argmax"]), torch.tensor(c["bonus"]).reshape(-1, 1),
        torch.tensor(c["greedy"]), 3, torch.tensor(c["uniform"], dtype=torch.float64), rates32, True,
    )  # fmt: skip
    assert out.tolist() == _oracle(c, greedy=True) and not calls
    out.fill_(-1)
    random_kernel(spy(random_impl))(
        out, i32("cu"), i32("draft"), None, torch.zeros(1, 10), torch.tensor(c["bonus"]).reshape(-1, 1),
        i32("recovered"), torch.tensor(c["uniform"], dtype=torch.float64), torch.tensor(c["greedy"]), 3, 10,
        rates32, True, True,
    )  # fmt: skip
    assert out.tolist() == _oracle(c, greedy=False) and not calls
    greedy_kernel(spy(greedy_impl))(out, 1, 2, 3, 4, None, 3, None, None, False)
    assert calls == [(out, 1, 2, 3, 4, None, 3, None, None, False)]  # not synthetic: vLLM's kernel, untouched
