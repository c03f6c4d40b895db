"""Compress an agent's history with ctxpress before an Anthropic Messages call.

What it shows:

* an Anthropic Messages request (top-level ``system``, ``model`` and
  ``max_tokens``; assistant ``tool_use`` blocks and user ``tool_result``
  blocks) compressed as one dict: ctxpress compresses ``messages`` and gives
  the other fields back as they were, so the result is the keyword arguments
  of ``client.messages.create``. Here the agent read ``utils/dates.py``, edited
  it and read it again: the latest read is kept whole and the first becomes a
  one-line difference against it; the budget then shortens older tool output;
* that the result is still a valid request: every ``tool_use`` keeps its
  ``tool_result`` in the next user turn (``ctxpress.validate`` returns no
  problems) and the messages pass the SDK's own types
  (``anthropic.types.MessageParam``, checked with pydantic);
* the call, made only when ``ANTHROPIC_API_KEY`` is set. Without it the script
  builds the client against an address where nothing listens
  (``127.0.0.1:9``), prints the request and exits 0: no network, no key.

Note: the top-level ``system`` prompt is passed through untouched and is not
part of the token figures or the budget (ctxpress counts ``messages`` only);
leave room for it when you choose the budget.

Run::

    python examples/python/anthropic_sdk.py           # prints, sends nothing
    ANTHROPIC_API_KEY=sk-ant-... ANTHROPIC_MODEL=claude-sonnet-4-5 \\
        python examples/python/anthropic_sdk.py

Needs the ctxpress package (crates/ctxpress-py) and ``pip install anthropic``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

import anthropic
from anthropic.types import MessageParam
from pydantic import TypeAdapter

import ctxpress

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")
BUDGET = 4000  # tokens for the messages (the system prompt comes on top)


def source_file(fixed: bool) -> str:
    """utils/dates.py as the agent's read_file tool returns it."""
    lines = ['"""Date helpers."""', "import datetime as dt", ""]
    for i in range(60):
        lines += [
            f"def shift_{i}(d: dt.date) -> dt.date:",
            f'    """d moved {i} days on."""',
            f"    return d + dt.timedelta(days={i})",
            "",
        ]
    rule = "(year % 100 != 0 or year % 400 == 0)" if fixed else "year % 100 != 0"
    lines += ["def is_leap(year: int) -> bool:", f"    return year % 4 == 0 and {rule}", ""]
    return "\n".join(f"{n:4d}  {text}" for n, text in enumerate(lines, 1))


def test_output() -> str:
    lines = ["============================= test session starts ==============================",
             "collected 61 items", ""]
    lines += [f"tests/test_dates.py::test_shift_{i} PASSED" for i in range(60)]
    lines += [
        "tests/test_dates.py::test_is_leap FAILED",
        "",
        "    def test_is_leap():",
        ">       assert is_leap(2000)",
        "E       assert False",
        "E        +  where False = is_leap(2000)",
        "",
        "tests/test_dates.py:241: AssertionError",
        "FAILED tests/test_dates.py::test_is_leap - assert False",
        "========================= 1 failed, 60 passed in 0.31s =========================",
    ]
    return "\n".join(lines)


def tool_use(id: str, name: str, **input: Any) -> Dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def tool_result(id: str, text: str, is_error: bool = False) -> Dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


def build_request() -> Dict[str, Any]:
    """The request the agent is about to send: keyword arguments of messages.create."""
    old = "    return year % 4 == 0 and year % 100 != 0"
    new = "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)"
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "system": "You are a coding agent. Use the tools to read, edit and test code.",
        "messages": [
            {"role": "user", "content": "test_is_leap fails in utils/dates.py; please fix it."},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me run the tests first."},
                tool_use("toolu_01", "bash", command="pytest tests/test_dates.py")]},
            {"role": "user", "content": [tool_result("toolu_01", test_output(), is_error=True)]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "is_leap(2000) is wrong. Reading the module."},
                tool_use("toolu_02", "read_file", path="utils/dates.py")]},
            {"role": "user", "content": [tool_result("toolu_02", source_file(fixed=False))]},
            {"role": "assistant", "content": [
                tool_use("toolu_03", "edit_file", path="utils/dates.py", old=old, new=new)]},
            {"role": "user", "content": [tool_result("toolu_03", "Edited utils/dates.py (1 line).")]},
            {"role": "assistant", "content": [tool_use("toolu_04", "read_file", path="utils/dates.py")]},
            {"role": "user", "content": [tool_result("toolu_04", source_file(fixed=True))]},
            {"role": "assistant", "content": [
                tool_use("toolu_05", "bash", command="pytest tests/test_dates.py")]},
            {"role": "user", "content": [tool_result("toolu_05", "61 passed in 0.29s")]},
            {"role": "assistant", "content": [{"type": "text", "text":
                "Fixed: a year divisible by 400 is a leap year. All 61 tests pass."}]},
            {"role": "user", "content": "Thanks. Now add a test for 1900 and 2024."},
        ],
    }


def check_request(request: Dict[str, Any]) -> None:
    """Raise if the request is not valid for the Messages API."""
    problems = ctxpress.validate(request)
    if problems:
        raise SystemExit("invalid request: " + "; ".join(p["message"] for p in problems))
    TypeAdapter(List[MessageParam]).validate_python(request["messages"])


def preview(message: Dict[str, Any], width: int = 70) -> str:
    content = message["content"]
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for b in content:
            if b["type"] == "text":
                parts.append(b["text"])
            elif b["type"] == "tool_use":
                parts.append(f"tool_use {b['name']}({json.dumps(b['input'])})")
            elif b["type"] == "tool_result":
                inner = b["content"] if isinstance(b["content"], str) else json.dumps(b["content"])
                parts.append(f"tool_result {inner}")
            else:
                parts.append(b["type"])
        text = " | ".join(parts)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def main() -> int:
    request = build_request()
    result = ctxpress.compress(request, preset="agent", budget=BUDGET)
    compressed = result.messages  # the same dict shape: model, max_tokens, system, messages
    r = result.report
    print(f"history: {r['messages_before']} messages, {r['tokens_before']} tokens")
    print(
        f"compressed: {r['messages_after']} messages, {r['tokens_after']} tokens, "
        f"budget {BUDGET}, fits={result.fits}"
    )
    assert compressed["system"] == request["system"] and compressed["model"] == MODEL
    check_request(compressed)
    print(
        f"request: model={compressed['model']}, max_tokens={compressed['max_tokens']}, "
        f"system kept, {len(compressed['messages'])} messages, valid for the Messages API"
    )
    for i, m in enumerate(compressed["messages"]):
        print(f"  [{i}] {m['role']}: {preview(m)}")

    if os.environ.get("ANTHROPIC_API_KEY"):
        client = anthropic.Anthropic()  # key from the environment
        message = client.messages.create(**compressed)
        print("answer:", "".join(b.text for b in message.content if b.type == "text"))
    else:
        # Built, never used: constructing a client makes no connection.
        client = anthropic.Anthropic(api_key="sk-test", base_url="http://127.0.0.1:9")
        print(f"not sent: ANTHROPIC_API_KEY is not set (client for {client.base_url} built, unused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
