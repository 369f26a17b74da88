// The curve explorer: draws the server's downsampled curve and, on every zoom or pan,
// asks /api/curve for the visible step range, so that a narrow window shows raw points.
(function () {
  "use strict";
  var div = document.getElementById("explorer");
  var status = document.getElementById("explorer-status");
  var points = div.dataset.points;
  var latest = 0; // answers to older requests are dropped when a newer one was sent

  function url(start, end) {
    var query = new URLSearchParams({
      job: div.dataset.job, arm: div.dataset.arm, metric: div.dataset.metric, points: points,
    });
    if (start !== null) query.set("start", String(Math.floor(start)));
    if (end !== null) query.set("end", String(Math.ceil(end)));
    return div.dataset.api + "?" + query.toString();
  }

  function describe(curve) {
    var what = curve.raw ? "every raw point" : "min/max downsampled from " +
      curve.in_window.toLocaleString() + " points";
    return "steps " + curve.start + " to " + curve.end + ": " +
      curve.step.length.toLocaleString() + " points drawn (" + what + ")";
  }

  function draw(curve, range) {
    var trace = {
      x: curve.step, y: curve.value, type: "scatter", mode: "lines",
      name: div.dataset.arm, line: { width: 1.2 }, connectgaps: false,
    };
    var layout = {
      height: 520, margin: { l: 70, r: 30, t: 30, b: 50 }, showlegend: false,
      xaxis: { title: { text: "step" } }, yaxis: { title: { text: div.dataset.metric } },
      uirevision: "explorer", // keeps the user's zoom across redraws
    };
    if (range) layout.xaxis.range = range;
    div.dataset.raw = String(curve.raw);
    div.dataset.drawn = String(curve.step.length);
    status.textContent = describe(curve);
    return Plotly.react(div, [trace], layout, { responsive: true, displaylogo: false });
  }

  function load(start, end, range) {
    var ticket = ++latest;
    div.dataset.loading = "true";
    return fetch(url(start, end), { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          return response.json().then(function (body) { throw new Error(body.detail); });
        }
        return response.json();
      })
      .then(function (curve) {
        if (ticket !== latest) return null;
        return draw(curve, range);
      })
      .catch(function (error) { status.textContent = "could not load the curve: " + error.message; })
      .then(function () { if (ticket === latest) div.dataset.loading = "false"; });
  }

  load(null, null, null).then(function () {
    div.on("plotly_relayout", function (event) {
      if (event["xaxis.autorange"]) {
        load(null, null, null);
        return;
      }
      var low = event["xaxis.range[0]"], high = event["xaxis.range[1]"];
      if (event["xaxis.range"]) { low = event["xaxis.range"][0]; high = event["xaxis.range"][1]; }
      if (low === undefined || high === undefined) return;
      load(low, high, [low, high]);
    });
  });
})();
