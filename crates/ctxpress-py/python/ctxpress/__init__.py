"""ctxpress: compress LLM conversation and agent histories so the next request
fits the model's context window, keeping what the model needs (the user's
intent, code, errors, file paths, decisions, the latest state of every file).

Messages are OpenAI Chat messages or Anthropic Messages (content blocks), given
as a list of dicts, a ``{"messages": [...]}`` dict, or the same as JSON text
(``str`` or ``bytes``). Results come back in the shape and type given: dicts in,
dicts out; ``str`` in, ``str`` out. Fields ctxpress does not know are kept.

>>> import ctxpress
>>> r = ctxpress.compress([{"role": "user", "content": "hi"}], preset="identity")
>>> r.messages
[{'role': 'user', 'content': 'hi'}]

The work is done in Rust with the interpreter lock released, so threads
compress in parallel. Errors are :class:`InputError`, :class:`ConfigError`
and :class:`ArchiveError`, all subclasses of :class:`Error`.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from . import _native
from ._errors import ArchiveError, ConfigError, Error, InputError
from ._native import Archive, MemoryArchive, SqliteArchive

__version__: str = _native.__version__

__all__ = [
    "Archive",
    "ArchiveError",
    "Compressor",
    "ConfigError",
    "Error",
    "InputError",
    "MemoryArchive",
    "Result",
    "Session",
    "SqliteArchive",
    "compress",
    "expand",
    "presets",
    "recall",
    "stats",
    "strategies",
    "validate",
]

#: What the functions accept as one conversation.
Messages = Union[List[Dict[str, Any]], Dict[str, Any], str, bytes]
#: A pipeline configuration: TOML or JSON text, a dict, or a path to a file.
Config = Union[str, Mapping[str, Any], "os.PathLike[str]"]

_LIST, _DICT, _STR, _BYTES = "list", "dict", "str", "bytes"


def _encode(messages: Any) -> Tuple[str, str]:
    """The conversation as JSON text, and the kind to give back."""
    if isinstance(messages, str):
        return messages, _STR
    if isinstance(messages, (bytes, bytearray, memoryview)):
        try:
            return bytes(messages).decode("utf-8"), _BYTES
        except UnicodeDecodeError as e:
            raise InputError(f"the bytes are not UTF-8: {e}") from None
    if isinstance(messages, (list, tuple)):
        kind = _LIST
    elif isinstance(messages, Mapping):
        kind = _DICT
    else:
        raise TypeError(
            "messages must be a list of message dicts, a {'messages': [...]} dict, "
            f"or JSON text (str or bytes), not {type(messages).__name__}"
        )
    try:
        return json.dumps(messages, ensure_ascii=False, allow_nan=False), kind
    except (TypeError, ValueError) as e:
        raise InputError(f"the messages are not JSON: {e}") from None


def _decode(text: str, kind: str) -> Any:
    if kind == _STR:
        return text
    if kind == _BYTES:
        return text.encode("utf-8")
    return json.loads(text)


def _read_config(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None


def _config_source(config: Optional[Config]) -> Tuple[Optional[str], Optional[str]]:
    """The configuration's text, and the file it was read from (``None`` for
    text or a dict). A string that names an existing file is that file's
    path; any other string is TOML or JSON text."""
    if config is None:
        return None, None
    if isinstance(config, str):
        if "\n" not in config and os.path.isfile(config):
            return _read_config(config), config
        return config, None
    if isinstance(config, Mapping):
        return json.dumps(config), None
    if isinstance(config, os.PathLike):
        path = os.fspath(config)
        return _read_config(path), str(path)
    raise TypeError(
        "config must be TOML or JSON text, a dict, or a path (a str naming a file, "
        f"or a pathlib.Path), not {type(config).__name__}"
    )


class Result:
    """What :func:`compress` returns.

    Attributes:
        messages: the compressed conversation, in the shape and type given.
        report: the pipeline's report as a dict: ``tokens_before``,
            ``tokens_after``, ``messages_before``, ``messages_after``,
            ``chars_before``, ``chars_after``, ``ratio``, ``fits`` (``None``
            without a budget or window), ``budget`` (what fit and what it cost),
            ``stages`` (one dict per stage) and ``statistics``.
    """

    __slots__ = ("messages", "report")

    def __init__(self, messages: Any, report: Dict[str, Any]):
        self.messages = messages
        self.report = report

    @property
    def fits(self) -> bool:
        """False only when a budget or window was set and the conversation
        could not be brought under it (its protected part alone is over)."""
        return self.report.get("fits") is not False

    @property
    def ratio(self) -> float:
        """Characters in / characters out."""
        return self.report["ratio"]

    @property
    def tokens_before(self) -> int:
        return self.report["tokens_before"]

    @property
    def tokens_after(self) -> int:
        return self.report["tokens_after"]

    def __repr__(self) -> str:
        r = self.report
        return (
            f"<ctxpress.Result {r['messages_before']}→{r['messages_after']} messages, "
            f"{r['tokens_before']}→{r['tokens_after']} tokens, fits={self.fits}>"
        )


class Compressor:
    """A configured pipeline, parsed once and reused across calls and threads.

    Args:
        preset: a preset name (see :func:`presets`); ``"agent"`` when neither
            a preset nor a config is given.
        config: a pipeline configuration instead of a preset: TOML or JSON
            text, a dict, or a file's path (a ``pathlib.Path``, or a ``str``
            that names an existing file). Errors in a file name it, with
            the line and column.
        budget: token budget: a conversation at or under it comes out
            unchanged; one over it is compressed, oldest first, until it fits.
        window: the model's context window in tokens: compress a conversation
            over 70% of it down to 40% (with a budget too, the lower of each).
        tokenizer: ``"heuristic"`` (default), ``"o200k_base"`` or ``"cl100k_base"``.
        archive: keep the originals here so :func:`expand` can restore them.
        llm: an OpenAI-compatible endpoint for the summarizing stages, as the
            ``[llm]`` table of a configuration: ``{"base_url": ..., "model":
            ..., "api_key_env": "OPENAI_API_KEY", "timeout_ms": ...}``.
            Without one, summaries are extractive; when the endpoint fails,
            they fall back to extractive. Secrets are redacted before any text
            is sent.

    Raises:
        ConfigError: an unknown preset, stage or field (with the closest
            known name), or a bad budget, window or tokenizer.
    """

    def __init__(
        self,
        preset: Optional[str] = None,
        config: Optional[Config] = None,
        *,
        budget: Optional[int] = None,
        window: Optional[int] = None,
        tokenizer: Optional[str] = None,
        archive: Optional[Archive] = None,
        llm: Optional[Mapping[str, Any]] = None,
        _config_name: Optional[str] = None,
    ):
        if archive is not None and not isinstance(archive, Archive):
            raise TypeError(
                "archive must be a ctxpress.SqliteArchive or ctxpress.MemoryArchive, "
                f"not {type(archive).__name__}"
            )
        if llm is not None and not isinstance(llm, Mapping):
            raise TypeError(f"llm must be a dict of [llm] settings, not {type(llm).__name__}")
        for name, value in (("budget", budget), ("window", window)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"{name} must be a positive number of tokens, not {value!r}")
        if _config_name is None:
            config_text, _config_name = _config_source(config)
        else:
            config_text = config
        self._args = dict(
            preset=preset,
            config=config_text,
            budget=budget,
            window=window,
            tokenizer=tokenizer,
            archive=archive,
            llm=None if llm is None else dict(llm),
        )
        try:
            self._native = _native.Compressor(
                preset,
                config_text,
                budget,
                window,
                tokenizer,
                archive,
                None if llm is None else json.dumps(dict(llm)),
                _config_name,
            )
        except ConfigError as e:
            if isinstance(config, str) and _config_name is None and "\n" not in config:
                # One line: meant as a path, or as text? Say both were tried.
                raise ConfigError(
                    f"config {config!r} names no file, and as configuration text: {e}"
                ) from None
            raise
        self.archive = archive

    @property
    def needs_llm(self) -> bool:
        """True when the pipeline calls an LLM endpoint."""
        return self._native.needs_llm

    @property
    def config(self) -> str:
        """The configuration in force, as TOML or JSON text."""
        return self._native.config

    def compress(self, messages: Messages) -> Result:
        """Compress one conversation; see :func:`compress`."""
        text, kind = _encode(messages)
        out, report = self._native.compress(text, kind in (_STR, _BYTES))
        return Result(_decode(out, kind), json.loads(report))

    def compress_many(
        self,
        conversations: Iterable[Messages],
        *,
        jobs: Optional[int] = None,
        errors: str = "raise",
    ) -> List[Any]:
        """Compress many conversations on ``jobs`` threads (default: the
        machine's cores), results in input order, each in the shape and type
        it was given.

        Args:
            errors: ``"raise"`` (default) raises the first item's error (its
                message starts with ``item N:``); ``"return"`` puts each
                failed item's exception in its place in the list and goes on.
        """
        if errors not in ("raise", "return"):
            raise ValueError(f'errors must be "raise" or "return", not {errors!r}')
        encoded = []
        for i, c in enumerate(conversations):
            try:
                encoded.append(_encode(c))
            except InputError as e:
                if errors == "raise":
                    raise InputError(f"item {i}: {e}") from None
                encoded.append((None, InputError(f"item {i}: {e}")))
        texts = [t if t is not None else "" for t, _ in encoded]
        positions = [k in (_STR, _BYTES) for _, k in encoded]
        outs = self._native.compress_many(texts, jobs, positions)
        results: List[Any] = []
        for out, (text, kind) in zip(outs, encoded):
            if text is None:
                out = kind
            if isinstance(out, BaseException):
                if errors == "raise":
                    raise out
                results.append(out)
            else:
                results.append(Result(_decode(out[0], kind), json.loads(out[1])))
        return results

    def __reduce__(self):
        # Rebuilt from its arguments (for Spark, Ray, multiprocessing); a
        # MemoryArchive cannot travel to another process.
        return (_rebuild, (self._args,))

    def __repr__(self) -> str:
        return f"<ctxpress.Compressor {self._native!r}>"


class Session:
    """One growing conversation, compressed so the provider's prompt cache
    stays warm.

    A :class:`Compressor` rewrites the history on every call; a session
    compresses only when the history crosses the trigger (70% of ``window``,
    or ``budget``), down to the target (40% of ``window``), and then keeps the
    compressed messages as a fixed prefix that later turns append to. Between
    two compactions every request starts with the exact messages of the
    previous one, so the provider serves that part from its cache.

    Give :meth:`prepare` the whole history each turn, as the client has it
    (the known part is recognized and replaced by the prefix); a history that
    does not continue the known one (edited, or another conversation) starts
    the session afresh (``report["reset"]``).

    The arguments are those of :class:`Compressor`; a ``window`` or a
    ``budget`` is required. A session may be shared by threads and asyncio
    tasks: its turns run one at a time, without the interpreter lock.

    Raises:
        ConfigError: as :class:`Compressor`, and when neither a window nor a
            budget is given.
    """

    def __init__(
        self,
        preset: Optional[str] = None,
        config: Optional[Config] = None,
        *,
        budget: Optional[int] = None,
        window: Optional[int] = None,
        tokenizer: Optional[str] = None,
        archive: Optional[Archive] = None,
        llm: Optional[Mapping[str, Any]] = None,
    ):
        if archive is not None and not isinstance(archive, Archive):
            raise TypeError(
                "archive must be a ctxpress.SqliteArchive or ctxpress.MemoryArchive, "
                f"not {type(archive).__name__}"
            )
        if llm is not None and not isinstance(llm, Mapping):
            raise TypeError(f"llm must be a dict of [llm] settings, not {type(llm).__name__}")
        for name, value in (("budget", budget), ("window", window)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"{name} must be a positive number of tokens, not {value!r}")
        if budget is None and window is None and config is None:
            raise ConfigError("a Session needs a window or a budget (window=TOKENS or budget=TOKENS)")
        config_text, config_name = _config_source(config)
        self._native = _native.Session(
            preset,
            config_text,
            budget,
            window,
            tokenizer,
            archive,
            None if llm is None else json.dumps(dict(llm)),
            config_name,
        )
        self.archive = archive

    @property
    def trigger(self) -> int:
        """Compact when a request would be over this many tokens."""
        return self._native.trigger

    @property
    def target(self) -> int:
        """A compaction brings the history down to this many tokens."""
        return self._native.target

    @property
    def compactions(self) -> int:
        """Compactions so far."""
        return self._native.compactions

    @property
    def needs_llm(self) -> bool:
        """True when the pipeline calls an LLM endpoint."""
        return self._native.needs_llm

    @property
    def config(self) -> str:
        """The configuration in force, as TOML or JSON text."""
        return self._native.config

    def prepare(self, messages: Messages) -> Tuple[Any, Dict[str, Any]]:
        """The request for this turn's history, and the turn's report.

        ``messages`` is the whole history as the client has it (the forms
        :func:`compress` takes); the request comes back in the same shape and
        type. The report is a dict: ``tokens_given``, ``tokens_request``,
        ``tokens_saved``, ``tokens_prefix_kept`` (tokens at its start that the
        previous request started with too: what the provider can serve from
        its cache), ``tokens_prefix_changed`` (the previous request's tokens
        this one no longer starts with; 0 between compactions),
        ``compacted`` (this turn compressed the history), ``fits`` (the
        request is at or under the trigger), ``reset`` (the history did not
        continue the known one), ``trigger``, ``target``, ``compactions`` and
        ``report`` (the pipeline's report, as in :attr:`Result.report`, when
        this turn compacted; else ``None``).
        """
        text, kind = _encode(messages)
        out, report = self._native.prepare(text, kind in (_STR, _BYTES))
        return _decode(out, kind), json.loads(report)

    async def aprepare(self, messages: Messages) -> Tuple[Any, Dict[str, Any]]:
        """:meth:`prepare` on a worker thread, for an asyncio event loop."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, self.prepare, messages)

    def __repr__(self) -> str:
        return f"<ctxpress.Session trigger={self.trigger} target={self.target} compactions={self.compactions}>"


def _rebuild(args: Dict[str, Any]) -> "Compressor":
    return Compressor(**args)


@functools.lru_cache(maxsize=16)
def _cached(
    preset: Optional[str],
    config: Optional[str],
    config_name: Optional[str],
    budget: Optional[int],
    window: Optional[int],
    tokenizer: Optional[str],
) -> Compressor:
    return Compressor(
        preset,
        config,
        budget=budget,
        window=window,
        tokenizer=tokenizer,
        _config_name=config_name,
    )


def compress(
    messages: Messages,
    *,
    preset: Optional[str] = "agent",
    config: Optional[Config] = None,
    budget: Optional[int] = None,
    window: Optional[int] = None,
    tokenizer: Optional[str] = None,
    archive: Optional[Archive] = None,
    llm: Optional[Mapping[str, Any]] = None,
) -> Result:
    """Compress one conversation.

    Args:
        messages: OpenAI Chat or Anthropic Messages: a list of dicts, a
            ``{"messages": [...]}`` dict, or JSON text (``str``/``bytes``).
        preset: ``identity``, ``chat``, ``cce``, ``agent`` (default),
            ``hybrid`` or ``compact`` (see :func:`presets`).
        config: a pipeline configuration instead of a preset (TOML or JSON
            text, a dict, or a file's path: a ``pathlib.Path`` or a ``str``
            naming an existing file).
        budget: target tokens; ``Result.fits`` says whether it was met.
        window: the model's context window in tokens.
        tokenizer: ``"heuristic"``, ``"o200k_base"`` or ``"cl100k_base"``.
        archive: a :class:`SqliteArchive` or :class:`MemoryArchive` to keep
            the originals in, for :func:`expand`.
        llm: an endpoint for the summarizing stages (see :class:`Compressor`).

    Returns:
        A :class:`Result`: ``.messages`` in the shape and type given,
        ``.report`` (a dict), ``.fits``.

    Raises:
        InputError: the messages are not a conversation (the message says where).
        ConfigError: a bad preset, configuration, budget, window or tokenizer.
        ArchiveError: the archive could not be written.

    Configuration is parsed once per distinct set of arguments and kept; a
    :class:`Compressor` does the same explicitly.
    """
    if config is not None:
        preset = None
    if archive is None and llm is None:
        cfg, name = _config_source(config)
        c = _cached(preset, cfg, name, budget, window, tokenizer)
    else:
        c = Compressor(
            preset,
            config,
            budget=budget,
            window=window,
            tokenizer=tokenizer,
            archive=archive,
            llm=llm,
        )
    return c.compress(messages)


def recall(handle: str, archive: Archive) -> Optional[List[Dict[str, Any]]]:
    """The original messages a recall handle stands for.

    With an archive, every marker ctxpress writes in place of text carries a
    handle, ``#h`` and ten hex digits (``[summary#h7f3a2c91d0: ...]``). This
    returns the messages it stands for, as dicts, exactly as they were given,
    or ``None`` when ``archive`` does not hold the handle.

    Raises:
        InputError: ``handle`` is not a handle.
    """
    if not isinstance(archive, Archive):
        raise TypeError(
            "archive must be a ctxpress.SqliteArchive or ctxpress.MemoryArchive, "
            f"not {type(archive).__name__}"
        )
    out = _native.recall(handle, archive)
    return None if out is None else json.loads(out)


def expand(messages: Messages, archive: Archive, *, partial: bool = False) -> Messages:
    """Restore the originals of a compressed conversation from ``archive``.

    The result has the shape and type given; a conversation compressed with
    that archive comes back exactly as it was first given.

    Raises:
        ArchiveError: some compressed messages cannot be restored from this
            archive (not the one they were compressed with?), unless
            ``partial=True``, which returns what could be restored.
    """
    if not isinstance(archive, Archive):
        raise TypeError(
            "archive must be a ctxpress.SqliteArchive or ctxpress.MemoryArchive, "
            f"not {type(archive).__name__}"
        )
    text, kind = _encode(messages)
    out, left = _native.expand(text, archive, kind in (_STR, _BYTES))
    if left and not partial:
        shown = ", ".join(f"messages[{i}]" for i in left[:8])
        more = ", ..." if len(left) > 8 else ""
        raise ArchiveError(
            f"{len(left)} compressed messages could not be restored from {archive!r} "
            f"({shown}{more}; not the archive they were compressed with?); "
            "partial=True returns what could be restored"
        )
    return _decode(out, kind)


def validate(messages: Messages) -> List[Dict[str, Any]]:
    """Check tool-call pairing and roles for the provider's API.

    Returns one dict per violation (``index``, ``kind``, ``detail``,
    ``message``); an empty list means the conversation is valid.
    """
    text, kind = _encode(messages)
    return json.loads(_native.validate(text, kind in (_STR, _BYTES)))


def stats(messages: Messages, *, tokenizer: str = "heuristic") -> Dict[str, Any]:
    """Messages and tokens by role, characters and the tool-output share of
    one conversation (what ``ctxpress stats --json`` prints). ``tokens``
    counts what a budget counts: the messages, and the text a request sends
    outside them (``system_tokens``: an Anthropic top-level ``system``;
    ``tool_definition_tokens``: ``tools`` and legacy ``functions``)."""
    text, kind = _encode(messages)
    return json.loads(_native.stats([text], tokenizer, kind in (_STR, _BYTES)))


def presets() -> List[Dict[str, str]]:
    """The presets: ``name``, ``summary`` and ``config`` (TOML) each."""
    return [{"name": n, "summary": s, "config": t} for n, s, t in _native.presets()]


def strategies() -> List[Dict[str, Any]]:
    """The registered strategies, each a dict with ``name``, ``summary``,
    ``defaults`` (its parameters with their default values), ``params`` (each
    parameter's documentation line, in the order of ``defaults``; what
    ``ctxpress strategies --show NAME`` prints) and ``takes_llm`` (whether it
    takes the pipeline's ``[llm]`` table)."""
    return [
        {
            "name": n,
            "summary": s,
            "defaults": json.loads(d),
            "params": dict(p),
            "takes_llm": llm,
        }
        for n, s, d, p, llm in _native.strategies()
    ]
