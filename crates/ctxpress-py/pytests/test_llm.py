"""Pipelines with an LLM endpoint: the async path behind a plain call, the
extractive fallback when the endpoint is down, and a real local model when
.ci/run has started one (CTXPRESS_LLM_URL)."""

from __future__ import annotations

import os
import socket

import pytest

import ctxpress


def _prose_session(turns=12):
    line = (
        "turn {i}: we discussed how the queue in src/app_{i}.zig hands messages from the primary "
        "loop to the secondary loop, why the ring buffer is lock-free, and whether the threading "
        "model should change; we keep the design until version 0.{i}.0 since p99 latency is 12 ms."
    )
    msgs = [{"role": "system", "content": "You are a coding assistant."}]
    for i in range(turns):
        msgs.append({"role": "user", "content": "user " + line.format(i=i)})
        msgs.append({"role": "assistant", "content": "assistant " + line.format(i=i)})
    return msgs


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_endpoint_down_falls_back_to_extractive():
    llm = {"base_url": f"http://127.0.0.1:{_closed_port()}/v1", "model": "none", "timeout_ms": 2000, "max_retries": 0}
    c = ctxpress.Compressor("hybrid", llm=llm, budget=600)
    assert c.needs_llm
    msgs = _prose_session()
    r = c.compress(msgs)
    assert r.fits and r.tokens_after <= 600 < r.tokens_before
    assert ctxpress.validate(r.messages) == []
    assert r.messages[0] == msgs[0] and r.messages[-2:] == msgs[-2:]
    assert not ctxpress.Compressor("hybrid").needs_llm
    # Threads share one compressor and its async runtime.
    many = c.compress_many([msgs, _prose_session(10), _prose_session(14)], jobs=3)
    assert [m.messages for m in many][0] == r.messages
    assert all(m.fits for m in many)


def test_llm_settings_must_be_a_table():
    with pytest.raises(ctxpress.ConfigError, match="base_url"):
        ctxpress.Compressor("hybrid", llm={"base_url": 5})
    with pytest.raises(TypeError):
        ctxpress.Compressor("hybrid", llm="http://x")


@pytest.mark.skipif(
    not os.environ.get("CTXPRESS_LLM_URL"),
    reason="needs a local model server: CTXPRESS_LLM_URL (scripts/llm-server.sh; .ci/run starts one)",
)
def test_a_real_local_model_summarizes_and_the_run_fits():
    llm = {"base_url": os.environ["CTXPRESS_LLM_URL"], "timeout_ms": 120000}
    arch = ctxpress.MemoryArchive()
    msgs = _prose_session(8)
    r = ctxpress.compress(msgs, preset="hybrid", llm=llm, budget=600, archive=arch)
    assert r.fits and r.tokens_after <= 600
    assert ctxpress.validate(r.messages) == []
    assert r.messages[0] == msgs[0]
    assert ctxpress.expand(r.messages, arch) == msgs
