"""specbench.serve.plugin: registration logic, pre-launch checks and server environment (no server)."""

from __future__ import annotations

import importlib.metadata as md
import json
import logging

import pytest

from specbench.errors import ConfigError
from specbench.serve.plugin import (
    CONTROL_VAR,
    ENV_VAR,
    HEAD_VAR,
    MTP_ARCH,
    PLUGIN_NAME,
    POS0_MASK_VAR,
    REGISTERED_ARCH,
    SWITCHABLE_VAR,
    Switches,
    check_variant_supported,
    plugin_env,
    register,
    switches_from_env,
)
from specbench.serve.plugin.switches import variant_cache_key

pytestmark = [pytest.mark.slow, pytest.mark.imports_vllm]  # imports vLLM (~20 s of CPU per worker); no server

ALL_VARS = (ENV_VAR, POS0_MASK_VAR, CONTROL_VAR, HEAD_VAR, SWITCHABLE_VAR)


@pytest.fixture
def registry(monkeypatch):
    """vLLM's real ModelRegistry, with its entry for the EAGLE head restored after the test."""
    from vllm.model_executor.models import ModelRegistry

    from specbench.serve.plugin import mtp_variants, variants

    for arch in (REGISTERED_ARCH, MTP_ARCH):
        monkeypatch.setitem(ModelRegistry.models, arch, ModelRegistry.models[arch])
    for module in (variants, mtp_variants):  # the variant the next head built would start with
        monkeypatch.setitem(module._initial, "variant", module.SHIPPED)
    for var in ALL_VARS:
        monkeypatch.delenv(var, raising=False)
    return ModelRegistry


def test_entry_point_is_declared():
    eps = {ep.name: ep.value for ep in md.entry_points(group="vllm.general_plugins")}
    assert eps.get(PLUGIN_NAME) == "specbench.serve.plugin:register"


def test_no_specbench_variable_is_inert(registry, caplog):
    before = dict(registry.models)
    with caplog.at_level(logging.DEBUG, logger="vllm.specbench_plugin"):
        register()
    assert registry.models == before and caplog.text == ""


@pytest.mark.parametrize(
    "env",
    [
        {ENV_VAR: "on"},
        {HEAD_VAR: "eagle", ENV_VAR: "", POS0_MASK_VAR: "off"},
        {HEAD_VAR: "eagle", ENV_VAR: "on", POS0_MASK_VAR: "off"},
        {HEAD_VAR: "mtp", ENV_VAR: "on", POS0_MASK_VAR: "on"},
        {HEAD_VAR: "mtp", ENV_VAR: "on"},
        {HEAD_VAR: "eagle", CONTROL_VAR: "0"},
    ],
)
def test_shipped_values_register_nothing(registry, monkeypatch, caplog, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    before = dict(registry.models)
    with caplog.at_level(logging.INFO, logger="vllm.specbench_plugin"):
        register()
    assert registry.models == before
    assert "output norm on (vLLM as shipped), nothing registered" in caplog.text


def _registered(registry, before) -> dict[str, type]:
    return {a: registry.models[a].model_cls for a in (REGISTERED_ARCH, MTP_ARCH) if registry.models[a] is not before[a]}


# Every non-shipped (output_norm, pos0_mask) of each head: EAGLE ships (on, off), MTP (on, on).
@pytest.mark.parametrize(
    "head,norm,mask",
    [
        (h, n, m)
        for h, shipped in (("eagle", ("on", "off")), ("mtp", ("on", "on")))
        for n in ("on", "logits-only", "off")
        for m in ("off", "on")
        if (n, m) != shipped
    ],
)
def test_variant_replaces_only_its_heads_class(registry, monkeypatch, head, norm, mask):
    from specbench.serve.plugin import mtp_variants, variants

    for k, v in {HEAD_VAR: head, ENV_VAR: norm, POS0_MASK_VAR: mask}.items():
        monkeypatch.setenv(k, v)
    before = dict(registry.models)
    register()
    ((arch, cls),) = _registered(registry, before).items()
    assert arch == {"eagle": REGISTERED_ARCH, "mtp": MTP_ARCH}[head]
    module = {"eagle": variants, "mtp": mtp_variants}[head]
    assert cls is module.VARIANT_CLASS  # one class per head: the variant is data it starts with
    assert module._initial["variant"] == (norm, mask == "on")
    other = {"eagle": mtp_variants, "mtp": variants}[head]
    assert other._initial["variant"] == other.SHIPPED


@pytest.mark.parametrize("head", ["eagle", "mtp"])
def test_a_switchable_server_gets_the_class_at_the_shipped_values(registry, monkeypatch, caplog, head):
    from specbench.serve.plugin import mtp_variants, variants

    monkeypatch.setenv(HEAD_VAR, head)
    monkeypatch.setenv(SWITCHABLE_VAR, "1")
    before = dict(registry.models)
    with caplog.at_level(logging.INFO, logger="vllm.specbench_plugin"):
        register()
    module = {"eagle": variants, "mtp": mtp_variants}[head]
    assert list(_registered(registry, before).values()) == [module.VARIANT_CLASS]
    assert module._initial["variant"] == module.SHIPPED and "switchable in place registered" in caplog.text


def test_a_users_cache_keeps_switchable_and_fixed_variant_graphs_apart():
    fixed = variant_cache_key({HEAD_VAR: "eagle", ENV_VAR: "on", POS0_MASK_VAR: "off"})
    switchable = variant_cache_key({HEAD_VAR: "eagle", SWITCHABLE_VAR: "1"})
    assert fixed and switchable and fixed != switchable and switchable.endswith("-switchable")
    assert variant_cache_key({HEAD_VAR: "mtp", SWITCHABLE_VAR: "1"}) != switchable


def test_without_a_head_each_head_is_compared_with_its_own_shipped_values(registry, monkeypatch):
    """A hand-set SPECBENCH_POS0_MASK=on (no SPECBENCH_HEAD): the EAGLE head gets the mask; MTP ships it."""
    monkeypatch.setenv(POS0_MASK_VAR, "on")
    before = dict(registry.models)
    register()
    assert list(_registered(registry, before)) == [REGISTERED_ARCH]
    monkeypatch.setenv(ENV_VAR, "logits-only")
    register()
    assert set(_registered(registry, before)) == {REGISTERED_ARCH, MTP_ARCH}


@pytest.mark.parametrize(
    "head,cls_name", [("eagle", "EagleDeepseekV3SpecbenchVariants"), ("mtp", "DeepSeekMTPSpecbenchVariants")]
)
def test_control_registers_the_reimplemented_shipped_forward(registry, monkeypatch, caplog, head, cls_name):
    monkeypatch.setenv(HEAD_VAR, head)
    monkeypatch.setenv(CONTROL_VAR, "1")
    before = dict(registry.models)
    with caplog.at_level(logging.INFO, logger="vllm.specbench_plugin"):
        register()
    (cls,) = _registered(registry, before).values()
    assert cls.__name__ == cls_name
    assert "(control: the shipped forward, re-implemented)" in caplog.text


def test_switch_values():
    assert switches_from_env({}) == Switches("on", None, False, None)
    assert switches_from_env({POS0_MASK_VAR: " on ", ENV_VAR: "off", CONTROL_VAR: "1", HEAD_VAR: "mtp"}) == Switches(
        "off", True, True, "mtp"
    )
    for var, bad, allowed in (
        (POS0_MASK_VAR, "1", "off, on"),
        (ENV_VAR, "Off", "on, off, logits-only"),
        (CONTROL_VAR, "yes", "0, 1"),
        (HEAD_VAR, "medusa", "eagle, mtp"),
    ):
        with pytest.raises(ConfigError, match=rf"{var}={bad!r}.*{allowed}"):
            switches_from_env({var: bad})


@pytest.mark.parametrize(
    ("variant", "mask", "expect"),
    [
        ("on", False, ("norm", "norm")),
        ("logits-only", False, ("norm", "sum")),
        ("off", False, ("sum", "sum")),
        ("on", True, ("norm", "norm")),
        ("logits-only", True, ("norm", "sum")),
        ("off", True, ("sum", "sum")),
    ],
)
def test_variant_forward_returns_and_masks_as_named(variant, mask, expect):
    """Runs the EAGLE class's forward (vLLM's real construction needs a server) on a stub module
    holding the variant buffers. Stub layers record what they are given, so the test sees the
    position-0 mask act on the input embedding and the buffers pick (norm, sum) outputs of the fused
    final norm; with the shipped values the result equals vLLM's own forward on the same stub."""
    import torch
    from vllm.model_executor.models import deepseek_eagle

    from specbench.serve.plugin import select, variants

    seen = {}

    class Stub(torch.nn.Module):
        embed_tokens = staticmethod(lambda ids: ids.float().unsqueeze(-1).repeat(1, 2) + 1.0)
        enorm = staticmethod(lambda x: seen.setdefault("enorm_in", x))
        hnorm = staticmethod(lambda h: h)
        fc = staticmethod(lambda x: x[:, :2] + x[:, 2:])
        layers = [lambda pos, h, r: (h, h * 0 + 10.0)]
        norm = staticmethod(lambda h, r: (torch.full_like(h, -1.0), h + r))

    stub = Stub()
    select.add_variant_buffers(stub, variant, mask)
    positions = torch.tensor([0, 1, 2])
    args = (torch.tensor([5, 6, 7]), positions, torch.zeros(3, 2))
    out = variants.variant_forward(stub, *args)
    first_row = seen["enorm_in"][0]
    assert bool((first_row == 0).all()) == mask  # masked only at position 0
    assert bool((seen["enorm_in"][1:] != 0).all())
    summed = seen["enorm_in"] + 10.0  # fc(embed, hidden 0) + the layer's residual 10
    values = {"norm": torch.full((3, 2), -1.0), "sum": summed}
    torch.testing.assert_close(out[0], values[expect[0]])
    torch.testing.assert_close(out[1], values[expect[1]])
    if (variant, mask) == variants.SHIPPED:
        shipped = deepseek_eagle.DeepseekV2Model.forward(stub, *args)
        assert all(torch.equal(a, b) for a, b in zip(out, shipped))


def _mtp_stub(seen: dict, variant: str, mask: bool):
    """A module with the MTP layer's attributes and the variant buffers; norms scale, so normed and
    un-normed states differ."""
    import torch

    from specbench.serve.plugin import select

    class Block:
        use_sequence_parallel_moe = False

        def __call__(self, positions, hidden_states, residual):
            return hidden_states * 2, hidden_states + 1.0

    class Stub(torch.nn.Module):
        enorm = staticmethod(lambda x: seen.setdefault("enorm_in", x) * 3)
        hnorm = staticmethod(lambda h: h * 5)
        eh_proj = staticmethod(lambda x: x[:, :2] + x[:, 2:])
        mtp_block = Block()

        class shared_head:
            head = "HEAD"

            def __new__(cls, h):
                return h / 7

    stub = Stub()
    select.add_variant_buffers(stub, variant, mask)
    return stub


@pytest.mark.parametrize("variant,mask", [(v, m) for v in ("on", "logits-only", "off") for m in (False, True)])
def test_mtp_variant_forward_is_vllms_but_for_its_switches(variant, mask):
    """The MTP class's layer forward against vLLM 0.32's own ``DeepSeekMultiTokenPredictorLayer.forward``,
    both run on one stub: the shipped values (on, mask on) equal it exactly; each switch changes only its part."""
    import torch
    from vllm.model_executor.models import deepseek_mtp

    from specbench.serve.plugin import mtp_variants

    ids, positions = torch.tensor([5, 6, 7]), torch.tensor([0, 1, 2])
    embeds, hidden = torch.arange(6.0).reshape(3, 2) + 1, torch.ones(3, 2)
    shipped = deepseek_mtp.DeepSeekMultiTokenPredictorLayer.forward(
        _mtp_stub({}, "on", True), ids, positions, hidden, embeds
    )
    seen: dict = {}
    out = mtp_variants.layer_forward(_mtp_stub(seen, variant, mask), ids, positions, hidden, embeds)
    assert bool((seen["enorm_in"][0] == 0).all()) == mask and bool((seen["enorm_in"][1:] != 0).all())
    if mask:  # the mask is the only input change: what is computed for logits is vLLM's
        torch.testing.assert_close(out[0], shipped[0])
    carried = out[0] / 7 if variant == "on" else out[0]  # shared_head (the final norm) or the pre-norm sum
    torch.testing.assert_close(out[1], carried)
    if (variant, mask) == mtp_variants.SHIPPED:
        assert all(torch.equal(a, b) for a, b in zip(out, shipped))


@pytest.mark.parametrize("variant", ["on", "logits-only", "off"])
def test_mtp_logits_are_normed_except_for_off(variant):
    import torch

    from specbench.serve.plugin import mtp_variants

    layer = _mtp_stub({}, variant, True)

    class Predictor:
        mtp_start_layer_idx, num_mtp_layers, layers = 2, 1, {"2": layer}
        logits_processor = staticmethod(lambda head, h: (head, h))

    class Outer:
        model = Predictor()

    h = torch.ones(2, 2)
    head, logits_in = mtp_variants.compute_logits(Outer(), h, spec_step_idx=3)
    assert head == "HEAD"
    torch.testing.assert_close(logits_in, h if variant == "off" else h / 7)


def test_unknown_value_stops_a_server_specbench_configured(registry, monkeypatch):
    monkeypatch.setenv(HEAD_VAR, "eagle")
    monkeypatch.setenv(ENV_VAR, "Off")
    with pytest.raises(ConfigError, match=r"SPECBENCH_OUTPUT_NORM='Off'.*on, off, logits-only"):
        register()


def test_unknown_value_in_another_server_is_logged_and_ignored(registry, monkeypatch, caplog):
    monkeypatch.setenv(ENV_VAR, "OFF")
    monkeypatch.setenv(POS0_MASK_VAR, "on")  # valid, but the server is left as shipped as a whole
    before = dict(registry.models)
    with caplog.at_level(logging.INFO, logger="vllm.specbench_plugin"):
        register()
    assert registry.models == before
    (record,) = caplog.records
    assert (
        record.levelname == "WARNING"
        and "SPECBENCH_OUTPUT_NORM='OFF' is not a known output-norm variant; use one of on, off, logits-only; ignored"
        in record.getMessage()
    )


def test_mismatched_vllm_head_names_version_and_what_is_missing(monkeypatch):
    from specbench.serve.plugin import variants

    class Headless:  # stands in for a future vLLM whose inner model lost its attributes
        def forward(self, input_ids, positions, hidden_states): ...

    monkeypatch.setattr(variants, "_BASE_INNER", Headless)
    with pytest.raises(RuntimeError, match=r"vLLM 9\.9\.9: missing .*DeepseekV2Model\.norm"):
        variants.verify_wrapped_classes("9.9.9")


def test_mismatched_mtp_layer_names_version_and_what_is_missing(monkeypatch):
    from specbench.serve.plugin import mtp_variants

    class OldLayer:  # an older MTP layer: same names, but carries the pre-norm sum and has no mask
        def __init__(self):
            self.enorm = self.hnorm = self.eh_proj = self.shared_head = self.mtp_block = None

        def forward(self, input_ids, positions, previous_hidden_states, inputs_embeds=None, spec_step_index=0):
            return previous_hidden_states

    mtp_variants.verify_wrapped_classes("0.32.0")  # the installed one is as expected
    monkeypatch.setattr(mtp_variants, "_BASE_LAYER", OldLayer)
    with pytest.raises(
        RuntimeError,
        match=r"vLLM 0\.9\.0's MTP layer: missing the position-0 mask .*"
        r"the post-norm carried state",
    ):
        mtp_variants.verify_wrapped_classes("0.9.0")


# (head, plugin module, a function the variants re-implement, one they do not touch)
PINNED = [
    ("eagle", "variants", "DeepseekV2Model.forward", "DeepseekV2Model.load_weights"),
    ("mtp", "mtp_variants", "DeepSeekMultiTokenPredictorLayer.forward", "DeepSeekMTP.load_weights"),
]


def _edited(source: str, qualname: str, line: str) -> str:
    """``source`` with ``line`` as the first statement of ``qualname``'s body (after its docstring)."""
    import ast

    tree = ast.parse(source)
    cls, name = qualname.split(".")
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    func = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    first = func.body[1] if isinstance(func.body[0], ast.Expr) and len(func.body) > 1 else func.body[0]
    lines = source.splitlines(keepends=True)
    indent = " " * first.col_offset
    lines.insert(first.lineno - 1, f"{indent}{line}\n")
    return "".join(lines)


@pytest.mark.parametrize(("head", "module", "pinned", "other"), PINNED)
def test_support_is_by_function_not_by_file(tmp_path, monkeypatch, head, module, pinned, other):
    """vLLM 0.33/0.34 changed deepseek_mtp.py only in DeepSeekMTP.__init__ / load_weights (read in the
    wheels, benchmarks/head_support.py): such a file is accepted; a change to a function the variants
    re-implement is refused, naming the function and the version; a comment is not a change."""
    import importlib

    from specbench.serve.plugin.switches import CHECKED_FUNCTIONS

    mod = importlib.import_module(f"specbench.serve.plugin.{module}")
    vllm_module = mod.deepseek_eagle if head == "eagle" else mod.deepseek_mtp
    mod.verify_wrapped_classes("0.32.0")  # the installed file: every pinned function as checked
    source = open(vllm_module.__file__, encoding="utf-8").read()
    copy = tmp_path / CHECKED_FUNCTIONS[head][0]
    monkeypatch.setattr(vllm_module, "__file__", str(copy))
    copy.write_text(_edited(source, other, "_ = 'a change outside the variants'"))
    mod.verify_wrapped_classes("0.34.0")
    copy.write_text(_edited(source, pinned, "# a comment only"))
    mod.verify_wrapped_classes("0.34.0")
    copy.write_text(_edited(source, pinned, "_ = 'a change to what runs'"))
    with pytest.raises(
        RuntimeError,
        match=rf"refuses: vLLM 0\.35\.0's {CHECKED_FUNCTIONS[head][0]} changed {pinned} \(code sha256 \w{{12}}\), "
        r"which the variants re-implement as in the releases the plugin was checked against \(0\.29\.0-0\.34\.0\)",
    ):
        mod.verify_wrapped_classes("0.35.0")


def test_mtp_variants_refuse_a_head_that_argmax_reduction_would_draft_through(monkeypatch):
    """A DeepSeekMTP with get_top_tokens (none in 0.29-0.34) would be drafted through it under
    use_local_argmax_reduction, past compute_logits where the variants select: refused."""
    from specbench.serve.plugin import mtp_variants

    mtp_variants.verify_wrapped_classes("0.32.0")
    monkeypatch.setattr(mtp_variants.deepseek_mtp.DeepSeekMTP, "get_top_tokens", lambda self, h: h, raising=False)
    with pytest.raises(RuntimeError, match=r"refuses: vLLM 0\.35\.0's DeepSeekMTP has get_top_tokens"):
        mtp_variants.verify_wrapped_classes("0.35.0")


def _installed(dist: str) -> bool:
    try:
        md.distribution(dist)
    except md.PackageNotFoundError:
        return False
    return True


def test_the_installed_vllms_head_functions_are_in_the_table():
    """Every pinned function of the installed vLLM's head files has a digest CHECKED_FUNCTIONS knows,
    attributed to a range holding the installed version (read from the dist, not imported)."""
    import ast

    from specbench.serve.plugin.switches import CHECKED_FUNCTIONS, function_digest
    from specbench.serve.vllm_main import VLLM_DISTRIBUTIONS, installed_vllm_version

    version = str(installed_vllm_version()).split("+")[0]
    dist = next(d for d in VLLM_DISTRIBUTIONS if _installed(d))
    for name, functions in CHECKED_FUNCTIONS.values():
        path = md.distribution(dist).locate_file(f"vllm/model_executor/models/{name}")
        source = open(str(path), encoding="utf-8").read()
        for qualname, known in functions.items():
            digest = function_digest(source, qualname)
            assert digest in known, (name, qualname, digest)
            low, _, high = known[digest].partition("-")
            as_tuple = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
            assert as_tuple(low) <= as_tuple(version) <= as_tuple(high or low), (qualname, version)
            # no f-string in it: Python 3.12+ tokenizes f-strings apart, which would change the digest
            cls, fn = qualname.split(".")
            klass = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
            node = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == fn)
            assert not any(isinstance(n, ast.JoinedStr) for n in ast.walk(node)), qualname


def _draft(tmp_path, **config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_check_variant_supported_names_the_architecture(tmp_path):
    llama = _draft(tmp_path, architectures=["LlamaForCausalLM"], model_type="llama")
    with pytest.raises(ConfigError, match=r"LlamaForCausalLM.*supported variants: on, off, logits-only"):
        check_variant_supported(llama, "off")
    check_variant_supported(llama, "on")  # vLLM as shipped works with any draft
    check_variant_supported(llama, "on", pos0_mask=False)  # the EAGLE head's shipped mask
    with pytest.raises(ConfigError, match="not a known variant"):
        check_variant_supported(llama, "none")


def test_pos0_mask_needs_a_deepseek_head(tmp_path):
    llama = _draft(tmp_path, architectures=["LlamaForCausalLM"], model_type="llama")
    with pytest.raises(ConfigError, match=r"LlamaForCausalLM.*pos0_mask 'on'.*output_norm 'on', pos0_mask 'off'"):
        check_variant_supported(llama, "on", pos0_mask=True)


def test_mtp_switches_need_a_target_with_an_mtp_layer(tmp_path):
    no_mtp = _draft(tmp_path, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3")
    check_variant_supported(no_mtp, "on", pos0_mask=True, method="deepseek_mtp")  # shipped
    with pytest.raises(ConfigError, match=r"num_nextn_predict_layers is None.*'deepseek_mtp'.*pos0_mask 'on'"):
        check_variant_supported(no_mtp, "on", pos0_mask=False, method="deepseek_mtp")
    _draft(tmp_path, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", num_nextn_predict_layers=1)
    check_variant_supported(tmp_path, "logits-only", method="mtp")
    check_variant_supported(tmp_path, "on", method="mtp", control=True)


def test_switches_on_a_method_without_a_deepseek_head_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"output_norm 'off' switches a DeepSeek draft head.*'ngram'"):
        check_variant_supported(tmp_path, "off", method="ngram")
    with pytest.raises(ConfigError, match=r"pos0_mask 'off'.*'ngram'"):
        check_variant_supported(tmp_path, "on", pos0_mask=False, method="ngram")
    check_variant_supported(tmp_path, "on", method="ngram")


def test_check_variant_supported_accepts_deepseek_heads(tmp_path):
    check_variant_supported(_draft(tmp_path, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3"), "off")
    with pytest.raises(ConfigError, match="config.json: config not found"):
        check_variant_supported(tmp_path / "missing", "logits-only")
    check_variant_supported(None, "logits-only")  # a hub head not downloaded: checked inside the server


def test_plugin_env(monkeypatch):
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    assert plugin_env({}, "eagle") == {}
    assert plugin_env({ENV_VAR: "off"}, "eagle") == {HEAD_VAR: "eagle"}
    assert plugin_env({POS0_MASK_VAR: "on"}, "deepseek_mtp") == {HEAD_VAR: "mtp"}
    assert plugin_env({CONTROL_VAR: "1"}, "mtp") == {HEAD_VAR: "mtp"}
    assert plugin_env({ENV_VAR: "off"}, "ngram") == {}  # refused before launch (check_variant_supported)
    assert plugin_env({ENV_VAR: "on"}, "eagle", {"VLLM_PLUGINS": "lora_resolver"}) == {
        HEAD_VAR: "eagle",
        "VLLM_PLUGINS": f"lora_resolver,{PLUGIN_NAME}",
    }
    assert plugin_env({ENV_VAR: "off", "VLLM_PLUGINS": f" {PLUGIN_NAME} "}, "eagle", {})["VLLM_PLUGINS"] == PLUGIN_NAME
    assert plugin_env({ENV_VAR: "off"}, "eagle", {"VLLM_PLUGINS": ""})["VLLM_PLUGINS"] == PLUGIN_NAME
