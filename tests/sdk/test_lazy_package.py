"""`cosigner` loads its public names on first use, and every one is still importable."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import cosigner


@pytest.mark.parametrize("name", cosigner.__all__)
def test_every_public_name_is_the_object_of_its_module(name: str) -> None:
    value = getattr(cosigner, name)
    homes = cosigner._HOMES
    if name in homes:
        assert getattr(importlib.import_module(f"cosigner.{homes[name]}"), name) is value
    else:
        assert value is importlib.import_module(f"cosigner.{name}")


def test_a_name_that_is_not_public_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Cosignr'"):
        _ = cosigner.Cosignr  # type: ignore[attr-defined]


def test_import_star_and_the_client_module_work_in_a_fresh_process() -> None:
    code = (
        "from cosigner import *\n"
        "import sys, cosigner\n"
        "assert Cosigner.__name__ == 'Cosigner' and SlackSurface and errors.AlreadyDecided\n"
        "assert cosigner.client.Cosigner is Cosigner\n"
        "print(sorted(set(cosigner.__all__) - set(dir(cosigner))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_importing_a_submodule_does_not_load_the_client() -> None:
    code = (
        "import sys, cosigner.strict_json; print('cosigner.client' in sys.modules, 'pydantic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "False False", done.stderr
