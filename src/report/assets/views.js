(function () {
  "use strict";
  var LANE = 7, HEAD = 16, GAP = 8, LEFT = 120, AX = 18;
  function decode(m) {
    if (m.R) return m;
    m.R = [];
    for (var r = 0; r < m.P; r++) {
      var a = m.ranks[r], n = a.k.length, s = new Float64Array(n), e = new Float64Array(n), acc = 0;
      for (var i = 0; i < n; i++) { acc += a.s[i]; s[i] = acc / 1e6; e[i] = s[i] + a.d[i] / 1e6; }
      m.R.push({k: a.k, m: a.m, s: s, e: e, pd: a.pd, ps: a.ps});
    }
    return m;
  }
  function fmt(ms) { return ms >= 100 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(3) : ms.toPrecision(3); }
  function opName(m, r, i) {
    var a = m.R[r], kd = m.kinds[a.k[i]], mb = a.m[i];
    if (kd.bb) return Math.floor(mb / 100000) + kd.n.slice(1) + (mb % 100000);
    return kd.n + mb;
  }
  function setup(cv, h) {
    var dpr = window.devicePixelRatio || 1, w = cv.parentNode.clientWidth || 800;
    cv.style.width = w + "px"; cv.style.height = h + "px";
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
    var c = cv.getContext("2d"); c.setTransform(dpr, 0, 0, dpr, 0, 0); c.clearRect(0, 0, w, h);
    return {c: c, w: w};
  }
  function axis(c, w, span) {
    var raw = span / Math.max(2, Math.floor((w - LEFT) / 90)), p = Math.pow(10, Math.floor(Math.log10(raw))), q = raw / p;
    var st = (q < 1.5 ? 1 : q < 3.5 ? 2 : q < 7.5 ? 5 : 10) * p;
    c.font = "10px sans-serif"; c.fillStyle = "#555"; c.textAlign = "center"; c.textBaseline = "middle";
    for (var t = 0; t <= span * 1.0001; t += st) c.fillText(+t.toPrecision(6) + " ms", LEFT + t / span * (w - LEFT - 10), 8);
  }
  /* one configuration's lanes at y; returns the height used */
  function block(c, w, m, y, span, title) {
    decode(m);
    var pw = w - LEFT - 10;
    c.font = "bold 11px sans-serif"; c.textAlign = "left"; c.textBaseline = "middle"; c.fillStyle = m.oom ? "#c00" : "#222";
    c.fillText(title + " \u2014 " + fmt(m.ms) + " ms" + (m.oom ? " (OOM)" : ""), 4, y + HEAD / 2);
    for (var r = 0; r < m.P; r++) {
      var a = m.R[r], yy = y + HEAD + r * (LANE + 1);
      c.fillStyle = "#888"; c.font = "9px sans-serif"; c.textAlign = "right"; c.fillText("rank " + r, LEFT - 6, yy + LANE / 2);
      c.fillStyle = "#ececec"; c.fillRect(LEFT, yy, m.ms / span * pw, LANE);
      for (var i = 0; i < a.s.length; i++) {
        var x0 = LEFT + a.s[i] / span * pw, x1 = LEFT + a.e[i] / span * pw;
        c.fillStyle = m.kinds[a.k[i]].c; c.fillRect(x0, yy, Math.max(0.5, x1 - x0), LANE);
      }
    }
    var xe = LEFT + m.ms / span * pw, hh = HEAD + m.P * (LANE + 1);
    c.strokeStyle = "#c00"; c.lineWidth = 1.5; c.beginPath(); c.moveTo(xe, y + 3); c.lineTo(xe, y + hh); c.stroke(); c.lineWidth = 1;
    return hh + GAP;
  }
  function hit(m, y0, x, y, span, w) {
    var r = Math.floor((y - y0 - HEAD) / (LANE + 1));
    if (r < 0 || r >= m.P || x < LEFT) return null;
    var t = (x - LEFT) / (w - LEFT - 10) * span, a = m.R[r], tol = span / (w - LEFT) * 2;
    for (var i = 0; i < a.s.length; i++) if (a.s[i] - tol <= t && t <= a.e[i] + tol) return {r: r, i: i};
    return {r: r, i: -1, t: t};
  }
  function showTip(tip, wrap, ev, html) {
    if (!html) { tip.style.display = "none"; return; }
    tip.innerHTML = html; tip.style.display = "block";
    var b = wrap.getBoundingClientRect(), tx = ev.clientX - b.left + 14, ty = ev.clientY - b.top + 14;
    if (tx + 360 > b.width) tx = ev.clientX - b.left - 370;
    tip.style.left = tx + "px"; tip.style.top = ty + "px";
  }
  function opHtml(m, h, label) {
    if (!h) return "";
    if (h.i < 0) return esc(label) + ": rank " + h.r + " idle at " + fmt(h.t) + " ms";
    var a = m.R[h.r];
    return "<b>" + esc(opName(m, h.r, h.i)) + "</b> on rank " + h.r + " (" + esc(label) + ")<br>start " + fmt(a.s[h.i]) +
           " ms, duration " + fmt(a.e[h.i] - a.s[h.i]) + " ms" + (a.pd ? "<br>against the measured op: start " + sg(a.ps[h.i] / 1e6) +
           " ms, duration " + sg(a.pd[h.i] / 1e6) + " ms (" + pc(a.pd[h.i] / 1e6 / Math.max(1e-9, a.e[h.i] - a.s[h.i] - a.pd[h.i] / 1e6)) + ")" : "");
  }
  function pc(v) { return (v >= 0 ? "+" : "\u2212") + (100 * Math.abs(v)).toFixed(1) + "%"; }
  function sg(v) { return (v >= 0 ? "+" : "\u2212") + fmt(Math.abs(v)); }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]; }); }
  /* stacked policy timelines */
  var pcv = document.getElementById("pcv"), ptip = document.getElementById("ptip"), pblocks = [], pspan = 0;
  function drawPolicies() {
    if (!pcv) return;
    var h = AX, span = 0;
    V.pol.forEach(function (mi) { var m = V.minis[mi]; span = Math.max(span, m.ms); h += HEAD + m.P * (LANE + 1) + GAP; });
    pspan = span > 0 ? span : 1;
    var g = setup(pcv, h), y = AX;
    axis(g.c, g.w, pspan);
    pblocks = [];
    V.pol.forEach(function (mi) { var m = V.minis[mi]; pblocks.push({m: m, y: y}); y += block(g.c, g.w, m, y, pspan, m.label); });
  }
  if (pcv) pcv.addEventListener("mousemove", function (ev) {
    var b = pcv.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top, html = "";
    for (var j = 0; j < pblocks.length; j++) {
      var pb = pblocks[j];
      if (y >= pb.y && y < pb.y + HEAD + pb.m.P * (LANE + 1)) html = opHtml(pb.m, hit(pb.m, pb.y, x, y, pspan, b.width), pb.m.label);
    }
    showTip(ptip, document.getElementById("pwrap"), ev, html);
  });
  if (pcv) pcv.addEventListener("mouseleave", function () { ptip.style.display = "none"; });
  /* the frontier: hover shows a point's configuration, click draws its timeline */
  var svg = document.getElementById("frontier"), ftip = document.getElementById("ftip"), fsel = document.getElementById("fsel");
  var fcv = document.getElementById("fcv"), fspan = 0, sel = -1;
  V.front.pts.forEach(function (p) { if (p.mi >= 0) fspan = Math.max(fspan, V.minis[p.mi].ms); });
  function conf(p) {
    return p.policy + (p.window ? " window " + p.window : "") + ", recompute " + p.rc;
  }
  function pointHtml(p) {
    return "<b>" + esc(conf(p)) + "</b><br>policy " + esc(p.policy) + " \u00b7 window " + (p.window || "\u2014") +
           " \u00b7 recompute " + esc(p.rc) + "<br>peak memory " + p.mem.toFixed(3) + " GiB per rank \u00b7 makespan " +
           fmt(p.ms) + " ms \u00b7 " + p.sps.toFixed(2) + " samples/s<br>" + (p.pareto ? "Pareto-optimal" : "dominated") +
           (p.oom ? " \u00b7 <b style=\"color:#c00\">does not fit</b>" : " \u00b7 fits") + "<br><i>click: its timeline</i>";
  }
  function select(i) {
    var p = V.front.pts[i];
    if (!p) return;
    sel = i;
    var els = svg.querySelectorAll(".fpt");
    for (var k = 0; k < els.length; k++) els[k].classList.toggle("sel", +els[k].getAttribute("data-i") === i);
    fsel.textContent = "timeline of: " + conf(p) + " \u2014 " + fmt(p.ms) + " ms, " + p.mem.toFixed(3) + " GiB";
    if (p.mi < 0) { fsel.textContent += " (not embedded: the report's size budget is spent; plan it with these flags)"; return; }
    var m = V.minis[p.mi], g = setup(fcv, AX + HEAD + m.P * (LANE + 1) + GAP);
    axis(g.c, g.w, fspan > 0 ? fspan : m.ms);
    block(g.c, g.w, m, AX, fspan > 0 ? fspan : m.ms, conf(p));
  }
  if (svg) {
    var pts = svg.querySelectorAll(".fpt");
    for (var q = 0; q < pts.length; q++) {
      pts[q].addEventListener("mouseover", function (ev) { showTip(ftip, document.getElementById("fwrap"), ev, pointHtml(V.front.pts[+this.getAttribute("data-i")])); });
      pts[q].addEventListener("mouseout", function () { ftip.style.display = "none"; });
      pts[q].addEventListener("click", function () { select(+this.getAttribute("data-i")); });
    }
    /* first shown: the fastest Pareto point that fits */
    var best = -1;
    V.front.pts.forEach(function (p, i) { if (p.pareto && !p.oom && (best < 0 || p.ms < V.front.pts[best].ms)) best = i; });
    select(best >= 0 ? best : 0);
  }
  drawPolicies();
  window.addEventListener("resize", function () { drawPolicies(); if (sel >= 0) select(sel); });
  document.body.setAttribute("data-views-ready", "1");
})();
