"""Where the hook finds Cosigner: URL, agent key, surface and time budget.

Each comes from an environment variable or, failing that, from the hook's config file
(`COSIGNER_HOOK_CONFIG`, else `$XDG_CONFIG_HOME/cosigner/hook.toml`, else
`~/.config/cosigner/hook.toml`):

    url = "https://cosigner.example.com"      # COSIGNER_URL
    api_key = "csk_agent_…"                    # COSIGNER_API_KEY (keep the file mode 600)
    surface = "slack:T0ACME/D0ALICE/U0ALICE"   # COSIGNER_SURFACE: where the person is asked
    timeout = 290                              # COSIGNER_HOOK_TIMEOUT, seconds (--timeout wins)

A value that is missing or malformed is a `HookConfigError` naming the variable or key,
and the hook denies the call with it: it never runs a call it could not ask about.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DEFAULT_TIMEOUT", "HookConfigError", "HookSettings", "config_path", "load_settings"]

DEFAULT_TIMEOUT = 290.0
"""Seconds the hook waits at most: under the 300 s `timeout` the docs put in the agent's
settings (Claude Code's default is 600 s), so the hook answers before the agent gives up."""

CONFIG_ENV = "COSIGNER_HOOK_CONFIG"
_KEYS = {"url": "COSIGNER_URL", "api_key": "COSIGNER_API_KEY", "surface": "COSIGNER_SURFACE"}
TIMEOUT_ENV = "COSIGNER_HOOK_TIMEOUT"


class HookConfigError(ValueError):
    """The hook's configuration is missing or malformed; the message names the fix."""


class HookSettings:
    """What the hook needs to ask Cosigner."""

    __slots__ = ("api_key", "surface", "timeout", "url")

    def __init__(self, url: str, api_key: str, surface: str, timeout: float) -> None:
        self.url = url
        self.api_key = api_key
        self.surface = surface
        self.timeout = timeout


def config_path(env: Mapping[str, str]) -> Path:
    """The config file the hook reads (it need not exist)."""
    given = env.get(CONFIG_ENV)
    if given:
        return Path(given)
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "cosigner" / "hook.toml"


def load_settings(env: Mapping[str, str] | None = None, timeout: float | None = None) -> HookSettings:
    """The settings from `env` (default: this process's) and the config file; `timeout`
    (the `--timeout` flag) wins over both."""
    env = os.environ if env is None else env
    path = config_path(env)
    file = _read(path, explicit=bool(env.get(CONFIG_ENV)))
    values: dict[str, str] = {}
    for key, var in _KEYS.items():
        value = env.get(var) or file.get(key)
        if value is None or value == "":
            raise HookConfigError(f"{var} is not set (nor `{key}` in {path}); the hook cannot ask Cosigner")
        if not isinstance(value, str):
            raise HookConfigError(f"`{key}` in {path} must be a string")
        values[key] = value
    if timeout is None:
        raw = env.get(TIMEOUT_ENV) or file.get("timeout")
        timeout = (
            DEFAULT_TIMEOUT
            if raw is None
            else _seconds(raw, TIMEOUT_ENV if env.get(TIMEOUT_ENV) else f"`timeout` in {path}")
        )
    return HookSettings(values["url"], values["api_key"], values["surface"], timeout)


def _seconds(raw: object, where: str) -> float:
    try:
        value = float(raw) if isinstance(raw, int | float | str) and not isinstance(raw, bool) else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise HookConfigError(f"{where} must be a positive number of seconds")
    return value


def _read(path: Path, *, explicit: bool) -> dict[str, object]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise HookConfigError(f"{CONFIG_ENV} names {path}, which does not exist") from None
        return {}
    except OSError as exc:
        raise HookConfigError(f"cannot read {path}: {exc.strerror}") from None
    import tomllib  # only when there is a file: most hooks are set up by environment variables

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HookConfigError(f"{path} is not valid TOML ({exc})") from None
