// Sorts and filters the tensor table from the JSON embedded beside it. Rows are built lazily
// (the first LIMIT of the current order) so a page with thousands of tensors opens at once.
(function () {
  var keys = JSON.parse(document.getElementById("tensor-keys").textContent);
  var data = JSON.parse(document.getElementById("tensor-data").textContent).map(function (a) {
    var row = {};
    keys.forEach(function (k, i) { row[k] = a[i]; });
    row.first = a[keys.length];
    return row;
  });
  var body = document.querySelector("#tensors tbody");
  var only = document.getElementById("only-differing");
  var count = document.getElementById("tensor-count");
  var NUMERIC = ["index", "mismatches", "elements", "max_abs_diff", "max_ulp_diff", "sqnr_db"];
  var LIMIT = 500, key = "index", dir = 1;

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function fmt(v) {
    if (v === null || v === undefined) return "\u2013";
    if (typeof v !== "number") return esc(v);
    return Number.isInteger(v) ? v.toLocaleString() : v.toPrecision(4);
  }
  function order(a, b) {
    var x = a[key], y = b[key];
    if (x === y) return 0;
    if (x === null) return 1;  // no figure: last, whichever the direction
    if (y === null) return -1;
    return (x < y ? -1 : 1) * dir;
  }
  function draw() {
    var rows = data.filter(function (r) { return !only.checked || r.mismatches > 0; });
    rows.sort(order);
    count.textContent = rows.length + " tensors" +
      (rows.length > LIMIT ? " (first " + LIMIT + " shown)" : "");
    body.innerHTML = rows.slice(0, LIMIT).map(function (r) {
      return "<tr" + (r.first ? ' class="bad"' : "") + ">" + keys.map(function (k) {
        var numeric = NUMERIC.indexOf(k) >= 0;
        return (numeric ? '<td class="num">' : "<td>") + fmt(r[k]) + "</td>";
      }).join("") + "</tr>";
    }).join("");
  }
  document.querySelectorAll("#tensors th").forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.getAttribute("data-key");
      dir = k === key ? -dir : 1;
      key = k;
      draw();
    });
  });
  only.addEventListener("change", draw);
  draw();
})();
