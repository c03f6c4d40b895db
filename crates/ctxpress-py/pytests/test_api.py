"""Every public function of the Python package, both dialects, errors."""

from __future__ import annotations

import copy
import json
import pathlib
import pydoc

import pytest

import ctxpress
from _support import anthropic_session, openai_session


# --- shapes ----------------------------------------------------------------


@pytest.mark.parametrize("form", ["list", "dict", "str", "bytes"])
def test_identity_gives_back_what_it_was_given(form):
    msgs = openai_session(3)
    given = {
        "list": msgs,
        "dict": {"id": "c1", "messages": msgs, "meta": {"n": 12345678901234567890123}},
        "str": json.dumps(msgs, indent=1),
        "bytes": json.dumps(msgs).encode(),
    }[form]
    before = copy.deepcopy(given)
    r = ctxpress.compress(given, preset="identity")
    assert type(r.messages) is type(given)
    assert r.messages == given
    assert given == before, "the caller's object is not modified"
    assert r.ratio == 1.0 and r.fits


def test_unknown_fields_survive():
    msgs = openai_session(8)
    msgs[3]["x-trace"] = {"deep": [1, 2.5, None, True, "é", 12345678901234567890123]}
    msgs[-1]["cache_control"] = {"type": "ephemeral"}
    out = ctxpress.compress(msgs).messages
    assert out[3]["content"] != msgs[3]["content"], "an old tool result is compressed in place"
    assert out[3]["x-trace"] == msgs[3]["x-trace"]
    assert out[-1]["cache_control"] == {"type": "ephemeral"}


# --- compress, both dialects ------------------------------------------------


def test_agent_compresses_an_openai_session():
    msgs = openai_session(12)
    r = ctxpress.compress(msgs)
    assert isinstance(r, ctxpress.Result)
    assert r.tokens_after < r.tokens_before
    assert r.ratio > 1.2
    assert ctxpress.validate(r.messages) == []
    assert r.messages[0] == msgs[0], "the system message is kept byte-identical"
    assert r.messages[-2:] == msgs[-2:], "the recent tail is kept"
    rep = r.report
    for k in ("messages_before", "messages_after", "chars_before", "chars_after", "stages", "statistics", "micros"):
        assert k in rep
    assert rep["fits"] is None, "no budget, nothing to fit"
    assert [s["name"] for s in rep["stages"]]
    assert "Result" in repr(r) and "fits=True" in repr(r)


def test_budget_on_an_anthropic_session():
    req = anthropic_session(12)
    r = ctxpress.compress(req, budget=1200, tokenizer="o200k_base")
    assert isinstance(r.messages, dict)
    assert r.messages["system"] == req["system"] and r.messages["model"] == "claude-x"
    assert r.fits and r.report["fits"] is True
    assert r.tokens_after <= 1200 < r.tokens_before
    assert r.report["budget"]["target"] == 1200
    assert ctxpress.validate(r.messages) == []
    # Every tool_use still has its tool_result right after it.
    ids = [b["id"] for m in r.messages["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"]
    res = [b["tool_use_id"] for m in r.messages["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    assert ids == res


def test_window_and_a_budget_that_cannot_be_met():
    msgs = openai_session(4)
    # The protected part (system, tail) alone is over 10 tokens.
    r = ctxpress.compress(msgs, budget=10)
    assert r.fits is False and r.report["fits"] is False
    assert r.report["budget"]["over_by"] > 0
    assert ctxpress.validate(r.messages) == []
    w = ctxpress.compress(msgs, window=1_000_000)
    assert w.messages == msgs, "under the window's trigger nothing changes"


def test_every_preset_runs_on_both_dialects():
    names = [p["name"] for p in ctxpress.presets()]
    assert names == ["identity", "chat", "cce", "agent", "hybrid", "compact"]
    for name in names:
        for conv in (openai_session(6), anthropic_session(6)):
            r = ctxpress.compress(conv, preset=name)
            assert ctxpress.validate(r.messages) == [], name
            assert r.report["chars_after"] <= r.report["chars_before"], name


# --- Compressor ---------------------------------------------------------------


def test_compressor_from_config_text_dict_and_path(tmp_path):
    toml = 'version = 1\n[[stages]]\ntype = "dedup"\n'
    p = tmp_path / "pipe.toml"
    p.write_text(toml)
    for cfg in (toml, {"version": 1, "stages": [{"type": "dedup"}]}, p):
        c = ctxpress.Compressor(config=cfg)
        assert c.compress(openai_session(2)).messages
    assert "dedup" in ctxpress.Compressor(config=p).config
    assert "[[stages]]" in ctxpress.Compressor("agent").config
    r = ctxpress.compress(openai_session(2), config={"version": 1, "stages": [{"type": "dedup"}]})
    assert [s["name"] for s in r.report["stages"]] == ["dedup"]


def test_config_path_string_and_errors_with_places(tmp_path, monkeypatch):
    # A str naming an existing file is that file, as a Path is.
    p = tmp_path / "p.toml"
    p.write_text('version = 1\n[[stages]]\ntype = "dedup"\n')
    r = ctxpress.compress(openai_session(2), config=str(p))
    assert [s["name"] for s in r.report["stages"]] == ["dedup"]
    monkeypatch.chdir(tmp_path)
    assert "dedup" in ctxpress.Compressor(config="p.toml").config
    # Errors in a file name it, with the line and column.
    p.write_text('version = 1\n[[stages]\ntype = "dedup"\n')
    with pytest.raises(ctxpress.ConfigError, match=r"p\.toml:2:\d+: invalid TOML"):
        ctxpress.compress(openai_session(2), config="p.toml")
    p.write_text('version = 1\n[[stages]]\ntype = "dedup"\nfuzy = true\n')
    with pytest.raises(ctxpress.ConfigError, match=r"p\.toml:4:1: stages\[0\]: dedup: unknown field `fuzy`; did you mean `fuzzy`"):
        ctxpress.Compressor(config=p)
    # Neither a file nor configuration text: the error says both were tried.
    with pytest.raises(ctxpress.ConfigError, match=r"config 'missing\.toml' names no file, and as configuration text: .*invalid TOML"):
        ctxpress.compress(openai_session(2), config="missing.toml")


def test_compressor_is_reused_and_compress_many_keeps_order_and_types():
    c = ctxpress.Compressor("agent", budget=2000)
    convs = [openai_session(n) for n in (2, 9, 4)] + [json.dumps(openai_session(7)), anthropic_session(5)]
    many = c.compress_many(convs, jobs=3)
    one = [c.compress(x) for x in convs]
    assert [m.messages for m in many] == [o.messages for o in one]
    assert [type(m.messages) for m in many] == [list, list, list, str, dict]
    assert all(m.fits for m in many)
    assert c.compress_many([]) == []


def test_archive_types_are_checked():
    with pytest.raises(TypeError):
        ctxpress.Compressor("agent", archive="x.db")
    with pytest.raises(TypeError):
        ctxpress.expand([], "x.db")


# --- expand ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_compress_then_expand_restores_the_input(kind, tmp_path):
    arch = ctxpress.MemoryArchive() if kind == "memory" else ctxpress.SqliteArchive(tmp_path / "a.db")
    for conv in (openai_session(10), anthropic_session(10)):
        r = ctxpress.compress(conv, budget=800, archive=arch)
        assert r.messages != conv
        assert ctxpress.expand(r.messages, arch) == conv
    text = json.dumps(openai_session(10), indent=2)
    r = ctxpress.compress(text, budget=800, archive=arch)
    assert ctxpress.expand(r.messages, arch) == text, "str in, the same bytes back"
    assert "Archive(" in repr(arch)


def test_every_handle_in_the_output_recalls_input_messages(tmp_path):
    """With an archive, markers carry recall handles (issue #35): each one
    gives back messages of the input, as dicts; an unknown handle gives
    None and a text that is no handle an InputError."""
    import re

    arch = ctxpress.SqliteArchive(tmp_path / "a.db")
    conv = openai_session(10)
    r = ctxpress.compress(conv, budget=800, archive=arch)
    handles = sorted(set(re.findall(r"#h[0-9a-f]{10}(?![0-9a-z_])", json.dumps(r.messages))))
    assert handles, "no marker carries a handle"
    for h in handles:
        back = ctxpress.recall(h, arch)
        assert back, h
        assert all(m in conv for m in back), h
    assert ctxpress.recall("#h0000000000", arch) is None
    with pytest.raises(ctxpress.InputError):
        ctxpress.recall("src/app.py", arch)
    r = ctxpress.compress(conv, budget=800)
    assert "#h" not in json.dumps(r.messages), "no archive, no handle"


def test_an_output_written_again_by_json_expands(tmp_path):
    """expand matches by meaning (issue #33): an output that json wrote
    again (keys sorted, ensure_ascii, indented, a field added around the
    messages) gives back the input's messages."""
    arch = ctxpress.SqliteArchive(tmp_path / "a.db")
    conv = anthropic_session(10)
    conv["messages"][0]["content"][0]["text"] += " (café …)"
    r = ctxpress.compress(conv, budget=800, archive=arch)
    assert r.messages != conv
    as_text = json.dumps(r.messages)
    for rewritten in (
        json.loads(json.dumps(r.messages, sort_keys=True)),
        json.dumps(r.messages, sort_keys=True, ensure_ascii=True, indent=2),
        json.dumps({**r.messages, "added": [1, 2]}, sort_keys=True),
    ):
        back = ctxpress.expand(rewritten, arch)
        back = json.loads(back) if isinstance(back, str) else back
        assert back["messages"] == conv["messages"]
    assert json.loads(ctxpress.expand(as_text, arch)) == conv


def test_sqlite_archive_persists_across_objects(tmp_path):
    db = tmp_path / "arch.db"
    r = ctxpress.compress(openai_session(10), budget=800, archive=ctxpress.SqliteArchive(str(db)))
    again = ctxpress.SqliteArchive(db)
    assert again.path == str(db)
    assert ctxpress.expand(r.messages, again) == openai_session(10)


def test_expand_with_the_wrong_archive_says_so():
    r = ctxpress.compress(openai_session(10), budget=800, archive=ctxpress.MemoryArchive())
    other = ctxpress.MemoryArchive()
    with pytest.raises(ctxpress.ArchiveError, match="could not be restored"):
        ctxpress.expand(r.messages, other)
    assert ctxpress.expand(r.messages, other, partial=True) == r.messages


def test_archive_that_cannot_be_opened(tmp_path):
    with pytest.raises(ctxpress.ArchiveError, match="cannot open archive"):
        ctxpress.SqliteArchive(tmp_path)  # a directory
    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ctxpress.ArchiveError):
        ctxpress.SqliteArchive(bad)
    assert bad.read_bytes() == b"this is not a database" * 100, "the file is left as it was"


# --- validate, stats, presets, strategies ----------------------------------------


def test_validate_finds_broken_pairing():
    msgs = openai_session(2)
    assert ctxpress.validate(msgs) == []
    broken = msgs[:3] + msgs[4:]  # drop the first tool result
    v = ctxpress.validate(broken)
    assert v and v[0]["index"] == 2 and v[0]["kind"] == "missing_result"
    assert v[0]["message"].startswith("messages[2]: tool call without a result")
    orphan = [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "y"}]
    assert [x["kind"] for x in ctxpress.validate(orphan)] == ["orphan_result"]


def test_stats():
    s = ctxpress.stats(openai_session(3))
    assert s["conversations"] == 1 and s["messages"] == 10
    assert s["roles"]["tool"]["messages"] == 3
    assert 0 < s["tool_output_share"] < 1
    assert s["tokenizer"] == "heuristic"
    assert ctxpress.stats(anthropic_session(3), tokenizer="cl100k_base")["tokenizer"] == "cl100k_base"


def test_presets_and_strategies():
    p = {x["name"]: x for x in ctxpress.presets()}
    assert "[[stages]]" in p["agent"]["config"] and p["agent"]["summary"]
    s = {x["name"]: x for x in ctxpress.strategies()}
    assert set(s) >= {"classifier", "dedup", "summarizer", "stale_pruner", "tool_compressor", "compactor"}
    assert isinstance(s["dedup"]["defaults"], dict) and s["dedup"]["summary"]
    # Every parameter has its documentation line, in the order of the defaults.
    for x in s.values():
        assert list(x["params"]) == list(x["defaults"]), x["name"]
        assert all(doc.strip() for doc in x["params"].values()), x["name"]
    assert s["summarizer"]["takes_llm"] and not s["dedup"]["takes_llm"]
    assert "fuzzy" in s["dedup"]["params"]


# --- errors ------------------------------------------------------------------------


def test_input_error_names_the_message_and_position():
    with pytest.raises(ctxpress.InputError, match=r"^messages\[1\]: expected a message object") as e:
        ctxpress.compress([{"role": "user", "content": "hi"}, 3])
    assert isinstance(e.value, ValueError) and isinstance(e.value, ctxpress.Error)
    with pytest.raises(ctxpress.InputError, match=r"^line 2, column \d+: ") as e:
        ctxpress.compress('[{"role": "user", "content": "hi"},\n  {"role": ]')
    assert e.value.line == 2 and e.value.column > 1
    with pytest.raises(ctxpress.InputError, match="messages"):
        ctxpress.compress({"nothing": []})
    with pytest.raises(ctxpress.InputError, match="UTF-8"):
        ctxpress.compress(b'[{"role":"user","content":"\xff"}]')
    with pytest.raises(ctxpress.InputError, match="not JSON"):
        ctxpress.compress([{"role": "user", "content": float("nan")}])
    with pytest.raises(ctxpress.InputError, match="item 1"):
        ctxpress.Compressor("identity").compress_many(["[]", "[1"])
    with pytest.raises(TypeError, match="not int"):
        ctxpress.compress(5)


def test_config_errors_suggest_the_closest_name():
    with pytest.raises(ctxpress.ConfigError, match="did you mean `agent`"):
        ctxpress.compress([], preset="agnet")
    with pytest.raises(ctxpress.ConfigError, match="dedup"):
        ctxpress.Compressor(config={"version": 1, "stages": [{"type": "dedpu"}]})
    with pytest.raises(ctxpress.ConfigError, match="tokenizer"):
        ctxpress.Compressor("agent", tokenizer="gpt2")
    with pytest.raises(ctxpress.ConfigError, match="cannot read"):
        ctxpress.Compressor(config=pathlib.Path("/nonexistent/pipe.toml"))
    with pytest.raises(ctxpress.ConfigError, match="budget"):
        ctxpress.Compressor("agent", budget=-5)
    with pytest.raises(ctxpress.ConfigError, match="not both"):
        ctxpress.Compressor("agent", config="[[stages]]\ntype='dedup'\n")


def test_help_reads_well():
    text = pydoc.render_doc(ctxpress.compress, renderer=pydoc.plaintext)
    for word in ("messages", "preset", "budget", "Returns", "Raises", "InputError"):
        assert word in text
    assert "ctxpress" in pydoc.render_doc(ctxpress, renderer=pydoc.plaintext)
    assert ctxpress.__version__
    for name in ctxpress.__all__:
        assert getattr(ctxpress, name).__doc__, name


def test_docstring_examples_run():
    import doctest

    failed, tried = doctest.testmod(ctxpress)
    assert tried >= 2 and failed == 0


def test_compress_many_returns_errors_in_place_when_asked():
    c = ctxpress.Compressor("identity")
    out = c.compress_many(["[]", "[1", [{"role": "user", "content": "x"}], 5 and "{}"], errors="return")
    assert out[0].messages == "[]" and out[2].messages == [{"role": "user", "content": "x"}]
    assert isinstance(out[1], ctxpress.InputError) and str(out[1]).startswith("item 1: line 1, column")
    assert isinstance(out[3], ctxpress.InputError) and str(out[3]).startswith("item 3: ")
    bad_dict = c.compress_many([[{"role": "user", "content": "x"}, 7]], errors="return")[0]
    assert str(bad_dict) == "item 0: messages[1]: expected a message object"
    assert str(c.compress_many([[{"content": float("nan")}]], errors="return")[0]).startswith("item 0: the messages are not JSON")
    with pytest.raises(ValueError):
        c.compress_many([], errors="ignore")


def test_compressors_and_sqlite_archives_pickle(tmp_path):
    import pickle

    arch = ctxpress.SqliteArchive(tmp_path / "p.db")
    c = ctxpress.Compressor("agent", budget=800, archive=arch)
    c2 = pickle.loads(pickle.dumps(c))
    conv = openai_session(10)
    r = c2.compress(conv)
    assert r.messages == c.compress(conv).messages
    a2 = pickle.loads(pickle.dumps(arch))
    assert isinstance(a2, ctxpress.SqliteArchive) and a2.path == arch.path
    assert ctxpress.expand(r.messages, a2) == conv
    with pytest.raises(TypeError, match="SqliteArchive"):
        pickle.dumps(ctxpress.MemoryArchive())
