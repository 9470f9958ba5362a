"""Cosigner's side of the application protocol: signed `prepare`, `execute` and `status` calls.

Each call is a `POST` of compact JSON to the operation's `url`, signed exactly as callbacks
are (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`, keyed with
the secret in the operation's `secret_env`), through the same checked, pinned egress client. Whatever goes
wrong on the way (no answer, a timeout, a body that is not one of the protocol's) is one
`ApplicationFailed`, whose text names the fix and never quotes a secret.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ValidationError

from bot.approvals import new_id
from bot.egress import Egress, EgressFailed, EgressRefused, Reply, Unreached
from contracts.enums import ErrorCode
from contracts.operations import (
    ExecuteCall,
    ExecuteOutcome,
    InProgress,
    NotStarted,
    Prepared,
    PrepareRejection,
    StatusCall,
    execute_answer,
    status_answer,
)
from contracts.operations import PrepareCall as PrepareCall
from contracts.webhooks import signing_key

USER_AGENT = "cosigner-contract/1"


class ApplicationFailed(Exception):
    """The application could not be reached, or did not answer as the protocol says."""

    code = ErrorCode.OPERATION_UNAVAILABLE

    def __init__(self, message: str, *, lost: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        # True when the request may have reached the application (its answer was lost).
        self.lost = lost
        self.status = status  # the HTTP status it answered with, if it answered


class Rejected(Exception):
    """The application refused to prepare: `message` is its safe text for the model."""

    code = ErrorCode.OPERATION_REJECTED
    status = 422

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ContractClient:
    """Calls an operation's application; `environ` holds the signing secrets by variable name."""

    def __init__(
        self, http: Egress, clock: Callable[[], float], environ: Mapping[str, str] | None = None
    ) -> None:
        self.http = http
        self.clock = clock
        self.environ = os.environ if environ is None else environ

    async def _post(self, url: str, secret_env: str, call: BaseModel, seconds: float) -> Reply:
        secret = self.environ.get(secret_env)
        if not secret:
            raise ApplicationFailed(f"{secret_env} is not set; set the operation's signing secret")
        try:
            signing_key(secret)
        except ValueError as exc:
            raise ApplicationFailed(f"{secret_env}: {exc}") from None
        body = call.model_dump_json(exclude_none=True).encode()
        try:
            return await self.http.post_signed(
                url,
                body,
                secret=secret,
                delivery=new_id("dlv"),
                at=self.clock(),
                user_agent=USER_AGENT,
                timeout=seconds,
            )
        except EgressRefused as exc:
            raise ApplicationFailed(f"the egress rules refuse {url}: {exc}") from None
        except Unreached as exc:
            raise ApplicationFailed(f"cannot connect to the application ({exc.reason})") from None
        except EgressFailed as exc:
            raise ApplicationFailed(f"no answer from the application ({exc.reason})", lost=True) from None

    async def prepare(self, url: str, secret_env: str, call: PrepareCall, seconds: float) -> Prepared:
        """The contract the application made of a request; `Rejected` with its safe message."""
        response = await self._post(url, secret_env, call, seconds)
        if response.status_code == 422:
            try:
                raise Rejected(PrepareRejection.model_validate_json(response.content).error.message)
            except ValidationError:
                raise ApplicationFailed(
                    "the application refused with a body that is not {error:{message}}", status=422
                ) from None
        if response.status_code != 200:
            raise ApplicationFailed(
                f"the application answered prepare with HTTP {response.status_code}",
                status=response.status_code,
            )
        try:
            return Prepared.model_validate_json(response.content)
        except ValidationError as exc:
            raise ApplicationFailed(
                f"the application's prepare answer is not a contract: {_first(exc)}"
            ) from None

    async def execute(self, url: str, secret_env: str, call: ExecuteCall, seconds: float) -> ExecuteOutcome:
        """The outcome of executing the contract; `ApplicationFailed(lost=True)` if it may have run."""
        response = await self._post(url, secret_env, call, seconds)
        if response.status_code != 200:
            raise ApplicationFailed(
                f"the application answered execute with HTTP {response.status_code}",
                lost=True,
                status=response.status_code,
            )
        try:
            return execute_answer(response.content)
        except ValidationError as exc:
            raise ApplicationFailed(
                f"the execute answer is not an outcome: {_first(exc)}", lost=True
            ) from None

    async def status(
        self, url: str, secret_env: str, call: StatusCall, seconds: float
    ) -> ExecuteOutcome | NotStarted | InProgress:
        """What became of the execution with the call's idempotency key."""
        response = await self._post(url, secret_env, call, seconds)
        if response.status_code != 200:
            raise ApplicationFailed(
                f"the application answered status with HTTP {response.status_code}",
                status=response.status_code,
            )
        try:
            return status_answer(response.content)
        except ValidationError as exc:
            raise ApplicationFailed(f"the status answer is not an outcome: {_first(exc)}") from None


def _first(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(p) for p in error["loc"]) or "body"
    return f"{where}: {error['msg']}"
