// The runs table: the runs ticked become one /plot link (run=JOB/ARM for each, in table
// order) and are drawn below the table, as that link opens them.
(function () {
  "use strict";
  var link = document.getElementById("plot-link");
  var button = document.getElementById("plot-button");
  var count = document.getElementById("plot-count");
  if (!link) return;
  var figure = document.getElementById("runs-plot-figure");
  var div = document.getElementById("runs-plot");
  var status = document.getElementById("runs-plot-status");
  var boxes = Array.prototype.slice.call(document.querySelectorAll("#runs input[name=run]"));
  var latest = 0; // answers to older requests are dropped when a newer one was sent

  function draw(query, ticket) {
    div.dataset.loading = "true";
    return TrackerPlot.fetchPlot(query)
      .then(function (answer) {
        if (ticket !== latest) return null;
        var traces = TrackerPlot.traces(answer);
        div.dataset.traces = String(traces.length);
        status.textContent = answer.series.length + " runs; Plot selected (above) opens them to smooth, zoom and group";
        return Plotly.react(div, traces, TrackerPlot.layout(answer, null, 420, traces),
          { responsive: true, displaylogo: false });
      })
      .catch(function (error) { status.textContent = "could not load the plot: " + error.message; })
      .then(function () { if (ticket === latest) div.dataset.loading = "false"; });
  }

  function update() {
    var runs = boxes.filter(function (box) { return box.checked; }).map(function (box) {
      // job and arm names hold no "/", so JOB/ARM stays readable in the link
      return "run=" + encodeURIComponent(box.value).replace(/%2F/g, "/");
    });
    var query = runs.concat(["metric=loss"]).join("&");
    var ticket = ++latest;
    link.href = "/plot?" + query;
    link.hidden = false; // a button, greyed until runs are ticked
    link.setAttribute("aria-disabled", String(runs.length === 0));
    figure.hidden = runs.length === 0;
    count.textContent = runs.length ? runs.length + " selected" : "tick runs to plot them together";
    if (runs.length) draw(query, ticket);
  }
  button.hidden = true;
  boxes.forEach(function (box) { box.addEventListener("change", update); });
  update();
})();
