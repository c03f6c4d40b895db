"""`ctxpress mcp` and `ctxpress serve --mcp` with the official MCP Python SDK
(PyPI `mcp`) as the client: over stdio (`mcp.client.stdio.stdio_client`) and
over streamable HTTP at the proxy's /mcp. The archive is made by `ctxpress
compress --archive` on the shipped SWE-agent trajectories at 8,000 tokens; a
word read in the middle of a session that the budget evicted is searched for
and recalled. Needs the binary (CTXPRESS_BIN, which .ci/run sets); skips with
the reason without it or without `mcp`, and fails instead when CI is set.
Every server listens on 127.0.0.1 and is stopped."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import time

import pytest

from _support import REPO

# A class name read in an exchange the budget moves out of the context.
WORD = "TimeCapsule"
CONVERSATION = "sweagent-3ff21d43335a"
TOKEN = "tok-mcp-test-1"


def _missing(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI is set: this test must run)")
    pytest.skip(why)


def _bin() -> str:
    b = os.environ.get("CTXPRESS_BIN")
    if not b or not pathlib.Path(b).is_file():
        _missing("CTXPRESS_BIN is not set to the ctxpress binary (cargo build -p ctxpress-cli --features mcp; .ci/run sets it)")
    probe = subprocess.run([b, "mcp", "--archive", "/nonexistent/a.db"], capture_output=True, text=True, timeout=30)
    if "without the MCP server" in probe.stderr:
        _missing(f"{b} was built without the cargo feature mcp (cargo build -p ctxpress-cli --features mcp)")
    return b


def _sdk():
    try:
        import mcp  # noqa: F401
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError as e:
        _missing(f"the MCP Python SDK is not importable (pip install mcp): {e}")
    return ClientSession, StdioServerParameters, stdio_client


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    d = tmp_path_factory.mktemp("mcp")
    db = d / "a.db"
    r = subprocess.run(
        [_bin(), "compress", str(REPO / "examples/data/swe_agent.jsonl"), "--budget", "8000",
         "--archive", str(db), "-o", str(d / "out.jsonl")],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "#h" in (d / "out.jsonl").read_text(), "the output's markers carry handles"
    return db


def _text(result, i=0) -> str:
    return result.content[i].text


def _get(obj, snake: str):
    """A field by its SDK 2 name (snake_case), or its SDK 1 name (camelCase)."""
    if hasattr(obj, snake):
        return getattr(obj, snake)
    head, *rest = snake.split("_")
    return getattr(obj, head + "".join(w.title() for w in rest))


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


async def _checks(session, db):
    """The same checks over any transport."""
    init = await session.initialize()
    assert _get(init, "server_info").name == "ctxpress"
    assert init.capabilities.tools is not None
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert sorted(tools) == ["history_outline", "recall", "search_history"]
    for t in tools.values():
        assert "64 KiB" in t.description, t.description
        assert _get(t, "input_schema")["type"] == "object"
        assert _get(t.annotations, "read_only_hint") is True

    r = await session.call_tool("search_history", {"query": WORD, "conversation": CONVERSATION, "limit": 5})
    assert not _get(r, "is_error"), _text(r)
    hits = json.loads(_text(r))["hits"]
    assert hits and len(hits) <= 5
    hit = next(h for h in hits if h["handle"])
    assert f"«{WORD}»" in hit["snippet"]
    assert hit["conversation"] == CONVERSATION
    handle = hit["handle"]
    assert re.fullmatch(r"#h[0-9a-f]{10}", handle)

    # Recalled exactly: the pages put together are `ctxpress recall --text`.
    want = subprocess.run([_bin(), "recall", handle, "--archive", str(db), "--text"],
                          capture_output=True, text=True, timeout=60)
    assert want.returncode == 0, want.stderr
    got, offset = "", 0
    for _ in range(200):
        r = await session.call_tool("recall", {"handle": handle, "offset": offset, "max_chars": 3000})
        assert not _get(r, "is_error"), _text(r)
        assert len(r.content[1].text) <= 3000
        got += _text(r, 1)
        if len(r.content) < 3:
            break
        offset = int(re.search(r'"offset": (\d+)', _text(r, 2)).group(1))
    assert got == want.stdout
    assert WORD in got

    r = await session.call_tool("history_outline", {"conversation": CONVERSATION})
    assert not _get(r, "is_error"), _text(r)
    outline = json.loads(_text(r))
    listed = [h["handle"] for h in outline["handles"]]
    assert handle in listed
    entry = outline["handles"][listed.index(handle)]
    assert entry["messages"] >= 1 and entry["roles"] and entry["preview"]

    # Errors the model can read, as tool errors (isError).
    for tool, args, says in [
        ("recall", {"handle": "#hnot-a-handle"}, "not a handle"),
        ("recall", {"handle": "#h0000000000"}, "no originals"),
        ("search_history", {"query": WORD, "limit": 10_000}, "between 1 and 50"),
        ("recall", {"handle": handle, "max_chars": 10**9}, "between 1 and 32000"),
        ("recall", {"handle": handle, "offset": 10**9}, "past the end"),
        ("history_outline", {"conversation": "no-such-conversation"}, "nothing is archived"),
    ]:
        r = await session.call_tool(tool, args)
        assert _get(r, "is_error"), (tool, args, _text(r))
        assert says in _text(r), _text(r)


def test_stdio(archive):
    ClientSession, StdioServerParameters, stdio_client = _sdk()

    async def go():
        params = StdioServerParameters(command=_bin(), args=["mcp", "--archive", str(archive)])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await _checks(session, archive)

    _run(go())


def test_stdio_exits_cleanly_when_stdin_closes(archive):
    _sdk()
    p = subprocess.Popen([_bin(), "mcp", "--archive", str(archive)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "pytest", "version": "1"}}}
    p.stdin.write((json.dumps(init) + "\n").encode())
    p.stdin.flush()
    line = p.stdout.readline()
    assert json.loads(line)["result"]["serverInfo"]["name"] == "ctxpress"
    p.stdin.close()
    try:
        assert p.wait(15) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _httpx():
    """The HTTP client package of the SDK: httpx2 for SDK 2, httpx for SDK 1."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx
    return httpx


def _http_client():
    try:
        from mcp.client.streamable_http import streamable_http_client

        httpx = _httpx()

        def connect(url, headers):
            return streamable_http_client(url, http_client=httpx.AsyncClient(headers=headers, timeout=30))
    except ImportError:
        from mcp.client.streamable_http import streamablehttp_client

        def connect(url, headers):
            return streamablehttp_client(url, headers=headers)
    return connect


def test_streamable_http_on_the_proxy(archive, tmp_path):
    ClientSession, _, _ = _sdk()
    connect = _http_client()
    port = _port()
    log = open(tmp_path / "serve.log", "w+")
    # No upstream is needed for MCP calls: port 9 on loopback refuses.
    proc = subprocess.Popen(
        [_bin(), "serve", "--mcp", "--admin-token", TOKEN, "--archive", str(archive),
         "--upstream", "http://127.0.0.1:9/v1", "--budget", "8000", "--listen", f"127.0.0.1:{port}"],
        stdout=log, stderr=log,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "serve did not start"
                time.sleep(0.05)

        async def go(headers):
            async with connect(url, headers) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    await _checks(session, archive)

        _run(go({"authorization": f"Bearer {TOKEN}"}))

        # Without the admin token: refused before any MCP.
        httpx = _httpx()

        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "pytest", "version": "1"}}}
        hdrs = {"accept": "application/json, text/event-stream"}
        r = httpx.post(url, json=body, headers=hdrs, timeout=10)
        assert r.status_code == 401, r.text
        r = httpx.post(url, json=body, headers={**hdrs, "authorization": "Bearer wrong"}, timeout=10)
        assert r.status_code == 401, r.text
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.flush()
        log.seek(0)
        text = log.read()
    assert proc.returncode == 0, text
    assert TOKEN not in text, "the token is never logged"
