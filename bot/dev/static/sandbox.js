// The sandbox page: renders what the emulators hold, and answers through /sandbox/api.
// Every piece of data is put on the page with textContent or as attributes, never as HTML.
"use strict";

const POLL_MS = 500;
const HOME = "@home";  // the sidebar's Apps → Cosigner: the Home tab of whoever is clicking
const state = { data: null, raw: "", channel: "C0DEMO", phone: null, modalId: null,
                people: {}, busy: false };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function unescapeEntities(text) {
  return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

function me() { return state.people[document.getElementById("as").value] || {}; }

// --- mrkdwn --------------------------------------------------------------------------

function mrkdwn(text, parent) {
  // Odd parts sit between ``` fences; an unclosed fence stays literal text.
  const parts = text.split("```");
  parts.forEach((part, i) => {
    const isCode = i % 2 === 1 && i < parts.length - 1;
    if (isCode) {
      parent.append(el("pre", "bk-code", unescapeEntities(part.replace(/^\n/, "").replace(/\n$/, ""))));
      return;
    }
    let chunk = i % 2 === 1 ? "```" + part : part;
    if (i > 0 && i % 2 === 0) chunk = chunk.replace(/^\n/, "");
    if (i + 1 < parts.length - 1) chunk = chunk.replace(/\n$/, "");
    inline(chunk, parent);
  });
}

const INLINE = /(<[^<>\n]+>)|(`[^`\n]+`)|((?<![\w*])\*(?!\s)[^*\n]+?\*(?![\w*]))|((?<![\w_])_(?!\s)[^_\n]+?_(?![\w_]))|((?<![\w~])~(?!\s)[^~\n]+?~(?![\w~]))/g;

function inline(text, parent) {
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    plain(text.slice(last, match.index), parent);
    const token = match[0];
    if (match[1]) parent.append(angle(token.slice(1, -1)));
    else if (match[2]) parent.append(el("code", "bk-inline-code", unescapeEntities(token.slice(1, -1))));
    else {
      const tag = match[3] ? "strong" : match[4] ? "em" : "s";
      const node = el(tag);
      inline(token.slice(1, -1), node);
      parent.append(node);
    }
    last = match.index + token.length;
  }
  plain(text.slice(last), parent);
}

function plain(text, parent) {
  const lines = unescapeEntities(text).split("\n");
  lines.forEach((line, i) => {
    if (i > 0) parent.append(el("br"));
    if (line) parent.append(document.createTextNode(line));
  });
}

function angle(inner) {
  const [target, label] = splitOnce(inner, "|");
  if (target.startsWith("@")) {
    const id = target.slice(1);
    const person = Object.values(state.people).find((p) => p.user_id === id);
    const node = el("span", "mention" + (id === me().user_id ? " me" : ""),
                    "@" + (label || (person ? person.name : id)));
    node.title = id;
    return node;
  }
  if (target.startsWith("#")) {
    const id = target.slice(1);
    return el("span", "mention", "#" + (label || state.data.channels[id] || id));
  }
  if (target.startsWith("!date^")) return dateToken(target, label);
  if (target.startsWith("!")) return el("span", "mention", "@" + target.slice(1).split("^")[0]);
  const link = el("a", "bk-link", unescapeEntities(label || target));
  if (/^https?:\/\//i.test(target)) {
    link.href = target;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }
  return link;
}

function splitOnce(text, sep) {
  const at = text.indexOf(sep);
  return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + 1)];
}

function dateToken(target, fallback) {
  const [, epoch, format] = target.split("^");
  const when = new Date(Number(epoch) * 1000);
  if (!format || Number.isNaN(when.getTime())) return el("span", "date", unescapeEntities(fallback));
  const text = format.replace(/\{(\w+)\}/g, (whole, name) => formatDate(when, name) ?? whole);
  const node = el("span", "date", text);
  node.title = unescapeEntities(fallback);
  return node;
}

function formatDate(when, name) {
  const day = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const diff = Math.round((day(when) - day(new Date())) / 86400000);
  const pretty = { 0: "Today", [-1]: "Yesterday", 1: "Tomorrow" }[diff];
  const short = when.toLocaleDateString(undefined, { month: "short", day: "numeric", year: "numeric" });
  const long = when.toLocaleDateString(undefined, { weekday: "long", month: "long", day: "numeric", year: "numeric" });
  const formats = {
    date_num: when.toISOString().slice(0, 10),
    date: when.toLocaleDateString(undefined, { month: "long", day: "numeric", year: "numeric" }),
    date_short: short, date_long: long,
    date_pretty: pretty || when.toLocaleDateString(undefined, { month: "long", day: "numeric", year: "numeric" }),
    date_short_pretty: pretty || short, date_long_pretty: pretty || long,
    time: when.toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit" }),
    time_secs: when.toLocaleTimeString(),
  };
  return formats[name];
}

function textObject(obj) {
  const node = el("span", "bk-text");
  if (!obj) return node;
  if (obj.type === "mrkdwn") mrkdwn(obj.text || "", node);
  else node.textContent = obj.text || "";
  return node;
}

// --- Block Kit -----------------------------------------------------------------------

function blocks(list, message) {
  const frag = document.createDocumentFragment();
  for (const block of list || []) frag.append(blockNode(block, message));
  return frag;
}

function blockNode(block, message) {
  switch (block.type) {
    case "header": return el("div", "bk-header", (block.text || {}).text || "");
    case "section": {
      const node = el("div", "bk-section");
      if (block.text) node.append(textObject(block.text));
      if (block.fields) {
        const fields = el("div", "bk-fields");
        for (const field of block.fields) fields.append(textObject(field));
        node.append(fields);
      }
      return node;
    }
    case "context": {
      const node = el("div", "bk-context");
      for (const item of block.elements || []) {
        node.append(item.type === "image" ? el("span", "", item.alt_text || "") : textObject(item));
      }
      return node;
    }
    case "actions": {
      const node = el("div", "bk-actions");
      for (const item of block.elements || []) {
        if (item.type === "button") node.append(buttonNode(item, message));
      }
      return node;
    }
    case "divider": return el("hr", "bk-divider");
    case "input": {
      const node = el("div", "bk-input");
      const label = el("label", "", (block.label || {}).text || "");
      const field = el(block.element && block.element.multiline ? "textarea" : "input");
      field.name = (block.element || {}).action_id || "value";
      if (block.element && block.element.max_length) field.maxLength = block.element.max_length;
      label.htmlFor = field.id = "input-" + (block.block_id || field.name);
      node.append(label, field);
      return node;
    }
    default: return el("div", "bk-context", `[${block.type} block]`);
  }
}

function buttonNode(button, message) {
  const node = el("button", "bk-button" + (button.style ? " " + button.style : ""),
                  (button.text || {}).text || "");
  node.type = "button";
  node.dataset.actionId = button.action_id;
  node.addEventListener("click", async () => {
    if (button.confirm && !(await confirmDialog(button.confirm))) return;
    node.disabled = true;
    try {
      const as = document.getElementById("as").value;
      if (message) {
        await api("click", { channel: message.channel, ts: message.ts, actionId: button.action_id, as });
      } else {
        await api("view-click", { viewId: state.modalId, actionId: button.action_id, as });
      }
    } finally {
      node.disabled = false;
      poll();
    }
  });
  return node;
}

function confirmDialog(confirm) {
  const overlay = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = (confirm.title || {}).text || "Are you sure?";
  const body = document.getElementById("confirm-text");
  body.replaceChildren(textObject(confirm.text));
  const yes = document.getElementById("confirm-yes");
  const no = document.getElementById("confirm-no");
  yes.textContent = (confirm.confirm || {}).text || "Yes";
  no.textContent = (confirm.deny || {}).text || "Cancel";
  yes.className = "bk-button " + (confirm.style === "danger" ? "danger" : "primary");
  overlay.hidden = false;
  return new Promise((resolve) => {
    const done = (answer) => { overlay.hidden = true; yes.onclick = no.onclick = null; resolve(answer); };
    yes.onclick = () => done(true);
    no.onclick = () => done(false);
  });
}

// --- the page ------------------------------------------------------------------------

async function api(path, body) {
  const response = await fetch("/sandbox/api/" + path, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) alert((answer.error || {}).message || `request failed (${response.status})`);
  return answer;
}

function timeOf(ts) {
  return new Date(Number(ts) * 1000).toLocaleTimeString(undefined, { hour: "numeric", minute: "2-digit" });
}

function messageNode(message, ephemeral) {
  const node = el("div", "message" + (ephemeral ? " ephemeral" : ""));
  node.dataset.ts = message.ts;
  node.dataset.channel = message.channel;
  const avatar = el("div", "avatar", "C");
  const body = el("div", "body");
  const meta = el("div", "meta");
  meta.append(el("span", "name", "Cosigner"), el("span", "app", "APP"), el("span", "time", timeOf(message.ts)));
  if (message.edited) meta.append(el("span", "edited", "(edited)"));
  if (message.threadTs) meta.append(el("span", "thread", "in a thread"));
  body.append(meta);
  if (ephemeral) {
    const who = Object.values(state.people).find((p) => p.user_id === message.user);
    body.append(el("div", "only", `Only visible to ${who ? who.name : message.user} (${message.user})`));
  }
  if (message.blocks && message.blocks.length) body.append(blocks(message.blocks, message));
  else if (message.text) { const t = el("div", "bk-text"); mrkdwn(message.text, t); body.append(t); }
  node.append(avatar, body);
  return node;
}

function renderPeople(data) {
  const select = document.getElementById("as");
  if (select.options.length) return;
  for (const person of data.people) {
    state.people[person.key] = person;
    const option = el("option", "", `${person.name} (${person.user_id}, ${person.team_id}): ${person.key.replace("_", " ")}`);
    option.value = person.key;
    select.append(option);
  }
  const note = () => { document.getElementById("as-note").textContent = me().note || ""; };
  select.addEventListener("change", () => { note(); if (state.channel === HOME) openHome(); render(); });
  note();
}

function renderChannels(data) {
  const ids = new Set(Object.keys(data.channels));
  for (const m of data.messages) ids.add(m.channel);
  const list = document.getElementById("channels");
  list.replaceChildren();
  for (const id of ids) {
    const item = el("li", id === state.channel ? "active" : "", "# " + (data.channels[id] || id));
    const count = data.messages.filter((m) => m.channel === id).length;
    if (count && id !== state.channel) item.append(el("span", "count", String(count)));
    item.addEventListener("click", () => { state.channel = id; render(); });
    list.append(item);
  }
  const apps = document.getElementById("apps");
  const home = el("li", state.channel === HOME ? "active" : "", "Cosigner");
  home.dataset.testid = "open-home";
  home.addEventListener("click", () => { state.channel = HOME; openHome(); render(); });
  apps.replaceChildren(home);
  document.getElementById("channel-name").textContent =
    state.channel === HOME ? "Cosigner · Home" : "# " + (data.channels[state.channel] || state.channel);
}

// Opening the tab sends the signed app_home_opened event; Cosigner answers with views.publish.
async function openHome() {
  await api("home", { as: document.getElementById("as").value });
  poll();
}

function renderHome(data) {
  const box = document.getElementById("messages");
  const view = (data.homes || {})[me().user_id];
  const tab = el("div", "home-tab");
  tab.dataset.testid = "home-tab";
  if (view) tab.append(blocks(view.blocks, null));
  else tab.append(el("p", "empty", "Opening the Home tab…"));
  box.replaceChildren(tab);
}

function renderMessages(data) {
  if (state.channel === HOME) return renderHome(data);
  const box = document.getElementById("messages");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const items = [
    ...data.messages.filter((m) => m.channel === state.channel).map((m) => [m, false]),
    // Like Slack, a reply only one person sees is shown to that person alone: pick someone
    // else under "Act as" and it is gone (a quorum's "You approved" is Ada's, not Ben's).
    ...data.ephemerals.filter((m) => m.channel === state.channel && m.user === me().user_id).map((m) => [m, true]),
  ].sort((a, b) => Number(a[0].ts) - Number(b[0].ts));
  const nodes = items.map(([m, eph]) => messageNode(m, eph));
  if (!nodes.length) nodes.push(document.getElementById("empty") || el("p", "empty", "No cards yet."));
  box.replaceChildren(...nodes);
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function renderActivity(data) {
  const list = document.getElementById("activity");
  list.replaceChildren(...data.activity.slice(-12).reverse().map((a) => {
    const item = el("li", a.status < 300 ? "ok" : "bad", `${a.what} → ${a.route} ${a.status}`);
    return item;
  }));
}

function renderPhone(data) {
  const select = document.getElementById("phone-number");
  const numbers = data.phone.numbers;
  if (!state.phone) state.phone = numbers[0];
  if ([...select.options].map((o) => o.value).join() !== numbers.join()) {
    select.replaceChildren(...numbers.map((n) => { const o = el("option", "", n); o.value = n; return o; }));
  }
  select.value = state.phone;
  document.getElementById("phone-bot").textContent = data.phone.bot;
  const box = document.getElementById("texts");
  const texts = data.phone.texts.filter((t) => t.phone === state.phone);
  box.replaceChildren(...texts.map((t) => {
    const bubble = el("div", "bubble " + t.dir, t.body);
    // A WhatsApp template's quick replies: a tap is posted as Twilio would post it.
    for (const title of t.buttons || []) {
      const button = el("button", "quick-reply", title);
      button.addEventListener("click", async () => { await api("tap", { sid: t.sid, title }); poll(); });
      bubble.append(el("br"), button);
    }
    return bubble;
  }));
  box.scrollTop = box.scrollHeight;
}

function renderModal(data) {
  const overlay = document.getElementById("modal");
  const open = data.views[0];
  if (!open) { overlay.hidden = true; state.modalId = null; state.modalSeen = null; return; }
  const seen = open.id + "#" + (open.updates || 0);
  if (state.modalSeen === seen) return;  // keep what the user is typing
  state.modalId = open.id;
  state.modalSeen = seen;
  const view = open.view;
  document.getElementById("modal-title").textContent = (view.title || {}).text || "";
  const submit = document.getElementById("modal-submit");
  submit.textContent = (view.submit || {}).text || "Submit";
  submit.hidden = !view.submit;  // a read-only modal (the full call) has only Close
  document.getElementById("modal-close").textContent = (view.close || {}).text || "Cancel";
  document.getElementById("modal-blocks").replaceChildren(blocks(view.blocks, null));
  document.getElementById("modal-error").hidden = true;
  overlay.hidden = false;
}

async function submitModal(event) {
  event.preventDefault();
  const field = document.querySelector("#modal-blocks textarea, #modal-blocks input");
  const answer = await api("submit", { viewId: state.modalId, comment: field ? field.value : "",
                                       as: document.getElementById("as").value });
  if (answer.errors) {
    const error = document.getElementById("modal-error");
    error.textContent = Object.values(answer.errors).join(" ");
    error.hidden = false;
  } else if (!answer.error) {
    document.getElementById("modal").hidden = true;
  }
  poll();
}

async function sendText(body) {
  if (!body.trim() || !state.phone) return;
  await api("text", { from: state.phone, body });
  poll();
}

function render() {
  const data = state.data;
  if (!data) return;
  document.getElementById("team").textContent = "team " + data.team;
  renderPeople(data);
  renderChannels(data);
  renderMessages(data);
  renderActivity(data);
  renderPhone(data);
  renderModal(data);
}

async function poll() {
  if (state.busy) return;
  state.busy = true;
  try {
    const response = await fetch("/sandbox/api/state", { cache: "no-store" });
    const raw = await response.text();
    if (raw !== state.raw) {
      state.raw = raw;
      state.data = JSON.parse(raw);
      render();
    }
  } catch (error) {
    console.warn("sandbox poll failed", error);
  } finally {
    state.busy = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("modal-form").addEventListener("submit", submitModal);
  document.getElementById("modal-close").addEventListener("click", async () => {
    if (state.modalId) await api("close", { viewId: state.modalId });
    document.getElementById("modal").hidden = true;
    poll();
  });
  document.getElementById("phone-number").addEventListener("change", (e) => {
    state.phone = e.target.value;
    render();
  });
  document.getElementById("reply").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = document.getElementById("reply-body");
    sendText(input.value);
    input.value = "";
  });
  for (const button of document.querySelectorAll("[data-quick]")) {
    button.addEventListener("click", () => sendText(button.dataset.quick));
  }
  document.getElementById("ask-here").addEventListener("click", async () => {
    // Alice asks in the channel shown (#support from the Home tab).
    await api("ask", { channel: state.channel === HOME ? "C0DEMO" : state.channel });
    poll();
  });
  poll();
  setInterval(poll, POLL_MS);
});
