"""compress -> expand gives back every conversation of ../shared/corpus, through
dicts (compared JSON-serialized) and through text (compared byte for byte)."""

from __future__ import annotations

import json

import pytest

import ctxpress
from _support import corpus_dir

CORPUS = corpus_dir()
FILES = sorted(p.name for p in CORPUS.glob("*.jsonl")) if CORPUS else []

pytestmark = pytest.mark.skipif(
    CORPUS is None, reason="no corpus: set CTXPRESS_CORPUS or put shared/ beside the repository"
)


@pytest.mark.parametrize("budget", [None, 8000], ids=["agent", "agent-budget-8000"])
@pytest.mark.parametrize("name", FILES or ["(none)"])
def test_round_trip(name, budget):
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
    assert lines, name
    arch = ctxpress.MemoryArchive()
    c = ctxpress.Compressor("agent", budget=budget, archive=arch)
    for i, line in enumerate(lines):
        as_dict = json.loads(line)
        r = c.compress(as_dict)
        back = ctxpress.expand(r.messages, arch)
        assert json.dumps(back) == json.dumps(as_dict), f"{name}:{i + 1}"
        t = c.compress(line)
        assert ctxpress.expand(t.messages, arch) == line, f"{name}:{i + 1} (text)"
        assert json.loads(t.messages) == r.messages, f"{name}:{i + 1}: text and dicts agree"
