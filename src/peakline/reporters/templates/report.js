/* peakline HTML report, part 2: reads the embedded data and builds the page: summary, memory
 * timeline, peak holders, leaks, per-file line tables (sortable), functions, call stacks. */
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("peakline-data").textContent);
  var P = data.profile, S = data.settings, el = PL.el;
  var hasMem = P.peak_bytes !== undefined && P.peak_bytes !== null;
  /* idle background threads' waiting (Profile.background_wait_by_thread): shown apart, not
   * in the denominator of the user's percentages */
  var bgWait = data.backgroundWait || {}, bgTotal = 0;
  Object.keys(bgWait).forEach(function (tid) { bgTotal += bgWait[tid]; });
  /* run_delay_s: runnable but not scheduled (CPU contention); absent in older profiles */
  var T = P.totals, userWait = Math.max(0, T.wait_s - bgTotal);
  var sampled = T.cpu_python_s + T.cpu_native_s + T.cpu_system_s + userWait + (T.run_delay_s || 0);
  var share = function (s) { return sampled > 0 ? 100 * s / sampled : 0; };
  var total = function (r) { return r.cpu_python_s + r.cpu_native_s + r.cpu_system_s + r.wait_s + (r.run_delay_s || 0); };
  var hasDelay = (T.run_delay_s || 0) > 0;
  var alloc = function (r) { return (r.alloc_python_bytes || 0) + (r.alloc_native_bytes || 0); };
  var pyShare = function (r) { var a = alloc(r); return a > 0 ? 100 * (r.alloc_python_bytes || 0) / a : null; };
  var fileNames = Object.keys(P.files);
  var fileIndex = {};
  fileNames.forEach(function (f, i) { fileIndex[f] = i; });
  var threadNames = {};
  P.threads.forEach(function (t) {
    threadNames[t.tid] = (t.name || (t.python ? "thread" : "native thread")) + " (" + t.tid + ")" +
      (bgWait[t.tid] ? " \u00b7 background, waited " + PL.fmtSeconds(bgWait[t.tid]) + " (not counted)" : "");
  });
  var held = {}, leaky = {};
  data.peakHolders.forEach(function (h) { held[h[0] + "\u0000" + h[1]] = h[2]; });
  data.leaks.forEach(function (l) { leaky[l[0] + "\u0000" + l[1]] = true; });
  var place = function (f, n) {
    var base = PL.baseName(f), same = fileNames.filter(function (g) { return PL.baseName(g) === base; }).length;
    return (same > 1 ? f : base) + ":" + (n || "?");
  };
  var sourceLine = function (f, n) { var src = data.sources[f]; return src && n > 0 && n <= src.length ? src[n - 1] : ""; };
  var lineAnchor = function (f, n) { return "L" + fileIndex[f] + "-" + n; };
  /* One scale for every per-line sparkline: the largest any line held. */
  var sparkScale = 0;
  fileNames.forEach(function (f) { P.files[f].lines.forEach(function (r) {
    (r.timeline || []).forEach(function (p) { if (p[1] > sparkScale) sparkScale = p[1]; });
  }); });
  function linkTo(f, n) {
    var a = el("a", null, place(f, n));
    a.href = "#" + lineAnchor(f, n);
    return a;
  }

  /* -- summary ---------------------------------------------------------------------------- */
  function fact(parent, label, value, cls) {
    var d = el("span", "fact" + (cls ? " " + cls : ""));
    d.appendChild(document.createTextNode(label + " "));
    d.appendChild(el("b", null, value));
    parent.appendChild(d);
    return d;
  }
  function summary() {
    var h = document.getElementById("summary");
    var h1 = el("h1");
    h1.appendChild(el("span", "brand", "peakline"));
    h1.appendChild(document.createTextNode((P.argv.length ? P.argv.join(" ") : P.program)));
    h.appendChild(h1);
    var facts = el("div", "facts");
    fact(facts, "elapsed", PL.fmtSeconds(P.elapsed_s) || "0 s");
    fact(facts, "exit code", P.exit_code === null ? "n/a" : String(P.exit_code));
    if (P.attached) fact(facts, "attached", "to a running process; memory counts from the attach moment");
    if (P.snapshot) {
      fact(facts, "snapshot", "#" + P.snapshot.sequence + " (" + P.snapshot.trigger + ") of a running program, " +
           P.snapshot.start_s.toFixed(2) + "-" + P.snapshot.end_s.toFixed(2) + " s, taken " + P.snapshot.taken_at);
    }
    var cpu = T.cpu_python_s + T.cpu_native_s + T.cpu_system_s;
    fact(facts, "CPU", PL.fmtSeconds(cpu) || "0 s");
    fact(facts, "wait", PL.fmtSeconds(userWait) || "0 s").title = "off CPU: sleep, I/O, locks, the GIL";
    if (hasDelay) fact(facts, "run delay", PL.fmtSeconds(T.run_delay_s)).title =
      "runnable but not scheduled: other processes on the CPU, a CPU quota (not the program waiting)";
    if (T.cgroup_throttled_s) fact(facts, "cgroup CPU quota throttled", PL.fmtSeconds(T.cgroup_throttled_s) +
      " (" + (T.cgroup_throttled_periods || 0) + " periods)", "warn");
    if (bgTotal > 0) fact(facts, "idle background threads waited", PL.fmtSeconds(bgTotal) + " (not counted)").id = "fact-background";
    fact(facts, "attributed", (sampled > 0 ? (100 * (1 - Math.max(0, T.unattributed_s - bgTotal) / sampled)).toFixed(1) : "0") + "%");
    var smp = P.sampling;
    fact(facts, "samples", (smp.cpu_samples + smp.wait_samples) + " (" + smp.cpu_samples + " CPU, " + smp.wait_samples + " wait)");
    var nBg = Object.keys(bgWait).length;
    fact(facts, "threads", String(P.threads.length) + (nBg ? " (" + nBg + " idle in library code)" : ""));
    if (hasMem) {
      var m = P.memory || {};
      var basis = data.peakBasis || { kind: "process" };
      if (basis.kind === "process") {
        fact(facts, "peak", PL.fmtBytes(P.peak_bytes) + (m.peak_time_s !== undefined ? " at " + m.peak_time_s.toFixed(2) + " s" : ""), "big").id = "fact-peak";
        if (P.peak_rss_bytes !== undefined) fact(facts, "peak RSS", PL.fmtBytes(P.peak_rss_bytes));
      } else {
        /* merged processes: every figure says which process(es) it covers */
        if (basis.kind === "tree") fact(facts, "peak of the process tree", PL.fmtBytes(basis.bytes) + " at " + basis.time_s.toFixed(2) + " s (all processes together)", "big").id = "fact-peak";
        var largest = fact(facts, "largest single-process peak", PL.fmtBytes(P.peak_bytes), basis.kind === "tree" ? undefined : "big");
        if (basis.kind !== "tree") largest.id = "fact-peak";
        if (P.peak_bytes_sum !== undefined) fact(facts, "sum of the processes' peaks", PL.fmtBytes(P.peak_bytes_sum));
        if (P.peak_rss_bytes !== undefined) fact(facts, "largest peak RSS", PL.fmtBytes(P.peak_rss_bytes));
      }
      if (data.blasNote) fact(facts, "BLAS buffers", data.blasNote);
      var who = basis.kind === "process" ? "" : "parent: ";
      if (m.growth_rate_bytes_s !== undefined) fact(facts, who + "growth", PL.fmtBytes(m.growth_rate_bytes_s, true) + "/s");
      if (m.live_end_bytes !== undefined) fact(facts, who + "live at end", PL.fmtBytes(m.live_end_bytes));
      if (m.sampling_interval_bytes) fact(facts, "memory sampled every", PL.fmtBytes(m.sampling_interval_bytes));
    } else {
      fact(facts, "memory", "not profiled (--cpu-only)");
    }
    if (smp.dropped_samples) fact(facts, "dropped samples", String(smp.dropped_samples), "warn");
    if (smp.truncated_stacks) {
      var chip = fact(facts, "truncated stacks", String(smp.truncated_stacks), "warn");
      chip.id = "fact-truncated";
      chip.title = "stacks deeper than 128 frames lost their middle; " + data.truncatedNote;
    }
    if (smp.invalid_frames) fact(facts, "invalid frames", String(smp.invalid_frames), "warn");
    h.appendChild(facts);
    /* figures that need a sentence, said where they appear */
    if (hasMem && data.rssNote) h.appendChild(el("p", "note figure-note", "peak " + PL.fmtBytes(P.peak_bytes) +
      " > peak RSS " + PL.fmtBytes(P.peak_rss_bytes) + ": " + data.rssNote + "."));
    if (smp.truncated_stacks) h.appendChild(el("p", "note figure-note", smp.truncated_stacks +
      " truncated stacks: deeper than 128 frames, their middle was cut; " + data.truncatedNote + "."));
    var split = el("div", "split"), legend = el("div", "legend");
    [["Python", T.cpu_python_s, "--py"], ["native", T.cpu_native_s, "--native"],
     ["system", T.cpu_system_s, "--system"], ["wait", userWait, "--wait"]]
      .concat(hasDelay ? [["run delay", T.run_delay_s, "--delay"]] : []).forEach(function (c) {
      var seg = el("span");
      seg.style.width = (sampled > 0 ? 100 * c[1] / sampled : 0) + "%";
      seg.style.background = "var(" + c[2] + ")";
      seg.title = c[0] + " " + PL.fmtSeconds(c[1]);
      split.appendChild(seg);
      var key = el("i");
      key.style.background = "var(" + c[2] + ")";
      legend.appendChild(key);
      legend.appendChild(document.createTextNode(c[0] + " " + PL.fmtPercent(share(c[1]))));
    });
    h.appendChild(split);
    h.appendChild(legend);
  }

  /* -- sortable tables -------------------------------------------------------------------- */
  /* columns: {label, title, group: header over a run of columns, value(row) -> number|string|null,
   *           show(row) -> string|Node, tip(row) -> cell title, text: left-aligned,
   *           asc: sort ascending first, nosort} */
  function table(columns, rows, rowSetup) {
    var t = el("table"), thead = el("thead"), gr = el("tr", "groups"), hr = el("tr"), tbody = el("tbody");
    var starts = columns.map(function (c, i) { return i > 0 && c.group !== columns[i - 1].group; });
    var cellClass = function (c, i) { return (c.text ? "text" : "") + (c.cls ? " " + c.cls : "") + (starts[i] ? " group-start" : ""); };
    var items = rows.map(function (row) {
      var tr = el("tr");
      columns.forEach(function (c, i) {
        var td = el("td", cellClass(c, i));
        var shown = c.show ? c.show(row) : c.value(row);
        if (shown instanceof Node) td.appendChild(shown);
        else if (shown !== null && shown !== undefined) td.textContent = String(shown);
        if (c.tip && td.textContent) td.title = c.tip(row);
        tr.appendChild(td);
      });
      if (rowSetup) rowSetup(row, tr);
      tbody.appendChild(tr);
      return { row: row, tr: tr };
    });
    var current = null, descending = true;
    columns.forEach(function (c, i) {
      if (i === 0 || starts[i]) {
        var span = 1;
        while (i + span < columns.length && !starts[i + span]) span++;
        var g = el("th", "group" + (starts[i] ? " group-start" : ""), c.group || "");
        g.colSpan = span;
        gr.appendChild(g);
      }
      var th = el("th", cellClass(c, i).replace(/\bsrc\b|\blineno\b/g, ""), c.label);
      if (c.title) th.title = c.title;
      if (!c.nosort) {
        th.classList.add("sortable");
        th.addEventListener("click", function () { sortBy(i, current === i ? !descending : !c.asc); });
      }
      hr.appendChild(th);
    });
    function sortBy(i, desc) {
      var c = columns[i], key = function (it) { var v = c.value(it.row); return v === null || v === undefined || v === "" ? null : v; };
      items.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) return x === y ? 0 : (x === null ? 1 : -1);
        var r = x < y ? -1 : x > y ? 1 : 0;
        return desc ? -r : r;
      });
      items.forEach(function (it) { tbody.appendChild(it.tr); });
      Array.prototype.forEach.call(hr.children, function (th, j) {
        th.classList.remove("sorted-asc", "sorted-desc");
        if (j === i) th.classList.add(desc ? "sorted-desc" : "sorted-asc");
      });
      current = i; descending = desc;
    }
    if (columns.some(function (c) { return c.group; })) thead.appendChild(gr);
    thead.appendChild(hr);
    t.appendChild(thead);
    t.appendChild(tbody);
    return { table: t, sortBy: sortBy, items: items };
  }
  var pctCol = function (label, key) {
    return { label: label, group: "Time", value: function (r) { return share(r[key] || 0) || null; },
             show: function (r) { return PL.fmtPercent(share(r[key] || 0)); },
             tip: function (r) { return PL.fmtSeconds(r[key]); } };
  };
  var bytesCol = function (group, label, get, signed, title) {
    return { label: label, group: group, title: title, value: function (r) { var v = get(r); return v ? v : null; },
             show: function (r) { return PL.fmtBytesShort(get(r), signed); },
             tip: function (r) { var v = get(r); return PL.fmtBytes(v, signed) + " (" + v + " bytes)"; } };
  };
  var pyShareCol = function (group) {
    return { label: "Python %", group: group, title: "share of allocated bytes that were Python objects",
             value: pyShare, show: function (r) { var v = pyShare(r); return v === null ? "" : v.toFixed(0) + "%"; } };
  };
  function timeColumns() {
    var totalCol = { label: "total", group: "Time", title: "share of sampled time (CPU + wait" + (hasDelay ? " + run delay)" : ")"),
                     value: function (r) { return share(total(r)) || null; },
                     tip: function (r) { return PL.fmtSeconds(total(r)) + " of " + PL.fmtSeconds(sampled) + " sampled"; },
                     show: function (r) {
                       var p = share(total(r));
                       if (!p) return "";
                       var s = el("span"), b = el("span", "bar");
                       b.style.width = Math.max(1, Math.min(40, 0.4 * p)) + "px";
                       s.appendChild(b); s.appendChild(document.createTextNode(PL.fmtPercent(p)));
                       return s;
                     } };
    return [totalCol, pctCol("Python", "cpu_python_s"), pctCol("native", "cpu_native_s"),
            pctCol("system", "cpu_system_s"),
            { label: "wait", group: "Time", title: "off CPU: sleep, I/O, locks, the GIL", value: function (r) { return r.wait_s || null; }, show: function (r) { return PL.fmtSeconds(r.wait_s); } }]
      .concat(hasDelay ? [{ label: "run delay", group: "Time", title: "runnable but not scheduled: other processes on the CPU, a CPU quota",
                            value: function (r) { return r.run_delay_s || null; }, show: function (r) { return PL.fmtSeconds(r.run_delay_s); } }] : []);
  }
  function memoryColumns(lineLevel) {
    if (!hasMem) return [];
    var cols = [
      bytesCol("Allocated", "Python", function (r) { return r.alloc_python_bytes; }, false, "bytes allocated as Python objects"),
      bytesCol("Allocated", "native", function (r) { return r.alloc_native_bytes; }, false, "bytes allocated by native code (malloc, mmap)"),
      pyShareCol("Allocated"),
      bytesCol("Memory", "freed", function (r) { return r.free_bytes; }),
      bytesCol("Memory", "net", function (r) { return r.net_bytes; }, true, "allocated minus freed: what the line still holds at the end"),
      bytesCol("Memory", "at peak", function (r) { return r.live_at_peak_bytes; }, false, P.processes && P.processes.length > 1 ? "what the line held at its process's own peak, summed over processes" : "what the line held when the heap peaked")];
    if (lineLevel) {
      cols.push({ label: "timeline", group: "Memory", title: "the line's live bytes over the run (sorts by its maximum)",
                  value: function (r) { return r.timeline && r.timeline.length ? Math.max.apply(null, r.timeline.map(function (p) { return p[1]; })) || null : null; },
                  show: function (r) { return PL.sparkline(r.timeline, P.elapsed_s, sparkScale) || ""; } });
      cols.push({ label: "leak", group: "Memory", title: "leak likelihood (flagged from " + (100 * S.leakThreshold).toFixed(0) + "%)",
                  value: function (r) { return r.leak_likelihood || null; },
                  show: function (r) { return r.leak_likelihood ? (100 * r.leak_likelihood).toFixed(0) + "%" : ""; },
                  tip: function (r) { return "growing " + PL.fmtBytes(r.leak_rate_bytes_s || 0, true) + "/s"; } });
    }
    cols.push(bytesCol("Copy", "bytes", function (r) { return r.copy_bytes; }, false, "bytes copied by memcpy/memmove (sampled)"));
    if (lineLevel) cols.push({ label: "MB/s", group: "Copy", value: function (r) { return r.copy_mb_s || null; },
                               show: function (r) { return r.copy_mb_s ? r.copy_mb_s.toFixed(r.copy_mb_s < 10 ? 2 : 0) : ""; } });
    return cols;
  }

  /* -- memory ------------------------------------------------------------------------------ */
  /* What the lines held at time t (seconds since start), largest first: each line's own
   * timeline (sampled estimates, points at aggregator ticks where it changed) read at t. */
  function liveAt(t) {
    var out = [];
    fileNames.forEach(function (f) { P.files[f].lines.forEach(function (r) {
      if (!r.timeline || !r.timeline.length) return;
      var v = PL.valueAt(r.timeline, t);
      if (v > 0) out.push([place(f, r.lineno) + "  " + sourceLine(f, r.lineno).trim().slice(0, 48), v]);
    }); });
    out.sort(function (a, b) { return b[1] - a[1]; });
    return out.slice(0, 5);
  }
  function memory() {
    if (!hasMem) return;
    var sec = document.getElementById("memory");
    sec.hidden = false;
    var basis = data.peakBasis || { kind: "process" };
    if (basis.kind === "tree") {
      PL.timelineChart(document.getElementById("timeline-chart"), P.tree_timeline || [], P.elapsed_s,
                       basis.bytes, basis.time_s || 0);
    } else {
      PL.timelineChart(document.getElementById("timeline-chart"), P.timeline || [], P.elapsed_s,
                       P.peak_bytes, (P.memory || {}).peak_time_s || 0,
                       { phases: P.phases || [], liveAt: liveAt });
    }
    var recs = {};
    fileNames.forEach(function (f) { P.files[f].lines.forEach(function (r) { recs[f + "\u0000" + r.lineno] = r; }); });
    if (data.peakHolders.length) {
      var hs = document.getElementById("peak-holders");
      hs.hidden = false;
      hs.querySelector("h2").textContent = "Lines holding memory at " + basis.title + " (" + PL.fmtBytes(basis.bytes) +
        (basis.time_s !== null && basis.time_s !== undefined ? " at " + basis.time_s.toFixed(2) + " s" : "") +
        (basis.kind === "tree" ? ", all processes together" : basis.kind === "each_process" ? ": the sum of the processes' peaks" : "") + ")";
      var rows = data.peakHolders.map(function (h) { return { f: h[0], n: h[1], share: h[2], held: h[3], r: recs[h[0] + "\u0000" + h[1]] }; });
      hs.querySelector(".table-wrap").appendChild(table([
        { label: "line", text: true, value: function (x) { return place(x.f, x.n); }, show: function (x) { return linkTo(x.f, x.n); } },
        { label: "source", text: true, cls: "src", nosort: true, value: function (x) { return sourceLine(x.f, x.n); }, tip: function (x) { return sourceLine(x.f, x.n); } },
        { label: "held at peak", value: function (x) { return x.held; }, show: function (x) { return "\u25B2 " + PL.fmtBytes(x.held); } },
        { label: "% of peak", value: function (x) { return x.share; }, show: function (x) { return (100 * x.share).toFixed(0) + "%"; } },
        { label: "Python %", value: function (x) { return pyShare(x.r); }, show: function (x) { var v = pyShare(x.r); return v === null ? "" : v.toFixed(0) + "%"; } },
        { label: "net", value: function (x) { return x.r.net_bytes; }, show: function (x) { return PL.fmtBytes(x.r.net_bytes, true); } }
      ], rows).table);
    }
    if (data.leaks.length) {
      var ls = document.getElementById("leaks");
      ls.hidden = false;
      var lrows = data.leaks.map(function (l) { return { f: l[0], n: l[1], r: recs[l[0] + "\u0000" + l[1]] }; });
      ls.querySelector(".table-wrap").appendChild(table([
        { label: "line", text: true, value: function (x) { return place(x.f, x.n); }, show: function (x) { return linkTo(x.f, x.n); } },
        { label: "source", text: true, cls: "src", nosort: true, value: function (x) { return sourceLine(x.f, x.n); }, tip: function (x) { return sourceLine(x.f, x.n); } },
        { label: "likelihood", value: function (x) { return x.r.leak_likelihood; }, show: function (x) { return (100 * x.r.leak_likelihood).toFixed(0) + "%"; } },
        { label: "growth", value: function (x) { return x.r.leak_rate_bytes_s; }, show: function (x) { return PL.fmtBytes(x.r.leak_rate_bytes_s || 0, true) + "/s"; } },
        { label: "held at end", value: function (x) { return x.r.net_bytes; }, show: function (x) { return PL.fmtBytes(x.r.net_bytes); } },
        { label: "timeline", nosort: true, value: function () { return null; }, show: function (x) { return PL.sparkline(x.r.timeline, P.elapsed_s, sparkScale) || ""; } }
      ], lrows).table);
    }
  }

  /* -- per-file line tables ---------------------------------------------------------------- */
  function files() {
    var list = document.getElementById("file-list");
    var ranked = fileNames.slice().sort(function (a, b) {
      var ta = P.files[a].lines.reduce(function (s, r) { return s + total(r); }, 0);
      var tb = P.files[b].lines.reduce(function (s, r) { return s + total(r); }, 0);
      return tb - ta || (a < b ? -1 : 1);
    });
    ranked.forEach(function (f) {
      var rec = P.files[f], byLine = {}, src = data.sources[f];
      rec.lines.forEach(function (r) { byLine[r.lineno] = r; });
      var active = {};
      (data.activeLines[f] || []).forEach(function (n) { active[n] = true; });
      var numbers = rec.lines.map(function (r) { return r.lineno; });
      if (src) for (var n = 1; n <= src.length; n++) if (!byLine[n]) numbers.push(n);
      numbers.sort(function (a, b) { return a - b; });
      var rows = numbers.map(function (n) { return byLine[n] || { lineno: n, cpu_python_s: 0, cpu_native_s: 0, cpu_system_s: 0, wait_s: 0, run_delay_s: 0, samples: 0 }; });
      var sec = el("section", "file");
      var fileTime = rec.lines.reduce(function (s, r) { return s + total(r); }, 0);
      var h3 = el("h3", null, f);
      h3.appendChild(el("span", "sub", PL.fmtPercent(share(fileTime)) + " of sampled time" +
        (hasMem ? ", net " + PL.fmtBytes(rec.lines.reduce(function (s, r) { return s + (r.net_bytes || 0); }, 0), true) : "")));
      sec.appendChild(h3);
      if (!src) sec.appendChild(el("p", "note", "source not available: " + (data.sourceErrors[f] || "unknown")));
      var bar = el("div", "toolbar"), lab = el("label"), box = el("input");
      box.type = "checkbox"; box.checked = !!S.reduced;
      lab.appendChild(box);
      lab.appendChild(document.createTextNode(" only lines with activity (\u2265 " + S.cpuPercentThreshold + "% of time" +
        (hasMem ? " or \u2265 " + PL.fmtBytes(S.mallocThresholdBytes) + " allocated" : "") + ")"));
      bar.appendChild(lab);
      bar.appendChild(el("span", null, "click a column header to sort"));
      sec.appendChild(bar);
      /* the code next to its line number: visible at any width, the figures scroll beside it */
      var cols = [{ label: "line", cls: "lineno", asc: true, value: function (r) { return r.lineno; }, show: function (r) { return r.lineno || "?"; } },
                  { label: "source", text: true, cls: "src", nosort: true, value: function (r) { return r.lineno === 0 ? "(line unknown)" : sourceLine(f, r.lineno); },
                    tip: function (r) { return r.lineno === 0 ? "" : sourceLine(f, r.lineno); } }]
        .concat(timeColumns(), memoryColumns(true));
      var t = table(cols, rows, function (r, tr) {
        tr.id = lineAnchor(f, r.lineno);
        var key = f + "\u0000" + r.lineno, p = share(total(r));
        if (p >= S.hotPercent) tr.classList.add("hot");
        if (held[key] !== undefined) tr.classList.add("peak");
        if (leaky[key]) tr.classList.add("leak");
        if (!active[r.lineno]) tr.classList.add("idle");
      });
      t.table.classList.add("lines");
      function applyFilter() { t.items.forEach(function (it) { it.tr.hidden = box.checked && !active[it.row.lineno]; }); }
      box.addEventListener("change", applyFilter);
      applyFilter();
      var wrap = el("div", "table-wrap");
      wrap.appendChild(t.table);
      sec.appendChild(wrap);
      list.appendChild(sec);
    });
    if (!ranked.length) list.appendChild(el("p", "note", "No reported file was sampled."));
  }

  /* -- functions --------------------------------------------------------------------------- */
  function functions() {
    var rows = [];
    fileNames.forEach(function (f) { P.files[f].functions.forEach(function (fn) { rows.push({ f: f, fn: fn }); }); });
    var wrap = document.querySelector("#functions .table-wrap");
    if (!rows.length) { wrap.appendChild(el("p", "note", "No functions were sampled.")); return; }
    var lift = function (c) {
      return { label: c.label, title: c.title, group: c.group, text: c.text, asc: c.asc, nosort: c.nosort,
               value: function (x) { return c.value(x.fn); }, show: c.show ? function (x) { return c.show(x.fn); } : null,
               tip: c.tip ? function (x) { return c.tip(x.fn); } : null };
    };
    var cols = [
      { label: "function", text: true, asc: true, value: function (x) { return x.fn.name; } },
      { label: "file", text: true, asc: true, value: function (x) { return place(x.f, x.fn.lineno); }, show: function (x) { return linkTo(x.f, x.fn.lineno); } },
      { label: "inclusive", group: "Time", value: function (x) { return share(x.fn.inclusive_s) || null; }, show: function (x) { return PL.fmtPercent(share(x.fn.inclusive_s)); } },
      { label: "self", group: "Time", value: function (x) { return share(x.fn.self_s) || null; }, show: function (x) { return PL.fmtPercent(share(x.fn.self_s)); } }
    ].concat(timeColumns().slice(1).map(lift), memoryColumns(false).map(lift));
    var t = table(cols, rows);
    t.sortBy(2, true);
    wrap.appendChild(t.table);
  }

  /* merged profiles: one row per process (worker, rank), with the host it ran on */
  function processes() {
    var procs = P.processes || [];
    if (procs.length < 2) return;
    var section = document.getElementById("processes"), wrap = section.querySelector(".table-wrap");
    section.hidden = false;
    if (data.rankHighlights.length) wrap.appendChild(el("p", "note", data.rankHighlights.map(function (h) { return h[0] + ": " + h[1] + " " + h[2]; }).join(" \u00b7 ")));
    var opt = function (v) { return v === undefined || v === null ? null : v; };
    var cols = [
      { label: "pid", value: function (r) { return r.pid; } },
      { label: "host", text: true, asc: true, value: function (r) { return opt(r.hostname) === null ? "" : r.hostname + (opt(r.node_id) === null ? "" : " (node " + r.node_id + ")"); } },
      { label: "rank", value: function (r) { return opt(r.rank); } },
      { label: "program", text: true, asc: true, value: function (r) { return data.processNames[procs.indexOf(r)] || ""; } },
      { label: "CPU", value: function (r) { return opt(r.cpu_s); }, show: function (r) { return opt(r.cpu_s) === null ? "" : PL.fmtSeconds(r.cpu_s); } },
      { label: "elapsed", value: function (r) { return opt(r.elapsed_s); }, show: function (r) { return opt(r.elapsed_s) === null ? "" : PL.fmtSeconds(r.elapsed_s); } },
      { label: "peak", value: function (r) { return opt(r.peak_bytes); }, show: function (r) { return opt(r.peak_bytes) === null ? "" : PL.fmtBytes(r.peak_bytes); } },
      { label: "merged", text: true, value: function (r) { return r.merged ? (opt(r.partial_until_s) !== null ? "partial: ended without its profile; its first " + PL.fmtSeconds(r.partial_until_s) + " (its last snapshot)" : (r.partial_reason ? "partly: " + r.partial_reason : "yes")) : (r.not_merged_reason || "no (still running or no profile)"); } }];
    wrap.appendChild(table(cols, procs).table);
    rankLines(wrap);
    var work = P.submitted_work;
    if (work && work.lines.length) {
      wrap.appendChild(el("h3", null, "Child processes' CPU, charged to the parent line that waited for it"));
      wrap.appendChild(el("p", "hint", "A child's CPU in each interval goes to the line the parent's main thread was on then (a pool call, a fit with n_jobs)." +
        (work.unlinked_cpu_s >= 0.01 ? " " + PL.fmtSeconds(work.unlinked_cpu_s) + " more ran while the parent's main thread was on no reported line." : "")));
      var wcols = [
        { label: "line", text: true, asc: true, value: function (r) { return place(r.file, r.lineno); }, show: function (r) { return linkTo(r.file, r.lineno); } },
        { label: "source", text: true, nosort: true, value: function (r) { return sourceLine(r.file, r.lineno); } },
        { label: "CPU", value: function (r) { return r.cpu_s; }, show: function (r) { return PL.fmtSeconds(r.cpu_s); } },
        { label: "processes", value: function (r) { return r.pids.length; } }];
      var wt = table(wcols, work.lines);
      wt.sortBy(2, true);
      wrap.appendChild(wt.table);
    }
  }

  /* merged ranks: each line's CPU and holding at each rank's own peak, rank by rank */
  function rankLines(wrap) {
    var rows = P.rank_lines || [];
    if (!rows.length) return;
    wrap.appendChild(el("h3", null, "Lines per rank"));
    wrap.appendChild(el("p", "hint", "Each rank's own CPU on the line and what the line held at that rank's peak: ranks do the same work on different data, and the merged lines add them up."));
    var ranks = [];
    rows.forEach(function (r) { r.ranks.forEach(function (x) { if (ranks.indexOf(x.rank) < 0) ranks.push(x.rank); }); });
    ranks.sort(function (a, b) { return a - b; });
    var of = function (r, rank) { for (var i = 0; i < r.ranks.length; i++) if (r.ranks[i].rank === rank) return r.ranks[i]; return null; };
    var cols = [
      { label: "line", text: true, asc: true, value: function (r) { return place(r.file, r.lineno); }, show: function (r) { return linkTo(r.file, r.lineno); } },
      { label: "source", text: true, nosort: true, value: function (r) { return sourceLine(r.file, r.lineno); } }];
    ranks.forEach(function (rank) {
      cols.push({ label: "rank " + rank + " CPU", value: function (r) { var x = of(r, rank); return x ? x.cpu_s : null; },
                  show: function (r) { var x = of(r, rank); return x ? PL.fmtSeconds(x.cpu_s) : ""; } });
      cols.push({ label: "rank " + rank + " held", value: function (r) { var x = of(r, rank); return x && x.live_at_peak_bytes !== undefined ? x.live_at_peak_bytes : null; },
                  show: function (r) { var x = of(r, rank); return x && x.live_at_peak_bytes ? PL.fmtBytes(x.live_at_peak_bytes) : ""; } });
    });
    wrap.appendChild(table(cols, rows).table);
  }

  /* task engines (Dask): CPU and heap per task key prefix, from each task's start and end */
  function taskKeys() {
    var rows = P.task_keys || [];
    if (!rows.length) return;
    var section = document.getElementById("task-keys"), wrap = section.querySelector(".table-wrap");
    section.hidden = false;
    wrap.appendChild(el("p", "hint", "The process CPU while a task of the prefix ran (shared between tasks that overlapped), and the heap: its largest rise during one task, and its highest point while one ran."));
    var bytes = function (name) {
      return { label: name === "rise_bytes" ? "largest rise in a task" : "heap peak while running",
               value: function (r) { return r[name] === undefined ? null : r[name]; },
               show: function (r) { return r[name] === undefined ? "" : PL.fmtBytes(r[name]); } };
    };
    var cols = [
      { label: "key prefix", text: true, asc: true, value: function (r) { return r.prefix; } },
      { label: "tasks", value: function (r) { return r.tasks; } },
      { label: "processes", value: function (r) { return r.processes; } },
      { label: "CPU", value: function (r) { return r.cpu_s; }, show: function (r) { return PL.fmtSeconds(r.cpu_s); } },
      { label: "wall", value: function (r) { return r.wall_s; }, show: function (r) { return PL.fmtSeconds(r.wall_s); } },
      bytes("rise_bytes"), bytes("peak_bytes")];
    var t = table(cols, rows);
    t.sortBy(3, true);
    wrap.appendChild(t.table);
  }

  function flame() {
    var graph = document.getElementById("flame-graph"), bar = el("div", "toolbar"), lab = el("label"), box = el("input");
    box.type = "checkbox"; box.checked = true; box.id = "fold-library";
    lab.appendChild(box);
    lab.appendChild(document.createTextNode(" fold library frames (the profiler's runner, the stdlib, packages)"));
    bar.appendChild(lab);
    graph.parentNode.insertBefore(bar, graph);
    var fg = PL.flameGraph(graph, P, threadNames, true);
    box.addEventListener("change", function () { fg.redraw(box.checked); });
  }

  /* Memory by call stack: what each stack held at the peak, or allocated over the run. */
  function memoryFlame() {
    var sec = document.getElementById("memory-flame");
    if (!hasMem || !P.stacks.samples.some(function (s) { return s.alloc_bytes !== undefined; })) return;
    sec.hidden = false;
    var graph = document.getElementById("memory-flame-graph"), bar = el("div", "toolbar");
    var weights = {
      peak: function (s) { return Math.max(0, s.live_at_peak_bytes || 0); },
      alloc: function (s) { return s.alloc_bytes || 0; }
    };
    var fg = null;
    [["peak", "held at the peak"], ["alloc", "allocated"]].forEach(function (m, i) {
      var lab = el("label"), radio = el("input");
      radio.type = "radio"; radio.name = "memory-flame-mode"; radio.value = m[0]; radio.checked = i === 0;
      radio.id = "memory-flame-" + m[0];
      lab.appendChild(radio);
      lab.appendChild(document.createTextNode(" " + m[1]));
      radio.addEventListener("change", function () { if (radio.checked && fg) fg.redraw(true, weights[m[0]]); });
      bar.appendChild(lab);
    });
    graph.parentNode.insertBefore(bar, graph);
    fg = PL.flameGraph(graph, P, threadNames, true, weights.peak, function (v) { return PL.fmtBytes(v); });
    if (!fg.total()) graph.appendChild(el("p", "note", "No sampled stack held memory at the peak."));
  }

  function phases() {
    var ph = P.phases || [];
    if (!ph.length) return;
    var sec = document.getElementById("phases");
    sec.hidden = false;
    var rows = ph.map(function (p, i) { return { p: p, i: i }; });
    var wall = function (x) { return x.p.end_s !== undefined && x.p.end_s !== null ? x.p.end_s - x.p.start_s : null; };
    sec.querySelector(".table-wrap").appendChild(table([
      { label: "phase", text: true, asc: true, value: function (x) { return x.p.name; },
        show: function (x) { return "\u00a0\u00a0".repeat(x.p.depth || 0) + x.p.name; } },
      { label: "start", asc: true, value: function (x) { return x.p.start_s; }, show: function (x) { return x.p.start_s.toFixed(2) + " s"; } },
      { label: "wall", value: wall, show: function (x) { var w = wall(x); return w === null ? "" : PL.fmtSeconds(w) || "0 s"; } },
      { label: "CPU", value: function (x) { return x.p.cpu_s; }, show: function (x) { return PL.fmtSeconds(x.p.cpu_s) || "0 s"; } }
    ].concat(hasMem ? [
      { label: "net", value: function (x) { return x.p.net_bytes; }, show: function (x) { return x.p.net_bytes === null || x.p.net_bytes === undefined ? "" : PL.fmtBytes(x.p.net_bytes, true); } },
      { label: "peak", value: function (x) { return x.p.peak_bytes; }, show: function (x) { return x.p.peak_bytes === null || x.p.peak_bytes === undefined ? "" : PL.fmtBytes(x.p.peak_bytes); } }
    ] : []), rows).table);
  }

  function footer() {
    var f = document.getElementById("footer");
    f.textContent = "peakline " + S.version + " \u00b7 Python " + P.python_version + " \u00b7 " + P.platform +
      " \u00b7 started " + P.started_at + " \u00b7 pid " + P.pid +
      " \u00b7 time columns are shares of all sampled time (CPU + wait" + (hasDelay ? " + run delay" : "") + "); memory per line is a sampled estimate, the peak is exact.";
  }

  summary();
  phases();
  memory();
  files();
  functions();
  processes();
  taskKeys();
  flame();
  memoryFlame();
  footer();
})();
