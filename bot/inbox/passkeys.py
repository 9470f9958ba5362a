"""Passkeys: an approver registers, names and removes the WebAuthn credentials that confirm
step-up approvals (`/inbox/passkeys`).

The ceremonies are py_webauthn's: options out, the browser's answer checked against a
challenge this server handed out (used once, `storage.passkeys.take`), user verification
required, the relying party the host of `COSIGNER_PUBLIC_URL` and the origin its scheme,
host and port. A passkey belongs to the person of the inbox sign-in (issuer and subject).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url, parse_client_data_json
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from bot.inbox import session
from bot.inbox.people import Person
from contracts.answers import ErrorBody
from contracts.enums import ErrorCode
from storage import passkeys as stored
from storage.database import Database

if TYPE_CHECKING:
    from bot.inbox.site import Inbox

log = logging.getLogger("cosigner.inbox")
CHALLENGE_SECONDS = 300.0  # how long a challenge handed to a browser may be used
MAX_BODY = 64 * 1024  # an attestation or assertion with its client data is a few KB
NAME_MAX = 100


class PasskeyRefused(Exception):
    """A ceremony that does not check out; the message says what to do."""


def person_key(person: Person) -> str:
    """Whose passkey: the issuer and subject of the sign-in (never an id a policy lists)."""
    return f"{person.issuer} {person.subject}"


def user_handle(person: Person) -> bytes:
    """The WebAuthn user handle: a digest of the person, never an email or a name."""
    return hashlib.sha256(person_key(person).encode()).digest()


class RelyingParty:
    """Cosigner as a WebAuthn relying party, at the host and origin of its public URL."""

    def __init__(self, public_url: str, name: str = "Cosigner") -> None:
        parts = urlsplit(public_url)
        self.id = parts.hostname or "localhost"
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.name = name

    def registration(self, person: Person, held: list[stored.Passkey]) -> tuple[bytes, str]:
        """A registration's challenge and its options as JSON (user verification required)."""
        options = generate_registration_options(
            rp_id=self.id,
            rp_name=self.name,
            user_name=person.email or person.slack_user or person.name,
            user_id=user_handle(person),
            user_display_name=person.name,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
            exclude_credentials=[
                PublicKeyCredentialDescriptor(id=base64url_to_bytes(k.credential_id)) for k in held
            ],
        )
        return options.challenge, options_to_json(options)

    def authentication(self, held: list[stored.Passkey]) -> tuple[bytes, str]:
        """An assertion's challenge and its options as JSON, for this person's passkeys only."""
        options = generate_authentication_options(
            rp_id=self.id,
            allow_credentials=[
                PublicKeyCredentialDescriptor(id=base64url_to_bytes(k.credential_id)) for k in held
            ],
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        return options.challenge, options_to_json(options)

    def registered(self, credential: dict[str, Any], challenge: bytes) -> tuple[str, bytes, int]:
        """The new credential's id, public key and counter, once its attestation checks out."""
        try:
            done = verify_registration_response(
                credential=credential,
                expected_challenge=challenge,
                expected_rp_id=self.id,
                expected_origin=self.origin,
                require_user_verification=True,
            )
        except (InvalidRegistrationResponse, ValueError, KeyError, TypeError) as exc:
            raise PasskeyRefused(f"the passkey was not registered: {exc}") from exc
        return bytes_to_base64url(done.credential_id), done.credential_public_key, done.sign_count

    def asserted(self, credential: dict[str, Any], challenge: bytes, key: stored.Passkey) -> tuple[int, bool]:
        """The assertion's new counter and user-verified flag, once it checks out against the
        passkey's public key, the challenge and the counter last seen."""
        try:
            done = verify_authentication_response(
                credential=credential,
                expected_challenge=challenge,
                expected_rp_id=self.id,
                expected_origin=self.origin,
                credential_public_key=key.public_key,
                credential_current_sign_count=key.sign_count,
                require_user_verification=True,
            )
        except (InvalidAuthenticationResponse, ValueError, KeyError, TypeError) as exc:
            raise PasskeyRefused(f"the passkey's signature was not accepted: {exc}") from exc
        return done.new_sign_count, done.user_verified


def challenge_of(credential: dict[str, Any]) -> str:
    """The challenge (base64url) the browser signed over, read from its client data; the
    signature is checked afterwards against the challenge stored under that name."""
    try:
        raw = credential["response"]["clientDataJSON"]
        return bytes_to_base64url(parse_client_data_json(base64url_to_bytes(str(raw))).challenge)
    except (KeyError, TypeError, ValueError) as exc:
        raise PasskeyRefused("the browser's answer carries no readable client data; try again") from exc


async def read_json(request: Request) -> dict[str, Any]:
    """A ceremony's JSON body, at most MAX_BODY bytes."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise PasskeyRefused(f"the body is over {MAX_BODY} bytes")
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise PasskeyRefused("the body is not JSON") from exc
    if not isinstance(value, dict) or not isinstance(value.get("credential"), dict):
        raise PasskeyRefused('the body must be {"csrf": ..., "credential": {...}}')
    return value


def refusal(message: str, status: int = 400, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> JSONResponse:
    """A ceremony's refusal, as every error body reads (`ErrorBody`)."""
    body = ErrorBody.of(code, message, {}).model_dump(mode="json", exclude_none=True)
    return JSONResponse(body, status_code=status)


class Passkeys:
    """The passkey pages over the inbox (its pages, sessions and clock) and the database."""

    def __init__(self, inbox: Inbox, db: Database, rp: RelyingParty, clock: Callable[[], float]) -> None:
        self.inbox, self.db, self.rp, self.clock = inbox, db, rp, clock

    async def held(self, person: Person) -> list[stored.Passkey]:
        """This person's passkeys."""
        key = person_key(person)
        return await self.db.run_read(lambda tx: stored.of(tx, key))

    async def page(self, request: Request) -> Response:
        person = await self.inbox.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        held = await self.held(person)
        rows = [
            {"id": k.credential_id, "name": k.name, "created": k.created_at, "used": k.used_at} for k in held
        ]
        return self.inbox.page(request, "passkeys.html", person=person, passkeys=rows)

    async def options(self, request: Request) -> Response:
        """Registration options for the signed-in person (a form post with the CSRF token)."""
        signed = await self.inbox.signed_form(request)
        if isinstance(signed, Response):
            return refusal("sign in again and reload the page", 401, ErrorCode.UNAUTHENTICATED)
        person, _ = signed
        held = await self.held(person)
        challenge, options = self.rp.registration(person, held)
        now = self.clock()
        hand = stored.Challenge(bytes_to_base64url(challenge), person_key(person), now + CHALLENGE_SECONDS)
        await self.db.run_write(lambda tx: stored.hand_out(tx, hand, now))
        return Response(options, media_type="application/json", headers=self.inbox.headers())

    async def add(self, request: Request) -> Response:
        """Store a passkey the browser created for the challenge handed out above."""
        person = await self.inbox.who(request)
        if person is None:
            return refusal("sign in first", 401, ErrorCode.UNAUTHENTICATED)
        try:
            body = await read_json(request)
            if not session.csrf_ok(request, body.get("csrf")):
                return refusal("this page has expired; reload it and try again", 403)
            name = str(body.get("name") or "").strip()[:NAME_MAX] or "Passkey"
            credential = body["credential"]
            said, key, now = challenge_of(credential), person_key(person), self.clock()
            handed = await self.db.run_write(lambda tx: stored.take(tx, said, key, now))
            if handed is None or handed.approval_id is not None:
                raise PasskeyRefused(
                    "this registration's challenge was not handed to you, or expired; try again"
                )
            cid, public_key, count = self.rp.registered(credential, base64url_to_bytes(handed.challenge))
        except PasskeyRefused as exc:
            return refusal(str(exc))
        new = stored.Passkey(cid, key, name, public_key, count, now)
        if not await self.db.run_write(lambda tx: stored.add(tx, new)):
            return refusal("this passkey is registered already", 409)
        log.info("passkey added", extra={"credential_id": cid})
        return JSONResponse({"ok": True, "redirect": "/inbox/passkeys"}, headers=self.inbox.headers())

    async def remove(self, request: Request) -> Response:
        signed = await self.inbox.signed_form(request)
        if isinstance(signed, Response):
            return signed
        person, _ = signed
        cid, key = request.path_params["credential_id"], person_key(person)
        if not await self.db.run_write(lambda tx: stored.remove(tx, key, cid)):
            return self.inbox.refused(request, person, "you hold no passkey by that id", 404)
        log.info("passkey removed", extra={"credential_id": cid})
        return RedirectResponse("/inbox/passkeys", status_code=303)


def check_assertion(
    rp: RelyingParty, credential: dict[str, Any], handed: stored.Challenge, key: stored.Passkey
) -> tuple[int, bool]:
    """`RelyingParty.asserted` for a challenge handed out for a step-up."""
    return rp.asserted(credential, base64url_to_bytes(handed.challenge), key)


def authentication_options(rp: RelyingParty, held: list[stored.Passkey]) -> tuple[str, str]:
    """A step-up's challenge (base64url) and its options as JSON."""
    challenge, options = rp.authentication(held)
    return bytes_to_base64url(challenge), options
