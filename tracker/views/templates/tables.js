// Every data table of a page sorts by a click on a column's header and filters by a text box
// above it. A table with data-controls="P" uses the page's own controls P-filter, P-info and,
// when present, P-status (rows of that class), P-prev/P-next (pages of data-page-size rows);
// any other table gets a filter box and a count. A header holding a link (a.sort) is sorted
// by the server and left alone; a table with data-controls="served" is filtered and paged by
// the server too (its controls are a form, sent again when its verdicts choice changes).
// Cells are only moved, hidden and read: nothing is parsed as HTML, so values from the
// database stay inert.
(function () {
  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: 'base'});
  // a leading number: 1,234 / -0.5 / 3e-4 / NaN / inf (what the value filter writes)
  var NUMBER = /^[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?|^[+-]?(?:inf(?:inity)?|nan)\b/i;
  var MISSING = {'': true, '\u2014': true, '\u2013': true, '-': true};

  function cellText(cell) { return cell ? cell.textContent.trim() : ''; }
  function leadingNumber(text) {
    var found = NUMBER.exec(text);
    if (!found) return null;
    var word = found[0].toLowerCase().replace(/,/g, '');
    if (word.indexOf('nan') >= 0) return NaN;
    if (word.indexOf('inf') >= 0) return word.charAt(0) === '-' ? -Infinity : Infinity;
    return parseFloat(word);
  }
  // A column is numeric when its header says so (class num) or every value is one number.
  function columnKeys(rows, index, numericHeader) {
    var texts = rows.map(function (row) { return cellText(row.cells[index]); });
    var numeric = numericHeader || texts.every(function (text) {
      if (MISSING[text]) return true;
      var found = NUMBER.exec(text);
      return found !== null && found[0].length === text.length;
    });
    return texts.map(function (text) {
      if (MISSING[text]) return {missing: true};
      if (!numeric) return {text: text};
      var number = leadingNumber(text);
      return number === null ? {missing: true} : {number: number};
    });
  }
  // ascending: -inf, numbers, inf, NaN; missing values last in either direction
  function compare(a, b, direction) {
    if (a.missing || b.missing) return (a.missing ? 1 : 0) - (b.missing ? 1 : 0);
    if (a.text !== undefined) return direction * collator.compare(a.text, b.text);
    var nanA = a.number !== a.number, nanB = b.number !== b.number;
    if (nanA || nanB) return direction * ((nanA ? 1 : 0) - (nanB ? 1 : 0));
    return direction * (a.number < b.number ? -1 : a.number > b.number ? 1 : 0);
  }

  var made = 0;
  function control(prefix, suffix) { return document.getElementById(prefix + '-' + suffix); }
  // the filter box and the count a table without its own controls gets, before the table
  // (or before the box that scrolls it)
  function makeControls(table, prefix) {
    var tools = document.createElement('div');
    tools.className = 'table-controls';
    var label = document.createElement('label');
    label.textContent = 'Filter ';
    var input = document.createElement('input');
    input.type = 'search';
    input.id = prefix + '-filter';
    input.placeholder = 'words in a row';
    input.autocomplete = 'off';
    input.setAttribute('aria-controls', table.id);
    label.appendChild(input);
    var info = document.createElement('span');
    info.id = prefix + '-info';
    info.className = 'muted';
    info.setAttribute('aria-live', 'polite');
    tools.appendChild(label);
    tools.appendChild(document.createTextNode(' '));
    tools.appendChild(info);
    var wrapper = table.parentElement.children.length === 1 && table.parentElement.tagName === 'DIV'
      ? table.parentElement : table;
    wrapper.parentElement.insertBefore(tools, wrapper);
  }

  function enhance(table) {
    var body = table.tBodies[0];
    var header = table.tHead && table.tHead.rows[0];
    if (!body || !header) return;
    if (table.dataset.controls === 'served') return;
    if (!table.id) table.id = 'table-' + (++made);
    var prefix = table.dataset.controls || table.id;
    if (!control(prefix, 'filter')) makeControls(table, prefix);
    var filter = control(prefix, 'filter');
    var info = control(prefix, 'info');
    var status = control(prefix, 'status');
    // rows of one group only (data-group), chosen in the select the table names
    var group = document.getElementById(table.dataset.groupSelect || '');
    var prev = control(prefix, 'prev');
    var next = control(prefix, 'next');
    var paged = Boolean(prev && next);
    var size = parseInt(table.dataset.pageSize, 10) || 25;
    var rows = Array.prototype.slice.call(body.rows);
    // what the filter matches: the row's text, lower case
    var texts = new Map(rows.map(function (row) { return [row, row.textContent.toLowerCase()]; }));
    var page = 0;
    var shown = rows;

    function draw() {
      var first = page * size;
      var visible = paged ? shown.slice(first, first + size) : shown;
      rows.forEach(function (row) { row.hidden = true; });
      visible.forEach(function (row) { row.hidden = false; });
      if (!paged) {
        info.textContent = shown.length + ' of ' + rows.length + ' rows';
        return;
      }
      // the one paged table is the jobs table: its count names jobs
      info.textContent = shown.length
        ? 'jobs ' + (first + 1) + '\u2013' + Math.min(first + size, shown.length) + ' of ' + shown.length +
          (shown.length < rows.length ? ' (filtered from ' + rows.length + ')' : '')
        : 'no job matches (of ' + rows.length + ')';
      prev.disabled = page === 0;
      next.disabled = first + size >= shown.length;
    }
    function apply() {
      var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      var wanted = status ? status.value : '';
      var inGroup = group ? group.value : '';
      shown = rows.filter(function (row) {
        var text = texts.get(row);
        return (!wanted || row.className === wanted) && (!inGroup || row.dataset.group === inGroup) &&
          words.every(function (word) { return text.indexOf(word) >= 0; });
      });
      page = 0;
      draw();
    }
    function sortBy(th) {
      var direction = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
      Array.prototype.forEach.call(header.cells, function (cell) { cell.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', direction === 1 ? 'ascending' : 'descending');
      var keys = columnKeys(rows, th.cellIndex, th.classList.contains('num'));
      var order = rows.map(function (row, i) { return i; });
      order.sort(function (i, j) { return compare(keys[i], keys[j], direction) || i - j; });
      rows = order.map(function (i) { return rows[i]; });
      rows.forEach(function (row) { body.appendChild(row); });
      apply();
    }
    Array.prototype.forEach.call(header.cells, function (th) {
      if (th.querySelector('a.sort')) return;  // the server sorts by this column
      var button = document.createElement('button');
      button.type = 'button';
      button.className = 'sort';
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener('click', function () { sortBy(th); });
    });
    filter.addEventListener('input', apply);
    if (status) status.addEventListener('change', apply);
    if (group) group.addEventListener('change', apply);
    if (prev) prev.addEventListener('click', function () { if (page > 0) { page--; draw(); } });
    if (next) next.addEventListener('click', function () { if ((page + 1) * size < shown.length) { page++; draw(); } });
    apply();
  }

  Array.prototype.forEach.call(document.querySelectorAll('main table'), enhance);
  var served = document.querySelector('form.jobs-controls select[name="status"]');
  if (served) served.addEventListener('change', function () { served.form.submit(); });

  // the claims' counts by status, of the group chosen (every claim when none is)
  var groups = document.getElementById('claims-group');
  if (groups) {
    groups.addEventListener('change', function () {
      var rows = document.querySelectorAll('table.claims tbody tr');
      Array.prototype.forEach.call(document.querySelectorAll('#claims-counts .chip'), function (chip) {
        var n = Array.prototype.filter.call(rows, function (row) {
          return row.dataset.status === chip.dataset.status && (!groups.value || row.dataset.group === groups.value);
        }).length;
        chip.textContent = n + ' ' + chip.dataset.status.replace('_', ' ');
        chip.classList.toggle('zero', n === 0);
      });
    });
  }
})();
