"""Decision: the snake_case view of an approval, pending or decided, as the SDK returns it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields, replace
from datetime import datetime
from typing import Annotated, Any, TypeVar

from pydantic import Field, TypeAdapter

from cosigner import answers
from cosigner.digest import parameters_digest
from cosigner.enums import ApprovalStatus, DeciderKind
from cosigner.errors import ParametersMismatch
from cosigner.handoff import HandoffReceipt, HandoffStart
from cosigner.operations import OperationOutcome, Preview

__all__ = ["Approval", "DecidedBy", "Decision", "parse_approval"]

T = TypeVar("T")


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults(cls: type) -> dict[str, Any]:
    found = _DEFAULTS.get(cls)
    if found is None:
        found = _DEFAULTS[cls] = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    return found


def _build(cls: type[T], values: dict[str, Any]) -> T:
    """A frozen dataclass without its __init__: frozen field-by-field assignment is slow."""
    obj = object.__new__(cls)
    state = obj.__dict__
    state.update(_defaults(cls))
    state.update(values)
    return obj


_APPROVAL: TypeAdapter[Any] = TypeAdapter(
    Annotated[answers.ApprovalStart | HandoffStart | answers.Decision, Field(discriminator="type")]
)


@dataclass(frozen=True)
class DecidedBy:
    """Who or what closed the approval: a person, the policy, the timeout, the agent, Cosigner."""

    kind: DeciderKind
    surface: str | None = None
    user_id: str | None = None
    team_id: str | None = None
    rule: str | None = None
    code: str | None = None

    @classmethod
    def from_wire(cls, model: Any) -> DecidedBy:
        """The view of a wire `decidedBy` model."""
        # The model's fields, not getattr: a missing attribute on a pydantic model is slow.
        given = model.__dict__
        return _build(
            cls,
            {
                "kind": DeciderKind(model.kind),
                "surface": given.get("surface"),
                "user_id": given.get("userId"),
                "team_id": given.get("teamId"),
                "rule": given.get("rule"),
                "code": given.get("code"),
            },
        )


@dataclass(frozen=True)
class Approval:
    """One approver's Approve counted toward the quorum: their id, the surface, when."""

    by: str
    surface: str
    at: datetime


def _approvals(given: list[Any]) -> tuple[Approval, ...]:
    return tuple(_build(Approval, {"by": a.by, "surface": str(a.surface), "at": a.at}) for a in given)


@dataclass(frozen=True)
class Decision:
    """An approval as the agent sees it; `approved` is the only field a gate should trust.

    While pending (`wait=False`), `parameters` holds the redacted parameters exactly as the
    approver sees them and `expires_at` the deadline; once approved with an edit (`edited`),
    `parameters` is the call to run (see `with_original`) and `parameters_digest` its digest,
    `original_digest` the digest of the call asked for; once decided, `decided_by`,
    `decided_at`, `comment` and (approved only) the signed `grant` are set. For an
    operation, `operation`, `arguments_digest`, the application's `preview` (while pending)
    and, once carried out, its `outcome` are set; `tool_name` is then the operation's name.
    `quorum` is how many distinct approvers must approve, and `approvals` every Approve
    counted so far (approved: the approvers who made the quorum). While pending, once an
    approver edited the call (a quorum), `current_parameters` and `current_digest` are the
    call the approvers are asked to approve now (`parameters` stays the agent's).
    `coalesced` (pending only): an identical request was pending already, and this is it.
    """

    approval_id: str
    execution_id: str
    tool_call_id: str
    tool_name: str
    status: ApprovalStatus
    parameters_digest: str
    decided_by: DecidedBy | None = None
    decided_at: datetime | None = None
    comment: str | None = None
    grant: str | None = None
    parameters: dict[str, Any] | None = None
    expires_at: datetime | None = None
    short_code: str | None = None
    operation: str | None = None
    arguments_digest: str | None = None
    preview: Preview | None = None
    outcome: OperationOutcome | None = None
    reason: str | None = None
    steps: tuple[str, ...] = ()
    code: str | None = None
    receipt: HandoffReceipt | None = None
    detail: str | None = None
    edited: bool = False
    edited_fields: tuple[str, ...] = ()
    editable: tuple[str, ...] = ()
    original_digest: str | None = None
    quorum: int = 1
    approvals: tuple[Approval, ...] = ()
    current_parameters: dict[str, Any] | None = None
    current_digest: str | None = None
    coalesced: bool = False

    @property
    def approved(self) -> bool:
        """True only for an approval; denied, expired, cancelled and pending are all False."""
        return self.status is ApprovalStatus.APPROVED

    @property
    def completed(self) -> bool:
        """True only for a handoff whose step the application confirmed."""
        return self.status is ApprovalStatus.COMPLETED

    @property
    def pending(self) -> bool:
        """True while nobody has decided yet."""
        return self.status is ApprovalStatus.PENDING

    @property
    def settled(self) -> bool:
        """Decided, and for an approved operation also carried out: `outcome` is then set."""
        if self.pending:
            return False
        return self.operation is None or not self.approved or self.outcome is not None

    def with_original(self, original: Mapping[str, Any]) -> Decision:
        """This decision with `parameters` the whole call to run, given the call the agent asked
        with: the agent's own values, with the approver's changes to `edited_fields` (values the
        policy hides are never edited, so the agent's own are the ones to run). Unchanged for a
        call approved as asked; raises ParametersMismatch unless the result is the approved call."""
        if not self.edited or self.parameters is None:
            return self
        call = {**dict(original), **{name: self.parameters[name] for name in self.edited_fields}}
        if parameters_digest(call) != self.parameters_digest:
            raise ParametersMismatch(
                f"the edited call of {self.approval_id} does not follow from these parameters; "
                "pass the parameters the approval was asked with",
                approvalId=self.approval_id,
            )
        return replace(self, parameters=call)

    @classmethod
    def from_wire(cls, model: Any) -> Decision:
        """The view of a wire `ApprovalStart` or `Decision` model."""
        # The model's own fields (its __dict__), read once: attribute access on a pydantic
        # model is slower, and this runs for every answer the SDK parses.
        given = model.__dict__
        common: dict[str, Any] = {
            "approval_id": given["approvalId"],
            "execution_id": given["executionId"],
            "tool_call_id": given["toolCallId"],
            "tool_name": given["toolName"],
            "status": ApprovalStatus(given["status"]),
            "parameters_digest": given["parametersDigest"],
        }
        quorum = given.get("quorum")
        if quorum is not None and quorum != 1:
            common["quorum"] = quorum
        if given.get("approvals"):
            common["approvals"] = _approvals(given["approvals"])
        if isinstance(model, answers.Decision):
            common["decided_by"] = DecidedBy.from_wire(given["decidedBy"])
            common["decided_at"] = given["decidedAt"]
            common["comment"] = given["comment"]
            common["grant"] = given["grant"]
            # Operation and handoff fields, only when the answer carries them.
            for wire_name, name in _DECIDED_EXTRAS:
                value = given[wire_name]
                if value is not None:
                    common[name] = value
            if given["edited"]:
                common["edited_fields"] = tuple(given["editedFields"] or ())
        elif isinstance(model, HandoffStart):
            common.update(
                parameters=model.parameters,
                expires_at=model.expiresAt,
                short_code=model.shortCode,
                reason=model.reason,
                steps=tuple(model.steps),
            )
        else:
            common["parameters"] = given["parameters"]
            common["expires_at"] = given["expiresAt"]
            common["short_code"] = given["shortCode"]
            for wire_name, name in _START_EXTRAS:
                value = given[wire_name]
                if value is not None:
                    common[name] = value
            if given["editable"]:
                common["editable"] = tuple(given["editable"])
            if given["coalesced"]:
                common["coalesced"] = True
            current = given["currentCall"]
            if current is not None:
                common["current_parameters"] = current.parameters
                common["current_digest"] = current.digest
        return _build(cls, common)


_DECIDED_EXTRAS = (
    ("operation", "operation"),
    ("argumentsDigest", "arguments_digest"),
    ("outcome", "outcome"),
    ("code", "code"),
    ("receipt", "receipt"),
    ("detail", "detail"),
    ("edited", "edited"),
    ("parameters", "parameters"),
    ("originalDigest", "original_digest"),
)
_START_EXTRAS = (("preview", "preview"), ("operation", "operation"), ("argumentsDigest", "arguments_digest"))


def parse_approval(content: bytes | str | dict[str, Any]) -> Decision:
    """A Decision from a response body: `approval_start` or `approval_decided`."""
    if isinstance(content, dict):
        return Decision.from_wire(_APPROVAL.validate_python(content))
    return Decision.from_wire(_APPROVAL.validate_json(content))
