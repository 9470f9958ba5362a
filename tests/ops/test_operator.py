"""What a new operator does, as real processes: the README's steps and its promises.

`cosigner serve` refuses bad configuration with one clear line and exit 2; with a secret
and a policy it serves the README's curl flow on a fresh SQLite file; the CLI reads the
audit record it wrote. The docs name every setting and every policy key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.policy import schema as policy_file
from bot.settings import Settings
from tests.processes import REPO, clean_env, cosigner, free_port, serving

SECRET = "ops-operator-secret-" + "o" * 32


@pytest.mark.parametrize("case", ["no_secret", "bad_policy", "bad_shadow", "missing_policy", "sync_driver"])
def test_serve_refuses_bad_configuration_clearly(case: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[tools.refund]\nkind = "dangerous"\n[defaults]\ntimout = "5m"\n')
    good = tmp_path / "policy.toml"
    good.write_text((REPO / "policy.example.toml").read_text())
    env = {
        "no_secret": clean_env(tmp_path, COSIGNER_POLICY=str(good)),
        "bad_policy": clean_env(tmp_path, COSIGNER_POLICY=str(bad), COSIGNER_SECRET=SECRET),
        "bad_shadow": clean_env(
            tmp_path, COSIGNER_POLICY=str(good), COSIGNER_POLICY_SHADOW=str(bad), COSIGNER_SECRET=SECRET
        ),
        "missing_policy": clean_env(
            tmp_path, COSIGNER_POLICY=str(tmp_path / "nope.toml"), COSIGNER_SECRET=SECRET
        ),
        "sync_driver": clean_env(
            tmp_path,
            COSIGNER_POLICY=str(good),
            COSIGNER_SECRET=SECRET,
            COSIGNER_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}",
        ),
    }[case]
    done = cosigner(env, "serve", "--port", str(free_port()), cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    expected = {
        "no_secret": ["COSIGNER_SECRET is not set"],
        "bad_policy": ["tools.refund.kind", "defaults.timout"],
        "bad_shadow": ["bad.toml", "tools.refund.kind", "defaults.timout"],
        "missing_policy": ["nope.toml", "cannot read the file"],
        "sync_driver": ["sqlite+aiosqlite://"],
    }[case]
    for text in expected:
        assert text in done.stderr, done.stderr


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, str, dict[str, str]]]:
    """README "Running it for real": policy, tenant, `cosigner serve` on a fresh SQLite file."""
    policy = tmp_path / "policy.toml"
    policy.write_text((REPO / "policy.example.toml").read_text())
    env = clean_env(tmp_path, COSIGNER_SECRET=SECRET, COSIGNER_POLICY=str(policy))
    checked = cosigner(env, "policy", "check", str(policy), cwd=tmp_path)
    assert checked.returncode == 0 and "OK" in checked.stdout, checked
    created = cosigner(env, "tenants", "create", "acme", cwd=tmp_path)
    assert created.returncode == 0, created
    key = re.search(r"^agent key[^:]*: (csk_\S+)", created.stdout, re.M)
    approver = re.search(r"^approver key[^:]*: (csa_\S+)", created.stdout, re.M)
    assert key and approver and "callback signing secret: whsec_" in created.stdout, created.stdout
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(env, tmp_path, port, tmp_path / "serve.log", terminate=True):
        yield url, key.group(1), approver.group(1), env


@pytest.mark.slow
def test_the_readme_flow_on_a_real_server(
    served: tuple[str, str, str, dict[str, str]], tmp_path: Path
) -> None:
    url, key, approver, env = served
    ready = httpx.get(f"{url}/readyz").json()
    assert ready == {"status": "ready", "database": "sqlite", "surfaces": ["dashboard"]}
    auth = {"Authorization": f"Bearer {key}"}
    r = httpx.post(
        f"{url}/v1/approvals",
        headers=auth,
        json={
            "executionId": "run_81",
            "toolCallId": "call_7",
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"},
            "reason": "Customer says the discount was not applied",
            "surface": {"type": "dashboard", "userId": "u_42"},
            "timeoutSeconds": 300,
        },
    )
    assert r.status_code == 201, r.text
    start = r.json()
    assert start["type"] == "approval_start" and start["status"] == "pending"
    assert start["parameters"]["cardToken"] == "[REDACTED]"
    apv = start["approvalId"]

    # While pending, GET (with or without wait) answers 200 with the approval_start body.
    for query in ("", "?wait=1"):
        r = httpx.get(f"{url}/v1/approvals/{apv}{query}", headers=auth, timeout=5)
        assert r.status_code == 200 and r.json() == start, r.text
    r = httpx.get(f"{url}/v1/approvals/{apv}?wait=61", headers=auth)
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_REQUEST"

    r = httpx.post(
        f"{url}/v1/approvals/{apv}/decision", headers=auth, json={"decision": "approve", "userId": "u_42"}
    )
    assert r.status_code == 403 and r.json()["error"]["code"] == "KEY_SCOPE", r.text
    auth = {"Authorization": f"Bearer {approver}"}
    r = httpx.post(
        f"{url}/v1/approvals/{apv}/decision",
        headers=auth,
        json={"decision": "approve", "userId": "u_mallory"},
    )
    assert r.status_code == 403 and r.json()["error"]["code"] == "NOT_AN_APPROVER", r.text
    r = httpx.post(
        f"{url}/v1/approvals/{apv}/decision",
        headers=auth,
        json={"decision": "approve", "userId": "u_42", "comment": "ok"},
    )
    assert r.status_code == 200, r.text
    decided = r.json()
    assert decided["status"] == "approved" and decided["grant"]
    assert decided["decidedBy"] == {"kind": "person", "surface": "dashboard", "userId": "u_42"}
    r = httpx.post(
        f"{url}/v1/approvals/{apv}/decision", headers=auth, json={"decision": "deny", "userId": "u_42"}
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "ALREADY_DECIDED", r.text

    shown = cosigner(env, "audit", "show", apv, cwd=tmp_path)
    assert shown.returncode == 0, shown
    assert [line.split()[2] for line in shown.stdout.splitlines()] == [
        "requested",
        "decision_refused",
        "approved",
        "decision_refused",
    ]
    assert "tok_x" not in shown.stdout
    verified = cosigner(env, "audit", "verify", cwd=tmp_path)
    assert verified.returncode == 0 and "audit OK: 4 events" in verified.stdout, verified
    exported = cosigner(env, "audit", "export", "--since", "2000-01-01T00:00:00Z", cwd=tmp_path)
    assert exported.returncode == 0 and len(exported.stdout.splitlines()) == 4, exported


def test_the_readme_names_every_setting() -> None:
    readme = (REPO / "README.md").read_text()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        env_name = alias.choices[0] if alias is not None else name.upper()  # type: ignore[union-attr]
        assert f"`{env_name}`" in readme, f"README's table does not name {env_name}"


def test_the_example_policy_shows_every_key() -> None:
    text = (REPO / "policy.example.toml").read_text()
    groups = {
        "defaults": policy_file.Defaults.model_fields,
        "tools": policy_file.ToolSection.model_fields,
        "tenants": policy_file.TenantPolicy.model_fields,
        "staff": policy_file.StaffPolicy.model_fields,
        "operations": policy_file.OperationSection.model_fields,
    }
    for group, keys in groups.items():
        for key in keys:
            shown = re.search(rf"^#?\s*{key}\s*=|[#,{{]\s*{key}\s*=|\[tenants\.\w+\.{key}[.\]]", text, re.M)
            assert shown, f"policy.example.toml does not show {group} key {key!r}"
