// The runs table: the runs ticked become one /plot link (run=JOB/ARM for each, in table order).
(function () {
  "use strict";
  var link = document.getElementById("plot-link");
  var button = document.getElementById("plot-button");
  var count = document.getElementById("plot-count");
  if (!link) return;
  var boxes = Array.prototype.slice.call(document.querySelectorAll("#runs input[name=run]"));
  function update() {
    var runs = boxes.filter(function (box) { return box.checked; }).map(function (box) {
      // job and arm names hold no "/", so JOB/ARM stays readable in the link
      return "run=" + encodeURIComponent(box.value).replace(/%2F/g, "/");
    });
    link.href = "/plot?" + runs.concat(["metric=loss"]).join("&");
    link.hidden = runs.length === 0;
    count.textContent = runs.length ? runs.length + " selected" : "tick runs to plot them together";
  }
  button.hidden = true;
  boxes.forEach(function (box) { box.addEventListener("change", update); });
  update();
})();
