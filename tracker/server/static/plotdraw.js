// Drawing an /api/plot answer with plotly, shared by the plot page and the runs table's plot
// of the ticked runs: traces (raw faint behind the smoothed line, or group means with a
// band), the layout, and fetching the answer.
(function () {
  "use strict";
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

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

  function traces(answer) {
    var colour = colours();
    return answer.groups.length ? groupTraces(answer, colour) : runTraces(answer, colour);
  }

  // range: the x range asked for ([low, high], strings from the URL) or null: all of it
  function layout(answer, range, height) {
    var drawn = {
      height: height, margin: { l: 70, r: 30, t: 30, b: 50 },
      legend: { orientation: "h", y: -0.15 },
      xaxis: { title: { text: timed(answer) ? "wall time (s)" : "step" }, type: "linear" },
      yaxis: { title: { text: esc(answer.metric) }, type: answer.y === "log" ? "log" : "linear" },
    };
    if (range && range[0] !== null && range[1] !== null) {
      drawn.xaxis.range = [Number(range[0]), Number(range[1])];
      drawn.xaxis.autorange = false;
    }
    return drawn;
  }

  // the answer to /api/plot?query, or an Error with the server's detail
  function fetchPlot(query) {
    return fetch("/api/plot?" + query, { credentials: "same-origin" }).then(function (response) {
      if (!response.ok) {
        return response.json().then(function (body) { throw new Error(body.detail); });
      }
      return response.json();
    });
  }

  window.TrackerPlot = { traces: traces, layout: layout, fetchPlot: fetchPlot, timed: timed };
})();
