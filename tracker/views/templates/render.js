(function () {
  // The figures in the first screen are drawn as soon as plotly is there, before the load
  // event, so that a screenshot taken on load shows them; the others after the load event,
  // one per task: the page's text and tables show without waiting for them, and input is
  // answered between two figures (the index of 1,000 jobs spent most of its load drawing
  // its six). Printing (a print to PDF too) first draws every figure not yet drawn.
  var plots = Array.prototype.slice.call(document.querySelectorAll('div.plot[data-figure]'));
  function draw(div) {
    var fig = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    Plotly.newPlot(div, fig.data, fig.layout, {responsive: true, displaylogo: false});
  }
  function drawNext() {
    var div = plots.shift();
    if (!div) return;
    draw(div);
    setTimeout(drawNext, 0);
  }
  function drawAll() {
    if (!window.Plotly) return;
    while (plots.length) draw(plots.shift());
  }
  function onScreen(div) {
    var box = div.getBoundingClientRect();
    return box.top < window.innerHeight && box.bottom > 0;
  }
  function drawFirstScreen() {
    var warning = document.getElementById('plotly-missing');
    if (!window.Plotly) { if (warning) warning.style.display = 'block'; return; }
    plots.filter(onScreen).forEach(draw);
    plots = plots.filter(function (div) { return !div.classList.contains('js-plotly-plot'); });
  }
  function start() {
    if (window.Plotly) drawNext();
  }
  // A printed page is narrower than most screens: each figure is drawn to fit one (A4 or
  // Letter, default margins), then to the screen's width again.
  var PRINT_WIDTH = 680;
  function eachDrawn(change) {
    Array.prototype.forEach.call(document.querySelectorAll('.js-plotly-plot'), change);
  }
  window.addEventListener('beforeprint', function () {
    drawAll();
    eachDrawn(function (div) {
      if (div.clientWidth > PRINT_WIDTH) Plotly.relayout(div, {width: PRINT_WIDTH});
    });
  });
  window.addEventListener('afterprint', function () {
    eachDrawn(function (div) {
      if (div.layout.width === PRINT_WIDTH) Plotly.relayout(div, {width: null, autosize: true});
    });
  });
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', drawFirstScreen);  // after deferred plotly
  } else {
    drawFirstScreen();
  }
  if (document.readyState === 'complete') start();
  else window.addEventListener('load', function () { setTimeout(start, 0); });  // not in the event
})();
