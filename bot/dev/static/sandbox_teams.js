"use strict";
// The Teams pane: the demo conversation's Adaptive Cards as the Teams emulator holds them,
// with their Action.Execute buttons. A press goes to /sandbox/api/teams/click, which sends
// the invoke Teams would send, signed with the emulator's Bot Connector key.

const teams = { raw: "", busy: false };

function teamsText(element) {
  const p = document.createElement("p");
  // Cards escape markdown with backslashes; the pane shows the text as Teams would.
  p.textContent = (element.text || "").replace(/\\(.)/g, "$1");
  if (element.weight === "Bolder") p.className = "teams-strong";
  if (element.isSubtle) p.className = "teams-subtle";
  return p;
}

function teamsCard(entry, people) {
  const box = document.createElement("div");
  box.className = "teams-card";
  box.dataset.testid = "teams-card";
  for (const element of entry.card.body || []) {
    if (element.type === "TextBlock") box.append(teamsText(element));
    if (element.type === "FactSet") {
      const list = document.createElement("dl");
      for (const fact of element.facts) {
        const dt = document.createElement("dt");
        dt.textContent = fact.title.replace(/\\(.)/g, "$1");
        const dd = document.createElement("dd");
        dd.textContent = fact.value.replace(/\\(.)/g, "$1");
        list.append(dt, dd);
      }
      box.append(list);
    }
  }
  if (entry.buttons.length) {
    const who = document.createElement("select");
    for (const name of Object.keys(people)) who.append(new Option(name, name));
    const comment = document.createElement("input");
    comment.placeholder = "Comment (optional)";
    const row = document.createElement("div");
    row.className = "teams-buttons";
    row.append(who, comment);
    for (const action of entry.card.actions || []) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = action.title;
      button.onclick = async () => {
        const response = await fetch("/sandbox/api/teams/click", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ id: entry.id, as: who.value, verb: action.verb, comment: comment.value || null }),
        });
        const body = await response.json();
        const answer = body.answer || {};
        if (answer.statusCode !== 200 && answer.value) alert(answer.value.message);
        teamsPoll();
      };
      row.append(button);
    }
    box.append(row);
  }
  return box;
}

async function teamsPoll() {
  if (teams.busy) return;
  teams.busy = true;
  try {
    const response = await fetch("/sandbox/api/teams", { cache: "no-store" });
    const raw = await response.text();
    if (raw !== teams.raw) {
      teams.raw = raw;
      const data = JSON.parse(raw);
      const list = document.getElementById("teams-cards");
      list.replaceChildren(...data.cards.map((entry) => teamsCard(entry, data.people)));
      document.getElementById("teams-count").textContent = String(data.cards.length);
    }
  } catch (error) {
    console.warn("teams poll failed", error);
  } finally {
    teams.busy = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  if (!document.getElementById("teams-cards")) return;
  teamsPoll();
  setInterval(teamsPoll, 1000);
});
