"""Hooks that put ctxpress into agent and gateway frameworks.

Each submodule imports its framework, so it is imported on its own and only
when used (``import ctxpress`` imports none of them):

- :mod:`ctxpress.integrations.litellm`: :class:`CtxpressHook`, a LiteLLM
  callback for the SDK (``litellm.callbacks = [hook]``) and the proxy
  (``callbacks`` in its config); ``pip install 'ctxpress[litellm]'``.
- :mod:`ctxpress.integrations.langchain`: :class:`CtxpressMiddleware`, a
  LangChain v1 agent middleware (``create_agent(..., middleware=[...])``);
  ``pip install 'ctxpress[langchain]'``.
"""
