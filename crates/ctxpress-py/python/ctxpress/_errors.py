"""The exceptions ctxpress raises (the native module raises these classes)."""

from __future__ import annotations

from typing import Optional


class Error(Exception):
    """Base class of every error ctxpress raises."""


class InputError(Error, ValueError):
    """The messages are not a conversation ctxpress can read.

    The message names where: ``messages[3]: expected a message object``; for
    JSON text it starts with the line and column, which are also in
    :attr:`line` and :attr:`column`.
    """

    def __init__(self, message: str, line: Optional[int] = None, column: Optional[int] = None):
        super().__init__(message)
        #: 1-based line in the JSON text (for text input), else ``None``.
        self.line = line
        #: 1-based column in that line (for text input), else ``None``.
        self.column = column


class ConfigError(Error, ValueError):
    """A bad preset, configuration, budget, window or tokenizer name.

    The message names the stage and field and suggests the closest known name.
    """


class ArchiveError(Error):
    """The archive cannot be opened or written, or could not restore what
    :func:`ctxpress.expand` was asked to restore."""
