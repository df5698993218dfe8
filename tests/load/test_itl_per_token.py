"""Per-token inter-token latency when one streamed chunk carries several tokens (speculative
decoding emits up to k + 1 tokens per verify step): the gap is spread over the chunk's tokens.

The stream is an in-process httpx.MockTransport and the clock a fake: a real vLLM cannot be told
to send a 3-token chunk exactly 300 ms after a 1-token one, and the values are the point here.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from specbench.load import driver
from specbench.load.driver import LoadPlan
from specbench.load.prompt_sets import Prompt

# (clock time at which the chunk arrives, token ids it carries)
CHUNKS = [(0.1, [5]), (0.4, [6, 7, 8]), (0.5, [9, 10])]


def test_chunk_of_several_tokens_gives_equal_per_token_gaps(monkeypatch):
    clock = {"t": 0.0}
    monkeypatch.setattr(driver.time, "perf_counter", lambda: clock["t"])

    async def stream():
        for t, ids in CHUNKS:
            clock["t"] = t
            chunk = {"choices": [{"index": 0, "delta": {"content": "x" * len(ids)}, "token_ids": ids}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        clock["t"] = 0.55
        yield b'data: {"choices": [], "usage": {"completion_tokens": 6, "prompt_tokens": 3}}\n\n'
        yield b"data: [DONE]\n\n"

    class Stream(httpx.AsyncByteStream):
        async def __aiter__(self):
            async for part in stream():
                yield part

    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=Stream()))

    async def go():
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await driver._one(
                client,
                "m",
                0,
                Prompt("p0", "chat", [{"role": "user", "content": "q"}]),
                LoadPlan(num_requests=1, concurrency=1, max_tokens=6),
                0.0,
            )

    rec = asyncio.run(go())
    assert rec["error"] is None and rec["itl_method"] == "per_token"
    assert rec["ttft_s"] == pytest.approx(0.1)
    # 3 tokens 0.3 s after the first: 0.1 s each; then 2 tokens 0.1 s later: 0.05 s each
    assert rec["itl_s"] == pytest.approx([0.1, 0.1, 0.1, 0.05, 0.05])
    assert rec["output_tokens"] == 6 and rec["token_ids"] == [5, 6, 7, 8, 9, 10]
    assert rec["e2e_s"] == pytest.approx(0.55)
