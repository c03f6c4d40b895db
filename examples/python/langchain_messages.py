"""Compress a LangChain message history with ctxpress.

What it shows: a LangChain history (``SystemMessage``, ``HumanMessage``,
``AIMessage`` with ``tool_calls``, ``ToolMessage``) turned into OpenAI Chat
dicts with ``langchain_core.messages.convert_to_openai_messages``, compressed
with ctxpress, and turned back into LangChain messages with
``langchain_core.messages.convert_to_messages``, ready for any chat model's
``invoke``. Tool calls keep their ids, names and arguments, and every
``ToolMessage`` still answers a tool call of the ``AIMessage`` before it.

The history is a customer-service agent's: the flight search results it asked
for early on are long and no longer needed in full once a flight was booked.

Run (no network, no key)::

    python examples/python/langchain_messages.py

Needs the ctxpress package (crates/ctxpress-py) and ``pip install langchain-core``.
To use it in a chain, put ``RunnableLambda(compress_history)`` before the model.
"""

from __future__ import annotations

import json
import sys
from typing import List

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

import ctxpress

BUDGET = 1500


def flights(origin: str, destination: str, day: str, n: int = 24) -> str:
    """What the search_flights tool returned: a long JSON list."""
    return json.dumps(
        [
            {
                "flight_number": f"HAT{100 + i:03d}",
                "origin": origin,
                "destination": destination,
                "date": day,
                "scheduled_departure_time_est": f"{5 + i % 18:02d}:{(i * 7) % 60:02d}:00",
                "scheduled_arrival_time_est": f"{7 + i % 16:02d}:{(i * 11) % 60:02d}:00",
                "status": "available",
                "available_seats": {"basic_economy": i % 9, "economy": 3 + i % 7, "business": i % 4},
                "prices": {"basic_economy": 60 + i, "economy": 120 + 3 * i, "business": 400 + 9 * i},
            }
            for i in range(n)
        ],
        indent=1,
    )


def history() -> List[BaseMessage]:
    return [
        SystemMessage("You are an airline agent. Use the tools; confirm before booking."),
        HumanMessage("I need a flight from JFK to SFO on May 20, economy, one passenger."),
        AIMessage(
            "",
            tool_calls=[{"name": "search_flights", "id": "call_1",
                         "args": {"origin": "JFK", "destination": "SFO", "date": "2024-05-20"}}],
        ),
        ToolMessage(flights("JFK", "SFO", "2024-05-20"), tool_call_id="call_1"),
        AIMessage("HAT103 leaves 08:21 and costs $129 in economy. Shall I book it?"),
        HumanMessage("Anything in the afternoon the day after?"),
        AIMessage(
            "",
            tool_calls=[{"name": "search_flights", "id": "call_2",
                         "args": {"origin": "JFK", "destination": "SFO", "date": "2024-05-21"}}],
        ),
        ToolMessage(flights("JFK", "SFO", "2024-05-21"), tool_call_id="call_2"),
        AIMessage("HAT112 leaves 17:24 on May 21 for $156 in economy. Book it?"),
        HumanMessage("Yes, book HAT112. My user id is mia_li_3668."),
        AIMessage(
            "",
            tool_calls=[{"name": "book_reservation", "id": "call_3",
                         "args": {"user_id": "mia_li_3668", "flight_number": "HAT112",
                                  "date": "2024-05-21", "cabin": "economy"}}],
        ),
        ToolMessage(json.dumps({"reservation_id": "4WQ150", "status": "booked", "total": 156}),
                    tool_call_id="call_3"),
        AIMessage("Booked: reservation 4WQ150, HAT112 on May 21, $156."),
        HumanMessage("Can I add a checked bag to 4WQ150?"),
    ]


def compress_history(messages: List[BaseMessage], budget: int = BUDGET) -> List[BaseMessage]:
    """LangChain messages in, compressed LangChain messages out."""
    as_dicts = convert_to_openai_messages(messages)
    result = ctxpress.compress(as_dicts, preset="agent", budget=budget)
    problems = ctxpress.validate(result.messages)
    assert not problems, problems
    compress_history.last_result = result  # for the figures printed below
    return convert_to_messages(result.messages)


def main() -> int:
    before = history()
    after = compress_history(before)
    r = compress_history.last_result.report
    print(f"history: {r['messages_before']} messages, {r['tokens_before']} tokens")
    print(f"compressed: {r['messages_after']} messages, {r['tokens_after']} tokens, budget {BUDGET}")
    print("types: " + " ".join(type(m).__name__ for m in after))
    for i, m in enumerate(after):
        text = m.content if isinstance(m.content, str) else json.dumps(m.content)
        text = " ".join(text.split())
        if len(text) > 70:
            text = text[:67] + "..."
        calls = getattr(m, "tool_calls", None) or []
        extra = " ".join(f"{c['name']}#{c['id']}{json.dumps(c['args'])}" for c in calls)
        if isinstance(m, ToolMessage):
            extra = f"(answers {m.tool_call_id})"
        print(f"  [{i}] {type(m).__name__}: " + " ".join(x for x in (text, extra) if x))
    # The last request and the booking survive as they were.
    assert isinstance(after[-1], HumanMessage) and after[-1].content == before[-1].content
    assert any(isinstance(m, AIMessage) and "4WQ150" in m.content for m in after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
