/* The tables of the mtlbench leaderboard site: a click on a column header sorts the rows by
   that column (again: the other way), a filter box keeps the rows holding every word typed.
   No dependency, no network.  Cells sort by their data-sort value (a number when it reads as
   one); an empty value sorts last in both directions. */
(function () {
  "use strict";

  function sortKey(cell) {
    var v = cell ? cell.getAttribute("data-sort") : null;
    if (v === null) { v = cell ? cell.textContent.trim() : ""; }
    if (v === "") { return null; }
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }

  function compare(a, b, dir) {
    if (a === null || b === null) { return a === b ? 0 : (a === null ? 1 : -1); }
    if (typeof a !== typeof b) { a = String(a); b = String(b); }
    return a < b ? -dir : (a > b ? dir : 0);
  }

  function sortTable(table, col) {
    var th = table.tHead.rows[0].cells[col];
    var current = th.getAttribute("aria-sort");
    var first = th.getAttribute("data-first") || "ascending";
    var next = current === null || current === "none" ? first :
      (current === "ascending" ? "descending" : "ascending");
    var dir = next === "ascending" ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r, s) { return compare(sortKey(r.cells[col]), sortKey(s.cells[col]), dir); });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
      h.setAttribute("aria-sort", "none");
    });
    th.setAttribute("aria-sort", next);
  }

  function makeSortable(table) {
    if (!table.tHead) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      var button = document.createElement("button");
      button.type = "button";
      button.title = "sort by this column";
      while (th.firstChild) { button.appendChild(th.firstChild); }
      th.appendChild(button);
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", function () { sortTable(table, col); });
    });
  }

  function filterTable(table, text, count) {
    var words = text.toLowerCase().split(/\s+/).filter(function (w) { return w; });
    var shown = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var hay = row.textContent.toLowerCase();
      var keep = words.every(function (w) { return hay.indexOf(w) >= 0; });
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    if (count) {
      count.textContent = words.length ? shown + " of " + table.tBodies[0].rows.length + " rows" : "";
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
    Array.prototype.forEach.call(document.querySelectorAll("input[data-filter]"), function (box) {
      var id = box.getAttribute("data-filter");
      var table = document.getElementById(id);
      var count = document.querySelector('[data-count="' + id + '"]');
      if (!table) { return; }
      box.addEventListener("input", function () { filterTable(table, box.value, count); });
      if (box.value) { filterTable(table, box.value, count); }
    });
  });
}());
