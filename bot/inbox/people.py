"""Who signed in, and which tenants and requests that person may see and answer."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.policy.rules import Policy
from contracts.enums import SurfaceType
from contracts.names import PHONE_PATTERN
from contracts.ports import SlackRoute, SmsRoute
from storage.records import Record

SLACK_USER = "https://slack.com/user_id"
SLACK_TEAM = "https://slack.com/team_id"
PHONE, PHONE_VERIFIED = "phone_number", "phone_number_verified"
_PHONE_PUNCTUATION = re.compile(r"[\s().\-]")


class SignInRefused(Exception):
    """A sign-in that cannot be trusted or names nobody; the message says what to do."""


@dataclass(frozen=True)
class Person:
    """A signed-in approver: the issuer and subject that vouched for them, and their ids."""

    issuer: str
    subject: str
    name: str
    email: str | None  # only a verified email
    slack_user: str | None = None
    slack_team: str | None = None
    phone: str | None = None  # only a verified number, in E.164 form

    @property
    def numbers(self) -> tuple[str, ...]:
        """How SMS and WhatsApp routes name this person's phone (`+1555…`, `whatsapp:+1555…`)."""
        return (self.phone, f"whatsapp:{self.phone}") if self.phone else ()

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids a policy's `dashboard` list may name this person by."""
        return tuple(i for i in (self.slack_user, self.email) if i)

    @property
    def vouched(self) -> tuple[str, ...]:
        """Every id the issuer vouched for in this sign-in (Slack user id, verified email and
        phone): one person's, whichever of them an answer is given by."""
        return tuple(i for i in (self.slack_user, self.email, self.phone) if i)

    def to_json(self) -> dict[str, Any]:
        """The session's copy."""
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Person:
        """Read the session's copy back."""
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]


def verified_phone(claims: Mapping[str, Any]) -> str | None:
    """The `phone_number` claim in E.164 form, only if the issuer says it verified it.

    Spaces, dots, dashes and parentheses are dropped (`+1 (555) 000-0002`); a number with an
    extension or without its country code names no one's phone for a text, so it is ignored.
    """
    number = claims.get(PHONE)
    if claims.get(PHONE_VERIFIED) is not True or not isinstance(number, str):
        return None
    number = _PHONE_PUNCTUATION.sub("", number)
    return number if re.fullmatch(PHONE_PATTERN, number) else None


def person_from_claims(issuer: str, claims: Mapping[str, Any]) -> Person:
    """The person an ID token names: Slack's user and team claims, else a verified email;
    a verified phone number with either."""
    email = claims.get("email") if claims.get("email_verified") is True else None
    slack_user, slack_team = claims.get(SLACK_USER), claims.get(SLACK_TEAM)
    if not email and not slack_user:
        raise SignInRefused(
            "the identity provider did not vouch for an email (email_verified) or a Slack user; "
            "ask for the `email` scope or sign in with another account"
        )
    name = str(claims.get("name") or email or slack_user)
    return Person(issuer, str(claims.get("sub")), name, email, slack_user, slack_team, verified_phone(claims))


def tenants_of(policy: Policy, person: Person) -> dict[str, bool]:
    """The tenants whose policy names this person, each with whether they are its admin."""
    found: dict[str, bool] = {}
    for name, tenant in policy.tenants.items():
        admin = (
            bool(set(person.ids) & {*tenant.admins.dashboard, *tenant.admins.email})
            or (
                person.slack_user is not None
                and person.slack_team == tenant.slack_team
                and person.slack_user in tenant.admins.slack
            )
            or (person.phone is not None and person.phone in (*tenant.admins.sms, *tenant.admins.whatsapp))
        )
        member = admin or (person.slack_team is not None and person.slack_team == tenant.slack_team)
        if member:
            found[name] = admin
    return found


def dashboard_id(person: Person, rec: Record) -> str:
    """The id this person answers a dashboard request by: the one its route names, if any."""
    approvers = rec.approvers_on(SurfaceType.DASHBOARD)
    return next((i for i in person.ids if i in approvers), person.email or person.ids[0])


def names_on_slack(person: Person, rec: Record) -> bool:
    """True if a Slack-routed request names this person as an approver in their workspace."""
    route = rec.route
    return (
        isinstance(route, SlackRoute)
        and person.slack_user in route.approvers
        and person.slack_team in {route.team_id, *route.approver_teams}
    )


def texted_to(person: Person, rec: Record) -> bool:
    """True if an SMS- or WhatsApp-routed request names this person's verified number."""
    route = rec.route
    if not isinstance(route, SmsRoute) or person.phone is None:
        return False
    number = person.phone if route.surface is SurfaceType.SMS else f"whatsapp:{person.phone}"
    return number in route.approvers
