"""Compress an agent's history with ctxpress before an OpenAI Chat Completions call.

What it shows:

* an OpenAI Chat message list (a real SWE-agent trajectory from
  ``examples/data/swe_agent.jsonl``: system prompt, user task, assistant
  ``tool_calls``, ``tool`` results) compressed with the ``agent`` preset under
  a token budget, counted with the ``o200k_base`` tokenizer (GPT-4o's);
* that the result is still a valid request: every tool call keeps its result
  (``ctxpress.validate`` returns no problems) and the list passes the OpenAI
  SDK's own message types (``openai.types.chat.ChatCompletionMessageParam``,
  checked with pydantic, which the SDK depends on);
* the call itself, ``client.chat.completions.create(model=..., messages=...)``,
  made only when ``OPENAI_API_KEY`` is set. Without it the script builds the
  client against an address where nothing listens (``127.0.0.1:9``), prints
  the request it would send and exits 0: no network, no key needed.

Run::

    python examples/python/openai_sdk.py            # prints, sends nothing
    OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini python examples/python/openai_sdk.py

Needs the ctxpress package (crates/ctxpress-py) and ``pip install openai``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import openai
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

import ctxpress

DATA = Path(__file__).resolve().parent.parent / "data" / "swe_agent.jsonl"
CONVERSATION_ID = "sweagent-636933f9abfb"  # 28 messages, ends with a tool result
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
BUDGET = 3000  # tokens for the history; the rest of the window is the answer's


def load_history() -> List[Dict[str, Any]]:
    """The agent's history so far: OpenAI Chat messages (dicts)."""
    with open(DATA, encoding="utf-8") as f:
        for line in f:
            conversation = json.loads(line)
            if conversation["id"] == CONVERSATION_ID:
                return conversation["messages"]
    raise SystemExit(f"{CONVERSATION_ID} is not in {DATA}")


def check_request(messages: List[Dict[str, Any]]) -> None:
    """Raise if the messages are not a valid Chat Completions request."""
    problems = ctxpress.validate(messages)
    if problems:
        raise SystemExit("invalid request: " + "; ".join(p["message"] for p in problems))
    # The SDK's own TypedDicts: role names, content types, tool_calls shape.
    TypeAdapter(List[ChatCompletionMessageParam]).validate_python(messages)


def send(client: openai.OpenAI, messages: List[Dict[str, Any]]) -> str:
    response = client.chat.completions.create(model=MODEL, messages=messages)
    return response.choices[0].message.content or ""


def preview(message: Dict[str, Any], width: int = 70) -> str:
    text = message.get("content") or ""
    if not isinstance(text, str):
        text = json.dumps(text)
    calls = message.get("tool_calls") or []
    if calls:
        text = " ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
        text = f"tool_calls: {text}"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def main() -> int:
    history = load_history()
    result = ctxpress.compress(history, preset="agent", budget=BUDGET, tokenizer="o200k_base")
    messages = result.messages  # a list of dicts, like the input
    r = result.report
    print(f"history: {r['messages_before']} messages, {r['tokens_before']} tokens (o200k_base)")
    print(
        f"compressed: {r['messages_after']} messages, {r['tokens_after']} tokens, "
        f"budget {BUDGET}, fits={result.fits}"
    )
    check_request(messages)
    body = json.dumps({"model": MODEL, "messages": messages})
    print(
        f"request: model={MODEL}, {len(messages)} messages, {len(body)} bytes of JSON, "
        "valid for the Chat Completions API"
    )
    for i, m in enumerate(messages):
        print(f"  [{i}] {m['role']}: {preview(m)}")

    if os.environ.get("OPENAI_API_KEY"):
        client = openai.OpenAI()  # key and base URL from the environment
        print("answer:", send(client, messages))
    else:
        # Built, never used: constructing a client makes no connection.
        client = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
        print(f"not sent: OPENAI_API_KEY is not set (client for {client.base_url} built, unused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
