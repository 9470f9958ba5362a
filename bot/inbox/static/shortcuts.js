// A request's page: `a` approves and `d` denies, each after a confirm naming the call.
// Without this script the buttons work as they are; typing in a field is never a shortcut.
(function () {
  var form = document.getElementById("answer");
  if (!form) return;
  var call = form.getAttribute("data-tool") + " (" + form.getAttribute("data-summary") + ")";
  var keys = { a: ["approve", "Approve "], d: ["deny", "Deny "] };
  document.addEventListener("keydown", function (event) {
    var key = keys[event.key];
    var target = event.target;
    if (!key || event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(target.tagName))) return;
    event.preventDefault();
    if (!window.confirm(key[1] + call + "?")) return;
    var button = form.querySelector('button[name="decision"][value="' + key[0] + '"]');
    if (button) form.requestSubmit(button);
  });
})();
