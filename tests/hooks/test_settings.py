"""The hook's settings: environment first, then its config file; a gap is named, never guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cosigner.hooks.settings import DEFAULT_TIMEOUT, HookConfigError, config_path, load_settings

ENV = {"COSIGNER_URL": "http://127.0.0.1:8000", "COSIGNER_API_KEY": "k", "COSIGNER_SURFACE": "dashboard:u_1"}


def test_the_environment_gives_everything(tmp_path: Path) -> None:
    got = load_settings({**ENV, "HOME": str(tmp_path)})
    assert (got.url, got.api_key, got.surface, got.timeout) == (
        "http://127.0.0.1:8000",
        "k",
        "dashboard:u_1",
        DEFAULT_TIMEOUT,
    )


def test_the_config_file_fills_what_the_environment_leaves(tmp_path: Path) -> None:
    home = tmp_path / "cosigner"
    home.mkdir()
    (home / "hook.toml").write_text(
        'url = "http://file"\napi_key = "fk"\nsurface = "sms:+15550100200"\ntimeout = 45\n'
    )
    env = {"XDG_CONFIG_HOME": str(tmp_path), "COSIGNER_URL": "http://env"}
    assert config_path(env) == home / "hook.toml"
    got = load_settings(env)
    assert (got.url, got.api_key, got.surface, got.timeout) == ("http://env", "fk", "sms:+15550100200", 45.0)
    assert load_settings(env, timeout=7).timeout == 7  # --timeout wins


@pytest.mark.parametrize("missing", sorted(ENV))
def test_a_missing_setting_names_its_variable(tmp_path: Path, missing: str) -> None:
    env = {k: v for k, v in ENV.items() if k != missing} | {"HOME": str(tmp_path)}
    with pytest.raises(HookConfigError, match=missing):
        load_settings(env)


@pytest.mark.parametrize("text", ['url = "x"\nurl = "y"\n', "url = [1\n"])
def test_a_config_file_that_is_not_toml_is_named(tmp_path: Path, text: str) -> None:
    path = tmp_path / "hook.toml"
    path.write_text(text)
    with pytest.raises(HookConfigError, match="not valid TOML"):
        load_settings({"COSIGNER_HOOK_CONFIG": str(path)})


def test_a_named_config_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HookConfigError, match="does not exist"):
        load_settings({**ENV, "COSIGNER_HOOK_CONFIG": str(tmp_path / "nope.toml")})


@pytest.mark.parametrize("raw", ["0", "-3", "soon", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(tmp_path: Path, raw: str) -> None:
    with pytest.raises(HookConfigError, match="COSIGNER_HOOK_TIMEOUT"):
        load_settings({**ENV, "HOME": str(tmp_path), "COSIGNER_HOOK_TIMEOUT": raw})


def test_a_wrongly_typed_value_in_the_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "hook.toml"
    path.write_text("url = 3\n")
    with pytest.raises(HookConfigError, match="`url`"):
        load_settings({"COSIGNER_HOOK_CONFIG": str(path), "COSIGNER_API_KEY": "k", "COSIGNER_SURFACE": "api"})
