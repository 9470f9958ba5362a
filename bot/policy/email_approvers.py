"""`approvers = ["email"]`: a tenant's `admins.email` addresses, told by email and answered in the inbox.

The route is the dashboard's (the inbox's page of the request) with those addresses as its
approvers and as its `email`, so the job worker hands its delivery to the email adapter. It
exists only where the tenant lists addresses and the server can send mail: `policy check`
refuses a rule that names `email` for a tenant with no `admins.email`, and `cosigner serve`
refuses to start when a rule names it and `COSIGNER_SMTP_URL` is not set.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Protocol

from bot.policy.schema import EscalateStep, TenantPolicy
from contracts.enums import ApproverKind, SurfaceType
from contracts.ports import DashboardRoute
from contracts.reach import Channel

SMTP_FIX = "set COSIGNER_SMTP_URL and COSIGNER_SMTP_FROM"


class EmailedRule(Protocol):
    """What these checks read of a merged rule (`bot.policy.rules.ToolRule`)."""

    @property
    def approvers(self) -> tuple[ApproverKind, ...]: ...
    @property
    def escalate(self) -> tuple[EscalateStep, ...]: ...
    @property
    def notify(self) -> tuple[Channel, ...]: ...
    def origin(self, key: str) -> str: ...


def emailed_route(tpol: TenantPolicy, enabled: Collection[str], problems: list[str]) -> DashboardRoute | None:
    """The route of `email`: the tenant's addresses, each emailed, answering in the inbox."""
    addresses = tpol.admins.email
    if not addresses:
        problems.append(
            f"email names tenants.{tpol.name}.admins.email, which lists nobody "
            f'(add admins = {{ email = ["alice@…"] }})'
        )
        return None
    if Channel.EMAIL not in enabled:
        problems.append(f"email is not configured on this server ({SMTP_FIX})")
        return None
    return DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=addresses, email=addresses)


def email_paths(rule: EmailedRule) -> Iterator[str]:
    """The key paths where `rule` (one outcome of it) emails the tenant's addresses:
    approvers, escalations, `notify`."""
    if ApproverKind.EMAIL in rule.approvers:
        yield rule.origin("approvers")
    for i, step in enumerate(rule.escalate):
        if step.to is ApproverKind.EMAIL:
            yield f"{rule.origin('escalate')}[{i}].to"
    if Channel.EMAIL in rule.notify:
        yield rule.origin("notify")


def notify_problems(rules: Iterable[EmailedRule]) -> list[str]:
    """`notify` naming the channel the request is asked on already: the route's own email."""
    return list(
        dict.fromkeys(
            f'{rule.origin("notify")}: "email" is how this request is asked already '
            f'({rule.origin("approvers")} names "email"), so a notice would be a second email of '
            'the same request; remove "email" from notify, or name other approvers'
            for rule in rules
            if Channel.EMAIL in rule.notify and ApproverKind.EMAIL in rule.approvers
        )
    )


def email_problems(
    tenants: Iterable[tuple[TenantPolicy, Iterable[EmailedRule]]], headless: Iterable[TenantPolicy]
) -> list[str]:
    """Each place a tenant's rule asks `email` while that tenant lists no `admins.email`."""
    problems: list[str] = []
    for tenant, rules in tenants:
        if tenant.admins.email:
            continue
        paths = [p for r in rules for p in email_paths(r)]
        problems += [
            f'{path}: names "email", and tenants.{tenant.name}.admins.email lists nobody, so the '
            f'request could never be emailed; add admins = {{ email = ["alice@{tenant.name}.example"] }} '
            f"to [tenants.{tenant.name}], or name other approvers there"
            for path in paths
        ]
    for tenant in headless:
        if tenant.headless_route is ApproverKind.EMAIL and not tenant.admins.email:
            problems.append(
                f'tenants.{tenant.name}.headless.route: names "email", and '
                f"tenants.{tenant.name}.admins.email lists nobody; "
                f'add admins = {{ email = ["alice@{tenant.name}.example"] }}'
            )
    return list(dict.fromkeys(problems))


def needs_smtp(rules: Iterable[EmailedRule], headless: Iterable[TenantPolicy]) -> str | None:
    """The first key path that asks `email`, for `cosigner serve` to refuse without SMTP."""
    for rule in rules:
        for path in email_paths(rule):
            return path
    for tenant in headless:
        if tenant.headless_route is ApproverKind.EMAIL:
            return f"tenants.{tenant.name}.headless.route"
    return None
