#if Console
/// The console's only script (`/assets/console.js`): live updates from the page's event stream (on the job page, a
/// link's row leads to its child job and names it and its worker), and a question before cancelling or removing. It builds every element with `textContent` (never `innerHTML`), so that names
/// stay text; the Content-Security-Policy allows no other script.
enum ConsoleScript {
    static let source = #"""
"use strict";
(function () {
  var body = document.body;

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-confirm]") : null;
    if (button && !window.confirm(button.getAttribute("data-confirm"))) { event.preventDefault(); }
  });

  var live = body.getAttribute("data-live");
  if (!live || !window.EventSource) { return; }
  var view = body.getAttribute("data-view");
  var state = document.getElementById("live-state");

  function setState(text) { if (state) { state.textContent = "live updates: " + text; } }

  function el(tag, className, text) {
    var element = document.createElement(tag);
    if (className) { element.className = className; }
    if (text !== undefined && text !== null) { element.textContent = text; }
    return element;
  }

  function link(base, id, text) {
    var anchor = el("a", null, text);
    anchor.href = base + encodeURIComponent(id);
    return anchor;
  }

  function cell(className, text) { return el("td", className, text === null || text === undefined ? "-" : text); }

  function statusCell(row) {
    var td = el("td", "state");
    td.appendChild(el("span", "status " + row.status + (row.label === "stalled" ? " stalled" : ""), row.label || row.status));
    if (row.failedSteps > 0) {
      td.appendChild(document.createTextNode(" "));
      td.appendChild(el("span", "failed-steps", row.failedSteps.toLocaleString("en-US") + " failed step" + (row.failedSteps === 1 ? "" : "s")));
    }
    return td;
  }

  function barCell(row) {
    var td = el("td", "bar");
    var progress = document.createElement("progress");
    progress.max = 1;
    var value = row.status === "completed" ? 1 : row.progress;
    if (value !== null && value !== undefined) { progress.value = value; }
    td.appendChild(progress);
    td.appendChild(el("span", "percent", row.percent));
    return td;
  }

  function setText(id, text) {
    var element = document.getElementById(id);
    if (element) { element.textContent = text; }
  }

  function listRows(tableID, rows) {
    var table = document.getElementById(tableID);
    if (!table) { return; }
    var base = table.getAttribute("data-base");
    var tbody = table.tBodies[0];
    var fresh = rows.map(function (row) {
      var tr = el("tr");
      tr.setAttribute("data-id", row.id);
      var id = el("td", "id");
      id.appendChild(link(base, row.id, row.id));
      var name = el("td", "name");
      name.appendChild(link(base, row.id, row.name));
      tr.appendChild(id);
      tr.appendChild(name);
      tr.appendChild(cell(null, row.kind));
      tr.appendChild(statusCell(row));
      tr.appendChild(barCell(row));
      tr.appendChild(cell("rate", row.rate));
      tr.appendChild(cell("left", row.left));
      tr.appendChild(cell("step", row.step));
      tr.appendChild(cell("number", String(row.attempt)));
      tr.appendChild(cell("time", row.updated));
      return tr;
    });
    tbody.replaceChildren.apply(tbody, fresh);
    var empty = document.getElementById(tableID + "-empty");
    if (empty) { empty.hidden = rows.length > 0; }
  }

  function treeRows(rows) {
    var table = document.getElementById("tree");
    if (!table) { return; }
    var base = table.getAttribute("data-base");
    var tbody = table.tBodies[0];
    var fresh = rows.map(function (row) {
      var tr = el("tr");
      var depth = "depth-" + Math.min(row.depth, 12);
      if (row.summary !== null && row.summary !== undefined) {
        tr.className = "summary";
        var td = el("td", depth, row.summary);
        td.colSpan = 7;
        tr.appendChild(td);
        return tr;
      }
      tr.setAttribute("data-id", row.id);
      var name = el("td", "name " + depth);
      name.appendChild(link(base, row.job || row.id, row.name));
      if (row.job) {
        name.appendChild(document.createTextNode(" "));
        name.appendChild(el("span", "child", "job " + row.job + (row.worker ? " · " + row.worker : "")));
      }
      tr.appendChild(name);
      tr.appendChild(statusCell(row));
      tr.appendChild(barCell(row));
      tr.appendChild(cell("rate", row.rate));
      tr.appendChild(cell("left", row.left));
      tr.appendChild(cell("step", row.step));
      tr.appendChild(cell("number", String(row.attempt)));
      return tr;
    });
    tbody.replaceChildren.apply(tbody, fresh);
    if (rows.length > 0) {
      var head = document.getElementById("job-progress");
      if (head) { head.replaceChildren.apply(head, Array.prototype.slice.call(barCell(rows[0]).childNodes)); }
      setText("job-rate", rows[0].rate);
      setText("job-left", rows[0].left);
    }
  }

  var svgNS = "http://www.w3.org/2000/svg";

  function chart(minutes) {
    var holder = document.getElementById("throughput");
    var svg = holder ? holder.querySelector("svg") : null;
    if (!svg || !minutes) { return; }
    var width = 600, height = 120, peak = 1;
    minutes.forEach(function (m) { peak = Math.max(peak, m.completed + m.failed); });
    var slot = width / Math.max(1, minutes.length);
    var parts = [];
    var label = document.createElementNS(svgNS, "text");
    label.setAttribute("class", "peak");
    label.setAttribute("x", "2");
    label.setAttribute("y", "12");
    label.textContent = peak + "/min";
    parts.push(label);
    minutes.forEach(function (m, index) {
      var group = document.createElementNS(svgNS, "g");
      var title = document.createElementNS(svgNS, "title");
      title.textContent = m.completed + " completed, " + m.failed + " failed";
      group.appendChild(title);
      var done = m.completed / peak * (height - 20), failed = m.failed / peak * (height - 20);
      [["completed", height - done, done], ["failed", height - done - failed, failed]].forEach(function (bar) {
        var rect = document.createElementNS(svgNS, "rect");
        rect.setAttribute("class", bar[0]);
        rect.setAttribute("x", (index * slot + 1).toFixed(1));
        rect.setAttribute("y", bar[1].toFixed(1));
        rect.setAttribute("width", Math.max(1, slot - 2).toFixed(1));
        rect.setAttribute("height", bar[2].toFixed(1));
        group.appendChild(rect);
      });
      parts.push(group);
    });
    svg.replaceChildren.apply(svg, parts);
  }

  function overview(data) {
    Object.keys(data.byStatus).forEach(function (status) {
      var number = document.querySelector(".number[data-status='" + status + "']");
      if (number) { number.textContent = data.byStatus[status].toLocaleString("en-US"); }
    });
    setText("total", data.total.toLocaleString("en-US"));
    listRows("running", data.running);
    chart(data.throughput);
  }

  var source = new EventSource(live);
  source.addEventListener("open", function () { setState("on"); });
  source.addEventListener("error", function () { setState("reconnecting…"); });
  source.addEventListener("update", function (event) {
    var data;
    try { data = JSON.parse(event.data); } catch (error) { return; }
    setState("on, " + new Date().toLocaleTimeString());
    if (view === "list") {
      listRows("tasks", data.rows);
      setText("footer", data.footer);
    } else if (view === "job") {
      if (data.status !== body.getAttribute("data-status")) {
        source.close();
        window.location.reload();
        return;
      }
      treeRows(data.rows);
    } else if (view === "overview") {
      overview(data);
    }
  });
})();
"""#
}
#endif
