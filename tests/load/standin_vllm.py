"""Stand-in for ``python -m specbench.serve.vllm_main serve`` in the server lifecycle tests.

A real vLLM cannot crash, hang, ignore SIGTERM or leave an escaped grandchild on demand, and takes
~20 s to start; this script does each of those in well under a second. Usage (argv as VLLMServer
builds it): ``python -m standin_vllm serve MODE [...] --host H --port P`` with MODE one of
healthy | crash | hang | ignore-term | escape | port-race (the first start, while the file
$STANDIN_RACE_MARK does not exist yet, fails on its bind as vLLM does when its port was taken; later
starts are healthy).
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import time


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"version": "standin"}' if self.path == "/version" else b"ok"
        self.send_response(200 if self.path in ("/health", "/version", "/metrics") else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _reap_then_die(engine: subprocess.Popen):
    """A SIGTERM handler that ends the way vLLM's API server does: it waits for its engine core
    (the group's SIGTERM reached it too; SIGKILLing the group stays the caller's job if it does not
    end), then dies of the signal. An engine core left to outlive it would be reparented to init as
    a zombie, and some inits reap those only after a second or more: each stop() would wait that
    out. Only the child in the group is waited for: the escaped one is stop()'s to kill."""

    def handler(signum, frame):
        try:
            engine.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return handler


def main() -> None:
    argv = sys.argv[1:]
    mode = argv[1]
    host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])
    for i in range(40):
        print(f"standin line {i} mode={mode}", flush=True)
    print(f"env SECRET_PROBE set: {'SPECBENCH_TEST_API_KEY' in os.environ}", flush=True)
    if mode == "port-race" and not os.path.exists(os.environ["STANDIN_RACE_MARK"]):
        open(os.environ["STANDIN_RACE_MARK"], "w").close()
        print("    sock.bind(addr)\nOSError: [Errno 98] Address already in use", flush=True)
        sys.exit(1)
    if mode == "port-race":
        mode = "healthy"
    if mode == "crash":
        print("standin: fatal error, exiting 3", flush=True)
        sys.exit(3)
    if mode == "hang":
        while True:
            time.sleep(1)
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode in ("healthy", "ignore-term", "escape"):
        # Children like vLLM's engine core: one in the group, one that escapes it with setsid.
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        engine = subprocess.Popen(sleeper)
        if mode == "escape":
            subprocess.Popen(sleeper, start_new_session=True)
        if mode != "ignore-term":
            signal.signal(signal.SIGTERM, _reap_then_die(engine))
    server = http.server.HTTPServer((host, port), Health)
    print(f"standin: serving on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
