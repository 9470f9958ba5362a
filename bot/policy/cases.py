"""Policy test files: `[[case]]` tables of a call and what the policy should decide for it.

Each case is decided by `bot.policy.decision.rule_on`, the function that decides live requests, so
a passing test file says what the server will do. A malformed file raises `CaseFileError`
naming the line and key; a failing case carries the explanation of what was decided instead.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from xml.etree import ElementTree

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from bot.policy.decision import Ruling, rule_on, where
from bot.policy.durations import parse_duration
from bot.policy.routing import SmsSender
from bot.policy.rules import Policy
from contracts.enums import ApprovalMode, ApproverKind, SurfaceType
from contracts.ports import Route
from contracts.wire import Surface

# What `policy explain` and `policy test` assume the server has: every surface configured.
ENABLED = frozenset(
    {SurfaceType.SLACK, SurfaceType.SMS, SurfaceType.WHATSAPP, SurfaceType.TEAMS, SurfaceType.DASHBOARD}
)
SURFACE_FORMS = (
    "slack:TEAM/CHANNEL/USER, sms:+15550000002, whatsapp:+15550000002, "
    "teams:TENANT/CONVERSATION/USER, dashboard:USER, api, schedule, batch, "
    "web_widget:client or web_widget:server"
)
_SURFACE: TypeAdapter[Any] = TypeAdapter(Surface)


class CaseFileError(Exception):
    """A test file that cannot be read; the message names the line and key to fix."""


def parse_surface(text: str) -> Any:
    """`slack:T0ACME/C0OPS/U0ALICE` and the like as the wire model of that surface."""
    kind, _, rest = text.partition(":")
    fields: dict[str, Any] = {"type": kind}
    if kind == "slack":
        parts = rest.split("/")
        if len(parts) != 3:
            raise ValueError(
                f"surface {text!r}: write slack:TEAM/CHANNEL/USER, e.g. slack:T0ACME/C0OPS/U0ALICE"
            )
        fields.update(teamId=parts[0], channelId=parts[1], userId=parts[2])
    elif kind == "teams":
        parts = rest.split("/")
        if len(parts) < 3:
            raise ValueError(
                f"surface {text!r}: write teams:TENANT/CONVERSATION/USER (the AAD tenant id, the "
                "conversation id, the user's AAD object id)"
            )
        # A conversation id may hold anything but the tenant and user ids are GUIDs.
        fields.update(tenantId=parts[0], conversationId="/".join(parts[1:-1]), userId=parts[-1])
    elif kind in ("sms", "whatsapp"):
        fields["phone"] = rest
    elif kind == "dashboard":
        fields["userId"] = rest
    elif kind == "web_widget":
        fields["tokenKind"] = rest
    elif rest:
        raise ValueError(f"surface {text!r}: {kind} takes nothing after it; use one of {SURFACE_FORMS}")
    try:
        return _SURFACE.validate_python(fields)
    except ValidationError:
        raise ValueError(f"surface {text!r} is not one of {SURFACE_FORMS}") from None


def assumed_sender(env: Mapping[str, str] | None = None) -> SmsSender:
    """The operator-wide SMS and WhatsApp senders the server would use, from the same
    variables (`TWILIO_FROM_NUMBER`, `TWILIO_MESSAGING_SERVICE_SID`, `TWILIO_WHATSAPP_FROM`)."""
    env = os.environ if env is None else env
    return SmsSender(
        from_number=env.get("TWILIO_FROM_NUMBER") or None,
        messaging_service_sid=env.get("TWILIO_MESSAGING_SERVICE_SID") or None,
        whatsapp_from=env.get("TWILIO_WHATSAPP_FROM") or None,
    )


def surface_of(data: Any) -> Any:
    """A surface as the audit record keeps it (its wire JSON), as the wire model."""
    return _SURFACE.validate_python(data)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Expect(_Strict):
    """What a case expects; every key is optional, and only the keys given are checked."""

    mode: Annotated[ApprovalMode, Field(strict=False)] | None = None
    deny: bool | None = None
    refused: bool | None = None
    invalid: bool | None = None
    approvers: (
        Annotated[ApproverKind, Field(strict=False)]
        | list[Annotated[ApproverKind, Field(strict=False)]]
        | None
    ) = None
    route: str | None = None
    rule: str | None = None
    timeout: str | None = None
    quorum: Annotated[int, Field(ge=1)] | None = None
    block: str | None = None  # the `when` block that decided, or "none"


class Case(_Strict):
    """One `[[case]]`: a call, the surface it came from, and what should be decided."""

    name: Annotated[str, Field(min_length=1)]
    tenant: str = ""
    tool: Annotated[str, Field(min_length=1)]
    params: dict[str, Any] = {}
    surface: str | None = None
    timeout_seconds: Annotated[int, Field(ge=1)] | None = None
    # What a Cedar policy reads besides the call: the agent key's id, the time (UNIX seconds).
    agent: str = ""
    time: float | None = None
    expect: Expect


class CaseFile(_Strict):
    """The whole test file."""

    case: Annotated[list[Case], Field(min_length=1)]


@dataclass(frozen=True)
class CaseRun:
    """One case run: its name, each way it failed (none: it passed), and the ruling made."""

    name: str
    failures: tuple[str, ...]
    ruling: Ruling | None

    @property
    def passed(self) -> bool:
        """True when every expectation held."""
        return not self.failures


def load_cases(path: str | Path) -> list[Case]:
    """Read and validate a test file; raise `CaseFileError` naming the line and key."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"{p}: cannot read the test file ({exc})") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CaseFileError(f"{p}: not valid TOML: {exc}") from exc
    try:
        cases = CaseFile.model_validate(data).case
    except ValidationError as exc:
        raise CaseFileError("\n".join(_problem(p, text, e) for e in exc.errors(include_url=False))) from exc
    for i, case in enumerate(cases):
        if case.surface is not None:
            try:
                parse_surface(case.surface)
            except ValueError as exc:
                line = _line_of(text, ("case", i, "surface"))
                raise CaseFileError(f"{p}:{line}: case {case.name!r}: {exc}") from exc
        if case.expect.timeout is not None:
            try:
                parse_duration(case.expect.timeout)
            except ValueError as exc:
                line = _line_of(text, ("case", i, "expect"))
                raise CaseFileError(f"{p}:{line}: case {case.name!r}: expect.timeout {exc}") from exc
    return cases


def _problem(path: Path, text: str, error: Any) -> str:
    loc = tuple(error["loc"])
    keys = ".".join(str(k) if not isinstance(k, int) else f"[{k}]" for k in loc).replace(".[", "[")
    message = error["msg"]
    if error["type"] == "extra_forbidden":
        fields = {1: CaseFile.model_fields, 3: Case.model_fields}.get(len(loc), Expect.model_fields)
        message = f"unknown key; expected one of {', '.join(fields)}"
    return f"{path}:{_line_of(text, loc)}: {keys or '(top level)'}: {message}"


_HEADER = re.compile(r"^\s*\[\[\s*case\s*\]\]")


def _line_of(text: str, loc: tuple[Any, ...]) -> int:
    """The line of the key at `loc` (`case`, index, key, …), else of its case, else 1."""
    lines = text.splitlines()
    if len(loc) < 2 or loc[0] != "case" or not isinstance(loc[1], int):
        key = str(loc[0]) if loc else ""
        for n, line in enumerate(lines, 1):
            if re.match(rf"^\s*\[*\s*{re.escape(key)}\b", line):
                return n
        return 1
    headers = [n for n, line in enumerate(lines) if _HEADER.match(line)]
    if loc[1] >= len(headers):
        return 1
    start = headers[loc[1]]
    end = headers[loc[1] + 1] if loc[1] + 1 < len(headers) else len(lines)
    for key in [str(k) for k in loc[2:] if not isinstance(k, int)][::-1]:
        for n in range(start, end):
            if re.match(rf"^\s*{re.escape(key)}\s*=", lines[n]) or re.search(
                rf"[{{,]\s*{re.escape(key)}\s*=", lines[n]
            ):
                return n + 1
    return start + 1


def run_case(policy: Policy, case: Case, sms: SmsSender | None = None) -> CaseRun:
    """Decide the case's call by the policy and compare with what it expects."""
    surface = parse_surface(case.surface) if case.surface is not None else None
    ruling = rule_on(
        policy,
        case.tenant,
        case.tool,
        case.params,
        surface,
        enabled=ENABLED,
        sms=sms or assumed_sender(),
        requested_timeout=case.timeout_seconds,
        agent=case.agent,
        now=case.time,
    )
    return CaseRun(case.name, tuple(_failures(case, ruling)), ruling)


def _failures(case: Case, ruling: Ruling) -> list[str]:
    e = case.expect
    wrong: list[str] = []
    if ruling.deny and e.deny is not True:
        wrong.append(f"expected no deny, but {ruling.decided_by} denies the call")
    elif e.deny is True and not ruling.deny:
        wrong.append("expected deny, but the call is not denied")
    if ruling.invalid is not None and e.invalid is not True:
        wrong.append(f"the call is refused as invalid (400): {ruling.invalid.message}")
    elif e.invalid is True and ruling.invalid is None:
        wrong.append("expected invalid (a threshold parameter that is not a number), but it is not")
    if ruling.unsupported and e.refused is not True and not ruling.deny:
        wrong.append("the call is refused: it needs a person and none can be reached from this surface")
    elif e.refused is True and not ruling.unsupported:
        wrong.append("expected refused (no reachable person), but it is not")
    if e.mode is not None and not ruling.deny and e.mode is not ruling.mode:
        wrong.append(f"expected mode {e.mode.value}, got {ruling.mode.value} (by {ruling.decided_by})")
    if e.approvers is not None:
        want = {e.approvers} if isinstance(e.approvers, ApproverKind) else set(e.approvers)
        got = set(ruling.kinds)
        if want != got:
            shown = ", ".join(sorted(k.value for k in got)) or "nobody"
            hint = "" if case.surface is not None else " (give the case a surface)"
            wrong.append(f"expected approvers {', '.join(sorted(k.value for k in want))}, got {shown}{hint}")
    if e.route is not None:
        got_route = (
            where(ruling.route) if isinstance(ruling.route, Route) and not ruling.runs_unasked else "none"
        )
        if got_route != e.route:
            wrong.append(f"expected route {e.route!r}, got {got_route!r}")
    if e.rule is not None and e.rule != ruling.decided_by:
        wrong.append(f"expected rule {e.rule}, got {ruling.decided_by}")
    if e.timeout is not None and parse_duration(e.timeout) != ruling.timeout:
        got_timeout = "none (nobody is asked)" if ruling.timeout is None else f"{ruling.timeout:g} s"
        wrong.append(f"expected timeout {e.timeout}, got {got_timeout}")
    if e.block is not None and e.block != (ruling.rule.block or "none"):
        got_block = ruling.rule.block or "none (no when block decided)"
        wrong.append(f"expected block {e.block}, got {got_block}")
    if e.quorum is not None and e.quorum != ruling.quorum:
        wrong.append(f"expected quorum {e.quorum}, got {ruling.quorum} ({ruling.rule.origin('quorum')})")
    return wrong


def run_cases(policy: Policy, cases: Sequence[Case], sms: SmsSender | None = None) -> list[CaseRun]:
    """Run every case; a case whose call cannot be decided fails with the reason."""
    outcomes = []
    sms = sms or assumed_sender()
    for case in cases:
        try:
            outcomes.append(run_case(policy, case, sms))
        except ValueError as exc:
            outcomes.append(CaseRun(case.name, (str(exc),), None))
    return outcomes


def junit(outcomes: Sequence[CaseRun], suite: str) -> bytes:
    """The outcomes as JUnit XML, the format CI systems read test reports in."""
    failed = sum(not o.passed for o in outcomes)
    root = ElementTree.Element("testsuites", tests=str(len(outcomes)), failures=str(failed))
    node = ElementTree.SubElement(
        root, "testsuite", name=suite, tests=str(len(outcomes)), failures=str(failed), errors="0"
    )
    for o in outcomes:
        case = ElementTree.SubElement(node, "testcase", name=o.name, classname=suite)
        if not o.passed:
            failure = ElementTree.SubElement(case, "failure", message="; ".join(o.failures))
            failure.text = o.ruling.explain() if o.ruling is not None else "\n".join(o.failures)
    ElementTree.indent(root)
    written: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return written
