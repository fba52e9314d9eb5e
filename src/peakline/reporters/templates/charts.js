/* peakline HTML report, part 1: formatting helpers and the drawings (memory timeline,
 * per-line sparklines, flame graph). Plain ES5-ish DOM code, no libraries, no network.
 * Text from the profile only ever reaches the page through textContent / attributes. */
"use strict";
var PL = {};

PL.el = function (tag, cls, text) {
  var node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
};

PL.svg = function (tag, attrs) {
  var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) node.setAttribute(k, attrs[k]);
  return node;
};

PL.fmtBytes = function (n, signed) {
  if (n === undefined || n === null) return "";
  var sign = n < 0 ? "-" : (signed && n > 0 ? "+" : "");
  var v = Math.abs(n);
  if (v < 1024) return sign + v.toFixed(0) + " B";
  var units = ["KiB", "MiB", "GiB", "TiB"];
  for (var i = 0; i < units.length; i++) {
    v /= 1024;
    if (v < 1024 || i === units.length - 1) return sign + v.toFixed(1) + " " + units[i];
  }
};

/* Table cells: at most ~6 characters, e.g. 512K, +200M, 1.5G (same as the terminal report). */
PL.fmtBytesShort = function (n, signed) {
  if (!n) return "";
  var sign = n < 0 ? "-" : (signed ? "+" : ""), v = Math.abs(n), units = ["B", "K", "M", "G", "T", "P"], u = 0;
  while (v >= 1000 && u < units.length - 1) { v /= 1024; u++; }
  if (u === 0) return sign + v.toFixed(0) + "B";
  return sign + (v < 9.95 ? v.toFixed(1) : v.toFixed(0)) + units[u];
};

PL.fmtSeconds = function (s) {
  if (!s) return "";
  if (s >= 100) return s.toFixed(0) + " s";
  if (s >= 1) return s.toFixed(2) + " s";
  if (s >= 0.001) return (s * 1000).toFixed(1) + " ms";
  return (s * 1e6).toFixed(0) + " \u00b5s";
};

PL.fmtPercent = function (p) {
  if (!p || p <= 0) return "";
  if (p < 0.05) return "<0.1%";
  return p.toFixed(1) + "%";
};

PL.baseName = function (path) {
  var parts = String(path).split(/[\\/]/);
  return parts[parts.length - 1] || path;
};

/* A step series [[t, v], ...] as `buckets` slices over [start, end], each the maximum of its
 * slice so that short spikes survive (same rule as reporters/_format.py resample_max). */
PL.resampleMax = function (points, start, end, buckets) {
  var out = new Array(buckets), width = (end - start) / buckets || 1e-9;
  var current = 0, i = 0;
  for (var b = 0; b < buckets; b++) {
    var lo = start + b * width, hi = lo + width, best = current;
    while (i < points.length && (points[i][0] < hi || b === buckets - 1)) {
      current = points[i][1];
      best = points[i][0] >= lo ? Math.max(best, current) : current;
      i++;
    }
    out[b] = best;
  }
  return out;
};

PL.valueAt = function (points, t) {
  var lo = 0, hi = points.length - 1, found = 0;
  while (lo <= hi) {
    var mid = (lo + hi) >> 1;
    if (points[mid][0] <= t) { found = points[mid][1]; lo = mid + 1; } else hi = mid - 1;
  }
  return found;
};

function niceStep(range, count) {
  var raw = range / count, mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  var steps = [1, 2, 2.5, 5, 10];
  for (var i = 0; i < steps.length; i++) if (steps[i] * mag >= raw) return steps[i] * mag;
  return 10 * mag;
}

/* Axis step for bytes: a round number of B, KiB, MiB or GiB. */
function niceByteStep(range, count) {
  var unit = 1;
  while (range / unit >= 1024 * count && unit < Math.pow(1024, 4)) unit *= 1024;
  return Math.max(1, niceStep(range / unit, count)) * unit;
}

function stepPath(values, x0, dx, y) {
  var d = "M" + x0 + "," + y(0);
  for (var i = 0; i < values.length; i++) {
    d += "V" + y(values[i]).toFixed(1) + "H" + (x0 + (i + 1) * dx).toFixed(1);
  }
  return d + "V" + y(0) + "Z";
}

/* The run's live heap over time, with the exact peak marked. opts.phases: [{name, depth,
 * start_s, end_s}] drawn as bands behind the curve; opts.liveAt(t) -> [[label, bytes], ...]:
 * what the lines held at t, listed under the cursor. */
PL.timelineChart = function (box, points, elapsed, peakBytes, peakTime, opts) {
  opts = opts || {};
  var W = Math.max(480, box.clientWidth - 16), H = 220, L = 72, R = 16, T = 24, B = 28;
  var end = Math.max(elapsed, points.length ? points[points.length - 1][0] : 0) || 1;
  var cells = Math.max(20, Math.floor((W - L - R) / 2));
  var values = PL.resampleMax(points, 0, end, cells);
  var top = Math.max(peakBytes || 0, Math.max.apply(null, values.concat([1])));
  var step = niceByteStep(top, 4), ymax = Math.ceil(top * 1.08 / step) * step || 1;
  var x = function (t) { return L + (W - L - R) * t / end; };
  var y = function (v) { return T + (H - T - B) * (1 - v / ymax); };
  var svg = PL.svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
                             "aria-label": "live memory over time" });
  svg.style.height = H + "px";
  for (var v = 0; v <= ymax + 1; v += step) {
    svg.appendChild(PL.svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), "class": "axis" }));
    var label = PL.svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", "class": "tick" });
    label.textContent = PL.fmtBytes(v);
    svg.appendChild(label);
  }
  var tstep = niceStep(end, 8);
  for (var t = 0; t <= end + 1e-9; t += tstep) {
    var tl = PL.svg("text", { x: x(t), y: H - 8, "text-anchor": "middle", "class": "tick" });
    tl.textContent = (tstep < 1 ? t.toFixed(2) : t.toFixed(0)) + " s";
    svg.appendChild(tl);
  }
  (opts.phases || []).forEach(function (ph, i) {
    if (ph.end_s === undefined || ph.end_s === null) return;
    var x0 = x(Math.max(0, ph.start_s)), x1 = x(Math.min(end, ph.end_s)), depth = ph.depth || 0;
    var band = PL.svg("g", { "class": "phase-band" + (i % 2 ? " odd" : ""), "data-phase": ph.name });
    band.appendChild(PL.svg("rect", { x: x0, y: T + depth * 4, width: Math.max(1, x1 - x0), height: y(0) - T - depth * 4 }));
    var label = PL.svg("text", { x: x0 + 3, y: T - 8 + 11 * depth + (depth ? 10 : 0), "class": "phase-label" });
    label.textContent = ph.name;
    var tt = PL.svg("title", {});
    tt.textContent = "phase " + ph.name + ": " + ph.start_s.toFixed(2) + "\u2013" + ph.end_s.toFixed(2) + " s";
    band.appendChild(tt);
    band.appendChild(label);
    svg.appendChild(band);
  });
  svg.appendChild(PL.svg("path", { d: stepPath(values, L, (W - L - R) / cells, y), "class": "area" }));
  if (peakBytes) {
    var g = PL.svg("g", { id: "peak-marker", "class": "peak" });
    var px = x(peakTime || 0), py = y(peakBytes);
    g.appendChild(PL.svg("line", { x1: px, x2: px, y1: py, y2: y(0) }));
    g.appendChild(PL.svg("circle", { cx: px, cy: py, r: 4.5 }));
    var right = px > L + (W - L - R) * 0.7;
    var text = PL.svg("text", { x: px + (right ? -8 : 8), y: Math.max(T - 6, py - 8) + 4,
                                "text-anchor": right ? "end" : "start" });
    text.textContent = "peak " + PL.fmtBytes(peakBytes) + " at " + (peakTime || 0).toFixed(2) + " s";
    var title = PL.svg("title", {});
    title.textContent = text.textContent;
    g.appendChild(title);
    g.appendChild(text);
    svg.appendChild(g);
  }
  var cursor = PL.svg("line", { y1: T, y2: y(0), "class": "cursor", visibility: "hidden" });
  svg.appendChild(cursor);
  var tip = PL.el("div", "tooltip");
  tip.hidden = true;
  svg.addEventListener("mousemove", function (ev) {
    var rect = svg.getBoundingClientRect(), sx = (ev.clientX - rect.left) * W / rect.width;
    if (sx < L || sx > W - R) { cursor.setAttribute("visibility", "hidden"); tip.hidden = true; return; }
    var when = (sx - L) / (W - L - R) * end;
    cursor.setAttribute("x1", sx); cursor.setAttribute("x2", sx);
    cursor.setAttribute("visibility", "visible");
    var text = when.toFixed(2) + " s: " + PL.fmtBytes(PL.valueAt(points, when)) + " live";
    if (opts.liveAt) {
      var live = opts.liveAt(when);
      if (live.length) text += live.map(function (l) { return "\n  " + PL.fmtBytes(l[1]) + "  " + l[0]; }).join("");
    }
    tip.textContent = text;
    tip.hidden = false;
    var at = ev.clientX - box.getBoundingClientRect().left;
    /* right of the cursor, or left of it where it would run past the chart's edge */
    tip.style.left = (at + 12 + tip.offsetWidth > box.clientWidth ? Math.max(0, at - 12 - tip.offsetWidth) : at + 12) + "px";
    tip.style.top = "8px";
  });
  svg.addEventListener("mouseleave", function () { cursor.setAttribute("visibility", "hidden"); tip.hidden = true; });
  box.appendChild(svg);
  box.appendChild(tip);
};

/* A line's live bytes over the run. With `scale` (bytes), every sparkline shares that
 * scale, so +512 K looks small beside +109 M; without it, the line's own maximum. */
PL.sparkline = function (points, elapsed, scale) {
  if (!points || !points.length) return null;
  var cells = 40, values = PL.resampleMax(points, 0, elapsed || points[points.length - 1][0] || 1, cells);
  var most = Math.max.apply(null, values), top = scale && scale >= most ? scale : most;
  if (most <= 0) return null;
  var svg = PL.svg("svg", { viewBox: "0 0 80 16", preserveAspectRatio: "none", "class": "spark" });
  svg.appendChild(PL.svg("path", { d: stepPath(values, 0, 80 / cells, function (v) { return 15.5 - 14 * v / top; }) }));
  var title = PL.svg("title", {});
  title.textContent = "max " + PL.fmtBytes(most) + " held by this line" +
    (top > most ? " (scale: 0 to " + PL.fmtBytes(top) + ", the same for every line)" : "");
  svg.setAttribute("data-max", String(most));
  svg.setAttribute("data-scale", String(top));
  svg.appendChild(title);
  return svg;
};

/* Icicle graph of profile.stacks: root on top, callers above callees, width = sampled time.
 * With `collapse`, library frames (files the profile does not report) are folded: the run of
 * library frames before the first user frame (interpreter start-up, peakline's runner) is
 * dropped, and every later run becomes one node named after the library function the user
 * code called. Returns {redraw(collapse)}. */
PL.flameGraph = function (box, profile, threadNames, collapse, weight, fmt) {
  /* weight(sample) -> number: what a stack contributes (default: its sampled time); fmt
   * formats a node's total (default: seconds). The memory flame graph passes bytes. */
  weight = weight || function (s) { return s.cpu_python_s + s.cpu_native_s + s.cpu_system_s + s.wait_s + (s.run_delay_s || 0); };
  fmt = fmt || PL.fmtSeconds;
  var frames = profile.stacks.frames, reported = profile.files, root;
  var isUser = function (id) { return id >= 0 && Object.prototype.hasOwnProperty.call(reported, frames[id][0]); };
  function child(node, key, make) {
    var c = node.kids[key];
    if (!c) { c = make(); c.kids = {}; c.value = 0; c.parent = node; c.depth = node.depth + 1; node.kids[key] = c; }
    return c;
  }
  function frameNode(id, hidden) {
    if (id < 0) return { label: "(no Python frame)", kind: "lib", detail: "" };
    var f = frames[id];
    return { label: f[1] + ":" + f[3] + (hidden ? " …" : ""), kind: isUser(id) ? "user" : "lib",
             detail: f[0] + ":" + f[3] + (hidden ? "\n+ " + hidden + " more library frame(s) folded" : "") };
  }
  /* [key, id, folded count] per node of one stack, root first. */
  function path(ids) {
    if (!collapse) return ids.map(function (id) { return ["f" + id, id, 0]; });
    var first = -1;
    for (var i = 0; i < ids.length; i++) if (isUser(ids[i])) { first = i; break; }
    if (first < 0) { var leaf = ids[ids.length - 1]; return [["c" + leaf, leaf, ids.length - 1]]; }
    var out = [];
    for (i = first; i < ids.length; i++) {
      if (isUser(ids[i])) { out.push(["f" + ids[i], ids[i], 0]); continue; }
      var j = i;
      while (j + 1 < ids.length && !isUser(ids[j + 1])) j++;
      out.push(["c" + ids[i], ids[i], j - i]);
      i = j;
    }
    return out;
  }
  function build() {
    root = { label: "all threads", value: 0, kids: {}, depth: 0, parent: null, kind: "root" };
    profile.stacks.samples.forEach(function (s) {
      var w = weight(s);
      if (!(w > 0)) return;
      root.value += w;
      var node = child(root, "t" + s.thread, function () {
        return { label: threadNames[s.thread] || ("tid " + s.thread), kind: "thread", detail: "thread " + s.thread };
      });
      node.value += w;
      path(s.frames.length ? s.frames : [-1]).forEach(function (step) {
        node = child(node, step[0], function () { return frameNode(step[1], step[2]); });
        node.value += w;
      });
    });
  }
  function colour(node) {
    var h = 0;
    for (var i = 0; i < node.label.length; i++) h = (h * 31 + node.label.charCodeAt(i)) >>> 0;
    if (node.kind === "root") return "hsl(220, 10%, 78%)";
    if (node.kind === "thread") return "hsl(265, 45%, " + (78 + h % 8) + "%)";
    if (node.kind === "user") return "hsl(" + (8 + h % 34) + ", 85%, " + (66 + h % 10) + "%)";
    return "hsl(" + (190 + h % 30) + ", 45%, " + (74 + h % 10) + "%)";
  }
  var ROW = 20;
  function draw(focus) {
    box.textContent = "";
    var width = box.clientWidth || 900, path = [], n = focus.parent, maxDepth = focus.depth;
    while (n) { path.unshift(n); n = n.parent; }
    function bar(node, left, w, ancestor) {
      var d = PL.el("div", "fnode" + (ancestor ? " ancestor" : ""), node.label);
      d.style.left = left + "px"; d.style.width = Math.max(1, w) + "px"; d.style.top = node.depth * ROW + "px";
      d.style.background = colour(node);
      d.title = node.label + (node.detail ? "\n" + node.detail : "") + "\n" + fmt(node.value) +
        " (" + (100 * node.value / (root.value || 1)).toFixed(1) + "% of all, " +
        (100 * node.value / (focus.value || 1)).toFixed(1) + "% of view)";
      d.addEventListener("click", function (ev) { ev.stopPropagation(); draw(node === focus && node.parent ? node.parent : node); });
      box.appendChild(d);
    }
    path.forEach(function (a) { bar(a, 0, width, true); });
    (function walk(node, left, w) {
      bar(node, left, w, false);
      maxDepth = Math.max(maxDepth, node.depth);
      var kids = Object.keys(node.kids).map(function (k) { return node.kids[k]; });
      kids.sort(function (a, b) { return b.value - a.value; });
      var x = left;
      kids.forEach(function (k) {
        var kw = w * k.value / (node.value || 1);
        if (kw >= 1) walk(k, x, kw);
        x += kw;
      });
    })(focus, 0, width);
    box.style.height = (maxDepth + 1) * ROW + 2 + "px";
  }
  build();
  draw(root);
  return { redraw: function (fold, newWeight) { collapse = fold; if (newWeight) weight = newWeight; build(); draw(root); },
           total: function () { return root.value; } };
};
