"""Conversations and paths the pytest suite shares."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Dict, List, Optional

REPO = pathlib.Path(__file__).resolve().parents[3]


def corpus_dir() -> Optional[pathlib.Path]:
    """The shared corpus: $CTXPRESS_CORPUS, else ../shared/corpus beside the repository."""
    env = os.environ.get("CTXPRESS_CORPUS")
    d = pathlib.Path(env) if env else REPO.parent / "shared" / "corpus"
    return d if d.is_dir() and any(d.glob("*.jsonl")) else None


def file_body(name: str, lines: int) -> str:
    return "\n".join(
        f"{i:4} def {name.replace('.', '_')}_{i}(x):  # line {i} of {name}, doing step {i}"
        for i in range(lines)
    )


def openai_session(turns: int = 12, lines: int = 60) -> List[Dict[str, Any]]:
    """An OpenAI-style agent session: the same files read again and again,
    long tool outputs, a final question."""
    msgs: List[Dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Work in /repo."},
        {"role": "user", "content": "Fix the failing test in src/app.py and keep the API stable."},
    ]
    for t in range(turns):
        path = f"src/{['app', 'util', 'db'][t % 3]}.py"
        cid = f"call_{t}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Reading {path} (step {t}).",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "Read", "arguments": json.dumps({"file_path": f"/repo/{path}"})},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": file_body(path, lines)})
    msgs.append({"role": "assistant", "content": "The bug is in util.py line 12: an off-by-one."})
    msgs.append({"role": "user", "content": "Good, now fix it and run the tests."})
    return msgs


def anthropic_session(turns: int = 12, lines: int = 60) -> Dict[str, Any]:
    """The same session in Anthropic Messages form (content blocks, top-level system)."""
    msgs: List[Dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test in src/app.py."}]},
    ]
    for t in range(turns):
        path = f"src/{['app', 'util', 'db'][t % 3]}.py"
        tid = f"toolu_{t:02}"
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading {path} (step {t})."},
                    {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": f"/repo/{path}"}},
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tid, "content": file_body(path, lines)}],
            }
        )
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "Found it: util.py line 12."}]})
    msgs.append({"role": "user", "content": [{"type": "text", "text": "Fix it and run the tests."}]})
    return {"model": "claude-x", "max_tokens": 1024, "system": "You are a coding agent.", "messages": msgs}
