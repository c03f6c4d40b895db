"""ctxpress.Session and the framework hooks with the real frameworks: LiteLLM
(`CtxpressHook`, SDK calls to a stub OpenAI-compatible server on 127.0.0.1)
and LangChain v1 (`CtxpressMiddleware` in `create_agent` with a fake model
that calls a tool 30 times). A missing framework skips its tests and says
so, and fails them instead when CI is set."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import importlib
import json
import os
import subprocess
import sys
import threading
from typing import Any, Dict, Iterator, List

import pytest

import ctxpress
from _support import anthropic_session, corpus_dir, openai_session

# LiteLLM's own types warn on import (pydantic and ReadOnly TypedDict items).
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")

# LiteLLM fetches its model cost map from GitHub on import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _need(module: str, extra: str) -> Any:
    """`module`, or a skip that says what is missing (a failure when CI is
    set). As `pytest.importorskip`, but for any ImportError: LiteLLM raises
    a plain one for a missing dependency of its proxy."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        why = f"{module} is not installed ({e}; pip install 'ctxpress[{extra}]', or crates/ctxpress-py/requirements-dev.txt)"
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI is set: this test must run)")
        pytest.skip(why)


def _tokens(messages: Any) -> int:
    return ctxpress.stats(messages)["tokens"]


def _agent_history() -> List[Dict[str, Any]]:
    """A long coding-agent session: from the corpus when it is there, else
    built; cut where no tool call waits for its result."""
    d = corpus_dir()
    msgs: List[Dict[str, Any]] = []
    if d is not None and (d / "coding_agent_sessions.jsonl").is_file():
        for line in (d / "coding_agent_sessions.jsonl").read_text(encoding="utf-8").splitlines():
            conv = json.loads(line)
            if conv.get("id") == "p2r-8513e634a083":
                msgs = conv["messages"]
                break
    if not msgs:
        msgs = openai_session(turns=60, lines=80)
    end = len(msgs)
    while end > 0 and (msgs[end - 1].get("role") != "assistant" or msgs[end - 1].get("tool_calls")):
        end -= 1
    assert end > 20
    return msgs[:end] + [{"role": "user", "content": "Go on with the task."}]


def test_a_missing_framework_skips_and_fails_under_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        _need("ctxpress_no_such_framework", "litellm")
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        _need("ctxpress_no_such_framework", "litellm")


# -- ctxpress.Session ------------------------------------------------------


def test_importing_ctxpress_imports_no_framework():
    code = (
        "import sys, ctxpress, ctxpress.integrations\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('litellm', 'langchain', 'langchain_core', 'langgraph'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_session_needs_a_window_or_a_budget():
    with pytest.raises(ctxpress.ConfigError, match="window"):
        ctxpress.Session("agent")
    with pytest.raises(ctxpress.ConfigError, match="nope"):
        ctxpress.Session("nope", window=1000)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_session_keeps_its_prefix_between_compactions(dialect):
    s = ctxpress.Session("agent", window=6000)
    assert (s.trigger, s.target) == (4200, 2400)
    base = openai_session(turns=2, lines=20)
    if dialect == "anthropic":
        history: Any = {"system": "You are a coding agent.", "messages": [{"role": "user", "content": "Fix it."}]}
    else:
        history = base[:2]
    compactions, prev = 0, None
    for k in range(40):
        req, r = s.prepare(history)
        msgs = req["messages"] if dialect == "anthropic" else req
        assert type(req) is type(history)
        assert ctxpress.validate(req) == []
        assert r["tokens_request"] <= s.trigger or not r["fits"]
        assert set(r) >= {"tokens_given", "tokens_saved", "tokens_prefix_kept", "compacted", "reset", "report"}
        assert not r["reset"], k
        if r["compacted"]:
            compactions += 1
            assert r["report"]["tokens_after"] <= s.target
        elif prev is not None:
            assert msgs[: len(prev)] == prev, f"turn {k}: the prefix moved"
            assert r["tokens_prefix_changed"] == 0
        prev = msgs
        reply = {"role": "assistant", "content": f"Step {k}: read src/mod_{k}.py. " + "It is fine. " * 40}
        ask = {"role": "user", "content": f"Now look at src/mod_{k + 1}.py; it failed with code {k}."}
        if dialect == "anthropic":
            history = {**history, "messages": history["messages"] + [reply, ask]}
        else:
            history = history + [reply, ask]
    assert compactions >= 2
    assert s.compactions == compactions


def test_session_as_text_and_async():
    s = ctxpress.Session(budget=100_000)
    text = json.dumps(openai_session(turns=2))
    out, r = s.prepare(text)
    assert out == text and not r["compacted"] and r["report"] is None
    out2, r2 = asyncio.run(s.aprepare(text))
    assert out2 == text and r2["tokens_prefix_kept"] > 0


def test_session_turns_from_threads():
    s = ctxpress.Session("agent", window=4000)
    history = openai_session(turns=12, lines=40)
    done: List[Any] = []

    def turn():
        done.append(s.prepare(history))

    threads = [threading.Thread(target=turn) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(done) == 8
    first = json.dumps(done[0][0])
    assert all(json.dumps(d[0]) == first for d in done)
    assert s.compactions == 1


# -- LiteLLM ---------------------------------------------------------------


class _Stub(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible /chat/completions that records what it is sent."""

    bodies: List[Dict[str, Any]] = []
    timeout = 30

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        type(self).bodies.append(body)
        n = len(type(self).bodies)
        reply = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"Reply {n}: I checked src/mod_{n}.py; it is fine."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _stub_server() -> Iterator[str]:
    _Stub.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    # Bounded: stopped after 5 minutes even if the test hangs.
    stop = threading.Timer(300, server.shutdown)
    stop.daemon = True
    stop.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.cancel()
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def litellm_mod():
    litellm = _need("litellm", "litellm")
    before = list(litellm.callbacks)
    yield litellm
    litellm.callbacks = before


def test_litellm_hook_keeps_the_prefix_stable_across_turns(litellm_mod):
    litellm = litellm_mod
    from ctxpress.integrations.litellm import CtxpressHook

    window = 20_000
    hook = CtxpressHook("agent", window=window)
    litellm.callbacks = [hook]
    history = _agent_history()
    assert _tokens(history) > window
    reports: List[Dict[str, Any]] = []
    newest: List[Any] = []
    with _stub_server() as base:

        async def run():
            nonlocal history
            for k in range(10):
                newest.append(history[-1]["content"])
                resp = await litellm.acompletion(
                    model="openai/stub", api_base=base, api_key="x", messages=history, timeout=60
                )
                reports.append(hook.last_report)
                ask = f"Turn {k}: now check these files too.\n" + "\n".join(
                    f"src/pkg_{k}/mod_{i}.py: def handler_{i}(request): return route(request, {i})" for i in range(60)
                )
                # The reply as LiteLLM gives it (a Message object), as clients do.
                history = history + [resp.choices[0].message, {"role": "user", "content": ask}]

        asyncio.run(run())
        sent = [b["messages"] for b in _Stub.bodies]
    assert len(sent) == 10, "every turn reached the stub, once"
    assert len(set(id(r) for r in reports)) == 10
    compactions = [k for k, r in enumerate(reports) if r["compacted"]]
    assert compactions and compactions[0] == 0, compactions
    assert len(compactions) >= 2, f"compactions at {compactions}"
    for k, msgs in enumerate(sent):
        assert _tokens(msgs) <= window, f"turn {k}: {_tokens(msgs)} tokens sent"
        assert ctxpress.validate(msgs) == [], k
        if k and not reports[k]["compacted"]:
            prev = sent[k - 1]
            assert msgs[: len(prev)] == prev, f"turn {k}: the prefix moved without a compaction"
            assert reports[k]["tokens_prefix_changed"] == 0
        assert msgs[-1]["content"] == newest[k], f"turn {k}: the newest message is the client's"
    assert len(hook._sessions) == 1


def test_litellm_hook_names_sessions_and_serves_the_proxy(litellm_mod):
    from ctxpress.integrations.litellm import CtxpressHook

    hook = CtxpressHook(window=6000, max_sessions=2)
    # The proxy calls a callback's async_pre_call_hook only when its own
    # class defines it (litellm/proxy/utils.py, ProxyLogging.pre_call_hook).
    assert "async_pre_call_hook" in vars(CtxpressHook)
    history = openai_session(turns=20, lines=40)
    data = {"model": "gpt-x", "messages": history, "metadata": {"ctxpress_session": "a"}}
    out = asyncio.run(hook.async_pre_call_hook(None, None, data, "acompletion"))
    assert out["messages"] != history and hook.last_report["compacted"]
    assert _tokens(out["messages"]) <= 6000
    # The router's deployment hook sees the request the proxy hook made: unchanged.
    again = asyncio.run(hook.async_pre_call_deployment_hook(dict(out), None))
    assert again["messages"] == out["messages"]
    # Keys: the metadata name, else system prompt and first user message.
    assert hook.session_key(data) == "s:a"
    assert hook.session_key(data, "k1") == "s:k1:a"
    assert hook.session_key({"messages": history}, "k1") != hook.session_key({"messages": history}, "k2")
    assert hook.session_key({"messages": history, "user": "u1"}) != hook.session_key({"messages": history})
    plain = hook.session_key({"messages": history})
    moved = [{**m, "content": [{"type": "text", "text": m["content"], "cache_control": {"type": "ephemeral"}}]} if i == 1 else m for i, m in enumerate(history)]
    assert hook.session_key({"messages": moved}) == plain
    assert hook.session_key({"messages": history[:1] + [{"role": "user", "content": "other"}]}) != plain
    for name in ("b", "c"):
        asyncio.run(hook.async_pre_call_hook(None, None, {**data, "metadata": {"ctxpress_session": name}}, "acompletion"))
    assert [k for k, _ in hook._sessions] == ["s:b", "s:c"]
    # Anthropic Messages through the proxy (/v1/messages): a top-level system
    # and content blocks.
    body = anthropic_session(turns=20, lines=40)
    res = asyncio.run(hook.async_pre_call_hook(None, None, dict(body), "anthropic_messages"))
    assert hook.last_report["compacted"] and res["system"] == body["system"]
    assert res["messages"] != body["messages"] and ctxpress.validate(res) == []
    assert _tokens(res) <= 6000
    assert res["messages"][-1] == body["messages"][-1]


def test_litellm_proxy_pre_call_hook_runs_the_hook(litellm_mod):
    """The proxy's own pre-call path (ProxyLogging.pre_call_hook, what every
    proxy request goes through) calls the hook and sends what it returns;
    the router's deployment hook then leaves that request alone."""
    litellm = litellm_mod
    proxy_utils = _need("litellm.proxy.utils", "litellm")
    from litellm.caching.caching import DualCache
    from litellm.proxy._types import UserAPIKeyAuth

    from ctxpress.integrations.litellm import CtxpressHook

    hook = CtxpressHook(window=6000)
    litellm.callbacks = [hook]
    proxy = proxy_utils.ProxyLogging(user_api_key_cache=DualCache())
    history = openai_session(turns=20, lines=40)
    sent = []
    for user in ("sk-one", "sk-two"):
        data = {"model": "gpt-x", "messages": history}
        out = asyncio.run(
            proxy.pre_call_hook(user_api_key_dict=UserAPIKeyAuth(api_key=user), data=data, call_type="completion")
        )
        assert hook.last_report["compacted"] and _tokens(out["messages"]) <= 6000
        assert ctxpress.validate(out["messages"]) == []
        again = asyncio.run(hook.async_pre_call_deployment_hook(dict(out), None))
        assert again["messages"] == out["messages"]
        sent.append(out["messages"])
    assert sent[0] == sent[1]
    assert len(hook._sessions) == 2, "one session per caller"


def test_litellm_hook_sends_what_it_cannot_read_unchanged(litellm_mod, caplog):
    from ctxpress.integrations.litellm import CtxpressHook

    hook = CtxpressHook(window=6000)
    odd = {"model": "gpt-x", "messages": [{"role": "user", "content": object()}]}
    assert hook.prepare_request(odd)["messages"] is odd["messages"]
    assert "uncompressed" in caplog.text
    other = {"model": "gpt-x", "messages": [3]}
    assert asyncio.run(hook.async_pre_call_deployment_hook(other, None)) is other


def test_litellm_sync_completion_through_prepare_request(litellm_mod):
    litellm = litellm_mod
    from ctxpress.integrations.litellm import CtxpressHook

    hook = CtxpressHook(window=6000)
    litellm.callbacks = [hook]
    history = openai_session(turns=20, lines=40)
    with _stub_server() as base:
        # The sync completion runs no hook that may change the request ...
        litellm.completion(model="openai/stub", api_base=base, api_key="x", messages=history)
        # ... so a sync caller asks the hook first.
        req = hook.prepare_request({"model": "openai/stub", "messages": history})
        litellm.completion(api_base=base, api_key="x", **req)
        sent = [b["messages"] for b in _Stub.bodies]
    assert sent[0] == history, "LiteLLM sent the sync call as given"
    assert sent[1] == req["messages"] and _tokens(sent[1]) <= 6000
    assert hook.last_report["compacted"]


def test_litellm_hook_window_from_the_model(litellm_mod):
    from ctxpress.integrations.litellm import CtxpressHook

    hook = CtxpressHook()
    assert hook._window_for("gpt-4o") == litellm_mod.get_model_info("gpt-4o")["max_input_tokens"]
    with pytest.raises(ctxpress.ConfigError, match="window"):
        hook._window_for("openai/no-such-model")
    with pytest.raises(ctxpress.ConfigError):
        CtxpressHook("nope", window=1000)


# -- LangChain -------------------------------------------------------------


def _langchain():
    _need("langchain", "langchain")
    _need("langchain.agents.middleware", "langchain")
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ToolCaller(BaseChatModel):
        """Calls the tool `steps` times, then answers; records what it reads."""

        steps: int = 30
        seen: list = []

        @property
        def _llm_type(self) -> str:
            return "ctxpress-test"

        def bind_tools(self, tools, **kwargs):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            self.seen.append(list(messages))
            n = len(self.seen)
            if n <= self.steps:
                msg = AIMessage(
                    content=f"Step {n}: reading part {n}.",
                    tool_calls=[{"name": "read_part", "args": {"part": n}, "id": f"call_{n}", "type": "tool_call"}],
                )
            else:
                msg = AIMessage(content="Done: every part is read.")
            return ChatResult(generations=[ChatGeneration(message=msg)])

    return ToolCaller


def _check_langchain_run(seen, window, system):
    from langchain_core.messages import AIMessage, SystemMessage, ToolMessage

    from ctxpress.integrations.langchain import to_dicts

    assert len(seen) == 31
    for step, msgs in enumerate(seen):
        assert isinstance(msgs[0], SystemMessage) and msgs[0].content == system, step
        assert _tokens(to_dicts(msgs)) <= window, f"step {step}"
        calls = [tc["id"] for m in msgs if isinstance(m, AIMessage) for tc in m.tool_calls]
        results = [m.tool_call_id for m in msgs if isinstance(m, ToolMessage)]
        assert calls == results, f"step {step}: tool calls and results paired"
        ids = [m.id for m in msgs[1:]]
        assert None not in ids and len(set(ids)) == len(ids), step
        assert ctxpress.validate(to_dicts(msgs)) == [], step


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_langchain_middleware_keeps_the_agent_under_its_window(mode):
    ToolCaller = _langchain()
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from ctxpress.integrations.langchain import CtxpressMiddleware

    @tool
    def read_part(part: int) -> str:
        """Read one part of the report."""
        return "\n".join(f"part {part} line {i}: value_{part}_{i} = compute({part}, {i})  # checked" for i in range(40))

    assert len(read_part.invoke({"part": 1})) > 2000
    window, system = 8000, "You are a careful agent. Read every part."
    model = ToolCaller(seen=[])
    mw = CtxpressMiddleware(window=window)
    agent = create_agent(model=model, tools=[read_part], middleware=[mw], system_prompt=system)
    ask = {"messages": [{"role": "user", "content": "Read all 30 parts of the report."}]}
    if mode == "sync":
        out = agent.invoke(ask, {"recursion_limit": 500})
    else:
        out = asyncio.run(agent.ainvoke(ask, {"recursion_limit": 500}))
    _check_langchain_run(model.seen, window, system)
    assert mw.last_report is not None, "the middleware compacted"
    # Uncompressed, the run would not have fit.
    assert sum(len(m.content) for m in out["messages"]) < 30 * 2000
    assert out["messages"][-1].content == "Done: every part is read."
    assert out["messages"][0].content == "Read all 30 parts of the report."


def test_langchain_messages_round_trip():
    _langchain()
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from ctxpress.integrations.langchain import from_dicts, to_dicts

    msgs = [
        SystemMessage("sys", id="s"),
        HumanMessage("hi", id="h"),
        AIMessage("", id="a", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}], response_metadata={"k": 1}),
        ToolMessage("out", tool_call_id="c1", id="t", name="f"),
    ]
    d = to_dicts(msgs)
    assert d[2]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}
    assert d[3] == {"role": "tool", "tool_call_id": "c1", "content": "out", "name": "f", "id": "t"}
    back = from_dicts(d, msgs)
    assert all(a is b for a, b in zip(back, msgs))
    d[3]["content"] = "[compressed]"
    d[2]["tool_calls"][0]["function"]["arguments"] = "not json"
    d[2]["content"] = "changed"
    back = from_dicts(d + [{"role": "user", "content": "new", "id": "h"}], msgs)
    assert back[3].content == "[compressed]" and back[3].id == "t" and back[3].tool_call_id == "c1"
    assert back[2].tool_calls[0]["args"] == {"x": 1} and back[2].response_metadata == {"k": 1}
    assert back[4].id not in ("h", None), "an id is not used twice"
    # An Anthropic model's call is a tool_use block and a tool call: once in the dict.
    blocks = [{"type": "text", "text": "Reading."}, {"type": "tool_use", "id": "c1", "name": "f", "input": {"x": 1}}]
    anth = AIMessage(blocks, id="a", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}])
    (d,) = to_dicts([anth])
    assert d["content"] == blocks[:1] and len(d["tool_calls"]) == 1
    assert from_dicts([d], [anth])[0] is anth
