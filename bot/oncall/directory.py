"""Whoever is on call, as a route: the provider's people, found in Slack or the inbox.

`OnCall.find` asks each rotation's provider who is on call now (kept `ttl` seconds by the
injected clock, so a burst of requests asks once), finds each person by their email: in
Slack (`users.lookupByEmail`, when Slack is on and the tenant names its workspace), else in
the inbox (an email `[people]` or the tenant's `admins.dashboard` lists). The answer is a
route to them (`Asked`), or why there is none (`Fallback`): the provider cannot be reached,
nobody is on call, or nobody on call has an identity here. Fail closed: the caller then asks
the rule's other approvers (the tenant's admins by default), never nobody.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.oncall.providers import OnCallPerson, Provider, Unreachable
from bot.policy import Policy
from bot.policy.oncall_refs import TOKEN_ENV, OnCallProvider, OnCallRef
from contracts.audit_events import OnCallNote
from contracts.enums import SurfaceType
from contracts.errors import SurfaceUnavailable
from contracts.ports import DashboardRoute, Route, SlackRoute

log = logging.getLogger("cosigner.oncall")
TTL_SECONDS = 60.0


class PeopleDirectory(Protocol):
    """A chat workspace's users by email (`surfaces.slack.directory.SlackDirectory`)."""

    async def user_by_email(self, email: str) -> str | None:
        """The user id, None if there is none; `SurfaceUnavailable` if it cannot say."""
        ...


@dataclass(frozen=True)
class Asked:
    """The on-call people reached: the route they are asked on, and who was not found."""

    route: Route
    rotations: tuple[str, ...]
    on_call: tuple[str, ...]  # every on-call email
    unknown: tuple[str, ...]  # on call, but with no identity here

    def audit(self) -> OnCallNote:
        """What the audit record says of it."""
        said = OnCallNote(
            rotations=list(self.rotations), onCall=list(self.on_call), asked=list(self.route.approvers)
        )
        return said.model_copy(update={"unknown": list(self.unknown)}) if self.unknown else said


@dataclass(frozen=True)
class Fallback:
    """Nobody on call can be asked, and why; the rule's other approvers are asked instead."""

    rotations: tuple[str, ...]
    reason: str

    def audit(self) -> OnCallNote:
        """What the audit record says of it."""
        return OnCallNote(rotations=list(self.rotations), fallback=self.reason)

    def note(self, instead: str) -> str:
        """What the card says of it, naming who is asked `instead`."""
        return f"on call not reached ({self.reason}); asked {instead} instead"


Found = Asked | Fallback


class OnCall:
    """The on-call lookups of one server: providers, the Slack directory, and their caches."""

    def __init__(
        self,
        providers: Mapping[OnCallProvider, Provider],
        slack: PeopleDirectory | None = None,
        *,
        clock: Callable[[], float],
        ttl: float = TTL_SECONDS,
    ) -> None:
        self.providers = providers
        self.slack = slack
        self.clock = clock
        self.ttl = ttl
        self._on_call: dict[str, tuple[float, tuple[OnCallPerson, ...]]] = {}
        self._slack_ids: dict[str, tuple[float, str | None]] = {}

    async def find(
        self, policy: Policy, tenant: str, refs: Sequence[OnCallRef], enabled: Collection[str]
    ) -> Found:
        """Who is on call for `refs` and where they are asked, or why nobody on call can be."""
        names = tuple(str(r) for r in refs)
        people: dict[str, OnCallPerson] = {}
        for ref in refs:
            try:
                found = await self.on_call(ref)
            except Unreachable as exc:
                log.warning("on-call provider unreachable", extra={"tenant": tenant, "rotation": str(ref)})
                return Fallback(names, f"{ref}: {exc.message}")
            for person in found:
                people.setdefault(person.email.casefold(), person)
        if not people:
            return Fallback(names, f"nobody is on call for {', '.join(names)}")
        return await self._route(policy, tenant, names, list(people.values()), enabled)

    async def on_call(self, ref: OnCallRef) -> tuple[OnCallPerson, ...]:
        """Everyone on call for `ref`, from the cache while it is fresh."""
        key, now = str(ref), self.clock()
        kept = self._on_call.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        provider = self.providers.get(ref.provider)
        if provider is None:
            raise Unreachable(
                f"{ref.provider.value} is not configured on this server (set {TOKEN_ENV[ref.provider]})"
            )
        people = tuple(await provider.on_call(ref))
        self._on_call[key] = (now + self.ttl, people)
        return people

    async def _slack_id(self, email: str) -> str | None:
        assert self.slack is not None
        key, now = email.casefold(), self.clock()
        kept = self._slack_ids.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        try:
            ident = await self.slack.user_by_email(email)
        except SurfaceUnavailable as exc:
            log.warning("slack lookup failed", extra={"reason": exc.message})
            return None  # not kept: the next request asks again
        self._slack_ids[key] = (now + self.ttl, ident)
        return ident

    async def _route(
        self,
        policy: Policy,
        tenant: str,
        names: tuple[str, ...],
        people: list[OnCallPerson],
        enabled: Collection[str],
    ) -> Found:
        tpol = policy.tenant(tenant)
        team = tpol.slack_team or tpol.slack_enterprise
        emails = tuple(p.email for p in people)
        found: dict[str, str] = {}
        if self.slack is not None and team and SurfaceType.SLACK in enabled:
            for person in people:
                ident = await self._slack_id(person.email)
                if ident is not None:
                    found[person.email] = ident
        slack_ids = list(dict.fromkeys(found.values()))
        if slack_ids:
            unknown = tuple(e for e in emails if e not in found)
            # One person: their DM with the app. Several: the admin channel, if there is one.
            several = len(slack_ids) > 1 and tpol.admin_channel
            asked = tuple(slack_ids) if several else (slack_ids[0],)
            route: Route = SlackRoute(
                surface=SurfaceType.SLACK,
                team_id=team or "",
                enterprise_id=tpol.slack_enterprise,
                channel_id=tpol.admin_channel if several and tpol.admin_channel else slack_ids[0],
                thread_ts=None,
                approvers=asked,
                approver_teams=tuple(t for t in (tpol.slack_team, tpol.slack_enterprise) if t),
                requester=None,
            )
            return Asked(route, names, emails, unknown)
        listed = {i.casefold() for i in tpol.admins.dashboard}
        inbox = tuple(e for e in emails if policy.people.name_of(e) is not None or e.casefold() in listed)
        if inbox:
            unknown = tuple(e for e in emails if e not in inbox)
            return Asked(
                DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=inbox), names, emails, unknown
            )
        return Fallback(
            names,
            f"nobody on call has an identity here ({', '.join(emails)}: no Slack user with that email, "
            "and neither [people] nor admins.dashboard lists it)",
        )
