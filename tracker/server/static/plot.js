// The plot page: the URL holds the whole view (runs, metric, smoothing, axes, zoom, colour,
// group); every change rewrites it and asks /api/plot (the same query) for the visible steps,
// or with x=time for the visible seconds (start_s/end_s: each run's points in them).
(function () {
  "use strict";
  var div = document.getElementById("plot");
  if (!div) return;
  var status = document.getElementById("plot-status");
  var controls = {
    metric: document.getElementById("plot-metric"),
    smooth: document.getElementById("plot-smooth"),
    log: document.getElementById("plot-log"),
    x: document.getElementById("plot-x"), // only when every run has a wall time
    color: document.getElementById("plot-color"),
    group: document.getElementById("plot-group"),
    band: document.getElementById("plot-band"),
  };
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var view = new URLSearchParams(window.location.search);
  var latest = 0; // answers to older requests are dropped when a newer one was sent

  function restore() {
    if (view.get("metric")) controls.metric.value = view.get("metric");
    controls.smooth.value = view.get("smooth") || "0";
    document.getElementById("plot-smooth-value").textContent = controls.smooth.value;
    controls.log.checked = view.get("y") === "log";
    if (controls.x) controls.x.value = view.get("x") || "step";
    controls.color.value = view.get("color") || "";
    controls.group.value = view.get("group") || "";
    controls.band.checked = view.get("band") === "1";
  }

  function set(name, value) {
    if (value === "" || value === null || value === "0" && name !== "start" && name !== "start_s") view.delete(name);
    else view.set(name, value);
  }

  // the view as a query string that reads like the one typed: run=job2/ref_s0, not %2F
  function query() {
    var parts = [];
    view.forEach(function (value, name) {
      parts.push(encodeURIComponent(name) + "=" + encodeURIComponent(value).replace(/%2F/g, "/"));
    });
    return parts.join("&");
  }

  function remember() {
    window.history.replaceState(null, "", "/plot?" + query());
    document.getElementById("plot-csv").href = "/api/plot.csv?" + query();
    document.getElementById("plot-json").href = "/api/plot?" + query();
  }

  // plotly reads a few HTML tags in trace names and titles: names from the database are text
  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function colours() {
    var byLabel = {}, next = 0;
    return function (label) {
      if (!(label in byLabel)) byLabel[label] = PALETTE[next++ % PALETTE.length];
      return byLabel[label];
    };
  }

  function timed(answer) { return answer.x === "time"; }

  function runTraces(answer, colour) {
    var traces = [];
    answer.series.forEach(function (s) {
      var x = timed(answer) ? s.times : s.steps;
      var name = s.job + "/" + s.arm;
      var c = colour(s.color === null ? name : s.color);
      var label = esc(s.color === null ? name : name + " (" + s.color + ")");
      traces.push({
        x: x, y: s.values, type: "scatter", mode: "lines", name: label,
        legendgroup: name, connectgaps: false, line: { width: 1, color: c },
        opacity: s.smoothed ? 0.25 : 1, showlegend: !s.smoothed, hoverinfo: s.smoothed ? "skip" : "all",
      });
      if (s.smoothed) {
        traces.push({
          x: x, y: s.smoothed, type: "scatter", mode: "lines", name: label,
          legendgroup: name, connectgaps: false, line: { width: 1.6, color: c },
        });
      }
    });
    return traces;
  }

  function groupTraces(answer, colour) {
    var traces = [];
    answer.groups.forEach(function (g) {
      var c = colour(g.label);
      var x = timed(answer) ? g.times : g.steps;
      var name = esc(answer.group + "=" + g.label) + " (" + g.runs.length + (g.runs.length === 1 ? " run)" : " runs)");
      if (g.low && g.high) {
        traces.push({ x: x, y: g.high, type: "scatter", mode: "lines", line: { width: 0, color: c },
          legendgroup: g.label, showlegend: false, hoverinfo: "skip" });
        traces.push({ x: x, y: g.low, type: "scatter", mode: "lines", line: { width: 0, color: c },
          fill: "tonexty", opacity: 0.2, legendgroup: g.label, showlegend: false, hoverinfo: "skip" });
      }
      traces.push({ x: x, y: g.mean, type: "scatter", mode: "lines", name: name,
        legendgroup: g.label, connectgaps: false, line: { width: 1.8, color: c } });
    });
    return traces;
  }

  function describe(answer) {
    var drawn = answer.series.map(function (s) { return s.steps.length; })
      .reduce(function (a, b) { return a + b; }, 0);
    var thinned = answer.series.some(function (s) { return s.downsampled; });
    var where = view.get("start") !== null || view.get("end") !== null ?
      "steps " + (view.get("start") || "first") + " to " + (view.get("end") || "last") : "all steps";
    if (view.get("start_s") !== null || view.get("end_s") !== null) {
      where += ", seconds " + (view.get("start_s") || "first") + " to " + (view.get("end_s") || "last");
    }
    return answer.series.length + " runs, " + where + ": " + drawn.toLocaleString() +
      " points drawn (" + (thinned ? "min/max downsampled" : "every raw point") + ")";
  }

  function draw(answer) {
    var colour = colours();
    var traces = answer.groups.length ? groupTraces(answer, colour) : runTraces(answer, colour);
    var layout = {
      height: 560, margin: { l: 70, r: 30, t: 30, b: 50 },
      legend: { orientation: "h", y: -0.15 },
      xaxis: { title: { text: timed(answer) ? "wall time (s)" : "step" }, type: "linear" },
      yaxis: { title: { text: esc(answer.metric) }, type: answer.y === "log" ? "log" : "linear" },
    };
    var start = view.get(timed(answer) ? "start_s" : "start");
    var end = view.get(timed(answer) ? "end_s" : "end");
    if (start !== null && end !== null) {
      layout.xaxis.range = [Number(start), Number(end)];
      layout.xaxis.autorange = false;
    }
    div.dataset.traces = String(traces.length);
    div.dataset.downsampled = String(answer.series.some(function (s) { return s.downsampled; }));
    status.textContent = describe(answer);
    return Plotly.react(div, traces, layout, { responsive: true, displaylogo: false });
  }

  function load() {
    var ticket = ++latest;
    div.dataset.loading = "true";
    remember();
    return fetch("/api/plot?" + query(), { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          return response.json().then(function (body) { throw new Error(body.detail); });
        }
        return response.json();
      })
      .then(function (answer) { return ticket === latest ? draw(answer) : null; })
      .catch(function (error) { status.textContent = "could not load the plot: " + error.message; })
      .then(function () { if (ticket === latest) div.dataset.loading = "false"; });
  }

  function unzoom() {
    ["start", "end", "start_s", "end_s"].forEach(function (name) { view.delete(name); });
  }

  function zoomed(event) {
    if (event["xaxis.autorange"]) {
      unzoom();
      return load();
    }
    var low = event["xaxis.range[0]"], high = event["xaxis.range[1]"];
    if (event["xaxis.range"]) { low = event["xaxis.range"][0]; high = event["xaxis.range"][1]; }
    if (low === undefined || high === undefined) return null;
    if (view.get("x") === "time") { // the visible seconds, to the millisecond around them
      view.set("start_s", String(Math.floor(low * 1000) / 1000));
      view.set("end_s", String(Math.ceil(high * 1000) / 1000));
    } else {
      view.set("start", String(Math.floor(low)));
      view.set("end", String(Math.ceil(high)));
    }
    return load();
  }

  function listen() {
    controls.metric.addEventListener("change", function () { view.set("metric", controls.metric.value); load(); });
    controls.smooth.addEventListener("input", function () {
      document.getElementById("plot-smooth-value").textContent = controls.smooth.value;
    });
    controls.smooth.addEventListener("change", function () { set("smooth", controls.smooth.value); load(); });
    controls.log.addEventListener("change", function () { set("y", controls.log.checked ? "log" : ""); load(); });
    if (controls.x) {
      controls.x.addEventListener("change", function () {
        set("x", controls.x.value === "time" ? "time" : "");
        unzoom(); // a range of steps is no range of seconds
        load();
      });
    }
    controls.color.addEventListener("change", function () { set("color", controls.color.value); load(); });
    controls.group.addEventListener("change", function () { set("group", controls.group.value); load(); });
    controls.band.addEventListener("change", function () { set("band", controls.band.checked ? "1" : ""); load(); });
    document.getElementById("plot-link").addEventListener("click", function () {
      if (navigator.clipboard) navigator.clipboard.writeText(window.location.href);
      status.textContent = "link: " + window.location.href;
    });
    document.getElementById("plot-png").addEventListener("click", function () {
      Plotly.downloadImage(div, { format: "png", filename: "plot-" + (view.get("metric") || "loss") });
    });
  }

  restore();
  listen();
  load().then(function () { div.on("plotly_relayout", zoomed); });
})();
