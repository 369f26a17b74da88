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

  // a value JSON could not give as a number ("NaN", "Infinity", "-Infinity") is not finite
  function finite(value) { return typeof value === "number" && isFinite(value); }

  // a curve logged every N > 1 steps (eval every 125) is drawn with its points marked
  function sparse(steps) {
    if (steps.length < 2) return true;
    return (steps[steps.length - 1] - steps[0]) / (steps.length - 1) > 1.5;
  }

  // where the curve is not finite: a cross at the last finite value before each stretch,
  // its hover text the stretch's steps (the line itself has a gap there)
  function nonFinite(s, x, c, name) {
    var xs = [], ys = [], texts = [], last = null, i = 0;
    while (i < s.values.length) {
      if (finite(s.values[i])) { last = s.values[i]; i += 1; continue; }
      var first = i;
      while (i < s.values.length && !finite(s.values[i])) i += 1;
      xs.push(x[first]);
      ys.push(last);
      texts.push(name + ": " + s.metric + " " + s.values[first] + " at steps " + s.steps[first] + "-" + s.steps[i - 1]);
    }
    if (!xs.length) return null;
    return { x: xs, y: ys, type: "scatter", mode: "markers", name: name + " not finite",
      legendgroup: name, showlegend: false, text: texts, hoverinfo: "text",
      marker: { symbol: "x", size: 10, color: c, line: { width: 2, color: c } } };
  }

  function runTraces(answer, colour) {
    var traces = [], marks = [], count = answer.series.length;
    answer.series.forEach(function (s, index) {
      var x = timed(answer) ? s.times : s.steps;
      var name = s.job + "/" + s.arm;
      var c = colour(s.color === null ? name : s.color);
      var label = esc(s.color === null ? name : name + " (" + s.color + ")");
      // overlaid runs: the first drawn widest, each later one narrower on top, all a little
      // transparent, so that a run under another still shows at its edges
      var width = count > 1 ? 2.6 - 1.4 * index / (count - 1) : 1.6;
      var mode = sparse(s.steps) ? "lines+markers" : "lines";
      traces.push({
        x: x, y: s.values, type: "scatter", mode: s.smoothed ? "lines" : mode, name: label,
        legendgroup: name, connectgaps: false, line: { width: s.smoothed ? 1 : width, color: c },
        marker: { size: 5 }, opacity: s.smoothed ? 0.25 : 0.85, showlegend: !s.smoothed,
        hoverinfo: s.smoothed ? "skip" : "all",
      });
      if (s.smoothed) {
        traces.push({
          x: x, y: s.smoothed, type: "scatter", mode: mode, name: label, opacity: 0.85,
          legendgroup: name, connectgaps: false, line: { width: width, color: c }, marker: { size: 5 },
        });
      }
      var bad = nonFinite(s, x, c, name);
      if (bad) marks.push(bad);
    });
    return traces.concat(marks);
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
