"""ctxpress as a LiteLLM callback: compress ``messages`` before each call,
one :class:`ctxpress.Session` per conversation so the provider's prompt
cache stays warm.

In the SDK::

    import litellm
    from ctxpress.integrations.litellm import CtxpressHook

    litellm.callbacks = [CtxpressHook(preset="agent")]
    await litellm.acompletion(model="gpt-4o", messages=history)

In the proxy (``config.yaml``, with ``hook = CtxpressHook()`` in a module the
proxy imports, e.g. ``ctxpress_hook.py`` beside the config)::

    litellm_settings:
      callbacks: ctxpress_hook.hook

Where LiteLLM lets a callback change the request (read in LiteLLM 1.110's
source and checked against it):

- The proxy awaits ``async_pre_call_hook(user_api_key_dict, cache, data,
  call_type)`` of each callback whose own class defines it, on every
  request, and sends the ``data`` it returns (``litellm/proxy/utils.py``,
  ``ProxyLogging.pre_call_hook``). The SDK never calls it. (The tests go
  through ``ProxyLogging.pre_call_hook`` itself; the proxy server,
  ``litellm[proxy]``, could not be installed at 1.110.2 to run whole.)
- The SDK's async entry points (``acompletion``, also under a ``Router``
  and inside the proxy) await ``async_pre_call_deployment_hook(kwargs,
  call_type)`` of every ``CustomLogger`` in ``litellm.callbacks`` and send
  the ``kwargs`` it returns (``litellm/utils.py``, ``wrapper_async``); the
  tests send through it to a stub server.
- ``log_pre_api_call`` (called by ``completion`` and ``acompletion``;
  ``async_log_pre_api_call`` by neither) is logging only: the request is
  built by then, and changing the messages there changes nothing that is
  sent.
- The sync ``litellm.completion`` runs no hook that may change the request,
  so sync callers use :meth:`CtxpressHook.prepare_request`.

Both hooks are implemented; a request the proxy hook already compressed
passes the deployment hook unchanged. ``acompletion`` must get
``messages=`` by keyword (the hook sees keyword arguments only).
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple

import ctxpress
from ctxpress import Archive, ConfigError, InputError, Session

try:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as e:  # pragma: no cover - exercised without litellm
    raise ImportError(
        f"ctxpress.integrations.litellm needs LiteLLM ({e}): pip install 'ctxpress[litellm]'"
    ) from e

__all__ = ["CtxpressHook"]

#: Where a caller names its conversation: ``metadata={"ctxpress_session": ...}``.
SESSION_FIELD = "ctxpress_session"

log = logging.getLogger("ctxpress.integrations.litellm")


def _digest(*parts: Any) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def _text(content: Any) -> Any:
    """What a provider reads of a message's content: a string and the one
    text block it stands for are the same, cache markers do not count."""
    if isinstance(content, list):
        blocks = [
            {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in content
        ]
        if len(blocks) == 1 and isinstance(blocks[0], dict) and set(blocks[0]) == {"type", "text"}:
            if blocks[0]["type"] == "text":
                return blocks[0]["text"]
        return blocks
    return content


def _plain(messages: Any) -> Optional[List[Dict[str, Any]]]:
    """The messages as dicts (a response's ``Message`` objects appended to
    the history become what their ``model_dump`` gives, ``None`` fields
    left out); ``None`` when some cannot be."""
    if not isinstance(messages, list) or not messages:
        return None
    out = []
    for m in messages:
        if isinstance(m, Mapping):
            out.append(m if isinstance(m, dict) else dict(m))
        elif hasattr(m, "model_dump"):
            out.append(m.model_dump(exclude_none=True))
        else:
            return None
    return out


def _owner(user_api_key_dict: Any) -> Optional[str]:
    """Who sends a proxy request (a hash of its key), so two users' equal
    conversations get two sessions."""
    for field in ("token", "api_key", "user_id"):
        v = getattr(user_api_key_dict, field, None)
        if v:
            return _digest(field, v)[:16]
    return None


class CtxpressHook(CustomLogger):
    """Compress each chat request's ``messages`` so it fits the model's
    window, keeping one :class:`ctxpress.Session` per conversation.

    A conversation is named by ``metadata["ctxpress_session"]`` when the
    request gives one (``litellm_metadata`` too), else by a hash of its
    system prompt, first user message and the ids a client sends the same
    every turn (``user``, ``prompt_cache_key``, ``safety_identifier``,
    ``metadata.user_id``); in the proxy, also by the caller's key. Sessions
    are kept for the ``max_sessions`` conversations used last.

    A request whose messages ctxpress cannot read (:class:`ctxpress.InputError`)
    goes out unchanged, with a warning on the ``ctxpress.integrations.litellm``
    logger; a model whose window is unknown raises (see ``window``).

    Args:
        preset: the pipeline (default ``"agent"``); or ``config``, as for
            :class:`ctxpress.Compressor`.
        window: the model's context window in tokens. Default: the model's
            ``max_input_tokens`` from ``litellm.get_model_info`` when LiteLLM
            knows the model; a request for a model it does not know raises
            :class:`ctxpress.ConfigError` (give ``window`` then).
        budget: a fixed token budget instead (compact above it).
        tokenizer, archive, llm: as for :class:`ctxpress.Compressor`.
        max_sessions: conversations kept (least recently used go first).

    ``reports`` holds the last turn's report per conversation key and
    ``last_report`` the newest one (see :meth:`ctxpress.Session.prepare`).
    """

    def __init__(
        self,
        preset: Optional[str] = None,
        config: Optional[ctxpress.Config] = None,
        *,
        window: Optional[int] = None,
        budget: Optional[int] = None,
        tokenizer: Optional[str] = None,
        archive: Optional[Archive] = None,
        llm: Optional[Mapping[str, Any]] = None,
        max_sessions: int = 256,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if max_sessions < 1:
            raise ConfigError(f"max_sessions must be at least 1, not {max_sessions!r}")
        self.preset = preset if preset is not None or config is not None else "agent"
        self.config = config
        self.window = window
        self.budget = budget
        self.tokenizer = tokenizer
        self.archive = archive
        self.llm = llm
        self.max_sessions = max_sessions
        self._sessions: "collections.OrderedDict[Tuple[str, Optional[int]], Session]" = collections.OrderedDict()
        # Fingerprints of requests this hook sent: the proxy's pre-call hook
        # and its router's deployment hook see the same request.
        self._sent: "collections.OrderedDict[str, None]" = collections.OrderedDict()
        self._lock = threading.Lock()
        self.reports: "collections.OrderedDict[str, Dict[str, Any]]" = collections.OrderedDict()
        self.last_report: Optional[Dict[str, Any]] = None
        if window is not None or budget is not None:
            # Check the configuration now, not on the first request.
            self._new_session(window)

    # -- the hooks LiteLLM calls ------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> dict:
        """The proxy's hook: returns ``data`` with its messages compressed."""
        return await self._compress_request(data, _owner(user_api_key_dict))

    async def async_pre_call_deployment_hook(self, kwargs: Dict[str, Any], call_type: Any) -> Optional[dict]:
        """The SDK's hook (``acompletion``, a ``Router``): returns the
        request's kwargs with the messages compressed."""
        return await self._compress_request(kwargs)

    # -- the work ---------------------------------------------------------

    def session_key(self, data: Mapping[str, Any], owner: Optional[str] = None) -> str:
        """The conversation a request belongs to (see the class docs);
        ``owner`` names who sends it."""
        metas = [data.get(f) for f in ("metadata", "litellm_metadata")]
        metas = [m for m in metas if isinstance(m, Mapping)]
        who = "" if owner is None else owner + ":"
        for meta in metas:
            if meta.get(SESSION_FIELD) is not None:
                return f"s:{who}{meta[SESSION_FIELD]}"
        ids = [data.get(f) for f in ("user", "prompt_cache_key", "safety_identifier")]
        ids += [m.get("user_id") for m in metas]
        messages = _plain(data.get("messages")) or []
        system = data.get("system")
        if system is None:
            system = next(
                (m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") in ("system", "developer")),
                None,
            )
        first = next(
            (m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"),
            None,
        )
        return "h:" + who + _digest(_text(system), _text(first), ids)

    def _window_for(self, model: Any) -> Optional[int]:
        if self.window is not None or self.budget is not None:
            return self.window
        try:
            info = litellm.get_model_info(model=str(model))
        except Exception:  # LiteLLM raises several kinds for an unknown model
            info = {}
        window = info.get("max_input_tokens") or info.get("max_tokens")
        if not window:
            raise ConfigError(
                f"ctxpress: LiteLLM does not know the context window of model {model!r}; "
                "give it: CtxpressHook(window=TOKENS)"
            )
        return int(window)

    def _new_session(self, window: Optional[int]) -> Session:
        return Session(
            self.preset,
            self.config,
            window=window,
            budget=self.budget,
            tokenizer=self.tokenizer,
            archive=self.archive,
            llm=self.llm,
        )

    def session(self, key: str, window: Optional[int]) -> Session:
        """The session of conversation ``key`` (made when new)."""
        with self._lock:
            s = self._sessions.get((key, window))
            if s is not None:
                self._sessions.move_to_end((key, window))
                return s
        s = self._new_session(window)
        with self._lock:
            s = self._sessions.setdefault((key, window), s)
            self._sessions.move_to_end((key, window))
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return s

    def prepare_request(self, data: Mapping[str, Any]) -> Dict[str, Any]:
        """``data`` (a request: ``model``, ``messages``, optional ``metadata``,
        ``system``, ``tools``) with its messages compressed, for what no hook
        reaches: ``litellm.completion(**hook.prepare_request({"model": ...,
        "messages": history}))``. Shares the hook's sessions."""
        plan = self._plan(data, None)
        if plan is None:
            return dict(data)
        key, session, body = plan
        try:
            out, report = session.prepare(body)
        except InputError as e:
            log.warning("ctxpress: request sent uncompressed: %s", e)
            return dict(data)
        return self._finish(data, key, out, report)

    async def _compress_request(self, data: Dict[str, Any], owner: Optional[str] = None) -> Dict[str, Any]:
        plan = self._plan(data, owner)
        if plan is None:
            return data
        key, session, body = plan
        try:
            out, report = await session.aprepare(body)
        except InputError as e:
            log.warning("ctxpress: request sent uncompressed: %s", e)
            return data
        return self._finish(data, key, out, report)

    def _plan(self, data: Mapping[str, Any], owner: Optional[str]) -> Optional[Tuple[str, Session, Dict[str, Any]]]:
        """The conversation's key, its session and what to give it; ``None``
        for a request with nothing to compress or one this hook made."""
        messages = _plain(data.get("messages"))
        if messages is None:
            return None
        if _digest(messages) in self._sent:
            return None
        key = self.session_key(data, owner)
        session = self.session(key, self._window_for(data.get("model")))
        # What the window counts besides the messages: an Anthropic
        # top-level system and the tool definitions.
        body: Dict[str, Any] = {"messages": messages}
        for field in ("system", "tools"):
            if data.get(field) is not None:
                body[field] = data[field]
        return key, session, body

    def _finish(self, data: Mapping[str, Any], key: str, out: Dict[str, Any], report: Dict[str, Any]) -> Dict[str, Any]:
        data = dict(data)
        data["messages"] = out["messages"]
        with self._lock:
            self._sent[_digest(data["messages"])] = None
            while len(self._sent) > 4 * self.max_sessions:
                self._sent.popitem(last=False)
            self.reports[key] = report
            self.reports.move_to_end(key)
            while len(self.reports) > self.max_sessions:
                self.reports.popitem(last=False)
            self.last_report = report
        return data
