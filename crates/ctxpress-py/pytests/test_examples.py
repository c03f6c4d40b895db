"""The SDK and LangChain examples in examples/python run as a user runs them.

Each script runs with ``sys.executable`` in a subprocess, without
OPENAI_API_KEY/ANTHROPIC_API_KEY (so nothing is sent), and must exit 0 and
print the expected structure. A missing SDK is a visible skip (``pytest -rs``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "python"


def run_example(name: str, needs: str) -> str:
    if importlib.util.find_spec(needs) is None:
        pytest.skip(f"examples/python/{name}: `{needs}` is not importable (pip install it)")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
    }
    p = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO),
        timeout=120,
    )
    assert p.returncode == 0, f"{name} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p.stdout


def figures(out: str):
    """(messages, tokens) before and after, from the history/compressed lines."""
    m1 = re.search(r"^history: (\d+) messages, (\d+) tokens", out, re.M)
    m2 = re.search(r"^compressed: (\d+) messages, (\d+) tokens, budget (\d+)", out, re.M)
    assert m1 and m2, out
    return (int(m1[1]), int(m1[2])), (int(m2[1]), int(m2[2])), int(m2[3])


def listed(out: str):
    """The printed messages: (index, label) in order."""
    return [(int(i), label) for i, label in re.findall(r"^  \[(\d+)\] (\w+):", out, re.M)]


def test_openai_sdk_example():
    out = run_example("openai_sdk.py", "openai")
    (n0, t0), (n1, t1), budget = figures(out)
    assert t1 < t0 and t1 <= budget and n1 <= n0
    assert re.search(r"^compressed: .* fits=True$", out, re.M), out
    assert re.search(
        rf"^request: model=\S+, {n1} messages, \d+ bytes of JSON, valid for the Chat Completions API$",
        out,
        re.M,
    ), out
    items = listed(out)
    assert [i for i, _ in items] == list(range(n1))
    roles = [r for _, r in items]
    assert roles[0] == "system" and set(roles) <= {"system", "user", "assistant", "tool"}
    assert "tool" in roles and "assistant" in roles
    assert re.search(r"^not sent: OPENAI_API_KEY is not set \(client for http://127\.0\.0\.1:9/v1/? built", out, re.M), out


def test_anthropic_sdk_example():
    out = run_example("anthropic_sdk.py", "anthropic")
    (n0, t0), (n1, t1), budget = figures(out)
    assert t1 < t0 and t1 <= budget and n1 <= n0
    assert re.search(
        rf"^request: model=\S+, max_tokens=1024, system kept, {n1} messages, valid for the Messages API$",
        out,
        re.M,
    ), out
    items = listed(out)
    assert [i for i, _ in items] == list(range(n1))
    roles = [r for _, r in items]
    # Anthropic Messages: no system or tool role inside messages; turns alternate.
    assert set(roles) == {"user", "assistant"}
    assert all(a != b for a, b in zip(roles, roles[1:])), roles
    assert "tool_use " in out and "tool_result " in out
    assert out.rstrip().splitlines()[-2].endswith("Thanks. Now add a test for 1900 and 2024.")
    assert re.search(r"^not sent: ANTHROPIC_API_KEY is not set \(client for http://127\.0\.0\.1:9/? built", out, re.M), out


def test_langchain_messages_example():
    out = run_example("langchain_messages.py", "langchain_core")
    (n0, t0), (n1, t1), budget = figures(out)
    assert t1 < t0 and t1 <= budget and n1 <= n0
    types = re.search(r"^types: (.*)$", out, re.M)[1].split()
    assert len(types) == n1
    assert set(types) <= {"SystemMessage", "HumanMessage", "AIMessage", "ToolMessage"}
    assert types[0] == "SystemMessage" and types[-1] == "HumanMessage"
    items = listed(out)
    assert [label for _, label in items] == types
    # Tool calls come back as LangChain tool_calls (name#id{args}) and each
    # ToolMessage answers a call of the AIMessage before it.
    calls = re.findall(r"^  \[\d+\] AIMessage: .*?(\w+)#(call_\d+)\{", out, re.M)
    answers = re.findall(r"\(answers (call_\d+)\)$", out, re.M)
    assert calls and sorted(answers) == sorted(c for _, c in calls), out
    assert "book_reservation#call_3" in out and "4WQ150" in out
