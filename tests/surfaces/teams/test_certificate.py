"""Certificate authentication for the bot's app: a token obtained with a signed client
assertion (no password) from a loopback token endpoint that checks it as Entra ID does."""

from __future__ import annotations

import datetime
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from bot.http.app import ConfigurationError, build_app, partial_configuration, parts_of
from bot.policy import load_policy
from bot.settings import Settings
from contracts.errors import SurfaceUnavailable
from surfaces.teams import CertificateError, ClientCertificate, TeamsConfig, TeamsConfigError
from surfaces.teams.auth import ClientCredentials
from surfaces.teams.certificate import ASSERTION_TYPE
from surfaces.teams.emulator import TeamsEmulator
from tests.harness import TEST_SECRET, ManualClock
from tests.surfaces.teams.world import APP_ID, HOME, PASSWORD, POLICY, posted, request, teams_app

PFX_PASSWORD = "pfx-pass"


def make_certificate(
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | None = None,
) -> tuple[object, x509.Certificate]:
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cosigner-bot")])
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    return key, cert


def write_pfx(path: Path, key: object, cert: x509.Certificate, password: str | None = PFX_PASSWORD) -> Path:
    crypt = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"bot", key, cert, None, crypt))  # type: ignore[arg-type]
    return path


def write_pem(path: Path, key: rsa.RSAPrivateKey, cert: x509.Certificate) -> Path:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.write_bytes(pem + cert.public_bytes(serialization.Encoding.PEM))
    return path


async def test_a_token_is_obtained_with_a_client_assertion_and_no_password(tmp_path: Path) -> None:
    key, cert = make_certificate()
    certificate = ClientCertificate.load(write_pfx(tmp_path / "bot.pfx", key, cert), PFX_PASSWORD)
    clock = ManualClock()
    async with TeamsEmulator.running(
        app_id=APP_ID, app_password=PASSWORD, tenant_id=HOME, clock=clock
    ) as emu:
        emu.trust_certificate(certificate.der)
        config = TeamsConfig(
            app_id=APP_ID, app_password=None, app_tenant_id=HOME, api_url=emu.api_url, certificate=certificate
        )
        sent: list[httpx.Request] = []
        async with httpx.AsyncClient(event_hooks={"request": [lambda r: _keep(sent, r)]}) as http:
            creds = ClientCredentials(config.token_url, APP_ID, None, http, clock, certificate)
            token = await creds.token()
            assert token in emu.tokens
            assert await creds.token() == token  # cached until five minutes before it expires
        body = sent[0].content.decode()
        assert "client_secret" not in body and "client_assertion_type=" in body
        [seen] = emu.assertions
        assert seen["claims"]["aud"] == config.token_url
        assert seen["claims"]["iss"] == seen["claims"]["sub"] == APP_ID
        assert seen["claims"]["exp"] - seen["claims"]["nbf"] == 600
        assert "x5c" not in seen["header"] and seen["header"]["alg"] == "RS256"


async def _keep(sent: list[httpx.Request], request: httpx.Request) -> None:
    await request.aread()
    sent.append(request)


async def test_a_card_is_delivered_and_answered_with_certificate_auth(tmp_path: Path) -> None:
    key, cert = make_certificate()
    certificate = ClientCertificate.load(write_pem(tmp_path / "bot.pem", key, cert), send_x5c=True)  # type: ignore[arg-type]
    async with teams_app(certificate=certificate) as (h, emu):
        api_key = await h.create_tenant("acme")
        approval_id = await request(h, api_key)
        card = await posted(h, emu, approval_id)
        assert card.buttons == ["approve", "deny"]
        [seen] = emu.assertions
        assert seen["header"]["x5c"] == [certificate.der_base64]


async def test_a_certificate_the_app_registration_does_not_hold_gets_no_token(tmp_path: Path) -> None:
    key, cert = make_certificate()
    certificate = ClientCertificate.load(write_pfx(tmp_path / "bot.pfx", key, cert, None))
    clock = ManualClock()
    async with TeamsEmulator.running(
        app_id=APP_ID, app_password=PASSWORD, tenant_id=HOME, clock=clock
    ) as emu:
        _, other = make_certificate()
        emu.trust_certificate(other.public_bytes(serialization.Encoding.DER))
        config = TeamsConfig(
            app_id=APP_ID, app_password=None, app_tenant_id=HOME, api_url=emu.api_url, certificate=certificate
        )
        async with httpx.AsyncClient() as http:
            creds = ClientCredentials(config.token_url, APP_ID, None, http, clock, certificate)
            with pytest.raises(SurfaceUnavailable, match="check MICROSOFT_APP_ID, MICROSOFT_APP_CERTIFICATE"):
                await creds.token()
            # An assertion replayed (the same jti) is refused too: each request signs a new one.
            assertion = certificate.assertion(APP_ID, config.token_url, clock())
            emu.trust_certificate(certificate.der)
            form = {
                "grant_type": "client_credentials",
                "client_id": APP_ID,
                "scope": "https://api.botframework.com/.default",
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": assertion,
            }
            assert (await http.post(config.token_url, data=form)).status_code == 200
            assert (await http.post(config.token_url, data=form)).status_code == 401
            # Signed for another endpoint: refused.
            elsewhere = certificate.assertion(
                APP_ID, "https://login.microsoftonline.com/x/oauth2/v2.0/token", clock()
            )
            refused = await http.post(config.token_url, data={**form, "client_assertion": elsewhere})
            assert refused.status_code == 401
    assert jwt.get_unverified_header(assertion)["x5t"]


def test_an_unusable_file_is_refused_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(CertificateError, match=r"MICROSOFT_APP_CERTIFICATE \(.*missing.pfx\) cannot be read"):
        ClientCertificate.load(tmp_path / "missing.pfx")
    key, cert = make_certificate()
    pfx = write_pfx(tmp_path / "bot.pfx", key, cert)
    with pytest.raises(CertificateError, match="MICROSOFT_APP_CERTIFICATE_PASSWORD does not open it"):
        ClientCertificate.load(pfx, "wrong")
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(CertificateError, match="not a PKCS#12"):
        ClientCertificate.load(tmp_path / "junk.pem")
    ec_key, ec_cert = make_certificate(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(CertificateError, match="RSA private key"):
        ClientCertificate.load(write_pfx(tmp_path / "ec.pfx", ec_key, ec_cert), PFX_PASSWORD)


def test_password_and_certificate_together_are_refused(tmp_path: Path) -> None:
    key, cert = make_certificate()
    certificate = ClientCertificate.load(write_pfx(tmp_path / "bot.pfx", key, cert), PFX_PASSWORD)
    with pytest.raises(TeamsConfigError, match="not both"):
        TeamsConfig(app_id=APP_ID, app_password=PASSWORD, app_tenant_id=HOME, certificate=certificate)
    with pytest.raises(TeamsConfigError, match="set MICROSOFT_APP_PASSWORD or MICROSOFT_APP_CERTIFICATE"):
        TeamsConfig(app_id=APP_ID, app_password=None, app_tenant_id=HOME)


def settings(**env: str) -> Settings:
    return Settings(**{"COSIGNER_SECRET": TEST_SECRET, **env})  # type: ignore[arg-type]


def test_the_certificate_variables_turn_teams_on_through_the_app_factory(tmp_path: Path) -> None:
    key, cert = make_certificate()
    pfx = write_pfx(tmp_path / "bot.pfx", key, cert)
    env = {
        "MICROSOFT_APP_ID": APP_ID,
        "MICROSOFT_APP_CERTIFICATE": str(pfx),
        "MICROSOFT_APP_CERTIFICATE_PASSWORD": PFX_PASSWORD,
        "MICROSOFT_APP_SEND_X5C": "true",
        "MICROSOFT_APP_TENANT_ID": HOME,
    }
    app = build_app(settings(**env), policy=load_policy(POLICY), run_workers=False)
    teams = parts_of(app).surfaces["teams"]
    config = teams.config  # type: ignore[attr-defined]
    assert config.certificate is not None and config.certificate.send_x5c and config.app_password is None
    with pytest.raises(ConfigurationError, match="MICROSOFT_APP_CERTIFICATE_PASSWORD does not open it"):
        build_app(
            settings(**{**env, "MICROSOFT_APP_CERTIFICATE_PASSWORD": "wrong"}), policy=load_policy(POLICY)
        )
    partial = settings(MICROSOFT_APP_ID=APP_ID, MICROSOFT_APP_TENANT_ID=HOME)
    assert partial_configuration(partial) == [
        "Teams is off: MICROSOFT_APP_PASSWORD or MICROSOFT_APP_CERTIFICATE is not set"
    ]
    with pytest.raises(ValueError) as caught:
        settings(**{**env, "MICROSOFT_APP_SEND_X5C": "sometimes"})
    assert "MICROSOFT_APP_SEND_X5C" in str(caught.value) or "microsoft_app_send_x5c" in str(caught.value)
    assert PFX_PASSWORD not in str(caught.value)
