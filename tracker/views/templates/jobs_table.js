(function () {
  var table = document.getElementById('jobs-table');
  if (!table) return;
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  // what the filter matches: the row's text (name, time, counts, metadata), lower case
  var texts = rows.map(function (row) { return row.textContent.toLowerCase(); });
  var filter = document.getElementById('jobs-filter');
  var status = document.getElementById('jobs-status');
  var info = document.getElementById('jobs-info');
  var prev = document.getElementById('jobs-prev');
  var next = document.getElementById('jobs-next');
  var size = parseInt(table.dataset.pageSize, 10) || 25;
  var page = 0;
  var shown = rows;
  function draw() {
    var first = page * size;
    rows.forEach(function (row) { row.hidden = true; });
    shown.slice(first, first + size).forEach(function (row) { row.hidden = false; });
    info.textContent = shown.length
      ? 'jobs ' + (first + 1) + '\u2013' + Math.min(first + size, shown.length) + ' of ' + shown.length +
        (shown.length < rows.length ? ' (filtered from ' + rows.length + ')' : '')
      : 'no job matches (of ' + rows.length + ')';
    prev.disabled = page === 0;
    next.disabled = first + size >= shown.length;
  }
  function apply() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    var wanted = status.value;
    shown = rows.filter(function (row, i) {
      return (!wanted || row.className === wanted) &&
        words.every(function (word) { return texts[i].indexOf(word) >= 0; });
    });
    page = 0;
    draw();
  }
  filter.addEventListener('input', apply);
  status.addEventListener('change', apply);
  prev.addEventListener('click', function () { if (page > 0) { page--; draw(); } });
  next.addEventListener('click', function () { if ((page + 1) * size < shown.length) { page++; draw(); } });
  apply();
})();
