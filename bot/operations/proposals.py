"""Operation proposals: the agent proposes, the application prepares, a person approves.

`POST /v1/approvals` with `operation` + `request` comes here. The policy must name the
operation (else 403). An earlier proposal under the same ids is replayed without asking
the application again. Otherwise the application `prepare`s it for a new approval id; a
refusal is `422 OPERATION_REJECTED` with its safe message, a failure `503
OPERATION_UNAVAILABLE`, and in both cases nothing is stored. The prepared contract is then
stored with the approval and routed like any gated call (`bot.approvals.engine`); what happens after
the approval is `bot.operations.execution`.
"""

from __future__ import annotations

import json
import logging

from bot.approvals import Denials, Engine, Prepared, Start, create_prepared, new_id, prepare_request
from bot.observability import SpanName, Tracing, answered
from bot.operations.contract_client import ApplicationFailed, ContractClient, PrepareCall, Rejected
from bot.policy import (
    OperationRule,
    Policy,
    ToolRule,
    cedar_rule,
    json_limits,
    operation_tool_rule,
    redact,
)
from contracts.answers import Decision
from contracts.enums import ApprovalMode, SurfaceType
from contracts.errors import (
    InvalidRequest,
    OperationRejected,
    OperationUnavailable,
    PermissionDenied,
)
from contracts.operations import arguments_digest
from contracts.ports import Route
from contracts.wire import ApprovalRequest, OperationRequest
from storage import ledger
from storage.database import Database
from storage.operations import OperationRecord, arguments_context
from storage.sealing import TokenSeal

log = logging.getLogger("cosigner.operations")


def tool_rule(policy: Policy, tenant: str, rule: OperationRule) -> ToolRule:
    """The operation's approval rule in the form routing and intake read for tools."""
    section = policy.tenants.get(tenant)
    return operation_tool_rule(rule, section.gate_all if section is not None else False)


def as_call(req: OperationRequest, timeout: int | None) -> ApprovalRequest:
    """The proposal as the gated call intake stores: the operation's name and the agent's request."""
    return ApprovalRequest.model_construct(
        executionId=req.executionId,
        toolCallId=req.toolCallId,
        toolName=req.operation,
        parameters=req.request,
        reason=req.reason,
        surface=req.surface,
        timeoutSeconds=timeout,
        callbackUrl=req.callbackUrl,
    )


class Proposals:
    """Takes operation proposals in: policy, replay, `prepare`, then the approval."""

    def __init__(
        self,
        engine: Engine,
        client: ContractClient,
        *,
        db: Database,
        policy: Policy,
        denials: Denials,
        tracing: Tracing,
        seal: TokenSeal | None,
    ) -> None:
        self.engine = engine
        self.client = client
        self.db = db
        self.policy = policy
        self.denials = denials
        self.tracing = tracing
        self.seal = seal

    async def propose(
        self, tenant: str, req: OperationRequest, agent: str = ""
    ) -> tuple[int, Start | Decision]:
        """Handle a proposal; returns (HTTP status, body) like `Engine.create`."""
        engine = self.engine
        rule = self.policy.operation_rule(tenant, req.operation)
        if rule is None:
            raise PermissionDenied(
                f"there is no operation {req.operation} in the policy; the operator adds "
                f'[operations."{req.operation}"] with the url of the application that carries it out',
                policy=f"operations.{req.operation}",
            )
        json_limits(req.request, "request")  # named as the agent sent it, before intake's checks
        approval_rule = tool_rule(self.policy, tenant, rule)
        if self.policy.cedar is not None:
            # Cedar decides an operation as `Cosigner::Action::"operation"` on the agent's request.
            approval_rule = cedar_rule(
                self.policy.cedar, approval_rule, tenant, req.request, req.surface, agent, None, "operation"
            )[0]
        call = as_call(req, req.timeoutSeconds)
        # The same intake as any request (`bot.approvals.prepare`): checked, ruled on, routed.
        asked = await prepare_request(engine, tenant, call, rule=approval_rule, agent=agent)
        if (
            asked.intake.call.deny
            or await self._made_before(tenant, req)
            or await self._held(tenant, asked, req)
        ):
            # A replay (or a 409 for another request), the policy's deny and a person's standing
            # deny need no contract: the application is never asked to prepare a refused call.
            return await create_prepared(engine, asked)
        approval_id = new_id("apv")
        prepare = PrepareCall(
            operation=req.operation,
            tenant=tenant,
            proposalId=approval_id,
            executionId=req.executionId,
            toolCallId=req.toolCallId,
            request=req.request,
            requestedBy=req.surface.model_dump(mode="json", exclude_none=True),
        )
        try:
            # Its parent is the request's context: the approval span does not exist yet, and
            # is not exported at all when the application refuses.
            prepared = await self.tracing.run(
                None,
                SpanName.PREPARE,
                self.client.prepare(rule.url, rule.secret_env, prepare, rule.prepare_timeout),
                operation=req.operation,
                approval_id=approval_id,
                result=answered,
            )
        except Rejected as exc:
            # The application's words reach the model, the log and the record: a credential
            # in them is redacted like one in any other text shown.
            raise OperationRejected(str(redact(exc.message)), operation=req.operation) from None
        except ApplicationFailed as exc:
            # The detail names the operator's internal URL and egress rules: it is for the
            # operator's log, never for the agent, which gets a reference to quote instead.
            log.warning(
                "operation %s could not be prepared at %s (reference %s): %s",
                req.operation,
                rule.url,
                approval_id,
                exc,
                extra={"approval_id": approval_id, "tenant": tenant, "tool": req.operation, "url": rule.url},
            )
            raise OperationUnavailable(
                f"the application of {req.operation} is unavailable; nothing is pending, so the same "
                f"request may be sent again later (give the operator reference {approval_id})",
                operation=req.operation,
                reference=approval_id,
            ) from None
        json_limits(prepared.arguments, "arguments")
        if self.seal is None:
            raise InvalidRequest("operations need COSIGNER_SECRET on this server (it seals their arguments)")
        contract = OperationRecord(
            name=req.operation,
            sealed_arguments=self.seal.seal(
                json.dumps(prepared.arguments, separators=(",", ":")), arguments_context(tenant, approval_id)
            ),
            preview=prepared.preview.model_dump(mode="json"),
            arguments_digest=arguments_digest(req.operation, prepared.arguments, prepared.preview),
            url=rule.url,
            secret_env=rule.secret_env,
            execute_timeout=rule.execute_timeout,
        )
        if prepared.expiresInSeconds is not None:
            # The application's contract holds only so long: the approval must not outlive it.
            policy_timeout = self.policy.timeout_for(
                approval_rule, SurfaceType(req.surface.type), req.timeoutSeconds
            )
            call = as_call(req, int(min(policy_timeout, prepared.expiresInSeconds)))
        return await engine.create(
            tenant, call, rule=approval_rule, contract=contract, approval_id=approval_id
        )

    async def _made_before(self, tenant: str, req: OperationRequest) -> bool:
        found = await self.db.run_read(
            lambda tx: ledger.load_call(tx, tenant, req.executionId, req.toolCallId)
        )
        return found is not None

    async def _held(self, tenant: str, prepared: Prepared, req: OperationRequest) -> bool:
        """True if a person's standing deny covers this proposal where it would be asked
        (where intake would look for one: `bot.approvals.intake.question`)."""
        call = prepared.intake.call
        route = call.routed
        if call.deny or call.mode is ApprovalMode.NONE or not isinstance(route, Route):
            return False  # decided by policy before any standing deny, or nobody can be asked
        held = await self.denials.held(tenant, req.operation, call.mode, route, req.surface.model_dump())
        return held is not None
