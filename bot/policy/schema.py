"""The policy file's shape as frozen pydantic models, and every problem with its key path.

Nothing is coerced: `true` is not a number and `1` is not a boolean. A name that could
never match a request (a tenant `cosigner tenants create` would refuse, a tool name the API
would refuse, a Slack id in lower case) is refused with the rule the API and CLI use.
`bot.policy.validation.read_policy` turns the errors into key-path problems.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, PlainValidator, PrivateAttr, model_validator
from pydantic_core import PydanticCustomError

from bot.policy.notify import Notify
from bot.policy.oncall_refs import OnCallRef, is_oncall, parse_oncall
from bot.policy.schema_types import (
    DOTTED,
    Aad,
    AadIds,
    Addresses,
    Approvers,
    Confirm,
    Count,
    Duration,
    Editable,
    Flag,
    Kind,
    Names,
    Phones,
    PolicyTenantName,
    PolicyToolName,
    RedactPaths,
    Route,
    ShowPaths,
    Slack,
    SlackIds,
    Table,
    Text,
    ToolApprovers,
    above_zero,
    listed,
    say,
)
from bot.policy.when_schema import WhenBlocks
from contracts.enums import ApproverKind, SurfaceType, ToolKind
from contracts.names import PHONE_PATTERN, PhoneNumber


class AllowBelow(Table):
    """`allow_below`: no person is needed while `parameter` is a number in [0, value)."""

    parameter: Annotated[
        str, Field(pattern=DOTTED), say('"{input}" is not a parameter path such as "amountCents"')
    ]
    value: Annotated[float, say("must be a number such as 5000"), AfterValidator(above_zero)]
    digits: Flag = False  # the parameter may also be a string of digits 0-9, read as its number


class DenyAbove(Table):
    """`deny_above`: every call whose `parameter` is a number above `value` is refused."""

    parameter: Annotated[
        str, Field(pattern=DOTTED), say('"{input}" is not a parameter path such as "amountCents"')
    ]
    value: Annotated[float, say("must be a number such as 100000")]
    digits: Flag = False  # the parameter may also be a string of digits 0-9, read as its number


def _absolute_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError(
            "policy",
            '"{input}" is not an absolute URL; write it as "https://app.example/cosigner/expect/publish"',
            {"input": value},
        )
    return value


class Expect(Table):
    """`expect`: the application endpoint that says whether a handoff's step really happened."""

    url: Annotated[str, say("must be a URL string"), AfterValidator(_absolute_url)]
    secret_env: Annotated[
        str,
        Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"),
        say('"{input}" is not an environment variable name such as "APP_EXPECT_SECRET"'),
    ]


class HandoffSection(Table):
    """`[tools.NAME.handoff]`: a step only a person may do, checked against `expect` on Done."""

    reason: Text
    steps: Annotated[
        tuple[Text, ...],
        Field(strict=False),
        listed('["Open Settings", "Enter the code"]', nonempty="must list at least one step"),
    ]
    expect: Expect
    timeout: Duration = 300.0


def _set_by_to(value: Any) -> OnCallRef | None:
    if value is None or isinstance(value, OnCallRef):
        return value
    raise PydanticCustomError("policy", 'name a rotation as `to = "oncall:pagerduty:EP123:2"`')


class EscalateStep(Table):
    """One `escalate` step: while the request is still pending `after` it was asked, it is
    also delivered to the route `to`, whose approvers may then answer there."""

    after: Duration
    to: Route
    # `to = "oncall:pagerduty:EP123:2"`: whoever is on call then (`bot.oncall`), with `to`
    # the tenant's admins, who are asked instead when nobody on call can be reached.
    oncall: Annotated[OnCallRef | None, PlainValidator(_set_by_to), Field(exclude=True)] = None

    @model_validator(mode="before")
    @classmethod
    def _oncall_to(cls, data: Any) -> Any:
        if isinstance(data, dict) and is_oncall(data.get("to")):
            if "oncall" in data:
                raise PydanticCustomError("policy", 'write the rotation as `to = "oncall:…"` only')
            try:
                ref = parse_oncall(data["to"])
            except ValueError as exc:
                raise PydanticCustomError("policy", "{message}", {"message": str(exc)}) from None
            return {**data, "to": ApproverKind.TENANT_ADMINS.value, "oncall": ref}
        return data


EscalateSteps = Annotated[
    tuple[EscalateStep, ...],
    Field(strict=False),
    listed('[{ after = "10m", to = "tenant_admins" }]'),
]


def _schema_source(value: Any) -> Any:
    if isinstance(value, dict) or (isinstance(value, str) and value):
        return value
    raise PydanticCustomError(
        "policy",
        'must be a JSON Schema as a table (parameters_schema = { type = "object", properties = … }) '
        'or the path of a JSON file holding one ("schemas/bash.json", relative to the policy file)',
    )


SchemaSource = Annotated[dict[str, Any] | str, PlainValidator(_schema_source)]
ArgumentPaths = Annotated[
    tuple[
        Annotated[str, Field(pattern=DOTTED), say('"{input}" is not a parameter path such as "repo"')], ...
    ],
    Field(strict=False),
    listed('["repo", "customer.id"]'),
]


class ToolSection(Table):
    """`[tools.NAME]`; the tenant override `[tenants.T.tools.NAME]` uses the same keys."""

    kind: Kind
    confirm: Confirm | None = None
    approvers: ToolApprovers = (ApproverKind.REQUESTER,)
    redact: RedactPaths = ()
    show: ShowPaths = ()  # names Cosigner hides as secret-looking that this tool's are not
    timeout: Duration | None = None
    deny: Flag = False
    deny_reason: Text | None = None
    allow_below: AllowBelow | None = None
    deny_above: DenyAbove | None = None
    editable: Editable = False
    description: Text | None = None
    # The executor this tool's grants are for: their `aud` claim, which that executor checks.
    audience: Text | None = None
    handoff: HandoffSection | None = None
    remind_after: Duration | None = None
    escalate: EscalateSteps = ()
    # Also told, by a channel that is not the route (`bot.policy.notify`): `["email"]`.
    notify: Notify = ()
    quorum: Count | None = None
    separate_duties: Flag | None = None
    # An Approve counts only once the approver confirms it with a passkey in the inbox.
    step_up: Flag | None = None
    # `[[tools.NAME.when]]`: rules on the call's arguments, first match wins (bot.policy.when).
    when: WhenBlocks = ()
    # The JSON Schema of the tool's parameters, a table or a JSON file's path (relative to the
    # policy file): `policy check` refuses a `when` path it rules out. Calls are not checked.
    parameters_schema: SchemaSource | None = None
    # "Allow for …" (bot.policy.allow_for): the longest standing allow an approver may give,
    # the arguments later calls must match, the numbers they may not exceed, and how many.
    allow_for: Duration | None = None
    allow_for_match: ArgumentPaths | None = None
    allow_for_at_most: ArgumentPaths | None = None
    allow_for_uses: Count | None = None


class ToolOverride(ToolSection):
    """A tenant's override: only the keys it sets replace the tool section's."""

    kind: Kind | None = None  # type: ignore[assignment]  # optional where the tool section has it


def _absolute_http(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError(
            "policy",
            '"{input}" is not an absolute http(s) URL; write it as "https://orders.example/cosigner"',
            {"input": value},
        )
    return value


EnvName = Annotated[
    str,
    Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"),
    say('"{input}" is not an environment variable name such as "ORDERS_CONTRACT_SECRET"'),
]
AppUrl = Annotated[str, say("must be a string"), AfterValidator(_absolute_http)]


class OperationSection(Table):
    """`[operations.NAME]`: the application that prepares and executes it, and its approval rule."""

    url: AppUrl
    secret_env: EnvName
    kind: Kind = ToolKind.DANGER
    confirm: Confirm | None = None
    approvers: Approvers = (ApproverKind.REQUESTER,)
    redact: RedactPaths = ()
    show: ShowPaths = ()
    timeout: Duration | None = None
    execute_timeout: Duration = 30.0
    prepare_timeout: Duration = 10.0
    description: Text | None = None
    remind_after: Duration | None = None
    escalate: EscalateSteps = ()
    quorum: Count | None = None
    separate_duties: Flag | None = None
    # An Approve counts only once the approver confirms it with a passkey in the inbox.
    step_up: Flag | None = None


class OperationOverride(Table):
    """A tenant's `[tenants.T.operations.NAME]`: only the keys it sets replace the section's."""

    url: AppUrl | None = None
    secret_env: EnvName | None = None
    kind: Kind | None = None
    confirm: Confirm | None = None
    approvers: Approvers | None = None
    redact: RedactPaths = ()
    show: ShowPaths | None = None
    timeout: Duration | None = None
    execute_timeout: Duration | None = None
    prepare_timeout: Duration | None = None
    deny: Flag = False
    remind_after: Duration | None = None
    escalate: EscalateSteps | None = None
    quorum: Count | None = None
    separate_duties: Flag | None = None
    # An Approve counts only once the approver confirms it with a passkey in the inbox.
    step_up: Flag | None = None


class Admins(Table):
    """A tenant's approver identities per surface."""

    slack: SlackIds = ()
    sms: Phones = ()
    whatsapp: Phones = ()  # E.164, without `whatsapp:`: the numbers WhatsApp requests go to
    dashboard: Names = ()
    teams: AadIds = ()
    email: Addresses = ()  # told by email; each answers in the inbox, signed in as that address


class Headless(Table):
    """`[tenants.T.headless]`: where runs that cannot host a person are routed."""

    route: Route


class TenantPolicy(Table):
    """`[tenants.NAME]`."""

    slack_team: Slack | None = None
    slack_enterprise: Slack | None = None
    sms_from: Annotated[PhoneNumber, say('must be an E.164 number such as "+15550000001"')] | None = None
    sms_messaging_service: Text | None = None
    whatsapp_from: (
        Annotated[PhoneNumber, say('must be an E.164 number such as "+15550000001", without "whatsapp:"')]
        | None
    ) = None
    teams_tenant: Aad | None = None
    admins: Admins = Admins()
    admin_channel: Text | None = None
    tools: dict[PolicyToolName, ToolOverride] = Field(default_factory=dict)
    operations: dict[PolicyToolName, OperationOverride] = Field(default_factory=dict)
    headless: Headless | None = None
    gate_all: Flag = False
    max_gated_calls_per_execution: Count | None = None
    display_name: Text | None = None
    _name: str = PrivateAttr(default="")

    @property
    def name(self) -> str:
        """The tenant's name: its key under `[tenants]`."""
        return self._name

    @property
    def headless_route(self) -> ApproverKind | None:
        """Who answers for a run that cannot host a person, if anyone."""
        return self.headless.route if self.headless is not None else None

    def named(self, name: str) -> TenantPolicy:
        """This section, knowing its own name (set once, when the policy is built)."""
        self._name = name
        return self


class StaffPolicy(Table):
    """`[staff]`: the operator's own approvers."""

    slack_team: Slack | None = None
    slack_enterprise: Slack | None = None
    channel: Text | None = None
    users: SlackIds = ()
    sms: Phones = ()
    dashboard: Names = ()
    email: Addresses = ()  # told by email; each answers in the inbox, signed in as that address


class Defaults(Table):
    """`[defaults]`, durations in seconds."""

    timeout: Duration = 300.0
    sms_timeout: Duration = 3600.0
    slack_timeout: Duration | None = None
    dashboard_timeout: Duration | None = None
    max_timeout: Duration = 86400.0
    max_gated_calls_per_execution: Count = 20
    grant_ttl: Duration = 300.0
    callback_retry_window: Duration = 86400.0

    def timeout_on(self, surface: SurfaceType) -> float:
        """The time a person on `surface` has when the tool names none."""
        own = {
            SurfaceType.SMS: self.sms_timeout,
            SurfaceType.SLACK: self.slack_timeout,
            SurfaceType.DASHBOARD: self.dashboard_timeout,
        }
        return own.get(surface) or self.timeout


# --- [people]: the ids that are one person -------------------------------------


def _person_id(value: str) -> str:
    if value.casefold().startswith("whatsapp:"):
        raise PydanticCustomError(
            "policy",
            '"{input}": write the number without "whatsapp:" (such as "+15550100200"); a number '
            "names the person by SMS and by WhatsApp",
            {"input": value},
        )
    if value.startswith("+") and not re.fullmatch(PHONE_PATTERN, value):
        raise PydanticCustomError(
            "policy", '"{input}" is not an E.164 number; write it as "+15550100200"', {"input": value}
        )
    return value


PersonName = Annotated[
    str,
    Field(pattern=r"^[A-Za-z0-9_-]{1,64}$"),
    say('"{input}" is not a person\'s name here: use letters, digits, _ or - (up to 64), such as alice'),
]
PersonId = Annotated[
    str,
    Field(max_length=320, pattern=r"^\S(?:.*\S)?$"),
    say(
        '"{input}" is not an id: write a Slack user id, an email, a phone number, … (up to 320 '
        "characters, without spaces around it)"
    ),
    AfterValidator(_person_id),
]
PersonIds = Annotated[
    tuple[PersonId, ...],
    Field(strict=False),
    listed(
        '["U0ALICE", "alice@demo.example", "+15550100200"]',
        nonempty='must list at least one id, e.g. ["U0ALICE", "alice@demo.example"]',
    ),
]


class CedarSection(Table):
    """`[cedar]`: the Cedar policies (and schema) that decide each call (docs/cedar.md)."""

    policies: Text
    # `schema` in the file; the name shadows pydantic's own `schema` method.
    schema_file: Text | None = Field(default=None, alias="schema")


class PolicyFile(Table):
    """The whole file."""

    defaults: Defaults = Defaults()
    tools: dict[PolicyToolName, ToolSection] = Field(default_factory=dict)
    operations: dict[PolicyToolName, OperationSection] = Field(default_factory=dict)
    tenants: dict[PolicyTenantName, TenantPolicy] = Field(default_factory=dict)
    staff: StaffPolicy | None = None
    # Each person's ids, on every surface: `alice = ["U0ALICE", "alice@demo.example"]`.
    people: dict[PersonName, PersonIds] = Field(default_factory=dict)
    cedar: CedarSection | None = None
