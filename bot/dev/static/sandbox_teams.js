"use strict";
// The Teams pane: the demo conversation's Adaptive Cards as the Teams emulator holds them,
// with their Action.Execute buttons. A press goes to /sandbox/api/teams/click, which sends
// the invoke Teams would send, signed with the emulator's Bot Connector key.

const teams = { raw: "", busy: false, refusals: {} };

// A TextBlock's text as Teams renders it: `**bold**`, and a backslash (how cards escape what
// an agent or tenant wrote) shows the next character as it is. With `names`, a person's
// Entra ID object id reads as their name, as Teams shows people.
function teamsInline(text, names) {
  const out = document.createDocumentFragment();
  let strong = false;
  let run = "";
  const flush = () => {
    if (!run) return;
    let shown = run;
    for (const [id, name] of Object.entries(names || {})) shown = shown.split(id).join(name);
    if (strong) {
      const b = document.createElement("strong");
      b.textContent = shown;
      out.append(b);
    } else {
      out.append(document.createTextNode(shown));
    }
    run = "";
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length) {
      run += text[i + 1];
      i++;
    } else if (c === "*" && text[i + 1] === "*") {
      flush();
      strong = !strong;
      i++;
    } else {
      run += c;
    }
  }
  flush();
  return out;
}

function teamsText(element, names) {
  const p = document.createElement("p");
  // The whole call (monospace) is shown exactly: no names put in place of ids there.
  const monospace = element.fontType === "Monospace";
  p.append(teamsInline(element.text || "", monospace ? null : names));
  if (monospace) p.className = "teams-mono";
  if (element.weight === "Bolder") p.className = "teams-strong";
  if (element.isSubtle) p.className = "teams-subtle";
  return p;
}

function teamsCard(entry, people, names) {
  const box = document.createElement("div");
  box.className = "teams-card";
  box.dataset.testid = "teams-card";
  for (const element of entry.card.body || []) {
    if (element.type === "TextBlock") box.append(teamsText(element, names));
    if (element.type === "FactSet") {
      const list = document.createElement("dl");
      for (const fact of element.facts) {
        // A parameter's name and value are shown exactly (escapes undone, nothing renamed).
        const dt = document.createElement("dt");
        dt.append(teamsInline(fact.title, null));
        const dd = document.createElement("dd");
        dd.append(teamsInline(fact.value, null));
        list.append(dt, dd);
      }
      box.append(list);
    }
  }
  if (entry.buttons.length) {
    const who = document.createElement("select");
    who.setAttribute("aria-label", "Pressing as");
    for (const [key, id] of Object.entries(people)) who.append(new Option(names[id] || key, key));
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
        // A refused press is said on the card, as Teams shows an invoke's error; nothing blocks.
        const refused = answer.statusCode !== 200 && answer.value ? answer.value.message : body.error;
        if (refused) teams.refusals[entry.id] = `${names[people[who.value]] || who.value}: ${refused}`;
        else delete teams.refusals[entry.id];
        teams.raw = "";  // draw again, with the refusal or without it
        teamsPoll();
      };
      row.append(button);
    }
    box.append(row);
  }
  if (teams.refusals[entry.id]) {
    const note = document.createElement("p");
    note.className = "teams-refusal";
    note.setAttribute("role", "status");
    note.dataset.testid = "teams-refusal";
    note.textContent = teams.refusals[entry.id];
    box.append(note);
  }
  return box;
}

async function teamsAsk() {
  const note = document.getElementById("teams-ask-note");
  const response = await fetch("/sandbox/api/teams/ask", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: "{}",
  });
  const body = await response.json();
  const answer = body.answer || {};
  note.textContent =
    body.status === 201 ? `Alice asked: ${answer.approvalId}` : `Refused: ${(answer.error || {}).message || body.error}`;
  teamsPoll();
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
      list.replaceChildren(...data.cards.map((entry) => teamsCard(entry, data.people, data.names)));
      document.getElementById("teams-count").textContent = String(data.cards.length);
      document.getElementById("teams-empty").hidden = data.cards.length > 0;
    }
  } catch (error) {
    console.warn("teams poll failed", error);
  } finally {
    teams.busy = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  if (!document.getElementById("teams-cards")) return;
  document.getElementById("teams-ask").onclick = teamsAsk;
  teamsPoll();
  setInterval(teamsPoll, 1000);
});
