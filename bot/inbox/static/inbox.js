// Live list: reload the waiting section when the server says what waits has changed.
(function () {
  if (!window.EventSource) return;
  var source = new EventSource("/inbox/events");
  // The count of what waits leads the title: "(3) Cosigner inbox".
  function count(n) {
    var rest = document.title.replace(/^\(\d+\) /, "");
    document.title = n > 0 ? "(" + n + ") " + rest : rest;
  }
  source.addEventListener("changed", function (event) {
    try { count(JSON.parse(event.data).waiting); } catch (e) { /* a stream from an older server */ }
    fetch("/inbox/", { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var page = new DOMParser().parseFromString(html, "text/html");
        ["waiting", "elsewhere"].forEach(function (id) {
          var fresh = page.getElementById(id);
          var here = document.getElementById(id);
          var typing = here && here.contains(document.activeElement) && document.activeElement.value;
          if (fresh && here && !typing) here.replaceWith(fresh);
        });
      });
  });
  // Signed out (in another tab, or by an operator): show the sign-in page.
  source.addEventListener("signed-out", function () {
    source.close();
    window.location.assign("/inbox/");
  });
})();
