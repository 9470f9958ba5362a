"""The server's name for the names the API and the policy agree on, defined in `cosigner.names`."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.names import *  # noqa: F403


def fold(name: str) -> str:
    """The form a tool or operation name is looked up in: `Delete_account` is `delete_account`.

    Names match case-insensitively wherever a rule or a standing deny is looked up, so a
    change of case never escapes a deny; the name as sent stays on the card and in the grant.
    """
    return name.casefold()
