(function () {
  "use strict";
  var P = D.P, MS = D.ms, K = D.kinds.length;
  var LANE_BAR = 20, LANE_MEM = 30, LANE_GAP = 8, LANE_H = LANE_BAR + LANE_MEM + LANE_GAP, AXIS = 24;
  var cv = document.getElementById("cv"), ctx = cv.getContext("2d");
  var tip = document.getElementById("tip"), labels = document.getElementById("labels");
  var wrap = document.getElementById("tl");
  /* decode the delta-encoded per-rank arrays into absolute times (ms) */
  var R = [];
  var memMax = 0;
  for (var r = 0; r < P; r++) {
    var src = D.ranks[r], n = src.k.length, s = new Float64Array(n), e = new Float64Array(n);
    var acc = 0;
    for (var i = 0; i < n; i++) { acc += src.s[i]; s[i] = acc / 1e6; e[i] = s[i] + src.d[i] / 1e6; }
    var mt = new Float64Array(src.mt.length), macc = 0;
    for (var j = 0; j < src.mt.length; j++) {
      macc += src.mt[j]; mt[j] = macc / 1e6;
      var tot = (src.me[j] + src.mb[j] + src.mg[j]) / 100;
      if (tot > memMax) memMax = tot;
    }
    var cr = new Uint8Array(n); for (var ci = 0; ci < src.c.length; ci++) cr[src.c[ci]] = 1;
    R.push({k: src.k, m: src.m, x: src.x, p: src.p, wr: src.wr, wo: src.wo, rd: src.rd, c: cr, s: s, e: e, mt: mt,
            me: src.me, mb: src.mb, mg: src.mg});
  }
  /* lane labels: one DOM element per rank (tests count them) */
  for (var q = 0; q < P; q++) {
    var el = document.createElement("div");
    el.className = "lane"; el.setAttribute("data-rank", String(q));
    el.style.top = (AXIS + q * LANE_H) + "px"; el.style.height = LANE_BAR + "px";
    el.textContent = "rank " + q;
    labels.appendChild(el);
  }
  var view = {t0: 0, t1: MS > 0 ? MS : 1}, hover = null, showCrit = true;
  function W() { return cv.clientWidth; }
  function xOf(t) { return (t - view.t0) / (view.t1 - view.t0) * W(); }
  function tOf(x) { return view.t0 + x / W() * (view.t1 - view.t0); }
  function label(r, i) {
    var a = R[r], k = a.k[i];
    if (k < K) {
      var kd = D.kinds[k];
      return kd.bb ? a.x[i] + kd.pass + a.m[i] : kd.mod + ":" + kd.pass + a.m[i];
    }
    var tn = D.tensors[a.x[i]], g = D.tgrad[a.x[i]] ? "B" : "F";
    return k === K ? "SEND_" + g + ":" + tn + ":" + a.m[i] + ">" + a.p[i]
                   : "RECV_" + g + ":" + tn + ":" + a.m[i] + "<" + a.p[i];
  }
  /* first op index whose end >= t (starts are non-decreasing in program order) */
  function first(a, t) {
    var lo = 0, hi = a.s.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (a.s[mid] < t) lo = mid + 1; else hi = mid; }
    while (lo > 0 && a.e[lo - 1] >= t) lo--;
    return lo;
  }
  function fmt(ms) { return ms >= 100 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(3) : ms.toPrecision(3); }
  function step(span, n) {
    var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  function resize() {
    var dpr = window.devicePixelRatio || 1, w = wrap.clientWidth - 80;
    if (w < 200) w = 200;
    var h = AXIS + P * LANE_H;
    cv.style.width = w + "px"; cv.style.height = h + "px";
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    draw();
  }
  function draw() {
    var w = W(), h = AXIS + P * LANE_H;
    ctx.clearRect(0, 0, w, h);
    ctx.font = "10px sans-serif"; ctx.textBaseline = "middle";
    var st = step(view.t1 - view.t0, Math.max(2, Math.floor(w / 90)));
    ctx.fillStyle = "#555"; ctx.strokeStyle = "#e0e0e0"; ctx.textAlign = "center";
    for (var t = Math.ceil(view.t0 / st) * st; t <= view.t1; t += st) {
      var x = xOf(t);
      ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS - 4); ctx.lineTo(x + 0.5, h); ctx.stroke();
      ctx.textAlign = x < 24 ? "left" : x > w - 30 ? "right" : "center";
      ctx.fillText(+t.toPrecision(6) + " ms", x < 24 ? Math.max(x, 0) : Math.min(x, w), 9);
    }
    for (var r = 0; r < P; r++) {
      var a = R[r], y = AXIS + r * LANE_H;
      ctx.fillStyle = "#e6e6e6"; ctx.fillRect(0, y, w, LANE_BAR);
      var i = first(a, view.t0), lastPx = -1;
      for (; i < a.s.length && a.s[i] <= view.t1; i++) {
        var k = a.k[i];
        if (k > K) { /* recv: time blocked */
          if (a.e[i] > a.s[i]) {
            ctx.fillStyle = showCrit && a.c[i] ? "#111" : "#d62728";
            var bx = xOf(a.s[i]);
            ctx.fillRect(bx, y + LANE_BAR - 3, Math.max(1, xOf(a.e[i]) - bx), 3);
          }
          continue;
        }
        if (k === K) continue;
        var x0 = xOf(a.s[i]), x1 = xOf(a.e[i]), px = Math.floor(x0);
        if (x1 - x0 < 1 && px === lastPx) continue;  /* one op per pixel column when zoomed out */
        lastPx = px;
        ctx.fillStyle = D.kinds[k].color;
        ctx.fillRect(x0, y, Math.max(x1 - x0, 0.6), LANE_BAR);
        if (showCrit && a.c[i]) { ctx.fillStyle = "#111"; ctx.fillRect(x0, y, Math.max(x1 - x0, 0.6), 3); ctx.fillRect(x0, y + LANE_BAR - 3, Math.max(x1 - x0, 0.6), 3); }
        if (x1 - x0 > 4) { ctx.fillStyle = "#fff"; ctx.fillRect(x1 - 0.5, y, 0.5, LANE_BAR); }
        if (x1 - x0 > 26) {
          var lb = label(r, i);
          if (lb.length * 6 + 4 < x1 - x0) {
            ctx.fillStyle = D.kinds[k].pass === "F" ? "#222" : "#fff"; ctx.textAlign = "center";
            ctx.fillText(lb, (Math.max(x0, 0) + Math.min(x1, w)) / 2, y + LANE_BAR / 2);
          }
        }
      }
      /* memory: stacked step areas per role, scaled to the largest total over ranks */
      var base = y + LANE_BAR + LANE_MEM;
      ctx.fillStyle = "#f7fbff"; ctx.fillRect(0, base - LANE_MEM + 2, w, LANE_MEM - 2);
      if (memMax > 0 && a.mt.length) {
        var layers = [["mg", "#fdae6b"], ["mb", "#9ecae1"], ["me", "#a1d99b"]];
        for (var L = 0; L < 3; L++) {
          ctx.beginPath(); ctx.moveTo(0, base);
          var lastY = base;
          var j0 = 0, lo = 0, hi = a.mt.length;
          while (lo < hi) { var md = (lo + hi) >> 1; if (a.mt[md] < view.t0) lo = md + 1; else hi = md; }
          j0 = lo > 0 ? lo - 1 : 0;
          for (var j = j0; j < a.mt.length && a.mt[j] <= view.t1; j++) {
            var v = 0;
            if (L <= 0) v += a.mg[j]; if (L <= 1) v += a.mb[j]; v += a.me[j];
            var yy = base - (v / 100) / memMax * (LANE_MEM - 4);
            var xx = Math.max(0, xOf(a.mt[j]));
            ctx.lineTo(xx, lastY); ctx.lineTo(xx, yy); lastY = yy;
          }
          ctx.lineTo(w, lastY); ctx.lineTo(w, base); ctx.closePath();
          ctx.fillStyle = layers[L][1]; ctx.fill();
        }
      }
    }
    if (hover && hover.wr >= 0) {
      var ha = R[hover.r], wa = R[hover.wr];
      var hx = xOf(ha.s[hover.i]), hy = AXIS + hover.r * LANE_H + LANE_BAR / 2;
      var wx = xOf(wa.e[hover.wo]), wy = AXIS + hover.wr * LANE_H + LANE_BAR / 2;
      ctx.strokeStyle = "#000"; ctx.lineWidth = 1.5;
      ctx.strokeRect(xOf(wa.s[hover.wo]), wy - LANE_BAR / 2, Math.max(2, wx - xOf(wa.s[hover.wo])), LANE_BAR);
      ctx.beginPath(); ctx.moveTo(wx, wy); ctx.lineTo(hx, hy); ctx.stroke();
      ctx.lineWidth = 1;
    }
    document.getElementById("range").textContent =
      "showing " + fmt(view.t0) + " .. " + fmt(view.t1) + " ms of " + fmt(MS) + " ms";
  }
  function zoom(f, tc) {
    var span = (view.t1 - view.t0) * f, full = MS > 0 ? MS : 1;
    if (span > full) span = full;
    if (span < full * 1e-7) span = full * 1e-7;
    var t0 = tc - (tc - view.t0) * span / (view.t1 - view.t0);
    if (t0 < 0) t0 = 0;
    if (t0 + span > full) t0 = full - span;
    view.t0 = t0; view.t1 = t0 + span; draw();
  }
  function pan(dt) {
    var span = view.t1 - view.t0, full = MS > 0 ? MS : 1, t0 = view.t0 + dt;
    if (t0 < 0) t0 = 0;
    if (t0 + span > full) t0 = full - span;
    view.t0 = t0; view.t1 = t0 + span; draw();
  }
  cv.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var rect = cv.getBoundingClientRect();
    if (ev.shiftKey) { pan((ev.deltaY + ev.deltaX) / W() * (view.t1 - view.t0)); return; }
    zoom(ev.deltaY > 0 ? 1.25 : 0.8, tOf(ev.clientX - rect.left));
  }, {passive: false});
  var drag = null;
  cv.addEventListener("mousedown", function (ev) { drag = {x: ev.clientX}; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x; drag.x = ev.clientX;
    pan(-dx / W() * (view.t1 - view.t0));
  });
  document.getElementById("zin").onclick = function () { zoom(0.5, (view.t0 + view.t1) / 2); };
  document.getElementById("zout").onclick = function () { zoom(2, (view.t0 + view.t1) / 2); };
  document.getElementById("left").onclick = function () { pan(-(view.t1 - view.t0) / 3); };
  document.getElementById("right").onclick = function () { pan((view.t1 - view.t0) / 3); };
  document.getElementById("crit").onclick = function () { showCrit = !showCrit; this.setAttribute("aria-pressed", showCrit ? "true" : "false"); draw(); };
  document.getElementById("reset").onclick = function () { view.t0 = 0; view.t1 = MS > 0 ? MS : 1; draw(); };
  cv.addEventListener("mouseleave", function () { tip.style.display = "none"; if (hover) { hover = null; draw(); } });
  cv.addEventListener("mousemove", function (ev) {
    if (drag) return;
    var rect = cv.getBoundingClientRect(), x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    var r = Math.floor((y - AXIS) / LANE_H), yin = (y - AXIS) - r * LANE_H, t = tOf(x), html = "";
    var old = hover; hover = null;
    if (r >= 0 && r < P) {
      var a = R[r];
      if (yin < LANE_BAR) {
        var tol = (view.t1 - view.t0) / W() * 2, best = -1;
        for (var i = first(a, t - tol); i < a.s.length && a.s[i] <= t + tol; i++) {
          if (a.k[i] === K) continue;
          if (a.k[i] > K && a.e[i] <= a.s[i]) continue;
          if (a.s[i] - tol <= t && t <= a.e[i] + tol) { best = i; if (a.s[i] <= t && t <= a.e[i]) break; }
        }
        if (best >= 0) {
          var i2 = best, k = a.k[i2];
          html = "<b>" + esc(label(r, i2)) + "</b> on rank " + r + " (op #" + i2 + ")<br>";
          if (k < K) html += esc(D.kinds[k].mod) + " (" + D.kinds[k].role + "), pass " + D.kinds[k].pass + ", microbatch " + a.m[i2] + (D.kinds[k].bb ? ", chunk " + a.x[i2] : "") + "<br>";
          else html += "blocked in recv<br>";
          if (a.c[i2]) html += "<b>on the critical path</b><br>";
          html += "start " + fmt(a.s[i2]) + " ms, duration " + fmt(a.e[i2] - a.s[i2]) + " ms, end " + fmt(a.e[i2]) + " ms<br>";
          if (a.wr[i2] >= 0) {
            var wr = a.wr[i2], wo = a.wo[i2];
            var what = R[wr].k[wo] === K ? "sent at " : "ended ", ready = a.s[i2] - a.rd[i2] / 1e6;
            html += "waited for <b>" + esc(label(wr, wo)) + "</b> on rank " + wr + " (" + what + fmt(R[wr].e[wo]) + " ms)<br>";
            html += a.rd[i2] > 1000 ? "input ready at " + fmt(ready) + " ms: started " + fmt(a.rd[i2] / 1e6) + " ms later (rank busy)"
                                    : "started when its input was ready";
            hover = {r: r, i: i2, wr: wr, wo: wo};
          } else html += "waited for nothing (inputs ready)";
        } else {
          html = "rank " + r + " idle at " + fmt(t) + " ms";
        }
      } else if (yin < LANE_BAR + LANE_MEM) {
        var lo = 0, hi = a.mt.length;
        while (lo < hi) { var md = (lo + hi) >> 1; if (a.mt[md] <= t) lo = md + 1; else hi = md; }
        var j = lo - 1;
        var e = j >= 0 ? a.me[j] / 100 : 0, b = j >= 0 ? a.mb[j] / 100 : 0, g = j >= 0 ? a.mg[j] / 100 : 0;
        html = "rank " + r + " at " + fmt(t) + " ms: live activations " + (e + b + g).toFixed(2) + " MiB<br>encoder " + e.toFixed(2) + ", backbone " + b.toFixed(2) + ", generator " + g.toFixed(2) + " MiB";
      }
    }
    if ((old && !hover) || hover) draw();
    if (html) {
      tip.innerHTML = html; tip.style.display = "block";
      var wr2 = wrap.getBoundingClientRect();
      var tx = ev.clientX - wr2.left + 14, ty = ev.clientY - wr2.top + 14;
      if (tx + 320 > wr2.width) tx = ev.clientX - wr2.left - 330;
      tip.style.left = tx + "px"; tip.style.top = ty + "px";
    } else tip.style.display = "none";
  });
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]; }); }
  window.addEventListener("resize", resize);
  resize();
  document.body.setAttribute("data-ready", "1");
})();
