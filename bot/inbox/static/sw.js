// The inbox's service worker (scope /inbox/): shows a Web Push message as a notification and
// opens the request's inbox page when it is clicked. The message names the tool and the
// tenant only; the page shows the call once the person is signed in.
function show(data) {
  var url = typeof data.url === "string" && data.url.indexOf("/inbox/") === 0 ? data.url : "/inbox/";
  return self.registration.showNotification(String(data.title || "Approval needed"), {
    body: String(data.body || ""),
    tag: String(data.tag || url),
    data: { url: url }
  });
}

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (event) { event.waitUntil(self.clients.claim()); });

self.addEventListener("push", function (event) {
  var data = {};
  try { data = event.data ? event.data.json() : {}; } catch (e) { data = {}; }
  event.waitUntil(show(data));
});

// A page of the inbox may hand the worker a message to show the same way (the same origin only).
// With a MessagePort, the worker answers on it once the notification is shown (or why not), so
// the page waits for that, never for a time.
self.addEventListener("message", function (event) {
  if (!(event.data && event.data.type === "show")) return;
  var port = event.ports && event.ports[0];
  function answer(said) { if (port) port.postMessage(said); }
  event.waitUntil(show(event.data.payload || {}).then(
    function () { answer({ shown: true }); },
    function (e) { answer({ shown: false, error: String(e) }); }
  ));
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var url = new URL(event.notification.data.url, self.location.origin).href;
  event.waitUntil(self.clients.matchAll({ type: "window" }).then(function (open) {
    for (var i = 0; i < open.length; i++) {
      if (open[i].url === url && "focus" in open[i]) return open[i].focus();
    }
    return self.clients.openWindow(url);
  }));
});
