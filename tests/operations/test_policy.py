"""`[operations.NAME]` in the policy: parsed strictly, overridden per tenant, and refused by
`serve` and `policy check` when its secret variable is unset or its url is not absolute."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.policy.rules import load_policy
from contracts.errors import PolicyError
from tests.processes import free_port

POLICY = """
[operations."order.refund_missing_discount"]
url = "https://orders.example/cosigner"
secret_env = "ORDERS_CONTRACT_SECRET"
kind = "danger"
approvers = ["tenant_admins"]
timeout = "30m"

[tenants.acme.operations."order.refund_missing_discount"]
approvers = ["requester"]
execute_timeout = "5s"
"""


def test_an_operation_is_parsed_and_a_tenant_overrides_it() -> None:
    policy = load_policy(POLICY)
    base = policy.operation_rule("globex", "order.refund_missing_discount")
    own = policy.operation_rule("acme", "order.refund_missing_discount")
    assert base is not None and own is not None
    assert (base.url, base.timeout, base.execute_timeout, base.prepare_timeout) == (
        "https://orders.example/cosigner",
        1800.0,
        30.0,
        10.0,
    )
    assert [a.value for a in base.approvers] == ["tenant_admins"]
    assert [a.value for a in own.approvers] == ["requester"] and own.execute_timeout == 5.0
    assert own.source == 'tenants.acme.operations."order.refund_missing_discount"'
    assert policy.operation_rule("acme", "order.other") is None


def test_every_mistake_is_named_with_its_key_path() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(
            """
[operations.pay]
url = "orders.example/cosigner"
secret_env = "not a name"
execute_timeout = "soon"
[operations.ship]
kind = "read"
[tenants.acme.operations.unknown]
kind = "read"
"""
        )
    problems = "\n".join(caught.value.problems)
    assert 'operations.pay.url: "orders.example/cosigner" is not an absolute http(s) URL' in problems
    assert "operations.pay.secret_env:" in problems and "operations.pay.execute_timeout:" in problems
    assert "operations.ship.url: missing" in problems and "operations.ship.secret_env: missing" in problems
    assert "tenants.acme.operations.unknown: there is no [operations.unknown]" in problems


def test_policy_check_refuses_an_unset_secret_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    monkeypatch.delenv("ORDERS_CONTRACT_SECRET", raising=False)
    assert main(["policy", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "secret_env: the variable ORDERS_CONTRACT_SECRET is not set" in err
    monkeypatch.setenv("ORDERS_CONTRACT_SECRET", "s3cr3t-value")
    assert main(["policy", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "operations: order.refund_missing_discount" in out and "s3cr3t" not in out


def test_serve_refuses_to_start_without_the_secret(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(POLICY)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("COSIGNER_", "SLACK_", "TWILIO_", "ORDERS_"))
    }
    env.update(
        COSIGNER_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'c.db'}",
        COSIGNER_SECRET="serve-secret-" + "x" * 32,
        COSIGNER_POLICY=str(tmp_path / "policy.toml"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--port", str(free_port())],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "ORDERS_CONTRACT_SECRET is not set" in done.stderr and "Traceback" not in done.stderr


def test_staff_approvers_need_a_staff_section() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(POLICY.replace('approvers = ["tenant_admins"]', 'approvers = ["staff"]'))
    assert any(
        p.startswith('operations."order.refund_missing_discount".approvers: names "staff"')
        for p in caught.value.problems
    )
