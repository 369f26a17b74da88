(function () {
  var warning = document.getElementById('plotly-missing');
  if (!window.Plotly) { if (warning) warning.style.display = 'block'; return; }
  document.querySelectorAll('div.plot[data-figure]').forEach(function (div) {
    var fig = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    Plotly.newPlot(div, fig.data, fig.layout, {responsive: true, displaylogo: false});
  });
})();
