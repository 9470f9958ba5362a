// "Notify me on this device": the service worker (/inbox/sw.js) and a Push API subscription,
// stored by the server for the signed-in person. A push names the tool and the tenant only.
(function () {
  var box = document.getElementById("push");
  if (!box || !("serviceWorker" in navigator)) return;
  var state = document.getElementById("push-state");
  var ready = navigator.serviceWorker.register("/inbox/sw.js", { scope: "/inbox/" });
  if (!("PushManager" in window) || !("Notification" in window)) return;
  box.hidden = false;

  function bytes(base64url) {
    var text = atob(base64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((base64url.length + 3) % 4));
    var out = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }

  function say(text) { state.textContent = text; }

  document.getElementById("push-on").addEventListener("click", function () {
    Notification.requestPermission().then(function (permission) {
      if (permission !== "granted") throw new Error("notifications are blocked for this site in the browser's settings");
      return Promise.all([ready, fetch("/inbox/push/key", { credentials: "same-origin" }).then(function (r) { return r.json(); })]);
    }).then(function (got) {
      var registration = got[0];
      return registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes(got[1].publicKey) });
    }).then(function (subscription) {
      return fetch("/inbox/push/subscriptions", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": box.dataset.csrf },
        body: JSON.stringify({ subscription: subscription.toJSON() })
      });
    }).then(function (r) {
      if (!r.ok) return r.json().then(function (b) { throw new Error((b.error && b.error.message) || ("HTTP " + r.status)); });
      say("This device will be notified of requests waiting for you.");
    }).catch(function (e) { say("Not turned on: " + e.message); });
  });
})();
