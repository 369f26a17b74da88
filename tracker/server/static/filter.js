// Filters the jobs table as one types: rows whose text holds every word typed.
(function () {
  "use strict";
  var input = document.getElementById("job-filter");
  var count = document.getElementById("job-count");
  if (!input) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll("#jobs tbody tr"));
  function apply() {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var text = row.textContent.toLowerCase();
      var match = words.every(function (w) { return text.indexOf(w) >= 0; });
      row.hidden = !match;
      if (match) shown += 1;
    });
    count.textContent = shown + " of " + rows.length + " jobs";
  }
  input.addEventListener("input", apply);
  apply();
})();
