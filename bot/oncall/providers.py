"""Who is on call now, asked of PagerDuty and Opsgenie over their REST APIs.

PagerDuty: `GET /oncalls` (REST API v2) with `schedule_ids[]`, or `escalation_policy_ids[]`
and `escalation_levels[]`, and `include[]=users` so that each on-call entry carries its user's
email. Opsgenie: `GET /v2/schedules/{id}/on-calls?flat=true`, whose `onCallRecipients` are the
usernames (emails) of everyone on call, teams and escalations flattened. Whatever goes wrong
(a refused token, a timeout, an answer of another shape) leaves as `Unreachable` with the
reason; nothing here decides who else is asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from bot.policy.oncall_refs import OnCallProvider, OnCallRef

PAGERDUTY_URL = "https://api.pagerduty.com"
OPSGENIE_URL = "https://api.opsgenie.com"
TIMEOUT_SECONDS = 5.0
MAX_PAGES = 5  # 5 × 100 on-call entries: more than any one schedule or level has
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True, slots=True)
class OnCallPerson:
    """Someone on call: the email that ties them to their chat and inbox identities."""

    email: str
    name: str


class Unreachable(Exception):
    """The provider could not say who is on call; the message says why and what to check."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Provider(Protocol):
    """One on-call provider's API."""

    async def on_call(self, ref: OnCallRef) -> list[OnCallPerson]:
        """Everyone on call now for `ref`, in the provider's order (may be nobody)."""
        ...


async def _get(client: httpx.AsyncClient, url: str, what: str, **kw: Any) -> Any:
    try:
        response = await client.get(url, timeout=TIMEOUT_SECONDS, **kw)
    except httpx.HTTPError as exc:
        raise Unreachable(f"{what} could not be reached ({type(exc).__name__})") from None
    if response.status_code in (401, 403):
        raise Unreachable(f"{what} refused the token ({response.status_code}); check its token setting")
    if response.status_code == 404:
        raise Unreachable(f"{what} does not know this rotation (404); check its id in the policy")
    if response.status_code != 200:
        raise Unreachable(f"{what} answered {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise Unreachable(f"{what} answered something that is not JSON") from None


class PagerDuty:
    """PagerDuty's REST API v2 (`Authorization: Token token=…`)."""

    def __init__(self, client: httpx.AsyncClient, token: str, url: str = PAGERDUTY_URL) -> None:
        self.client = client
        self.url = url.rstrip("/")
        self.headers = {
            "Authorization": f"Token token={token}",
            "Accept": "application/vnd.pagerduty+json;version=2",
        }

    async def on_call(self, ref: OnCallRef) -> list[OnCallPerson]:
        """The users on call for a schedule, or for one level of an escalation policy."""
        params: list[tuple[str, str | int]] = [("include[]", "users"), ("limit", 100)]
        if ref.is_schedule:
            params.append(("schedule_ids[]", ref.target))
        else:
            params += [("escalation_policy_ids[]", ref.target), ("escalation_levels[]", ref.level or 1)]
        people: dict[str, OnCallPerson] = {}
        for page in range(MAX_PAGES):
            body = await _get(
                self.client,
                f"{self.url}/oncalls",
                "PagerDuty",
                params=[*params, ("offset", page * 100)],
                headers=self.headers,
            )
            entries = body.get("oncalls") if isinstance(body, dict) else None
            if not isinstance(entries, list):
                raise Unreachable("PagerDuty answered without an `oncalls` list")
            for entry in entries:
                if _pagerduty_matches(entry, ref):
                    person = _pagerduty_user(entry.get("user"))
                    people.setdefault(person.email.casefold(), person)
            if not body.get("more"):
                break
        return list(people.values())


def _pagerduty_matches(entry: Any, ref: OnCallRef) -> bool:
    """The entry is for this schedule, or this escalation policy at this level (the API
    filters too; an entry for another one is never taken)."""
    if not isinstance(entry, dict):
        raise Unreachable("PagerDuty answered an on-call entry that is not an object")
    if ref.is_schedule:
        schedule = entry.get("schedule")
        return isinstance(schedule, dict) and schedule.get("id") == ref.target
    policy = entry.get("escalation_policy")
    return (
        isinstance(policy, dict)
        and policy.get("id") == ref.target
        and entry.get("escalation_level") == ref.level
    )


def _pagerduty_user(user: Any) -> OnCallPerson:
    email = user.get("email") if isinstance(user, dict) else None
    if not isinstance(email, str) or "@" not in email:
        raise Unreachable(
            "PagerDuty answered an on-call user without an email (was include[]=users dropped?)"
        )
    name = user.get("name") or user.get("summary") or email
    return OnCallPerson(email, str(name))


class Opsgenie:
    """Opsgenie's Who is On Call API (`Authorization: GenieKey …`)."""

    def __init__(self, client: httpx.AsyncClient, token: str, url: str = OPSGENIE_URL) -> None:
        self.client = client
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"GenieKey {token}"}

    async def on_call(self, ref: OnCallRef) -> list[OnCallPerson]:
        """Everyone on call now in one schedule, named by its id (a UUID) or its name."""
        kind = "id" if _UUID.match(ref.target) else "name"
        body = await _get(
            self.client,
            f"{self.url}/v2/schedules/{ref.target}/on-calls",
            "Opsgenie",
            params={"scheduleIdentifierType": kind, "flat": "true"},
            headers=self.headers,
        )
        data = body.get("data") if isinstance(body, dict) else None
        recipients = data.get("onCallRecipients") if isinstance(data, dict) else None
        if not isinstance(recipients, list) or not all(isinstance(r, str) for r in recipients):
            raise Unreachable("Opsgenie answered without a `data.onCallRecipients` list")
        # An Opsgenie username is the user's email address.
        unique = dict.fromkeys(r for r in recipients if "@" in r)
        return [OnCallPerson(r, r) for r in unique]


def provider_for(kind: OnCallProvider, client: httpx.AsyncClient, token: str, url: str | None) -> Provider:
    """The API client of one provider."""
    if kind is OnCallProvider.PAGERDUTY:
        return PagerDuty(client, token, url or PAGERDUTY_URL)
    return Opsgenie(client, token, url or OPSGENIE_URL)
