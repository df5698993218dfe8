"""The head variant as data (specbench/serve/plugin/select.py) under torch.compile: a switch is an
in-place write that a compiled graph (and, on a GPU, a captured CUDA graph) obeys without a
re-trace, and each variant computes exactly what a Python-branch forward of that variant does.

The module (tests/serve/plugin/torch_head.py: Head) has the shape of the plugin's heads: a mask on the
input embedding at position 0, a fused "norm with residual" returning (normed, summed), then a pick
of (for logits, carried). The independent source is torch_head.branch_forward, the variant written
with Python ``if``s (what the plugin shipped before: correct eager, frozen into the graph once
compiled).

On CPU this runs Inductor's C++ backend. With CUDA (benchmarks/gpu_check.sh on a lent GPU: they skip
elsewhere, and that script exits non-zero without CUDA so a skip never reads as a pass) it also
compiles with Inductor's Triton backend, captures a CUDA graph of the eager module, and captures one
of the compiled module: the path vLLM's V2 draft decode takes (FULL CUDA graphs of the compiled
draft, its step switched by a write to a buffer before replay).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.imports_vllm  # torch in the worker: on the one worker that imports it anyway

# torch is imported inside the tests, so that collecting this module (on every xdist worker, even
# when its tests are deselected) does not import torch; so are torch_head and specbench.serve.plugin.select,
# which import it.


def test_eager_selection_is_the_python_branch_forward_bit_for_bit():
    import torch
    from torch_head import VARIANTS, Head, branch_forward, inputs

    from specbench.serve.plugin import select

    head, args = Head("on", False, "cpu"), inputs("cpu")
    with torch.no_grad():
        for norm, mask in VARIANTS:
            select.set_variant(head, norm, mask)
            assert select.read_variant(head) == (norm, mask)
            got, want = head(*args), branch_forward(head, norm, mask, *args)
            assert all(torch.equal(a, b) for a, b in zip(got, want)), (norm, mask)


@pytest.mark.slow  # torch.compile (Inductor) of the module: ~4 s of CPU
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_compiled_graph_follows_in_place_switches_without_retracing(device):
    """One graph, compiled at the shipped EAGLE values, switched through all six variants and back:
    each output equals a graph compiled fresh at that variant, bit for bit, and Dynamo never
    re-traced. The variants really differ (else the check would pass vacuously)."""
    import torch
    from torch_head import VARIANTS, CountingBackend, Head, inputs

    from specbench.serve.plugin import select

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA graphs need a GPU")
    torch._dynamo.reset()
    args = inputs(device)
    head = Head("on", False, device)
    backend = CountingBackend()
    compiled = torch.compile(head, backend=backend, fullgraph=True)
    got = {}
    with torch.no_grad():
        for norm, mask in VARIANTS + [("on", False)]:
            select.set_variant(head, norm, mask)
            got.setdefault((norm, mask), []).append(compiled(*args))
    assert backend.compiles == 1  # before any fresh compile below: reset() would clear the count's cache
    with torch.no_grad():
        for (norm, mask), outs in got.items():
            torch._dynamo.reset()  # a fresh graph for a fresh module, as a fresh server would trace
            want = torch.compile(Head(norm, mask, device), backend="inductor", fullgraph=True)(*args)
            for out in outs:  # ("on", False) twice: before and after the round trip
                assert all(torch.equal(a, b) for a, b in zip(out, want)), (norm, mask)
    seen = {k: torch.cat(v[0], dim=-1).cpu() for k, v in got.items()}
    distinct = {tuple(v.flatten().tolist()) for v in seen.values()}
    assert len(distinct) == len(VARIANTS), "some variants computed the same outputs"


def test_a_captured_cuda_graph_follows_in_place_switches():
    """The GPU path vLLM takes: a CUDA graph captured once at the shipped values replays each
    variant exactly as an eager forward of that variant (the buffers are read at their address)."""
    import torch
    from torch_head import VARIANTS, Head, branch_forward, inputs

    from specbench.serve.plugin import select

    if not torch.cuda.is_available():
        pytest.skip("CUDA graphs need a GPU")
    args = inputs("cuda")
    head = Head("on", False, "cuda")
    static = [a.clone() for a in args]
    with torch.no_grad():
        for _ in range(2):  # warm up on a side stream, as torch's docs prescribe before capture
            head(*static)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = head(*static)
        for norm, mask in VARIANTS:
            select.set_variant(head, norm, mask)
            graph.replay()
            torch.cuda.synchronize()
            want = branch_forward(head, norm, mask, *args)
            assert all(torch.equal(a, b) for a, b in zip(out, want)), (norm, mask)


@pytest.mark.slow  # torch.compile (Inductor, Triton) on the GPU
def test_a_compiled_and_captured_graph_follows_in_place_switches():
    """Compiled as vLLM compiles a draft (Inductor, fullgraph, dynamic=False) and that compiled
    module captured in one CUDA graph at the shipped values: each in-place switch, then a replay,
    gives what a graph compiled fresh at that variant gives, bit for bit."""
    import torch
    from torch_head import VARIANTS, Head, inputs

    from specbench.serve.plugin import select

    if not torch.cuda.is_available():
        pytest.skip("CUDA graphs need a GPU")
    torch._dynamo.reset()
    args = inputs("cuda")
    head = Head("on", False, "cuda")
    compiled = torch.compile(head, backend="inductor", fullgraph=True, dynamic=False)
    static = [a.clone() for a in args]
    got = {}
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # compile and warm up off the capture stream
                compiled(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = compiled(*static)
        for norm, mask in VARIANTS + [("on", False)]:
            select.set_variant(head, norm, mask)
            graph.replay()
            torch.cuda.synchronize()
            got[(norm, mask)] = [t.clone() for t in out]
    with torch.no_grad():
        for (norm, mask), outs in got.items():
            torch._dynamo.reset()
            want = torch.compile(Head(norm, mask, "cuda"), backend="inductor", fullgraph=True, dynamic=False)(*args)
            assert all(torch.equal(a, b) for a, b in zip(outs, want)), (norm, mask)
    assert len({tuple(torch.cat(v, dim=-1).flatten().tolist()) for v in got.values()}) == len(VARIANTS)


def test_an_unknown_variant_is_refused_before_anything_is_written():
    from torch_head import Head

    from specbench.serve.plugin import select

    head = Head("logits-only", True, "cpu")
    with pytest.raises(ValueError, match="unknown output_norm 'of'"):
        select.set_variant(head, "of", False)
    assert select.read_variant(head) == ("logits-only", True)


def test_buffers_are_not_weights():
    import torch
    from torch_head import Head

    from specbench.serve.plugin import select

    head = Head("off", True, "cpu")
    assert not set(select.BUFFERS) & set(head.state_dict())
    assert select.has_variant(head) and not select.has_variant(torch.nn.Linear(2, 2))


def test_a_head_module_is_checked_then_given_its_buffers_and_a_load_line(caplog):
    """Both heads' __init__ (EAGLE inner model, MTP layer) go through init_variant_module: a module
    missing what the variant forward reads is refused naming it; otherwise it starts at the variant
    asked for, read back from its buffers, and says so in the log."""
    import logging

    import torch

    from specbench.serve.plugin import select

    log = logging.getLogger("test.specbench.select")
    bare = torch.nn.Module()
    with pytest.raises(RuntimeError, match=r"deepseek_mtp layer has no \['shared_head'\]"):
        select.init_variant_module(bare, ("shared_head",), "deepseek_mtp layer", ("off", True), log)
    head = torch.nn.Module()
    head.norm = torch.nn.Linear(2, 2)
    with caplog.at_level(logging.INFO, logger="test.specbench.select"):
        select.init_variant_module(head, ("norm",), "deepseek_eagle.DeepseekV2Model", ("logits-only", True), log)
    assert select.read_variant(head) == ("logits-only", True)
    assert "specbench output_norm variant 'logits-only' loaded (pos0_mask on): Module" in caplog.text


def test_buffers_sit_on_the_device_the_head_computes_on():
    """A head whose first weight stays in CPU memory (vLLM's --cpu-offload-gb) while the rest sit on
    an accelerator gets its buffers on the accelerator ("meta" stands in for a GPU here); all-CPU
    weights keep them on the CPU; weights on two accelerators are refused."""
    import torch

    from specbench.serve.plugin import select

    class TwoPlaces(torch.nn.Module):
        def __init__(self, first: str, second: str):
            super().__init__()
            self.offloaded = torch.nn.Parameter(torch.zeros(2, device=first))
            self.resident = torch.nn.Parameter(torch.zeros(2, device=second))

    class TwoAccelerators(torch.nn.Module):
        def parameters(self, recurse: bool = True):  # only .device is read; no GPU needed
            return iter([torch.empty(1, device="meta"), SimpleNamespace(device=torch.device("cuda", 1))])

    assert select.weights_device(TwoPlaces("cpu", "meta")) == torch.device("meta")
    assert select.weights_device(TwoPlaces("cpu", "cpu")) == torch.device("cpu")
    assert select.weights_device(torch.nn.Module()) is None
    with pytest.raises(RuntimeError, match="the variant buffers need the one device"):
        select.weights_device(TwoAccelerators())
