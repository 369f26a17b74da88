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
    smoothBy: document.getElementById("plot-smooth-by"),
    log: document.getElementById("plot-log"),
    x: document.getElementById("plot-x"), // only when every run has a wall time
    color: document.getElementById("plot-color"),
    group: document.getElementById("plot-group"),
    band: document.getElementById("plot-band"),
  };
  var view = new URLSearchParams(window.location.search);
  var latest = 0; // answers to older requests are dropped when a newer one was sent
  var zoomable = false; // the zoom is listened to once a first plot is drawn

  // a metric none of the runs has keeps the page's placeholder option shown (the page says
  // so, and /api/plot's answer names the known ones)
  function offered(metric) {
    return Array.prototype.some.call(controls.metric.options, function (o) { return !o.disabled && o.value === metric; });
  }

  function restore() {
    if (offered(view.get("metric"))) controls.metric.value = view.get("metric");
    controls.smooth.value = view.get("smooth") || "0";
    document.getElementById("plot-smooth-value").textContent = controls.smooth.value;
    controls.smoothBy.value = view.get("smooth_by") || "step";
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
    var traces = TrackerPlot.traces(answer);
    var time = TrackerPlot.timed(answer);
    var range = [view.get(time ? "start_s" : "start"), view.get(time ? "end_s" : "end")];
    div.dataset.traces = String(traces.length);
    div.dataset.downsampled = String(answer.series.some(function (s) { return s.downsampled; }));
    status.textContent = describe(answer);
    status.className = "muted";
    var layout = TrackerPlot.layout(answer, range, 560, traces);
    return Plotly.react(div, traces, layout, { responsive: true, displaylogo: false }).then(function () {
      if (!zoomable) div.on("plotly_relayout", zoomed);
      zoomable = true;
    });
  }

  function load() {
    var ticket = ++latest;
    div.dataset.loading = "true";
    remember();
    return TrackerPlot.fetchPlot(query())
      .then(function (answer) { return ticket === latest ? draw(answer) : null; })
      .catch(function (error) {
        if (ticket !== latest) return;
        status.textContent = "could not draw the plot: " + error.message;
        status.className = "fail-text";
      })
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
    controls.smoothBy.addEventListener("change", function () {
      set("smooth_by", controls.smoothBy.value === "point" ? "point" : "");
      load();
    });
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
  // a metric none of the runs has: the page says so and offers theirs; nothing to ask for
  if (controls.metric.value) load();
  else div.dataset.loading = "false";
})();
