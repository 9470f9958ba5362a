"""What a first user sees when a setting or an extra is missing: one error naming the fix.

Run in subprocesses, as a user runs them, so that what is printed is what is checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# `sys.modules["mcp"] = None` makes `import mcp` fail as it does where the extra is not installed.
WITHOUT_MCP = "import sys; sys.modules['mcp'] = None; "


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter without Cosigner's variables, plus `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COSIGNER_")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env}, timeout=60
    )


@pytest.mark.parametrize("argv", [["--help"], ["--upstream-cmd", "x", "--surface", "dashboard:u_1"]])
@pytest.mark.parametrize("command", ["cosigner-mcp-gateway", "cosigner mcp-gateway"])
def test_the_gateway_without_the_mcp_extra_says_what_to_install_and_exits_2(
    argv: list[str], command: str
) -> None:
    entry = (
        "from cosigner.mcp_gateway.cli import main"
        if command == "cosigner-mcp-gateway"
        else "from bot.cli import main"
    )
    given = argv if command == "cosigner-mcp-gateway" else ["mcp-gateway", *argv]
    done = python(f"{WITHOUT_MCP}{entry}; sys.exit(main({given!r}))")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == "error: the MCP gateway needs the mcp extra: pip install 'cosigner-sdk[mcp]'\n"


def test_the_gateway_in_code_without_the_mcp_extra_is_an_import_error_naming_the_extra() -> None:
    done = python(f"{WITHOUT_MCP}from cosigner.mcp_gateway import Gateway")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "ImportError: the MCP gateway needs the mcp extra: pip install 'cosigner-sdk[mcp]'"
    )


@pytest.mark.parametrize("client", ["Cosigner", "AsyncCosigner"])
def test_a_client_without_an_api_key_is_one_error_naming_the_variable_and_the_argument(client: str) -> None:
    done = python(f"from cosigner import {client}\n{client}(url='http://127.0.0.1:8000')")
    last = done.stderr.splitlines()[-1]
    assert done.returncode == 1
    assert last.startswith(
        "cosigner.errors.ConfigurationError: no API key: pass api_key= or set COSIGNER_API_KEY"
    )
    # The caller's line and the constructor's, none of the SDK's inner frames, no chained error.
    frames = [line for line in done.stderr.splitlines() if line.startswith("  File ")]
    assert len(frames) == 2 and Path(frames[1].split('"')[1]).name.endswith("client.py"), done.stderr
    assert "During handling" not in done.stderr


def test_a_client_without_a_url_names_the_variable_too() -> None:
    done = python("from cosigner import Cosigner\nCosigner(api_key='csk_x')")
    assert "no Cosigner URL: pass url= or set COSIGNER_URL" in done.stderr.splitlines()[-1]


def test_a_client_without_either_names_both_variables() -> None:
    done = python("from cosigner import Cosigner\nCosigner()")
    last = done.stderr.splitlines()[-1]
    assert last.startswith("cosigner.errors.ConfigurationError: no Cosigner URL and no API key")
    assert "COSIGNER_URL" in last and "COSIGNER_API_KEY" in last


def test_configuration_error_is_still_a_value_error() -> None:
    from cosigner.errors import ConfigurationError

    assert issubclass(ConfigurationError, ValueError)
