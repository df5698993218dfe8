"""specbench/redact.py: what is a secret, how every writer hides it, and where --resume takes it from.

The run-directory test writes a whole run (manifest, cell.json, cells.csv/parquet) through the real
plan and runner with a stand-in executor (no vLLM: what is under test is the writers, not a server).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench.cli.exits import run_exit
from specbench.errors import ConfigError
from specbench.redact import (
    REDACTED,
    redact_argv,
    redact_env,
    scrub_text,
    secret_axis,
    secret_values,
    server_api_key,
    shown_axis_value,
)

SECRETS = [
    "sk-AAAA1111",
    "sk-BBBB2222",
    "flagkey-1111",
    "hf_secretvalue1",
    "pw-in-url-9",
    "k1-secret",
    "k2-secret",
    "auth_x1234",
]


@pytest.mark.parametrize(
    "argv, shown",
    [
        # vLLM's --api-key takes every value up to the next option (nargs='+').
        (["m", "--api-key", "k1", "k2", "--enforce-eager"], ["m", "--api-key", REDACTED, REDACTED, "--enforce-eager"]),
        # Abbreviations vLLM's parser accepts (allow_abbrev): --api-k, --hf-t and longer.
        (["m", "--api-k", "K"], ["m", "--api-k", REDACTED]),
        (["m", "--hf-tok=T"], ["m", "--hf-tok=***"]),
        # A bare --hf-token (nargs='?') takes no value when an option follows: that option stays visible.
        (["m", "--hf-token", "--enforce-eager"], ["m", "--hf-token", "--enforce-eager"]),
        (["m", "--hf-token", "hf_x", "--max-num-seqs", "4"], ["m", "--hf-token", REDACTED, "--max-num-seqs", "4"]),
        # --api-server-count shares --api- with --api-key: not a secret.
        (
            ["m", "--api-server-count", "2", "--max-num-batched-tokens", "512"],
            ["m", "--api-server-count", "2", "--max-num-batched-tokens", "512"],
        ),
        (["m", "--client-secret", "s", "--db-password=p"], ["m", "--client-secret", REDACTED, "--db-password=***"]),
        # A key that looks like an option is still the key: vLLM would read it as one or fail.
        (["m", "--api-key", "-X", "--enforce-eager"], ["m", "--api-key", REDACTED, "--enforce-eager"]),
        (["m", "--api-key", "--X"], ["m", "--api-key", REDACTED]),
        (["m", "--client-token", "-t0k"], ["m", "--client-token", REDACTED]),
        # Go-style tools spell long options with one dash.
        (["m", "-api-key", "X", "-tp", "2"], ["m", "-api-key", REDACTED, "-tp", "2"]),
        # User info in any URL, whatever the flag.
        (["m", "--otlp-traces-endpoint", "http://u:PW@h:4317"], ["m", "--otlp-traces-endpoint", "http://u:***@h:4317"]),
        (["m", "--x=https://tok123@h/p"], ["m", "--x=https://***@h/p"]),
    ],
)
def test_redact_argv_follows_vllms_parser(argv, shown):
    assert redact_argv(argv) == shown


def test_api_key_of_the_server_is_the_first_key_of_any_spelling():
    assert server_api_key(["m", "--api-k", "k1", "k2"], {}) == "k1"
    assert server_api_key(["m", "--api-key=k3"], {}) == "k3"
    assert server_api_key(["m"], {"VLLM_API_KEY": "k4"}) == "k4"
    assert server_api_key(["m", "--hf-token", "t"], {}) is None


def test_secret_env_names_and_urls_with_user_info():
    env = {
        "HF_TOKEN": "a",
        "OPENAI_API_KEY": "b",
        "DB_PASSWORD": "c",
        "DATABASE_URL": "d",
        "GCP_CREDENTIALS": "e",
        "HF_AUTH": "f",
        "MY_SECRET_X": "g",
        "REDIS_URL": "redis://u:pw@h:6379",
        "SESSION_COOKIE": "h",
        "VLLM_MLA_DISABLE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PLAIN_URL": "http://h/x",
        "VLLM_MAX_TOKENS_PER_X": "8",
    }
    out = redact_env(env)
    hidden = {k for k, v in out.items() if v == REDACTED}
    assert hidden == {
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "DB_PASSWORD",
        "DATABASE_URL",
        "GCP_CREDENTIALS",
        "HF_AUTH",
        "MY_SECRET_X",
        "REDIS_URL",
        "SESSION_COOKIE",
    }


def test_urls_with_user_info_are_hidden_wherever_they_are():
    from specbench.redact import redact_urls, redact_value, url_secrets

    assert (
        redact_urls("see http://u:PW@h:1/x and https://tok@h, not a@b")
        == "see http://u:***@h:1/x and https://***@h, not a@b"
    )
    assert url_secrets("http://u:PW@h https://tok@h http://u:***@h") == ["PW", "tok"]
    assert secret_values({"OTEL": "x http://u:pw-env@h"}, ["m", "--e", "http://u:pw-arg@h"]) == ["pw-env", "pw-arg"]
    assert shown_axis_value("flag:--otlp-traces-endpoint", "http://u:PW@h").startswith("sha256:")
    data = {
        "serve": {"model": "https://u:PW@h/m", "env": {"A": "ok"}, "extra_args": ["--api-key", "k"]},
        "load": {"llmperf": {"extra_args": ["--token", "t"]}},
        "matrix": {"flag:--e": ["http://u:PW@h", 3]},
    }
    assert redact_value((), data) == {
        "serve": {"model": "https://u:***@h/m", "env": {"A": "ok"}, "extra_args": ["--api-key", REDACTED]},
        "load": {"llmperf": {"extra_args": ["--token", REDACTED]}},
        "matrix": {"flag:--e": [shown_axis_value("flag:--e", "http://u:PW@h"), 3]},
    }


@pytest.mark.parametrize(
    "override, shown",
    [
        ("serve.env.HF_TOKEN=hf_abcdef", 'serve.env.HF_TOKEN="***"'),
        ("serve.env={HF_TOKEN: hf_abcdef, A: b}", 'serve.env={"HF_TOKEN": "***", "A": "b"}'),
        ("serve.extra_args=[--api-key, sk-1, --seed, 1]", 'serve.extra_args=["--api-key", "***", "--seed", 1]'),
        ("matrix.env:OPENAI_API_KEY=[sk-1]", f'matrix.env:OPENAI_API_KEY=["{shown_axis_value("env:X_KEY", "sk-1")}"]'),
        # a malformed axis (refused by validation, but shown in that refusal): hidden by its name all the same
        ("matrix.env:1_API_KEY=[sk-1]", f'matrix.env:1_API_KEY=["{shown_axis_value("env:X_KEY", "sk-1")}"]'),
        ("serve.model=https://u:PW@h/m", 'serve.model="https://u:***@h/m"'),
        ("serve.env.HF_TOKEN=[hf_abcdef", "serve.env.HF_TOKEN=***"),  # not YAML: its error echoes it, hidden
        ("load.num_requests=40", "load.num_requests=40"),
    ],
)
def test_set_overrides_are_shown_and_stored_with_secrets_hidden(override, shown):
    from specbench.config.overrides import shown_override

    assert shown_override(override) == shown
    assert shown_override(shown) == shown  # what the manifest stores, shown again, stays as it is


def test_secret_values_cover_all_keys_and_scrub_them():
    values = secret_values({"HF_TOKEN": "hf_abcdef"}, ["m", "--api-key", "key-one", "key-two"])
    assert set(values) == {"hf_abcdef", "key-one", "key-two"}
    assert scrub_text("k key-one key-two hf_abcdef", values) == "k *** *** ***"


def test_secret_axes_show_a_stable_short_hash():
    assert secret_axis("env:OPENAI_API_KEY") and secret_axis("flag:--api-key") and secret_axis("flag:--hf-tok")
    assert not secret_axis("mla") and not secret_axis("flag:--max-num-seqs") and not secret_axis("env:VLLM_X")
    # Malformed axes (an override not yet validated) are read by their prefix, never refused here.
    assert secret_axis("env:1BAD_TOKEN") and secret_axis("flag:-api-key") and not secret_axis("colour")
    a = shown_axis_value("env:OPENAI_API_KEY", "sk-X")
    assert a == shown_axis_value("env:OPENAI_API_KEY", "sk-X") and a.startswith("sha256:") and "sk-X" not in a
    assert shown_axis_value("env:OPENAI_API_KEY", "sk-Y") != a
    assert shown_axis_value("env:VLLM_X", "1") == "1"


def _config(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    data = {
        "name": "sec",
        "serve": {
            "model": str(model),
            "per_request_metrics": "off",
            "env": {
                "HF_TOKEN": "hf_secretvalue1",
                "DATABASE_URL": "postgres://u:pw-in-url-9@h/db",
                "HF_AUTH": "auth_x1234",
            },
            "extra_args": ["--api-key", "k1-secret", "k2-secret", "--enforce-eager"],
        },
        "matrix": {"env:OPENAI_API_KEY": ["sk-AAAA1111", "sk-BBBB2222"], "flag:--hf-token": ["flagkey-1111"]},
        "results_dir": str(tmp_path / "results"),
    }
    cfg = tmp_path / "sec.yaml"
    cfg.write_text(yaml.safe_dump(data))
    return cfg


class _DoneExecutor:
    """Stands in for vLLM: every cell 'done' with no acceptance (the writers are under test)."""

    def run_cell(self, cell, ctx):
        from specbench.run.runner import new_record

        rec = new_record(cell, ctx.study)
        rec.status = "done"
        return rec, None


def _all_text(root: Path) -> str:
    parts = [str(p) for p in root.rglob("*")]
    parts += [p.read_bytes().decode("latin-1") for p in root.rglob("*") if p.is_file()]
    return "\n".join(parts)


def test_secret_axis_values_never_reach_a_path_file_or_table(tmp_path):
    from specbench.run.display import QuietDisplay
    from specbench.run.plan import new_plan
    from specbench.run.runner import execute

    plan = new_plan(_config(tmp_path))
    assert run_exit(execute(plan, QuietDisplay(), _DoneExecutor())) == 0
    text = _all_text(plan.run_dir)
    for s in SECRETS:
        assert s not in text, s
    ids = json.loads((plan.run_dir / "manifest.json").read_text())["cells"]
    assert all(cid.startswith("OPENAI_API_KEY-") for cid in ids) and len(set(ids)) == 2
    cell = json.loads((plan.run_dir / ids[0] / "cell.json").read_text())
    assert cell["axes"]["env:OPENAI_API_KEY"].startswith("sha256:")
    import pandas as pd

    assert set(pd.read_parquet(plan.run_dir / "cells.parquet")["OPENAI_API_KEY"]) == {
        shown_axis_value("env:OPENAI_API_KEY", s) for s in SECRETS[:2]
    }


def test_dry_run_shows_no_secret(tmp_path, capsys):
    from specbench.cli.main import run_cli

    assert run_cli(["run", "--dry-run", str(_config(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "OPENAI_API_KEY-" in out and "--api-key '***' '***' --enforce-eager" in out
    for s in SECRETS:
        assert s not in out


def _resolved(tmp_path: Path, matrix: bool = False) -> dict:
    from specbench.config import load_config
    from specbench.run.plan import redacted_config

    data = yaml.safe_load(_config(tmp_path).read_text())
    if not matrix:
        data["matrix"] = {}
    p = tmp_path / "c2.yaml"
    p.write_text(yaml.safe_dump(data))
    return redacted_config(load_config(p))


def test_resume_takes_secrets_from_the_environment_never_the_manifest(tmp_path):
    from specbench.run.plan import restore_secrets

    resolved = _resolved(tmp_path)
    environ = {"HF_TOKEN": "hf_from_env", "DATABASE_URL": "x", "HF_AUTH": "y", "VLLM_API_KEY": "vk"}
    data, used = restore_secrets(resolved, environ, "m.json", Path("gone.yaml"))
    assert REDACTED not in json.dumps(data)
    assert "HF_TOKEN" not in data["serve"]["env"]  # inherited from the environment, not "***"
    assert data["serve"]["env"]["VLLM_API_KEY"] == "vk"
    assert data["serve"]["extra_args"] == ["--enforce-eager"]
    assert set(used) == {"HF_TOKEN", "DATABASE_URL", "HF_AUTH", "VLLM_API_KEY"}
    hf = {**resolved, "serve": {**resolved["serve"], "extra_args": ["--hf-token", REDACTED, "--enforce-eager"]}}
    data, used = restore_secrets(hf, environ, "m.json", Path("gone.yaml"))
    assert data["serve"]["extra_args"] == ["--enforce-eager"] and "HF_TOKEN" in used
    with pytest.raises(ConfigError, match=r"serve\.env\.\w+ was redacted .* is not set"):
        restore_secrets(resolved, {}, "m.json", Path("gone.yaml"))


def test_resume_refuses_hashed_matrix_secrets(tmp_path):
    from specbench.run.plan import restore_secrets

    with pytest.raises(ConfigError, match="matrix.env:OPENAI_API_KEY"):
        restore_secrets(_resolved(tmp_path, matrix=True), {}, "m.json", Path("gone.yaml"))
    older = {"serve": {"model": "m", "env": {}}, "matrix": {"env:OPENAI_API_KEY": [REDACTED, REDACTED]}}
    with pytest.raises(ConfigError, match="matrix.env:OPENAI_API_KEY"):  # as runs before hashes saved them
        restore_secrets(older, {"OPENAI_API_KEY": "k"}, "m.json", Path("gone.yaml"))


def test_resume_plan_of_a_real_run_says_where_secrets_came_from(tmp_path, monkeypatch):
    # The committed real run, its config file gone and a token redacted in its manifest.
    import shutil

    from specbench.io import load_json, save_json
    from specbench.run.plan import resume_plan

    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "results" / "baselines" / "cpu-default", run_dir)
    manifest = load_json(run_dir / "manifest.json")
    manifest["config_path"] = str(tmp_path / "gone.yaml")
    manifest["resolved_config"]["serve"]["env"]["HF_TOKEN"] = REDACTED
    save_json(run_dir / "manifest.json", manifest)
    shutil.rmtree(run_dir / manifest["cells"][0])
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment")
    plan = resume_plan(run_dir)
    assert plan.notes == [f"secrets: from the environment (HF_TOKEN); {tmp_path / 'gone.yaml'} is gone"]
    assert all(REDACTED not in c.env.values() for c in plan.cells)
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(ConfigError, match="HF_TOKEN is not set"):
        resume_plan(run_dir)


def test_a_mode_like_variable_leaves_stored_logs_readable_and_parseable(tmp_path):
    # A Ray run's environment holds RAY_AUTH_MODE=token (a mode): "token" must survive in the logs.
    from specbench.metrics.parse import parse_text
    from specbench.redact import scrub_file

    real = (Path(__file__).parent / "analysis" / "data" / "real_v1_server.log").read_text()
    log = tmp_path / "server.log"
    log.write_text(real + "hub login with hf_Ray0Secret99\n")
    env = {
        "RAY_AUTH_MODE": "token",
        "XDG_SESSION_CLASS": "user",
        "SOME_AUTH": "kerberos",
        "HF_TOKEN": "hf_Ray0Secret99",
    }
    assert redact_env(env)["RAY_AUTH_MODE"] == "token" and redact_env(env)["SOME_AUTH"] == REDACTED
    scrub_file(log, secret_values(env, ["m"], include_process_env=True))
    text = log.read_text()
    assert text == real + "hub login with ***\n"
    records = parse_text(text)
    assert records and records == parse_text(real)


def test_resume_refuses_a_url_whose_password_was_hidden():
    from specbench.run.plan import restore_secrets

    saved = {"serve": {"model": "m", "env": {}, "extra_args": ["--otlp-traces-endpoint", "http://u:***@h:4317"]}}
    with pytest.raises(ConfigError, match=r"serve\.extra_args: a password in a URL was redacted"):
        restore_secrets(saved, {}, "m.json", Path("gone.yaml"))
    plain = {"serve": {"model": "m", "env": {}, "extra_args": ["--otlp-traces-endpoint", "http://h:4317"]}}
    assert restore_secrets(plain, {}, "m.json", Path("gone.yaml"))[0] == plain


def test_a_refused_override_of_a_malformed_secret_axis_does_not_echo_its_value(tmp_path):
    from specbench.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "serve": {"model": "fixture:target"}}), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path, ["matrix.env:1_API_KEY=[sk-secret-1]"])
    assert "matrix.env:1_API_KEY: '1_API_KEY' is not an environment variable name" in str(err.value)
    assert "sk-secret-1" not in str(err.value)


# -- issue 43: secrets by flag grammar and by value ------------------------------------------------
SK = "sk-" + "a1B2c3D4e5F6g7H8i9J0"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUv"


def test_underscore_spellings_of_vllms_secret_flags_are_hidden():
    """vLLM's parser reads ``--api_key`` as ``--api-key`` (and abbreviations of either)."""
    from specbench.redact import argv_secret_values, redact_argv

    argv = ["m", "--api_key", "k-one", "k-two", "--api_k=k-three", "--hf_t", "tok-four", "--max_num_seqs", "4"]
    shown = redact_argv(argv)
    assert shown == ["m", "--api_key", "***", "***", "--api_k=***", "--hf_t", "***", "--max_num_seqs", "4"]
    assert set(argv_secret_values(argv)) >= {"k-one", "k-two", "k-three", "tok-four"}


def test_secret_values_by_shape_header_and_query_are_hidden():
    from specbench.redact import redact_env, redact_urls, secret_values

    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Basic dXNlcjpwYXNz",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-honeycomb-team=abcdef123456",
        "GH_PAT": "ghp_" + "x" * 36,
        "MY_VAR": SK,
        "ENDPOINT": "https://api.example.com/v1?api_key=qwerty12345&region=eu",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_ENABLE_HF_TRANSFER": "hf_transfer",
    }
    shown = redact_env(env)
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "GH_PAT", "MY_VAR"):
        assert shown[name] == "***", name
    assert shown["ENDPOINT"] == "https://api.example.com/v1?api_key=***&region=eu"
    assert shown["TOKENIZERS_PARALLELISM"] == "false" and shown["HF_HUB_ENABLE_HF_TRANSFER"] == "hf_transfer"
    assert redact_urls(f"see http://h/x?token={HF}") == "see http://h/x?token=***"
    secrets = secret_values(env, [])
    assert SK in secrets and "qwerty12345" in secrets and "false" not in secrets


def test_json_valued_flags_hide_secret_named_keys():
    from specbench.redact import argv_secret_values, redact_argv

    cfg = '{"kv_connector": "LMCache", "extra": {"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG", "region": "us"}}'
    shown = redact_argv(["m", "--kv-transfer-config", cfg])
    assert "wJalrXUtnFEMI/K7MDENG" not in shown[2] and '"region": "us"' in shown[2] and "LMCache" in shown[2]
    assert "wJalrXUtnFEMI/K7MDENG" in argv_secret_values(["m", "--kv-transfer-config", cfg])
    inline = redact_argv([f"--kv-transfer-config={cfg}"])[0]
    assert inline.startswith("--kv-transfer-config=") and "wJalrXUtnFEMI" not in inline


@pytest.mark.parametrize(
    ("override", "secret"),
    [
        ("serve.env.HF_TOKEN: hf_abcdefghijklmnop", "hf_abcdefghijklmnop"),  # no '=': the syntax error echoes it
        ("serve.env.HF_TOKEN tok12345678", "tok12345678"),
        ("serve.envs.HF_TOKEN=tok12345678", "tok12345678"),  # a misspelt section: not serve.env
        ("serve.envs.MY_VAR=sk-abcdefghijklmnopqrstu", "sk-abcdefghijklmnopqrstu"),  # by value
        ("serve.extra_args=--api-key kkkkkkkk", "kkkkkkkk"),  # argv as one string, not a list
    ],
)
def test_a_secret_in_a_bad_set_never_reaches_the_error(override, secret, capsys):
    """issue 43: each of these printed the secret in its one-line error (exit 2 all the same)."""
    from specbench.cli.main import run_cli

    code = run_cli(["run", "configs/default.yaml", "--dry-run", "--set", override])
    out, err = capsys.readouterr()
    assert code == 2 and "error:" in err
    assert secret not in out + err and REDACTED in err


@pytest.mark.heavy
def test_secrets_read_from_an_input_run_never_reach_an_output(tmp_path, capsys):
    """issue 43: a failed cell's reason and a model URL read from an input run were copied into
    compare's stdout, --json, --markdown, --junit and report's summary.md / acceptance.csv."""
    import shutil

    from specbench.cli.main import run_cli

    root = Path(__file__).resolve().parents[1]
    base = root / "results" / "baselines" / "cpu-default"
    run = tmp_path / "run"
    shutil.copytree(base, run, ignore=shutil.ignore_patterns("server.log", "*.prom"))
    cell = run / "mla-on__output_norm-on__r0" / "cell.json"
    record = json.loads(cell.read_text())
    record.update(
        status="failed", reason="died loading https://u:hunter2pass@example.com/m with sk-abcdefghijklmnopqrstuvwx"
    )
    cell.write_text(json.dumps(record))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["resolved_config"]["serve"]["model"] = "https://bob:s3cretpw@hf.example/model"
    (run / "manifest.json").write_text(json.dumps(manifest))
    outs = [tmp_path / "c.json", tmp_path / "c.md", tmp_path / "c.xml"]
    code = run_cli(
        ["compare", str(base), str(run), "--json", str(outs[0]), "--markdown", str(outs[1]), "--junit", str(outs[2])]
        + ["--force"]  # the model differs (a URL): another study, compared anyway for what it shows
    )
    assert code == 3  # the failed cell's checks cannot be made
    assert run_cli(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    texts = [*capsys.readouterr(), *(p.read_text() for p in outs)]
    texts += [p.read_text() for p in (tmp_path / "report").iterdir() if p.suffix in (".md", ".csv")]
    shown = "\n".join(texts)
    assert "died loading https://u:***@example.com/m with ***" in shown  # the reason is shown, hidden
    for secret in ("hunter2pass", "sk-abcdefghijklmnopqrstuvwx", "s3cretpw"):
        assert secret not in shown
