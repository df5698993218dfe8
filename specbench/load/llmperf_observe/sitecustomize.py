"""Loaded at start-up by llmperf's python and its Ray workers (specbench puts this folder first on
PYTHONPATH when it runs llmperf; llmperf hands its whole environment to its Ray workers).

Observation only, nothing llmperf computes changes: llmperf reads the body of an HTTP error answer
into the request's error_msg, then its thread dies before recording it, so the server's own
message ("This model's maximum context length is ...") would be lost. Print it where specbench
reads llmperf's output. Python 3.8+ (llmperf's venv), no specbench imports.
"""

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

    requests.Response.raise_for_status = _observed_raise_for_status
except Exception:  # noqa: BLE001 - without requests there is nothing to observe
    pass
