"""`ctxpress serve` with real clients from PyPI: the Anthropic SDK against a
local stub upstream that checks what it receives (pairing valid, window met,
system byte-identical), and the OpenAI SDK, plain and streaming, against the
local llama.cpp server .ci/run starts (CTXPRESS_LLM_URL). Everything listens
on 127.0.0.1 and is stopped."""

from __future__ import annotations

import http.server
import json
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time

import pytest

import ctxpress
from _support import REPO, anthropic_session, openai_session


def _bin():
    for p in (os.environ.get("CTXPRESS_BIN"), REPO / "target/debug/ctxpress", REPO / "target/release/ctxpress"):
        if p and pathlib.Path(p).is_file():
            return str(p)
    pytest.skip("no ctxpress binary: build it (cargo build -p ctxpress-cli) or set CTXPRESS_BIN")


def _port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class _Serve:
    def __init__(self, upstream, window, tmp_path):
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(tmp_path / "serve.log", "w+")
        self.proc = subprocess.Popen(
            [_bin(), "serve", "--upstream", upstream, "--window", str(window), "--listen", f"127.0.0.1:{self.port}",
             "--archive", str(tmp_path / "serve.db")],
            stdout=self.log, stderr=self.log,
        )
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("ctxpress serve did not start: " + self.text())

    def text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class _Stub(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        _Stub.seen.append((self.path, dict(self.headers), body))
        out = json.dumps({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": "Fixed."}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


@pytest.fixture
def stub():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Stub.seen = []
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_anthropic_sdk_through_the_proxy(stub, tmp_path):
    anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is not installed")
    s = _Serve(stub, 8000, tmp_path)
    try:
        req = anthropic_session(30)
        client = anthropic.Anthropic(base_url=s.url, api_key="sk-ant-test", max_retries=0)
        msg = client.messages.create(model=req["model"], max_tokens=64, system=req["system"], messages=req["messages"])
        assert msg.content[0].text == "Fixed."
        path, headers, body = _Stub.seen[-1]
        assert path == "/v1/messages"
        # The key passes through as the SDK sent it (x-api-key or a bearer token).
        assert "sk-ant-test" in (headers.get("x-api-key", "") + headers.get("authorization", "")), sorted(headers)
        sent = json.loads(body)
        assert sent["system"] == req["system"]
        assert ctxpress.validate(sent) == []
        given = ctxpress.stats(req)["tokens"]
        tokens = ctxpress.stats(sent)["tokens"]
        assert tokens < given
        # The window's trigger (70% of 8000), the system prompt included (stats
        # counts it as the window does).
        assert ctxpress.stats(sent)["system_tokens"] > 0
        assert tokens <= 5600 + 20
        # The next turn extends the request just sent.
        req["messages"] += [{"role": "assistant", "content": "Fixed."}, {"role": "user", "content": "Thanks, run the tests."}]
        client.messages.create(model=req["model"], max_tokens=64, system=req["system"], messages=req["messages"])
        nxt = json.loads(_Stub.seen[-1][2])["messages"]
        assert nxt[: len(sent["messages"])] == sent["messages"]
    finally:
        assert s.stop() == 0, s.text()
    assert "sk-ant-test" not in s.text(), "credentials are never logged"
    assert '"api":"anthropic"' in s.text()


@pytest.mark.skipif(
    not os.environ.get("CTXPRESS_LLM_URL"),
    reason="needs a local model server: CTXPRESS_LLM_URL (scripts/llm-server.sh; .ci/run starts one)",
)
def test_openai_sdk_through_the_proxy_to_a_real_model(tmp_path):
    openai = pytest.importorskip("openai", reason="the openai SDK is not installed")
    s = _Serve(os.environ["CTXPRESS_LLM_URL"], 4000, tmp_path)
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="sk-test", max_retries=0, timeout=300)
        messages = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "Say hello."}]
        r = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=8, temperature=0)
        assert r.choices[0].message.role == "assistant"
        assert isinstance(r.choices[0].message.content, str)
        chunks = list(
            client.chat.completions.create(model="smollm2", messages=messages, max_tokens=8, temperature=0, stream=True)
        )
        assert len(chunks) >= 2
        assert any(c.choices and c.choices[0].delta.content for c in chunks)
        # A long agent history is compacted under the window before the model sees it.
        long = openai_session(40)
        r = client.chat.completions.create(model="smollm2", messages=long, max_tokens=4, temperature=0)
        assert r.usage.prompt_tokens < ctxpress.stats(long, tokenizer="o200k_base")["tokens"]
    finally:
        assert s.stop() == 0, s.text()
    log = [json.loads(l) for l in s.text().splitlines() if l.startswith("{")]
    assert [l["status"] for l in log] == [200, 200, 200]
    assert log[-1]["compacted"] is True
