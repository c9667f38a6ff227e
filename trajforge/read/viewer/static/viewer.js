// Index filters: plain JS, no modules, so the page works from file:// too.
(function () {
  "use strict";
  var form = document.getElementById("filters");
  if (!form) return;
  var selects = form.querySelectorAll("select[data-facet]");
  var rows = document.querySelectorAll("#trajs tbody tr.traj");
  var shown = document.getElementById("shown");

  function apply() {
    var want = {};
    selects.forEach(function (s) { if (s.value) want[s.dataset.facet] = s.value; });
    var n = 0;
    rows.forEach(function (r) {
      var ok = Object.keys(want).every(function (f) { return r.dataset[f] === want[f]; });
      r.hidden = !ok;
      if (ok) n += 1;
    });
    shown.textContent = n + " of " + rows.length + " shown";
    // Keep the filter in the URL so a view can be shared or reloaded.
    var q = Object.keys(want).map(function (f) { return f + "=" + encodeURIComponent(want[f]); }).join("&");
    history.replaceState(null, "", q ? "#" + q : location.pathname);
  }

  function fromHash() {
    var h = location.hash.replace(/^#/, "");
    h.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i < 0) return;
      var s = form.querySelector('select[data-facet="' + kv.slice(0, i) + '"]');
      if (s) s.value = decodeURIComponent(kv.slice(i + 1));
    });
  }

  selects.forEach(function (s) { s.addEventListener("change", apply); });
  document.getElementById("reset").addEventListener("click", function () {
    selects.forEach(function (s) { s.value = ""; });
    apply();
  });
  fromHash();
  apply();
})();
