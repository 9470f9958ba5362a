"""The one policy merge: a tenant's section over the file's, key by key, for tools and
operations alike.

A key counts in a section only when the section sets it (pydantic's `model_fields_set`) to
something other than None; the first section that does decides, and its key path is kept
as the key's origin (`policy explain` and the decision trace name it). Lists that only add
up, such as `redact`, are joined instead: a tenant can hide more, never less.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Layers:
    """Sections from the most specific (a tenant's override) to the least (the file's), each
    with its key path; `pick` reads a key through them."""

    def __init__(self, *sections: tuple[BaseModel | None, str]) -> None:
        self._sections = [(s, path) for s, path in sections if s is not None]
        self.origins: dict[str, str] = {}

    def pick(self, key: str, default: Any) -> Any:
        """The value of `key` in the first section that sets it, else `default`."""
        for section, path in self._sections:
            if key in section.model_fields_set and getattr(section, key) is not None:
                self.origins[key] = path
                return getattr(section, key)
        return default

    def joined(self, key: str) -> tuple[Any, ...]:
        """A tuple key added up over every section, least specific first."""
        out: tuple[Any, ...] = ()
        for section, _path in reversed(self._sections):
            out += tuple(getattr(section, key))
        return out
