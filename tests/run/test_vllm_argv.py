"""Every bundled config's planned ``vllm serve`` command line, through the installed vLLM's own
``serve`` argument parser and its post-parse validation, without starting a server.

A flag vLLM renamed or dropped, or a speculative config it reads differently, fails here, not an
hour into a DeepSeek-R1 study. The parsed values must be the cell's ``spec`` (what its name claims).
The parser comes from vLLM's CLI (``vllm.entrypoints.cli.serve.ServeSubcommand``, which builds it
with ``make_arg_parser``: ``vllm.entrypoints.launchers.cli_args`` in 0.31/0.32,
``vllm.entrypoints.common.cli_args`` in 0.33/0.34).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.axis import UNSET
from specbench.config import load_config
from specbench.run.cells import expand
from specbench.run.groups import group_cells
from specbench.serve.plugin.switch import server_additions
from specbench.serve.server import server_argv

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted([*ROOT.glob("configs/*.yaml"), ROOT / "specbench" / "configs" / "default.yaml"])


pytestmark = pytest.mark.imports_vllm  # vLLM's own parser, in this process


@pytest.fixture(scope="module")
def serve():
    pytest.importorskip("vllm")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cmd = ServeSubcommand()
    parser = FlexibleArgumentParser(prog="vllm")
    cmd.subparser_init(parser.add_subparsers(dest="subparser"))

    def parse(argv: list[str]):
        ns = parser.parse_args(argv)
        cmd.validate(ns)
        return ns

    return parse


def test_every_bundled_config_is_covered():
    names = {p.name for p in CONFIGS}
    assert {"deepseek-r1-eagle.yaml", "default.yaml", "seed-questions.yaml", "k_sweep.yaml"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_planned_argv_parses_as_the_cell_claims(serve, config):
    study = load_config(config)
    cells = expand(study)
    assert cells
    for group in group_cells(cells, study.serve.host, study.serve.share_servers):
        switching = len({c.spec.head_variant.output_norm if c.spec.head_variant else None for c in group}) > 1
        for cell in group:
            full = server_argv(cell.args, study.serve.host, 8000, "python", "specbench.serve.vllm_main")
            argv = full[full.index("serve") :] + (server_additions()[0] if switching else [])
            ns = serve(argv)
            spec = cell.spec
            assert spec is not None
            assert ns.model_tag == cell.args[0] and ns.host == study.serve.host and ns.port == 8000
            assert ns.tensor_parallel_size == spec.tp
            assert bool(ns.enforce_eager) is (not spec.compiled)
            if cell.is_baseline:
                assert ns.speculative_config is None, cell.cell_id
            else:
                # vLLM's other SpeculativeConfig fields pass through as the config and its speculative: axes set them
                fields = dict(study.serve.speculative.vllm_fields)
                for axis, shown in cell.axes.items():
                    if str(axis).startswith("speculative:") and shown == UNSET:  # null: the field left out
                        fields.pop(str(axis).split(":", 1)[1], None)
                    elif str(axis).startswith("speculative:"):
                        fields[str(axis).split(":", 1)[1]] = json.loads(shown) if isinstance(shown, str) else shown
                assert ns.speculative_config == {
                    "method": spec.vllm_method,
                    "model": spec.draft_model,
                    "num_speculative_tokens": spec.num_speculative_tokens,
                    **fields,
                }
