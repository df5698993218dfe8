"""Test support for tests/serve/plugin/test_select.py: a torch module with the shape of the plugin's heads,
its Python-branch reference forward, inputs, and an Inductor backend that counts compiles.

Kept out of test_select.py because it needs torch (and specbench.serve.plugin.select, which imports
torch) at import: test_select.py imports it inside its tests, so that collecting that module (on
every xdist worker, even when its tests are deselected) does not import torch (~1.7 s a worker).

:class:`Head` has the shape of the plugin's heads: a mask on the input embedding at position 0, a
fused "norm with residual" returning (normed, summed), then a pick of (for logits, carried). The
independent source is :func:`branch_forward`, the variant written with Python ``if``s (what the
plugin shipped before: correct eager, frozen into the graph once compiled).
"""

from __future__ import annotations

import itertools

import torch

from specbench.serve.plugin import select

VARIANTS = list(itertools.product(select.NORM_FLAGS, (False, True)))


class Head(torch.nn.Module):
    def __init__(self, output_norm: str, pos0_mask: bool, device: str):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 16, device=device)
        self.fc = torch.nn.Linear(32, 16, device=device)
        self.weight = torch.nn.Parameter(torch.rand(16, device=device) + 0.5)
        select.add_variant_buffers(self, output_norm, pos0_mask, device=device)

    def norm(self, x, residual):
        summed = x + residual
        return summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight, summed

    def forward(self, ids, positions, hidden):
        embeds = select.mask_pos0(self, self.embed(ids), positions)
        x = self.fc(torch.cat([embeds, hidden], dim=-1))
        normed, summed = self.norm(torch.tanh(x), x)
        return select.for_logits(self, normed, summed), select.carried(self, normed, summed)


def branch_forward(head: Head, output_norm: str, pos0_mask: bool, ids, positions, hidden):
    embeds = head.embed(ids)
    if pos0_mask:
        embeds = torch.where(positions.unsqueeze(-1) == 0, 0, embeds)
    x = head.fc(torch.cat([embeds, hidden], dim=-1))
    normed, summed = head.norm(torch.tanh(x), x)
    picked = {True: normed, False: summed}
    logits, carry = select.NORM_FLAGS[output_norm]
    return picked[logits], picked[carry]


def inputs(device: str):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 50, (6,), generator=g).to(device)
    positions = torch.tensor([0, 1, 2, 0, 1, 5], device=device)  # two sequences' position 0
    hidden = torch.randn(6, 16, generator=g).to(device)
    return ids, positions, hidden


class CountingBackend:
    """Inductor, counting how often Dynamo hands it a graph (a re-trace is a second call)."""

    def __init__(self):
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx

        self.compiles += 1
        return compile_fx(gm, example_inputs)
