"""Where the framework examples find the sandbox that `./run dev` (`cosigner dev`) starts.

COSIGNER_URL (default http://127.0.0.1:8000) and COSIGNER_API_KEY (default: the key
`cosigner dev` wrote to demo.key in COSIGNER_DATA, default cosigner-data). The runs happen
in the sandbox's Slack channel, started by Alice: approve or deny them at /sandbox.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from cosigner import SlackSurface

URL = os.environ.get("COSIGNER_URL", "http://127.0.0.1:8000")
SLACK = SlackSurface(team_id="T0DEMO", channel_id="C0DEMO", user_id="U0ALICE")


def data_file(name: str) -> str:
    """A file `cosigner dev` wrote to its data folder (COSIGNER_DATA, default cosigner-data)."""
    data = os.environ.get("COSIGNER_DATA")
    for folder in (
        [Path(data)] if data else [Path("cosigner-data"), Path(__file__).parents[2] / "cosigner-data"]
    ):
        if (folder / name).is_file():
            return (folder / name).read_text(encoding="utf-8").strip()
    sys.exit(f"no {name}: start `./run dev` first and paste the `export …` line it prints")


def api_key() -> str:
    """COSIGNER_API_KEY, else the key file `cosigner dev` writes."""
    return os.environ.get("COSIGNER_API_KEY", "").strip() or data_file("demo.key")


def callback_secret() -> str:
    """The demo tenant's callback signing secret, which `cosigner dev` writes."""
    return data_file("demo.callback-secret")


def run_id(prefix: str) -> str:
    """A fresh execution (thread) id."""
    return f"{prefix}_{secrets.token_hex(4)}"


def say(line: str) -> None:
    """Print at once, even into a pipe."""
    print(line, flush=True)
