"""The execution (agent run) and tool call that gated functions belong to, per thread or task."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from cosigner.surfaces import Surface

__all__ = ["Scope", "current", "execution", "tool_call"]


@dataclass(frozen=True)
class Scope:
    """One agent run: its id, the surface it was triggered on, and an explicit next call id."""

    execution_id: str | None = None
    surface: Surface | None = None
    tool_call_id: str | None = None


_NONE = Scope()
_scope: ContextVar[Scope | None] = ContextVar("cosigner_scope", default=None)


def current() -> Scope:
    """The scope gated calls in this thread or task run in."""
    return _scope.get() or _NONE


@contextmanager
def execution(execution_id: str, surface: Surface | None = None) -> Iterator[Scope]:
    """Run the block as the agent run `execution_id`, triggered on `surface`."""
    token = _scope.set(Scope(execution_id=execution_id, surface=surface))
    try:
        yield current()
    finally:
        _scope.reset(token)


@contextmanager
def tool_call(tool_call_id: str) -> Iterator[Scope]:
    """Give the gated call made in this block the id `tool_call_id` (e.g. the model's call id).

    With the same execution id and tool call id, a call asked again after a crash resumes
    the same approval instead of asking twice.
    """
    outer = current()
    token = _scope.set(Scope(outer.execution_id, outer.surface, tool_call_id))
    try:
        yield current()
    finally:
        _scope.reset(token)


def new_tool_call_id() -> str:
    """A fresh tool call id, for calls made outside `tool_call`."""
    return f"call_{uuid.uuid4().hex}"
