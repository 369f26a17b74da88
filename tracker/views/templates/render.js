(function () {
  // The figures are drawn after the load event, one per task: the page's text and tables
  // show without waiting for them, and input is answered between two figures (the index
  // of 1,000 jobs spent most of its load drawing its six).
  var plots = Array.prototype.slice.call(document.querySelectorAll('div.plot[data-figure]'));
  function drawNext() {
    var div = plots.shift();
    if (!div) return;
    var fig = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    Plotly.newPlot(div, fig.data, fig.layout, {responsive: true, displaylogo: false});
    setTimeout(drawNext, 0);
  }
  function start() {
    var warning = document.getElementById('plotly-missing');
    if (!window.Plotly) { if (warning) warning.style.display = 'block'; return; }
    drawNext();
  }
  if (document.readyState === 'complete') start();
  else window.addEventListener('load', function () { setTimeout(start, 0); });  // not in the event
})();
