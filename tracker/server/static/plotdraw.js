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

  // "#1f77b4" at this opacity: a band's fill, seen through
  function tint(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + (n >> 8 & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  function medianGap(steps) {
    if (steps.length < 2) return 1;
    var gaps = [];
    for (var i = 1; i < steps.length; i++) gaps.push(steps[i] - steps[i - 1]);
    gaps.sort(function (a, b) { return a - b; });
    return gaps[Math.floor(gaps.length / 2)];
  }

  // An EMA per step over a curve logged every 125 steps keeps W^125 of the mean before each
  // point (0.9^125: nothing): below a tenth it only redraws the points, and is left out.
  var KEPT_AT_LEAST = 0.1;
  function smooths(answer, s) {
    return answer.smooth_by === "point" || Math.pow(answer.smooth, medianGap(s.steps)) >= KEPT_AT_LEAST;
  }

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

  // where the run's notes put a mark (a resume from a checkpoint): a triangle on the curve
  // at that step, its note as the hover text
  function noteMarks(s, x, c, name) {
    var xs = [], ys = [], texts = [];
    (s.marks || []).forEach(function (mark) {
      var i = s.steps.indexOf(mark.step);
      if (i < 0) i = s.steps.findIndex(function (step) { return step > mark.step; });
      if (i < 0 || !finite(s.values[i])) return;
      xs.push(x[i]);
      ys.push(s.values[i]);
      texts.push(name + ": " + mark.text);
    });
    if (!xs.length) return null;
    return { x: xs, y: ys, type: "scatter", mode: "markers", name: name + " resumed",
      legendgroup: name, showlegend: false, text: texts, hoverinfo: "text",
      marker: { symbol: "triangle-down", size: 13, color: c, line: { width: 1.5, color: "#222" } } };
  }

  function runTraces(answer, colour) {
    var traces = [], marks = [], count = answer.series.length;
    answer.series.forEach(function (s, index) {
      if (s.smoothed && !smooths(answer, s)) s = Object.assign({}, s, { smoothed: null });
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
      var noted = noteMarks(s, x, c, name);
      if (noted) marks.push(noted);
    });
    return traces.concat(marks);
  }

  // every band first, each see-through in its group's colour, then every mean above them, the
  // first widest so that a mean under another still shows at its edges
  function groupTraces(answer, colour) {
    var bands = [], means = [], count = answer.groups.length;
    answer.groups.forEach(function (g, index) {
      var c = colour(g.label);
      var x = timed(answer) ? g.times : g.steps;
      var name = esc(answer.group + "=" + g.label) + " (" + g.runs.length + (g.runs.length === 1 ? " run)" : " runs)");
      if (g.low && g.high) {
        bands.push({ x: x, y: g.high, type: "scatter", mode: "lines", line: { width: 0.5, color: tint(c, 0.5) },
          legendgroup: g.label, showlegend: false, hoverinfo: "skip" });
        bands.push({ x: x, y: g.low, type: "scatter", mode: "lines", line: { width: 0.5, color: tint(c, 0.5) },
          fill: "tonexty", fillcolor: tint(c, 0.18), legendgroup: g.label, showlegend: false, hoverinfo: "skip" });
      }
      var width = count > 1 ? 3 - 1.4 * index / (count - 1) : 2;
      means.push({ x: x, y: g.mean, type: "scatter", mode: sparse(g.steps) ? "lines+markers" : "lines",
        name: name, legendgroup: g.label, connectgaps: false, line: { width: width, color: c }, marker: { size: 5 } });
    });
    return bands.concat(means);
  }

  function traces(answer) {
    var colour = colours();
    return answer.groups.length ? groupTraces(answer, colour) : runTraces(answer, colour);
  }

  // A log axis over less than a decade or so gets plotly's ticks at the powers of ten only,
  // none where a loss ends (3.3 between 1 and 10): ticks at 1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8
  // times a power of ten instead, and one at the lowest value drawn.
  var MANTISSAS = [1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8];
  function logTicks(traces) {
    var low = Infinity, high = -Infinity;
    traces.forEach(function (t) {
      (t.y || []).forEach(function (v) {
        if (finite(v) && v > 0) { low = Math.min(low, v); high = Math.max(high, v); }
      });
    });
    if (!(high > low) || high / low > 30) return null;
    var ticks = [];
    for (var e = Math.floor(Math.log10(low)); Math.pow(10, e) <= high; e++) {
      MANTISSAS.forEach(function (m) {
        var v = Number((m * Math.pow(10, e)).toPrecision(3));
        if (v >= low && v <= high) ticks.push(v);
      });
    }
    var scale = Math.pow(10, Math.floor(Math.log10(low)) - 1);
    var lowest = Math.floor(low / scale) * scale; // 3.2796 -> 3.2: two digits, not above it
    lowest = Number(lowest.toPrecision(2));
    if (!ticks.some(function (v) { return Math.abs(Math.log10(v / lowest)) < 0.02; })) ticks.unshift(lowest);
    return ticks.sort(function (a, b) { return a - b; });
  }

  // range: the x range asked for ([low, high], strings from the URL) or null: all of it;
  // traces: what is drawn (a log axis's ticks are chosen from its values)
  function layout(answer, range, height, traces) {
    var drawn = {
      height: height, margin: { l: 70, r: 30, t: 30, b: 50 },
      legend: { orientation: "h", y: -0.15 },
      xaxis: { title: { text: timed(answer) ? "wall time (s)" : "step" }, type: "linear" },
      yaxis: { title: { text: esc(answer.metric) }, type: answer.y === "log" ? "log" : "linear" },
    };
    var ticks = answer.y === "log" && traces ? logTicks(traces) : null;
    if (ticks) {
      drawn.yaxis.tickvals = ticks;
      drawn.yaxis.ticktext = ticks.map(String);
    }
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
