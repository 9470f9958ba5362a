"""The events a closing writes are built from their models (`contracts.audit_events`), and
are stored byte for byte as the dicts written before them were: the same data, the same
hashes, so chains written before verify and exports read the same. The rows below were
recorded from the tree before, with the same approvals, answers and clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.approvals import lifecycle as approval
from contracts.answers import AgentDecider, PersonDecider, SystemDecider
from contracts.edits import EditResult, EditState
from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import CosignerError, NotAnApprover
from storage import ledger
from storage.audit import AuditRow, Event
from storage.database import Database
from storage.records import Changes, Record
from storage.work import Work
from tests.harness import database
from tests.storage.test_direct import values

ANN = PersonDecider(surface=SurfaceType.DASHBOARD, userId="u_ann")
BOB = PersonDecider(surface=SurfaceType.DASHBOARD, userId="u_bob")
EDITED = {
    "edited": {
        "parameters": {"orderId": "o2"},
        "fields": ["orderId"],
        "changed": ["orderId"],
        "digest": "sha256:" + "b" * 64,
        "originalDigest": "sha256:" + "0" * 64,
    }
}
RESULT = EditResult(
    parameters={"orderId": "o2"},
    fields=("orderId",),
    digest="sha256:" + "b" * 64,
    by="u_ann",
    surface="dashboard",
)
EDIT = EditState(fields=("orderId",)).model_dump_json(by_alias=True, exclude_none=True)
AN_EDIT = Changes(edit=EditState(fields=("orderId",), result=RESULT))

# (approval, seq, event, actor, data, hash) as the tree before wrote them.
BEFORE = [
    (
        "apv_a",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "30de642641e746e1f09d804cd5ea08ade5dbc252866897f8fdfa6902a95d800c",
    ),
    (
        "apv_a",
        2,
        "approved",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        '{"comment":"ok"}',
        "7b08a6ec60bd285773544c0c3cc9ad8b7db2a5048eb156189a176b1503914076",
    ),
    (
        "apv_b",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "48842eddcc3172925a425a4c8383dc3d4df67bc6e023ad1f3a389035e1f86639",
    ),
    (
        "apv_b",
        2,
        "decision_refused",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        '{"code":"NOT_AN_APPROVER","message":"u_ann is not an approver of this one","wanted":"denied"}',
        "24ba82eb20e657e9f51328c168377595dc3ed41637bdba57bc16aa69bd845ff6",
    ),
    (
        "apv_c",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "e80aca9cd76ff0a2556596e71a8197220690e468bb7b8b709842cda17cd4af7f",
    ),
    (
        "apv_c",
        2,
        "approval_counted",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        '{"comment":"one","count":1,"quorum":2}',
        "deade0dcef7daa90b44fd6a497a5c2872cbb85f28cded72c515c2de05741ac20",
    ),
    (
        "apv_c",
        3,
        "approval_counted",
        '{"kind":"person","surface":"dashboard","userId":"u_bob"}',
        '{"comment":"two","count":2,"quorum":2}',
        "9224a20ad5792b54f09b17120d897fd91030b6fd577af54e9dfd3322191fefa6",
    ),
    (
        "apv_c",
        4,
        "approved",
        '{"kind":"person","surface":"dashboard","userId":"u_bob"}',
        (
            '{"approvers":[{"by":"u_ann","surface":"dashboard"},{"by":"u_bob","surface":"dashboard"}],"'
            'comment":"two"}'
        ),
        "39c735ebf419ec2b357d64713c90bf17df8d957c80b8856fe74eeb0f44651b57",
    ),
    (
        "apv_d",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "a76a5d9cd77847ad6720812b3c5985c434b5b1a82f0ec8d77bf1040ba00f7be0",
    ),
    (
        "apv_d",
        2,
        "approved",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        (
            '{"comment":null,"edited":{"changed":["orderId"],"digest":"sha256:bbbbbbbbbbbbbbbbbbbbbbbbb'
            'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","fields":["orderId"],"originalDigest":"sha256:000'
            '0000000000000000000000000000000000000000000000000000000000000","parameters":{"orderId":"o2'
            '"}}}'
        ),
        "e75f8d99aa35da99baaa5cdad4cc299e14ddb8f4bda6530ee4c3abe6365faf8a",
    ),
    (
        "apv_e",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "5b9441082d38c43573cdcdde43e84f2ed4907d7088e61c1cf05df463d8a61013",
    ),
    (
        "apv_e",
        2,
        "approval_counted",
        '{"kind":"person","surface":"dashboard","userId":"u_bob"}',
        '{"comment":"first","count":1,"quorum":2}',
        "e75b2c88ec8dacbfb82f5a6ce97d7c920691297c667bad3761f36654d919a13e",
    ),
    (
        "apv_e",
        3,
        "call_edited",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        (
            '{"edited":{"changed":["orderId"],"digest":"sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb'
            'bbbbbbbbbbbbbbbbbbbbbbbb","fields":["orderId"],"originalDigest":"sha256:000000000000000000'
            '0000000000000000000000000000000000000000000000","parameters":{"orderId":"o2"}}}'
        ),
        "9006f06a3a9d6a48c3e95873b1647d5efd7f679ce2b81ea2e09afd154ea82fbc",
    ),
    (
        "apv_e",
        4,
        "approvals_set_aside",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        (
            '{"approvedDigest":"sha256:0000000000000000000000000000000000000000000000000000000000000000'
            '","approvers":[{"by":"u_bob","surface":"dashboard"}],"digest":"sha256:bbbbbbbbbbbbbbbbbbbb'
            'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","reason":"they approved a version of the cal'
            'l that an edit replaced"}'
        ),
        "c42705da585fc418050787a647da3abe47e8f999d25df5fc4d74174a11973f19",
    ),
    (
        "apv_e",
        5,
        "approval_counted",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        '{"comment":"edit","count":1,"quorum":2}',
        "0dc33b508cb19af99bf689385988d4a1e7cfa1a4d6e0dbc1c6da8c4b3bbc74b3",
    ),
    (
        "apv_f",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "95811954122bd482c7d173dc7194bea9ce07c321c9c3b9e7a64f7b8f8ce77a91",
    ),
    (
        "apv_f",
        2,
        "decision_refused",
        '{"kind":"person","surface":"dashboard","userId":"u_ann"}',
        (
            '{"code":"APPROVAL_EXPIRED","message":"approval apv_f expired before this answer; expiry me'
            'ans deny and nothing was done","wanted":"approved"}'
        ),
        "0543c37973a725043ae6ea06e9a323ce9d19c65cb7b12ba69755f22855861222",
    ),
    (
        "apv_f",
        3,
        "expired",
        '{"kind":"timeout"}',
        '{"comment":null}',
        "a43cb595594aba0bffc531e95fd3b954d77fbbd618345d6942af58388c3f8365",
    ),
    (
        "apv_g",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "c5dce4beff0da6156e994e0f6b31e8a19eb99e68de029a2e879765a11770f7ea",
    ),
    (
        "apv_g",
        2,
        "denied",
        '{"code":"SURFACE_UNAVAILABLE","kind":"system"}',
        '{"comment":"gone"}',
        "e5e5bf9e94027dcb7db7c89050b49379e5229eff46e09caa75e236e72c9e1a72",
    ),
    (
        "apv_h",
        1,
        "requested",
        '{"kind":"agent"}',
        "{}",
        "4d9c4d5e4901ee07af44b08d5d52663e9b3d9ac1a5b26eb0ce0d18abcdad0e06",
    ),
    (
        "apv_h",
        2,
        "cancelled",
        '{"kind":"agent"}',
        '{"comment":null}',
        "375b03ae5baff4b36af27e58de540a4fdb59d85279bbd23f07dca2de2aeed246",
    ),
]


def refuse(rec: Record) -> None:
    raise NotAnApprover("u_ann is not an approver of this one")


async def make(db: Database, approval_id: str, **changes: Any) -> None:
    row = values(approval_id, created_at=1000.5, **changes)
    requested = [Event("requested", {"kind": "agent"}, {})]
    await db.run_write(lambda tx: ledger.insert_approval(tx, row, requested))


async def close(db: Database, approval_id: str, c: approval.Closing, now: float) -> None:
    try:
        await db.run_write(lambda tx: approval.close(tx, approval_id, c, lambda: now, callback_window=60.0))
    except CosignerError:
        pass


def events_of(approval_id: str) -> Callable[[Work], list[AuditRow]]:
    return lambda tx: ledger.events_of(tx, approval_id)


async def test_closing_events_are_stored_as_before_byte_for_byte() -> None:
    async with database("sqlite") as db:
        await make(db, "apv_a")
        await close(db, "apv_a", approval.Closing(ApprovalStatus.APPROVED, ANN, comment="ok"), 2000.0)
        await make(db, "apv_b")
        refused = approval.Closing(ApprovalStatus.DENIED, ANN, check=refuse, audit_refusal=True)
        await close(db, "apv_b", refused, 2000.0)
        await make(db, "apv_c", quorum=2)
        await close(db, "apv_c", approval.Closing(ApprovalStatus.APPROVED, ANN, comment="one"), 2000.0)
        await close(db, "apv_c", approval.Closing(ApprovalStatus.APPROVED, BOB, comment="two"), 2001.0)
        await make(db, "apv_d", edit=EDIT)
        edited = approval.Closing(ApprovalStatus.APPROVED, ANN, data=EDITED, changes=AN_EDIT)
        await close(db, "apv_d", edited, 2000.0)
        await make(db, "apv_e", quorum=2, edit=EDIT)
        await close(db, "apv_e", approval.Closing(ApprovalStatus.APPROVED, BOB, comment="first"), 2000.0)
        revised = approval.Closing(
            ApprovalStatus.APPROVED, ANN, comment="edit", data=EDITED, revises=True, changes=AN_EDIT
        )
        await close(db, "apv_e", revised, 2001.0)
        await make(db, "apv_f")
        late = approval.Closing(ApprovalStatus.APPROVED, ANN, comment="late", audit_refusal=True)
        await close(db, "apv_f", late, 5000.0)
        await make(db, "apv_g")
        failed = approval.Closing(
            ApprovalStatus.DENIED, SystemDecider(code="SURFACE_UNAVAILABLE"), comment="gone"
        )
        await close(db, "apv_g", failed, 2000.0)
        await make(db, "apv_h")
        await close(db, "apv_h", approval.Closing(ApprovalStatus.CANCELLED, AgentDecider()), 2000.0)
        rows = []
        for approval_id in [f"apv_{x}" for x in "abcdefgh"]:
            for r in await db.run_read(events_of(approval_id)):
                rows.append((r.approval_id, r.seq, r.event, r.actor, r.data, r.hash))
    assert rows == BEFORE
