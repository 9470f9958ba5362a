"""The checks a request or an answer must pass, and the refusals for closed approvals."""

from __future__ import annotations

import json
from typing import Any

from bot.egress import AllowList, EgressRefused, check_url
from bot.policy.redaction import measure
from bot.policy.rules import Policy
from contracts.digest import CanonicalFormError, canonical_json
from contracts.enums import SurfaceType
from contracts.errors import (
    InvalidRequest,
    WrongTenant,
)

MAX_PARAMETER_BYTES = 64 * 1024
MAX_PARAMETER_DEPTH = 20


def json_limits(parameters: Any, field: str = "parameters") -> bytes:
    """Refuse JSON nested deeper than 20 levels, over 64 KiB, or without an RFC 8785 form
    (NaN, Infinity, integers beyond ±(2^53−1)); return that form, which the digest hashes."""
    if measure(parameters, MAX_PARAMETER_DEPTH) > MAX_PARAMETER_DEPTH:
        raise InvalidRequest(
            f"{field} nest deeper than {MAX_PARAMETER_DEPTH} levels; flatten them", field=field
        )
    # The JCS writer is pure Python and ten times slower than json.dumps: bound the work with
    # a C-speed estimate first, far enough above the limit never to refuse what JCS would take.
    rough = len(
        json.dumps(parameters, separators=(",", ":"), ensure_ascii=False).encode(errors="surrogatepass")
    )
    if rough > 2 * MAX_PARAMETER_BYTES:
        raise InvalidRequest(f"{field} are {rough} bytes; the limit is {MAX_PARAMETER_BYTES}", field=field)
    try:
        canonical = canonical_json(parameters, field)
    except CanonicalFormError as exc:
        raise InvalidRequest(str(exc), field=exc.path) from exc
    if len(canonical) > MAX_PARAMETER_BYTES:
        raise InvalidRequest(
            f"{field} are {len(canonical)} bytes; the limit is {MAX_PARAMETER_BYTES}", field=field
        )
    return canonical


def surface_belongs(policy: Policy, tenant: str, surface: Any) -> None:
    """A Slack surface must name the tenant's own workspace (and org, if any); a Teams
    surface the tenant's own Microsoft Entra tenant."""
    tpol = policy.tenant(tenant)
    if surface.type == SurfaceType.TEAMS and surface.tenantId != tpol.teams_tenant:
        raise WrongTenant(
            f"surface.tenantId {surface.tenantId} is not the Microsoft Entra tenant of tenant "
            f'{tenant}; set teams_tenant = "{surface.tenantId}" in [tenants.{tenant}] if it is',
            field="surface.tenantId",
        )
    if surface.type != SurfaceType.SLACK:
        return
    # The enterprise id is not decoration: the route accepts clicks from every workspace
    # of that org and may post with its org-wide install. So it must be this tenant's
    # own org, even when the team id alone would pass.
    if surface.enterpriseId is not None and surface.enterpriseId != tpol.slack_enterprise:
        raise WrongTenant(
            f"surface.enterpriseId {surface.enterpriseId} is not the Slack "
            f"org of tenant {tenant}; omit it, or set slack_enterprise in "
            f"[tenants.{tenant}]",
            field="surface.enterpriseId",
        )
    mine = {t for t in (tpol.slack_team, tpol.slack_enterprise) if t}
    if surface.teamId not in mine and (surface.enterpriseId or "") not in mine:
        raise WrongTenant(
            f"surface.teamId {surface.teamId} is not a Slack workspace of "
            f"tenant {tenant}; set slack_team (or slack_enterprise) in "
            f"[tenants.{tenant}]",
            field="surface.teamId",
        )


def callback_allowed(url: str, allow: AllowList) -> None:
    """Refuse a `callbackUrl` with a scheme or literal address the egress rules refuse."""
    try:
        check_url(url, allow)
    except EgressRefused as exc:
        raise InvalidRequest(str(exc), field="callbackUrl") from exc
