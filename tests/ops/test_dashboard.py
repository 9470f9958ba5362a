"""The Grafana dashboard (deploy/grafana/cosigner.json) reads only metrics Cosigner exposes.

Every metric name and label a panel's query uses is checked against a real `/metrics`
scraped from an app after a round trip (create, long-poll, decide, the callback delivered,
a shadow policy that disagrees), so a renamed metric or label fails here, not on an
operator's screen.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.api.test_approvals import call
from tests.api.test_metrics import gauge_reaches
from tests.api.test_shadow import SHADOW
from tests.harness import CallbackReceiver, cosigner_app, until, until_async

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "cosigner.json"
# Labels Prometheus adds to every scraped series (the target's), and the histogram's bucket bound.
TARGET_LABELS = {"instance", "job"}
SELECTOR = re.compile(r"\b(cosigner_[a-z_]+)\s*(?:\{([^}]*)\})?")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def queries() -> list[str]:
    """Every PromQL expression in the dashboard: the panels' and the variables' queries."""
    found = [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            found.append(variable["definition"])
    return found


async def exposed_after_a_round_trip(db_kind: str) -> dict[str, set[str]]:
    """Each sample name a real /metrics shows after a round trip, with its label names."""
    with CallbackReceiver() as receiver:
        async with cosigner_app(database_kind=db_kind, shadow_toml=SHADOW, callback_allow="127.0.0.0/8") as h:
            key = await h.create_tenant("acme")
            created = await h.client.post(
                "/v1/approvals", headers=h.auth(key), json=call(callbackUrl=receiver.url)
            )
            assert created.status_code == 201, created.text
            aid = created.json()["approvalId"]
            poll = asyncio.create_task(h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key)))
            await gauge_reaches(h, 1)
            decided = await h.client.post(
                f"/v1/approvals/{aid}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": "approve", "userId": "u_1"},
            )
            assert decided.status_code == 200, decided.text
            assert (await asyncio.wait_for(poll, 10)).json()["status"] == "approved"
            await until(receiver.snapshot)

            async def scraped() -> str | None:
                # The callback job is counted once it has recorded the delivery, just after.
                text = (await h.client.get("/metrics")).text
                return text if 'cosigner_jobs_total{kind="callback"' in text else None

            text = await until_async(scraped)
    exposed: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            exposed.setdefault(sample.name, set()).update(sample.labels)
    return exposed


async def test_every_metric_and_label_the_dashboard_reads_is_exposed(db_kind: str) -> None:
    exposed = await exposed_after_a_round_trip(db_kind)
    used: set[str] = set()
    for expr in queries():
        names = set()
        for name, selector in SELECTOR.findall(expr):
            assert name in exposed, f"{name} is not on /metrics: {expr}"
            names.add(name)
            for label in re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)", selector):
                assert label in exposed[name] | TARGET_LABELS, f"{name} has no label {label}: {expr}"
        labels = set().union(*(exposed[n] for n in names)) | TARGET_LABELS
        for grouping in GROUPING.findall(expr):
            for label in (x.strip() for x in grouping.split(",")):
                assert label in labels, f"no metric of this query has the label {label}: {expr}"
        used |= names
    # Every family Cosigner exposes has a panel: a new metric is shown, not forgotten.
    families = {re.sub(r"_(total|created|bucket|sum|count)$", "", n) for n in exposed}
    shown = {re.sub(r"_(total|created|bucket|sum|count)$", "", n) for n in used}
    assert families - shown == set(), f"metrics with no panel: {sorted(families - shown)}"


def test_the_dashboard_is_well_formed() -> None:
    d = dashboard()
    assert d["uid"] == "cosigner" and d["title"] == "Cosigner"
    panels = d["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in d["templating"]["list"]}
    assert variables == {"datasource", "instance"}
    for panel in panels:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        for target in panel["targets"]:
            # Each query follows the replica picker, so one replica can be looked at alone.
            for _, selector in SELECTOR.findall(target["expr"]):
                assert 'instance=~"$instance"' in selector, target["expr"]
