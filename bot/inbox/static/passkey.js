// Passkeys: register one (/inbox/passkeys) or confirm a step-up Approve with one
// (/inbox/approvals/ID/step-up). The server makes every challenge and checks every answer;
// this script only carries them between it and the browser's WebAuthn API.
(function () {
  var status = document.getElementById("passkey-status");
  function say(text) { if (status) status.textContent = text; }
  function bytes(b64url) {
    var s = atob(b64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((b64url.length + 3) % 4));
    return Uint8Array.from(s, function (c) { return c.charCodeAt(0); }).buffer;
  }
  function b64url(buffer) {
    var s = String.fromCharCode.apply(null, new Uint8Array(buffer));
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function post(url, body, json) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": json ? "application/json" : "application/x-www-form-urlencoded" },
      body: json ? JSON.stringify(body) : new URLSearchParams(body)
    }).then(function (r) {
      return r.json().then(function (data) {
        if (!r.ok) throw new Error((data.error && data.error.message) || r.statusText);
        return data;
      });
    });
  }
  function credentialJSON(c) {
    var r = c.response, out = { id: c.id, rawId: b64url(c.rawId), type: c.type, clientExtensionResults: {},
      response: { clientDataJSON: b64url(r.clientDataJSON) } };
    if (r.attestationObject) {
      out.response.attestationObject = b64url(r.attestationObject);
      out.response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      out.response.authenticatorData = b64url(r.authenticatorData);
      out.response.signature = b64url(r.signature);
      out.response.userHandle = r.userHandle ? b64url(r.userHandle) : null;
    }
    return out;
  }
  function failed(err) { say("Not done: " + err.message); }

  var add = document.getElementById("add-passkey");
  if (add) add.addEventListener("submit", function (e) {
    e.preventDefault();
    if (!window.PublicKeyCredential) return say("This browser has no passkeys (WebAuthn).");
    var csrf = add.elements.csrf.value, name = add.elements.name.value;
    say("Follow your browser's prompt…");
    post("/inbox/passkeys/options", { csrf: csrf }).then(function (o) {
      o.challenge = bytes(o.challenge);
      o.user.id = bytes(o.user.id);
      (o.excludeCredentials || []).forEach(function (c) { c.id = bytes(c.id); });
      return navigator.credentials.create({ publicKey: o });
    }).then(function (c) {
      return post("/inbox/passkeys", { csrf: csrf, name: name, credential: credentialJSON(c) }, true);
    }).then(function (done) { window.location.assign(done.redirect); }, failed);
  });

  var confirm = document.getElementById("step-up");
  if (confirm) confirm.addEventListener("submit", function (e) {
    e.preventDefault();
    if (!window.PublicKeyCredential) return say("This browser has no passkeys (WebAuthn).");
    var f = confirm.elements, base = confirm.getAttribute("action");
    say("Confirm with your passkey…");
    post(base + "/options", { csrf: f.csrf.value, digest: f.digest.value }).then(function (o) {
      o.challenge = bytes(o.challenge);
      (o.allowCredentials || []).forEach(function (c) { c.id = bytes(c.id); });
      return navigator.credentials.get({ publicKey: o });
    }).then(function (c) {
      return post(base, { csrf: f.csrf.value, comment: f.comment.value, credential: credentialJSON(c) }, true);
    }).then(function (done) { window.location.assign(done.redirect); }, failed);
  });
})();
