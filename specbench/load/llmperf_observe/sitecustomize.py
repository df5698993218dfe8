"""Loaded at start-up by llmperf's python and its Ray workers (specbench puts this folder first on
PYTHONPATH when it runs llmperf and its tokenizer pre-check; llmperf hands its whole environment to
its Ray workers).

Python imports one module named ``sitecustomize``: the first on the path. Being first would hide
the user's own (site proxies, offline tokenizers, certificates), so this one runs the next
``sitecustomize`` on the path before anything else: its folder leaves ``sys.path`` (this process
only; PYTHONPATH, which Ray's workers inherit, is unchanged, so they chain the same way) and the
import is made again. An error in the user's module is reported as Python's site.py reports one
(``Error in sitecustomize; ...``) and start-up goes on, as it would without specbench.

Then observation only, nothing llmperf computes changes: llmperf reads the body of an HTTP error
answer into the request's error_msg, then its thread dies before recording it, so the server's own
message ("This model's maximum context length is ...") would be lost. Print it where specbench
reads llmperf's output. Python 3.8+ (llmperf's venv), no specbench imports.
"""

import os as _os
import sys as _sys


def _chain() -> None:
    here = _os.path.dirname(_os.path.abspath(__file__))
    ours = _sys.modules.pop("sitecustomize", None)
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != here]
    try:
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", None) != "sitecustomize":  # the user's module failed inside
            _report(exc)
    except Exception as exc:  # noqa: BLE001 - as site.py: report and go on
        _report(exc)
    finally:
        # The user's module, if any, stays importable under its own name; ours is the one running.
        if "sitecustomize" not in _sys.modules and ours is not None:
            _sys.modules["sitecustomize"] = ours


def _report(exc: BaseException) -> None:
    print(
        "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s" % (type(exc).__name__, exc), file=_sys.stderr
    )


_chain()

try:
    import requests

    _raise_for_status = requests.Response.raise_for_status

    def _observed_raise_for_status(self):
        if self.status_code >= 400:
            try:
                body = " ".join(self.text.split())[:400]
            except Exception:  # noqa: BLE001 - never let the observer change what llmperf sees
                body = ""
            print("specbench-llmperf: server answered HTTP %d: %s" % (self.status_code, body), flush=True)
        return _raise_for_status(self)

    # setattr (B010 off): a method patched at run time, which mypy rightly refuses as an assignment
    setattr(requests.Response, "raise_for_status", _observed_raise_for_status)  # noqa: B010
except Exception:  # noqa: BLE001 - without requests there is nothing to observe
    pass
