// Draws every figure of a page from its JSON block (no inline script: the CSP forbids it).
(function () {
  "use strict";
  document.querySelectorAll("div.plot[data-figure]").forEach(function (div) {
    var figure = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    Plotly.newPlot(div, figure.data, figure.layout, { responsive: true, displaylogo: false });
  });
})();
