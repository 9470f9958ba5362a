"""One person, several ids (`bot.policy.people`): `[people]` in the policy file, strictly read;
`policy check` counting persons; and the answer's checks (`bot.approvals.judging.judge`)
comparing the person, whichever id they answer with, on any surface."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.approvals.judging import Asked, Counted, Refused, Transition, Unchanged, judge
from bot.policy import load_policy
from bot.policy.people import People, id_key
from contracts.answers import PersonDecider
from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType
from contracts.errors import NotAnApprover
from storage.record_columns import surface_from_json
from storage.records import Record
from tests.bot.test_intake_decide import earlier
from tests.bot.test_policy import has_problem, problems_of

WIRE = """
[tools.wire_funds]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
separate_duties = true

[tenants.demo]
admins = { dashboard = ["U0ALICE", "alice@demo.example"] }
"""
ALICE = '\n[people]\nalice = ["U0ALICE", "alice@demo.example", "+15550100200"]\n'


# --- [people] is read strictly ----------------------------------------------------------


def test_people_tie_ids_and_the_policy_keeps_them() -> None:
    policy = load_policy('[tools.x]\nkind = "read"\n' + ALICE + 'bob = ["U0BOB"]\n')
    assert policy.people.listed == {
        "alice": ("U0ALICE", "alice@demo.example", "+15550100200"),
        "bob": ("U0BOB",),
    }
    assert policy.people.same(["u0alice"], ["whatsapp:+15550100200"]), (
        "any case; a WhatsApp address is its number"
    )
    assert not policy.people.same(["U0ALICE"], ["U0BOB"])


def test_an_id_listed_under_two_people_is_refused_naming_both() -> None:
    problems = problems_of(
        '[tools.x]\nkind = "read"\n[people]\nalice = ["U0ALICE", "ops@demo.example"]\n'
        'bob = ["U0BOB", "OPS@demo.example"]\n'
    )
    assert has_problem(problems, "people.bob", '"OPS@demo.example"', "people.alice", "one person")
    twice = problems_of('[people]\nalice = ["U0ALICE", "u0alice"]\n')
    assert has_problem(twice, "people.alice", "listed twice", "list it once")


def test_bad_people_are_refused_with_what_to_write() -> None:
    assert has_problem(problems_of("[people]\nalice = []\n"), "people.alice", "at least one id")
    # A person is a list of ids: a table in its place, or any key of one, is refused.
    table = problems_of('[people.alice]\nslack = "U0ALICE"\n')
    assert has_problem(table, "people.alice", "must be a list")
    assert has_problem(problems_of('[peoples]\nalice = ["U0ALICE"]\n'), "peoples", "unknown key", "people")
    assert has_problem(problems_of('[people]\nalice = "U0ALICE"\n'), "people.alice", "must be a list")
    assert has_problem(problems_of('[people]\nalice = ["U0ALICE", ""]\n'), "people.alice", "is not an id")
    assert has_problem(problems_of("[people]\nalice = [42]\n"), "people.alice", '"42" is not an id')
    assert has_problem(problems_of('[people]\nalice = [" U0ALICE"]\n'), "people.alice", "spaces")
    wa = problems_of('[people]\nalice = ["whatsapp:+15550100200"]\n')
    assert has_problem(wa, "people.alice", 'without "whatsapp:"', "+15550100200")
    assert has_problem(problems_of('[people]\nalice = ["+1 555 0100"]\n'), "people.alice", "E.164")
    assert has_problem(problems_of('[people]\n"alice smith" = ["U0ALICE"]\n'), 'people."alice smith"', "name")


# --- policy check counts persons, not ids -------------------------------------------------


def test_a_quorum_that_distinct_persons_cannot_meet_is_refused_naming_the_tool_quorum_and_persons() -> None:
    assert load_policy(WIRE).rule_for("demo", "wire_funds").quorum == 2, "untied, the two ids are two people"
    problems = problems_of(WIRE + ALICE)
    assert has_problem(
        problems,
        "tools.wire_funds.quorum",
        "quorum 2",
        "1 distinct approver ",
        "for tenant demo",
        "on dashboard: alice (U0ALICE, alice@demo.example)",
        "wire_funds could never be approved",
    ), problems


def test_an_admin_who_is_also_staff_counts_once_and_whatsapp_admins_count() -> None:
    staff = """
[tools.deploy]
kind = "danger"
approvers = ["tenant_admins", "staff"]
quorum = 2

[staff]
sms = ["+15550000011"]

[tenants.acme]
sms_from = "+15550000001"
admins = { sms = ["+15550000011"] }
"""
    assert has_problem(
        problems_of(staff), "tools.deploy.quorum", "1 distinct approver", "on sms: +15550000011", "deploy"
    )
    load_policy(staff.replace('admins = { sms = ["+15550000011"] }', 'admins = { sms = ["+15550000012"] }'))
    whatsapp = """
[tools.deploy]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2

[tenants.acme]
whatsapp_from = "+15550000001"
admins = { whatsapp = ["+15550000011", "+15550000012"] }
"""
    assert load_policy(whatsapp).rule_for("acme", "deploy").quorum == 2


def test_policy_check_exits_2_naming_the_persons(tmp_path: Path) -> None:
    from tests.ops.test_cli_errors import run

    bad = tmp_path / "policy.toml"
    bad.write_text(WIRE + ALICE)
    checked = run({}, "policy", "check", str(bad), tmp_path=tmp_path)
    assert checked.returncode == 2, checked.stdout
    assert "tools.wire_funds.quorum: quorum 2 is more than the 1 distinct approver" in checked.stderr
    assert "alice (U0ALICE, alice@demo.example)" in checked.stderr and "Traceback" not in checked.stderr


# --- the answer's checks compare persons --------------------------------------------------


def pending(surface: dict[str, str], quorum: int = 2) -> Record:
    return replace(
        earlier("wire_funds", "sha256:" + "a" * 64),
        status=ApprovalStatus.PENDING,
        mode=ApprovalMode.ASK_ALWAYS,
        quorum=quorum,
        separate_duties=True,
        surface=surface_from_json(json.dumps(surface)),
    )


def test_the_requester_is_recognised_on_another_surface_by_the_same_id_or_a_tie() -> None:
    # The app named the requester by her phone; she answers by text from it.
    rec = pending({"type": "dashboard", "userId": "+15550100200"})
    by_text = Asked(ApprovalStatus.APPROVED, PersonDecider(surface=SurfaceType.SMS, userId="+15550100200"))
    out = judge(rec, by_text, 1500.0)
    assert isinstance(out, Refused) and isinstance(out.error, NotAnApprover)
    assert "separate_duties" in out.error.message
    on_whatsapp = Asked(
        ApprovalStatus.APPROVED, PersonDecider(surface=SurfaceType.WHATSAPP, userId="whatsapp:+15550100200")
    )
    assert isinstance(judge(rec, on_whatsapp, 1500.0), Refused)
    # Started in Slack as U0ALICE: her number answers only as herself where [people] says so.
    slack = pending({"type": "slack", "teamId": "T0", "channelId": "C0", "userId": "U0ALICE"})
    assert isinstance(judge(slack, by_text, 1500.0), Counted)
    tied = People({"alice": ["U0ALICE", "+15550100200"]})
    assert isinstance(judge(slack, by_text, 1500.0, tied), Refused)
    # The ids a sign-in vouched for with the answer are hers too.
    signed_in = Asked(
        ApprovalStatus.APPROVED,
        PersonDecider(surface=SurfaceType.DASHBOARD, userId="alice@demo.example"),
        ids=("U0ALICE", "alice@demo.example"),
    )
    assert isinstance(judge(slack, signed_in, 1500.0), Refused)


# A person is a handful of ids on several surfaces, in groups: the ids of a group are tied by
# [people] (or are one id), the groups only by an inbox sign-in, whose answer carries them all.
PERSONS: dict[str, tuple[tuple[tuple[str, str], ...], ...]] = {
    "req": ((("dashboard", "u_req"), ("sms", "+15550000010")),),
    "ann": ((("slack", "U0ANN"), ("sms", "+15550000011")), (("dashboard", "ann@x.example"),)),
    "bob": ((("slack", "U0BOB"), ("whatsapp", "whatsapp:+15550000012"), ("sms", "+15550000012")),),
    "cat": (
        (("teams", "00000000-0000-0000-0000-00000000000c"),),
        (("dashboard", "Cat@X.example"), ("dashboard", "cat@x.example")),
    ),
    "dan": ((("dashboard", "u_dan"),),),
}
TIES = People(
    {"ann": ["U0ANN", "+15550000011"], "req": ["u_req", "+15550000010"], "bob": ["U0BOB", "+15550000012"]}
)


@settings(max_examples=800, deadline=None)
@given(
    quorum=st.integers(1, 4),
    answers=st.lists(
        st.tuples(st.sampled_from(sorted(PERSONS)), st.integers(0, 5), st.booleans()), max_size=10
    ),
)
def test_each_person_counts_once_and_the_requester_never_whichever_id_they_answer_with(
    quorum: int, answers: list[tuple[str, int, bool]]
) -> None:
    rec = pending({"type": "dashboard", "userId": "u_req"}, quorum)
    votes: list[tuple[str, str, set[int]]] = []  # who, the id counted, the groups it was known by
    for i, (who, pick, signed_in) in enumerate(answers):
        groups = PERSONS[who]
        group = pick % len(groups)
        surface, user = groups[group][pick % len(groups[group])]
        known = set(range(len(groups))) if signed_in else {group}
        vouched = tuple(ident for g in groups for _, ident in g) if signed_in else ()
        closing = Asked(
            ApprovalStatus.APPROVED, PersonDecider(surface=SurfaceType(surface), userId=user), ids=vouched
        )
        out = judge(rec, closing, 1500.0 + i, TIES)
        same = next((v for v in votes if v[0] == who and v[2] & known), None)
        if who == "req":
            assert isinstance(out, Refused) and "separate_duties" in out.error.message
        elif same is not None and same[1] == user:
            assert isinstance(out, Unchanged), "the same id again changes nothing"
        elif same is not None:
            assert isinstance(out, Refused) and f"same person as {same[1]}" in out.error.message
        elif len(votes) + 1 >= quorum:
            assert isinstance(out, Transition) and out.to is ApprovalStatus.APPROVED
            return
        else:
            assert isinstance(out, Counted) and out.count == len(votes) + 1
            votes.append((who, user, known))
            rec = replace(rec, votes=(*rec.votes, out.vote))


def test_ids_compare_without_case_and_a_whatsapp_address_is_its_number() -> None:
    assert id_key("whatsapp:+15550000002") == id_key("+15550000002")
    assert id_key("Alice@Demo.Example") == id_key("alice@demo.example")
    people = People({"alice": ["U0ALICE", "alice@demo.example"]})
    assert [str(p) for p in people.distinct(["U0ALICE", "U0BOB", "ALICE@demo.example"])] == [
        "alice (U0ALICE, ALICE@demo.example)",
        "U0BOB",
    ]
    assert people.count([["U0BOB"], ["u0alice"], ["alice@demo.example", "U0CAT"], ["U0CAT"]]) == 2
