"""Every ``specbench`` command is a module-level function in a module of its own,
``specbench/cli/<command>_cmd.py``: a newcomer finds a command by its name, and a command can be
imported and called (or its options read) without building the app."""

from __future__ import annotations

import importlib

import typer

from specbench.cli.main import app


def _callbacks():
    for info in app.registered_commands:
        yield info.name, info.callback
    for group in app.registered_groups:
        for info in group.typer_instance.registered_commands:
            yield f"{group.name} {info.name}", info.callback


def test_each_command_lives_at_module_level_in_its_own_module():
    seen = {}
    for name, callback in _callbacks():
        fn = getattr(callback, "__wrapped__", callback)  # handle_errors wraps it (functools.wraps)
        assert "<locals>" not in fn.__qualname__, f"{name}: defined inside {fn.__qualname__}"
        module = f"specbench.cli.{name.split()[0]}_cmd"
        assert fn.__module__ == module, f"{name}: in {fn.__module__}, not {module}"
        assert getattr(importlib.import_module(module), fn.__name__) in (fn, callback)
        seen[name] = module
    assert {"run", "validate", "report", "compare", "parse", "fixtures build", "fixtures path"} <= set(seen)
    per_module = {}
    for name, module in seen.items():
        per_module.setdefault(module, set()).add(name.split()[0])
    assert all(len(commands) == 1 for commands in per_module.values()), per_module
    assert isinstance(app, typer.Typer)
