"""ctxpress as a LangChain v1 agent middleware: before each model call,
compress the agent's messages when they cross 70% of the window, down to
40%, and replace them in the agent's state.

::

    from langchain.agents import create_agent
    from ctxpress.integrations.langchain import CtxpressMiddleware

    agent = create_agent(model, tools=tools, middleware=[CtxpressMiddleware(window=128_000)])

The compressed messages replace the state's (``RemoveMessage(id=
REMOVE_ALL_MESSAGES)`` and the new list, as LangChain's own
``SummarizationMiddleware`` does), so later steps append to them: the
history the model reads stays the same from one step to the next until the
next compaction, and the provider's prompt cache stays warm. Messages that
come out unchanged are the same objects (ids, metadata and all); changed
ones keep their ids; tool calls and their ``ToolMessage``\\ s stay paired.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ctxpress import Archive, Compressor, ConfigError

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        RemoveMessage,
        SystemMessage,
        ToolMessage,
    )
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
except ImportError as e:  # pragma: no cover - exercised without langchain
    raise ImportError(
        f"ctxpress.integrations.langchain needs LangChain 1.x ({e}): pip install 'ctxpress[langchain]'"
    ) from e

__all__ = ["CtxpressMiddleware", "to_dicts", "from_dicts"]


def _to_dict(m: BaseMessage) -> Dict[str, Any]:
    if isinstance(m, AIMessage):
        content = m.content
        if m.tool_calls and isinstance(content, list):
            # Anthropic models give each call twice: a `tool_use` block and
            # an entry of `tool_calls` (from which the block is made again).
            ids = {tc.get("id") for tc in m.tool_calls}
            content = [
                b
                for b in content
                if not (isinstance(b, dict) and b.get("type") in ("tool_use", "tool_call") and b.get("id") in ids)
            ]
        d: Dict[str, Any] = {"role": "assistant", "content": content}
        if m.tool_calls:
            d["tool_calls"] = [
                {
                    "id": tc.get("id"),
                    "type": "function",
                    "function": {"name": tc["name"], "arguments": json.dumps(tc.get("args", {}), ensure_ascii=False)},
                }
                for tc in m.tool_calls
            ]
    elif isinstance(m, ToolMessage):
        d = {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    elif isinstance(m, HumanMessage):
        d = {"role": "user", "content": m.content}
    elif isinstance(m, SystemMessage):
        d = {"role": "system", "content": m.content}
    elif isinstance(m, ChatMessage):
        d = {"role": m.role, "content": m.content}
    else:
        raise TypeError(f"ctxpress: cannot convert a {type(m).__name__} to a chat message")
    if m.name is not None and not isinstance(m, (AIMessage, HumanMessage)):
        d["name"] = m.name
    if m.id is not None:
        d["id"] = m.id
    return d


def to_dicts(messages: Sequence[BaseMessage]) -> List[Dict[str, Any]]:
    """LangChain messages as OpenAI Chat dicts (``tool_calls`` with JSON
    arguments, ``role: tool`` with ``tool_call_id``), each with its ``id``."""
    return [_to_dict(m) for m in messages]


def _tool_calls(d: Mapping[str, Any], before: Optional[BaseMessage]) -> List[Dict[str, Any]]:
    old = {tc.get("id"): tc for tc in getattr(before, "tool_calls", None) or []}
    calls = []
    for tc in d.get("tool_calls") or []:
        fn = tc.get("function") or {}
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else (raw or {})
        except ValueError:
            args = None
        if not isinstance(args, dict):
            # Compressed to text: the call as it was made, else the text.
            args = old[tc.get("id")]["args"] if tc.get("id") in old else {"input": raw}
        calls.append({"name": fn.get("name", ""), "args": args, "id": tc.get("id"), "type": "tool_call"})
    return calls


def from_dicts(
    dicts: Sequence[Mapping[str, Any]], originals: Sequence[BaseMessage] = ()
) -> List[BaseMessage]:
    """OpenAI Chat dicts back as LangChain messages. A dict with the ``id``
    of one of ``originals`` that converts to the same dict is that message
    object; a changed one keeps the original's id and metadata. Every
    message gets an id, none twice."""
    by_id = {m.id: m for m in originals if m.id is not None}
    out: List[BaseMessage] = []
    used = set()
    for d in dicts:
        mid = d.get("id")
        before = by_id.get(mid) if mid is not None else None
        if mid is None or mid in used:
            mid = str(uuid.uuid4())
            before = None
        used.add(mid)
        if before is not None and _to_dict(before) == dict(d):
            out.append(before)
            continue
        role, content = d.get("role"), d.get("content")
        if content is None:
            content = ""
        m: BaseMessage
        if role == "assistant":
            fields: Dict[str, Any] = {"content": content, "tool_calls": _tool_calls(d, before), "id": mid}
            if isinstance(before, AIMessage):
                m = before.model_copy(update={**fields, "invalid_tool_calls": []})
            else:
                m = AIMessage(**fields)
        elif role == "tool":
            m = ToolMessage(content=content, tool_call_id=d.get("tool_call_id", ""), id=mid, name=d.get("name"))
            if isinstance(before, ToolMessage):
                m = before.model_copy(update={"content": content, "tool_call_id": m.tool_call_id, "id": mid})
        elif role == "user":
            m = HumanMessage(content=content, id=mid)
            if isinstance(before, HumanMessage):
                m = before.model_copy(update={"content": content, "id": mid})
        elif role in ("system", "developer"):
            m = SystemMessage(content=content, id=mid, name=d.get("name"))
        else:
            m = ChatMessage(role=str(role), content=content, id=mid)
        out.append(m)
    return out


class CtxpressMiddleware(AgentMiddleware):
    """Keep an agent's messages under its window: before each model call,
    when the messages are over 70% of ``window`` (or over ``budget``),
    compress them down to 40% (to ``budget``) and replace them in the state.

    Args:
        window: the context window the messages get, in tokens (the model's
            window less what its system prompt and tool definitions take:
            those are not in the state this middleware sees).
        budget: a fixed token budget instead of a window.
        preset: the pipeline (default ``"agent"``); or ``config``.
        tokenizer, archive, llm: as for :class:`ctxpress.Compressor`.

    ``last_report`` is the pipeline report of the last compaction (``None``
    before one).
    """

    def __init__(
        self,
        window: Optional[int] = None,
        *,
        budget: Optional[int] = None,
        preset: Optional[str] = None,
        config: Any = None,
        tokenizer: Optional[str] = None,
        archive: Optional[Archive] = None,
        llm: Optional[Mapping[str, Any]] = None,
    ):
        super().__init__()
        if window is None and budget is None:
            raise ConfigError("CtxpressMiddleware needs a window (window=TOKENS) or a budget (budget=TOKENS)")
        if preset is None and config is None:
            preset = "agent"
        self.compressor = Compressor(
            preset, config, window=window, budget=budget, tokenizer=tokenizer, archive=archive, llm=llm
        )
        self.last_report: Optional[Dict[str, Any]] = None

    def compress(self, messages: Sequence[BaseMessage]) -> Optional[List[BaseMessage]]:
        """The compressed messages, or ``None`` when they stay as they are."""
        given = to_dicts(messages)
        r = self.compressor.compress(given)
        if r.messages == given:
            return None
        self.last_report = r.report
        return from_dicts(r.messages, messages)

    def _update(self, new: Optional[List[BaseMessage]]) -> Optional[Dict[str, Any]]:
        if new is None:
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]}

    def before_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
        return self._update(self.compress(state["messages"]))

    async def abefore_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
        import asyncio

        new = await asyncio.get_running_loop().run_in_executor(None, self.compress, state["messages"])
        return self._update(new)
