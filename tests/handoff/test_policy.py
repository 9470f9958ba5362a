"""A handoff in the policy: its section, the default timeout, and every mistake named by key path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.policy.rules import load_policy, load_policy_file
from contracts.enums import ApprovalMode
from contracts.errors import PolicyError

HANDOFF = """
[tools.publish_changes]
kind = "danger"
{extra}
[tools.publish_changes.handoff]
reason = "Publishing needs the owner's code"
steps = ["Open Settings", "Enter the code"]
expect = {{ url = "{url}", secret_env = "{env}" }}
{handoff_extra}
"""


def policy(
    extra: str = "", handoff_extra: str = "", url: str = "https://app.example/expect", env: str = "APP_SECRET"
) -> str:
    return HANDOFF.format(extra=extra, handoff_extra=handoff_extra, url=url, env=env)


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        load_policy(text)
    return caught.value.problems


def test_a_handoff_tool_is_mode_handoff_with_five_minutes() -> None:
    rule = load_policy(policy()).rule_for("acme", "publish_changes")
    assert rule.mode is ApprovalMode.HANDOFF and rule.timeout == 300.0
    assert rule.handoff is not None and rule.handoff.steps == ("Open Settings", "Enter the code")
    assert rule.describe() == "tools.publish_changes: danger → handoff"
    longer = load_policy(policy(handoff_extra='timeout = "10m"')).rule_for("acme", "publish_changes")
    assert longer.timeout == 600.0


def test_confirm_or_a_threshold_with_a_handoff_is_refused() -> None:
    (found,) = problems(policy(extra="confirm = true"))
    assert found.startswith("tools.publish_changes.confirm: confirm cannot be set together with a handoff")
    (found,) = problems(policy(extra='confirm = "always"'))
    assert found.startswith("tools.publish_changes.confirm:")
    tenant = policy() + "\n[tenants.acme.tools.publish_changes]\nconfirm = false\n"
    (found,) = problems(tenant)
    assert found.startswith("tenants.acme.tools.publish_changes.confirm: confirm cannot be set")
    threshold = policy(extra='allow_below = { parameter = "n", value = 5 }')
    assert problems(threshold)[0].startswith("tools.publish_changes.allow_below:")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            policy(url="/expect/publish"),
            'tools.publish_changes.handoff.expect.url: "/expect/publish" is not an absolute URL',
        ),
        (policy(url="ftp://app.example/x"), "tools.publish_changes.handoff.expect.url:"),
        (
            policy(env="1BAD-NAME"),
            'tools.publish_changes.handoff.expect.secret_env: "1BAD-NAME" is not an environment',
        ),
        (
            policy(handoff_extra="colour = 1"),
            "tools.publish_changes.handoff.colour: unknown key; "
            "expected one of expect, reason, steps, timeout",
        ),
        (policy(handoff_extra='timeout = "soon"'), "tools.publish_changes.handoff.timeout:"),
        (
            policy().replace('steps = ["Open Settings", "Enter the code"]', "steps = []"),
            "tools.publish_changes.handoff.steps: must list at least one step",
        ),
        (
            policy().replace('reason = "Publishing needs the owner\'s code"', ""),
            "tools.publish_changes.handoff.reason: missing; say why",
        ),
    ],
)
def test_every_handoff_mistake_names_its_key_path(text: str, expected: str) -> None:
    assert any(p.startswith(expected) for p in problems(text)), problems(text)


def test_an_unset_secret_env_is_refused_by_policy_check_and_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "policy.toml"
    file.write_text(policy(env="COSIGNER_TEST_UNSET_SECRET"), encoding="utf-8")
    monkeypatch.delenv("COSIGNER_TEST_UNSET_SECRET", raising=False)
    with pytest.raises(PolicyError) as caught:
        load_policy_file(file)
    assert caught.value.problems == [
        "tools.publish_changes.handoff.expect.secret_env: the variable COSIGNER_TEST_UNSET_SECRET "
        "is not set; set COSIGNER_TEST_UNSET_SECRET to the secret the application checks the "
        "expect call's signature with"
    ]
    assert load_policy_file(file, {"COSIGNER_TEST_UNSET_SECRET": "s3cret"}).tools
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    assert main(["policy", "check", str(file)]) == 2
    assert "COSIGNER_TEST_UNSET_SECRET is not set" in capsys.readouterr().err
    monkeypatch.setenv("COSIGNER_TEST_UNSET_SECRET", "s3cret")
    assert main(["policy", "check", str(file)]) == 0
    repo = Path(__file__).resolve().parents[2]
    env = {
        "PATH": "/usr/bin:/bin",
        # This tree's server and SDK, not whichever copy is installed in the environment.
        "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "sdk" / "python")]),
        "COSIGNER_SECRET": "serve-secret-" + "q" * 32,
        "COSIGNER_POLICY": str(file),
        "COSIGNER_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 's.db'}",
    }
    served = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--port", "0"],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 2 and "COSIGNER_TEST_UNSET_SECRET is not set" in served.stderr
    assert "Traceback" not in served.stderr
