"""One person, several ids: which ids name the same person, for separation of duties and the quorum.

A person may hold a Slack user id, a verified email, a verified phone number (SMS and
WhatsApp), a Teams (Entra) object id and the id the tenant's app sends for its dashboard.
Two things tie ids together: the policy's `[people]` (`alice = ["U0ALICE",
"alice@demo.example", "+15550100200"]`), and an identity provider that vouches for several
ids in one sign-in (a Slack OpenID token names the user id and the email), which the surface
hands over with the answer. `People.marks` resolves the ids one person holds to what makes
them that person; two sets of ids are one person when their marks meet. Ids nothing ties
are two people. Ids are compared case-insensitively, and a WhatsApp address
(`whatsapp:+1555…`) is its phone number: either way more is tied, never less (fail closed).

This is the one place a person is resolved: `bot.policy.quorum` asks it who the requester is
and whom a route can count, `bot.approvals.judging.count` whether an answer comes from the
requester or from someone counted already.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

WHATSAPP = "whatsapp:"


def id_key(ident: str) -> str:
    """An id as persons are compared: `whatsapp:` dropped, case folded."""
    key = ident.strip()
    if key[: len(WHATSAPP)].casefold() == WHATSAPP:
        key = key[len(WHATSAPP) :]
    return key.casefold()


@dataclass(frozen=True)
class Someone:
    """One distinct person among several ids: the `[people]` name that ties them, if any."""

    name: str | None
    ids: tuple[str, ...]

    def __str__(self) -> str:
        listed = ", ".join(self.ids)
        return f"{self.name} ({listed})" if self.name else listed


class People:
    """The policy's `[people]`: which ids are one person (an id is listed under one at most)."""

    def __init__(self, listed: Mapping[str, Sequence[str]] | None = None) -> None:
        self.listed: dict[str, tuple[str, ...]] = {n: tuple(ids) for n, ids in (listed or {}).items()}
        self._names = {id_key(i): name for name, ids in self.listed.items() for i in ids}

    def name_of(self, ident: str) -> str | None:
        """The `[people]` entry listing this id, if any."""
        return self._names.get(id_key(ident))

    def marks(self, ids: Iterable[str]) -> frozenset[str]:
        """What makes these ids (one person's) that person: the `[people]` entry of each listed
        id, and each id nothing lists."""
        return frozenset(m for m in map(self._mark, ids) if m is not None)

    def _mark(self, ident: str) -> str | None:
        key = id_key(ident)
        if not key:
            return None
        name = self._names.get(key)
        return f"person:{name}" if name is not None else f"id:{key}"

    def same(self, one: Iterable[str], other: Iterable[str]) -> bool:
        """True when two sets of ids, each held by one person, are held by the same person."""
        return not self.marks(one).isdisjoint(self.marks(other))

    def distinct(self, ids: Iterable[str]) -> tuple[Someone, ...]:
        """The distinct persons among ids that each name one person (a route's approvers), in
        the order they are first named."""
        persons: dict[str, list[str]] = {}
        names: dict[str, str | None] = {}
        for ident in ids:
            mark = self._mark(ident)
            if mark is None:
                continue
            persons.setdefault(mark, []).append(ident)
            names[mark] = self.name_of(ident)
        return tuple(Someone(names[m], tuple(dict.fromkeys(found))) for m, found in persons.items())

    def count(self, holders: Iterable[Iterable[str]]) -> int:
        """How many distinct persons hold these sets of ids (each set one person's: an answer's
        ids); sets that share a mark are one person."""
        groups: list[frozenset[str]] = []
        for held in holders:
            mine = self.marks(held)
            if not mine:
                continue
            meeting = [g for g in groups if not g.isdisjoint(mine)]
            groups = [g for g in groups if g.isdisjoint(mine)]
            groups.append(mine.union(*meeting))
        return len(groups)


NOBODY_TIED = People()
"""No `[people]`: only the ids an identity provider vouches for in one answer are tied."""


def people_problems(listed: Mapping[str, Sequence[str]]) -> list[str]:
    """`[people]` that cannot be read one way: an id listed under two people (or twice under
    one; ids match case-insensitively, and a WhatsApp address is its number)."""
    problems: list[str] = []
    first: dict[str, tuple[str, str]] = {}
    for name, ids in listed.items():
        for ident in ids:
            key = id_key(ident)
            if key not in first:
                first[key] = (name, ident)
                continue
            other, written = first[key]
            if other == name:
                problems.append(
                    f'people.{name}: "{ident}" is listed twice (as "{written}"; ids match '
                    "case-insensitively); list it once"
                )
            else:
                problems.append(
                    f'people.{name}: "{ident}" is also listed under people.{other} (as "{written}"); '
                    f"an id belongs to one person: remove it from people.{name} or people.{other}"
                )
    return problems
