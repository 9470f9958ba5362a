"""Approvals: the engine, one approval's life (intake, answers, close), its bodies, grants,
trail, standing denies, and the desk surfaces answer through.
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.approvals.allowances import Allowances, allowance_to_wire
    from bot.approvals.batches import batch_of, group_key, listed_of, place_of, together
    from bot.approvals.bodies import Start, actor_of, decision_body, start_body
    from bot.approvals.collaborators import HandoffKind, Observe, Reach, Rules, Stores, Wakeups
    from bot.approvals.creating import create_prepared, prepare_request
    from bot.approvals.denials import Denials, setter, to_wire
    from bot.approvals.desk import Desk
    from bot.approvals.engine import Engine
    from bot.approvals.grants import GrantSigner, callback_secret
    from bot.approvals.judging import closed_error
    from bot.approvals.lifecycle import (
        EXECUTE_GRACE,
        Closing,
        new_id,
        queue_callback,
        queue_card_update,
        queue_execution,
        refused,
        stored,
    )
    from bot.approvals.notifier import Notifier
    from bot.approvals.prepare import Prepared

__all__ = [
    "EXECUTE_GRACE",
    "Allowances",
    "Closing",
    "Denials",
    "Desk",
    "Engine",
    "GrantSigner",
    "HandoffKind",
    "Notifier",
    "Observe",
    "Prepared",
    "Reach",
    "Rules",
    "Start",
    "Stores",
    "Wakeups",
    "actor_of",
    "allowance_to_wire",
    "batch_of",
    "callback_secret",
    "closed_error",
    "create_prepared",
    "decision_body",
    "group_key",
    "listed_of",
    "new_id",
    "place_of",
    "prepare_request",
    "queue_callback",
    "queue_card_update",
    "queue_execution",
    "refused",
    "setter",
    "start_body",
    "stored",
    "to_wire",
    "together",
]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.approvals.batches": ["batch_of", "group_key", "listed_of", "place_of", "together"],
        "bot.approvals.allowances": ["Allowances", "allowance_to_wire"],
        "bot.approvals.bodies": ["Start", "actor_of", "decision_body", "start_body"],
        "bot.approvals.denials": ["Denials", "setter", "to_wire"],
        "bot.approvals.desk": ["Desk"],
        "bot.approvals.collaborators": ["HandoffKind", "Observe", "Reach", "Rules", "Stores", "Wakeups"],
        "bot.approvals.creating": ["create_prepared", "prepare_request"],
        "bot.approvals.prepare": ["Prepared"],
        "bot.approvals.engine": ["Engine"],
        "bot.approvals.grants": ["GrantSigner", "callback_secret"],
        "bot.approvals.judging": ["closed_error"],
        "bot.approvals.lifecycle": [
            "EXECUTE_GRACE",
            "Closing",
            "new_id",
            "queue_callback",
            "queue_card_update",
            "queue_execution",
            "refused",
            "stored",
        ],
        "bot.approvals.notifier": ["Notifier"],
    },
)
