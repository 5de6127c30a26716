/* html.c — the self-contained HTML report (no network): a canvas timeline drawn from compact
 * arrays embedded as JSON (so 64 ranks x 1024 microbatches stay usable), hover tooltips with
 * each op's times and what it waited for, zoom/pan (wheel, drag, buttons), per-rank memory
 * curves stacked by role, a metrics table and, for a spec, the policy comparison.
 *
 * Embedded data (const D): per rank, parallel arrays over the rank's ops in program order:
 *   k kind (module*3+pass for compute; K = send, K+1 = recv, K = number of compute kinds)
 *   m microbatch, x chunk (backbone) or tensor index (comm) or 0, p peer (comm) or 0,
 *   s start in ns as a delta from the previous op's start, d duration in ns,
 *   wr/wo the op waited for (-1 = none), rd how long (ns) the op's inputs were ready before it
 *   started (the rank was busy)
 *   c the indices of the rank's ops on the critical path (src/report/critical.h), ascending
 * and the memory trace: mt time in ns (delta), me/mb/mg encoder/backbone/generator MiB x 100,
 * at most MEM_POINTS points per rank (an upper envelope when the trace is longer).
 * The script and style are in this file (report_js, report_css). */
#include <math.h>
#include <string.h>

#include "report/html_views.h"
#include "report/report.h"
#include "sim/hosts.h"
#include "util/util.h"

#define MEM_POINTS 3000

void bm_report_xml_escape(FILE *f, const char *s);

static const char *const report_css[] = {
    "body { font: 13px/1.4 -apple-system, \"Segoe UI\", Helvetica, Arial, sans-serif; margin: 16px 20px; color: #222; background: #fff; }\n",
    "h1 { font-size: 19px; margin: 0 0 4px; }\n",
    "h2 { font-size: 15px; margin: 22px 0 6px; }\n",
    ".sub { color: #555; margin: 0 0 10px; }\n",
    "#controls button { font: inherit; padding: 2px 10px; margin-right: 4px; cursor: pointer; }\n",
    "#controls span { color: #555; margin-left: 10px; }\n",
    "#legend { margin: 8px 0; }\n",
    "#legend span.sw { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin: 0 4px 0 12px; border-radius: 2px; }\n",
    "#tl { position: relative; margin-top: 6px; border-top: 1px solid #ddd; }\n",
    "#labels { position: absolute; left: 0; top: 0; width: 76px; }\n",
    "#labels .lane { position: absolute; left: 0; font-size: 12px; line-height: 20px; white-space: nowrap; }\n",
    "#cv { margin-left: 78px; display: block; cursor: grab; }\n",
    "#tip { position: absolute; display: none; background: #fffff0; border: 1px solid #999; padding: 5px 8px; font-size: 12px; max-width: 320px; pointer-events: none; box-shadow: 1px 1px 4px rgba(0,0,0,.2); z-index: 2; }\n",
    "table { border-collapse: collapse; font-size: 12px; }\n",
    "th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }\n",
    "th { background: #f3f3f3; }\n",
    "td:first-child, th:first-child { text-align: left; }\n",
    "tr.best td { background: #eef7ee; }\n",
    "td.oom { color: #c00; font-weight: bold; }\n",
    ".note { color: #666; font-size: 12px; max-width: 900px; }\n",
    NULL};

static const char *const report_js[] = {
    "(function () {\n",
    "  \"use strict\";\n",
    "  var P = D.P, MS = D.ms, K = D.kinds.length;\n",
    "  var LANE_BAR = 20, LANE_MEM = 30, LANE_GAP = 8, LANE_H = LANE_BAR + LANE_MEM + LANE_GAP, AXIS = 24;\n",
    "  var cv = document.getElementById(\"cv\"), ctx = cv.getContext(\"2d\");\n",
    "  var tip = document.getElementById(\"tip\"), labels = document.getElementById(\"labels\");\n",
    "  var wrap = document.getElementById(\"tl\");\n",
    "  /* decode the delta-encoded per-rank arrays into absolute times (ms) */\n",
    "  var R = [];\n",
    "  var memMax = 0;\n",
    "  for (var r = 0; r < P; r++) {\n",
    "    var src = D.ranks[r], n = src.k.length, s = new Float64Array(n), e = new Float64Array(n);\n",
    "    var acc = 0;\n",
    "    for (var i = 0; i < n; i++) { acc += src.s[i]; s[i] = acc / 1e6; e[i] = s[i] + src.d[i] / 1e6; }\n",
    "    var mt = new Float64Array(src.mt.length), macc = 0;\n",
    "    for (var j = 0; j < src.mt.length; j++) {\n",
    "      macc += src.mt[j]; mt[j] = macc / 1e6;\n",
    "      var tot = (src.me[j] + src.mb[j] + src.mg[j]) / 100;\n",
    "      if (tot > memMax) memMax = tot;\n",
    "    }\n",
    "    var cr = new Uint8Array(n); for (var ci = 0; ci < src.c.length; ci++) cr[src.c[ci]] = 1;\n",
    "    R.push({k: src.k, m: src.m, x: src.x, p: src.p, wr: src.wr, wo: src.wo, rd: src.rd, c: cr, s: s, e: e, mt: mt,\n",
    "            me: src.me, mb: src.mb, mg: src.mg});\n",
    "  }\n",
    "  /* lane labels: one DOM element per rank (tests count them) */\n",
    "  for (var q = 0; q < P; q++) {\n",
    "    var el = document.createElement(\"div\");\n",
    "    el.className = \"lane\"; el.setAttribute(\"data-rank\", String(q));\n",
    "    el.style.top = (AXIS + q * LANE_H) + \"px\"; el.style.height = LANE_BAR + \"px\";\n",
    "    el.textContent = \"rank \" + q;\n",
    "    labels.appendChild(el);\n",
    "  }\n",
    "  var view = {t0: 0, t1: MS > 0 ? MS : 1}, hover = null, showCrit = true;\n",
    "  function W() { return cv.clientWidth; }\n",
    "  function xOf(t) { return (t - view.t0) / (view.t1 - view.t0) * W(); }\n",
    "  function tOf(x) { return view.t0 + x / W() * (view.t1 - view.t0); }\n",
    "  function label(r, i) {\n",
    "    var a = R[r], k = a.k[i];\n",
    "    if (k < K) {\n",
    "      var kd = D.kinds[k];\n",
    "      return kd.bb ? a.x[i] + kd.pass + a.m[i] : kd.mod + \":\" + kd.pass + a.m[i];\n",
    "    }\n",
    "    var tn = D.tensors[a.x[i]], g = D.tgrad[a.x[i]] ? \"B\" : \"F\";\n",
    "    return k === K ? \"SEND_\" + g + \":\" + tn + \":\" + a.m[i] + \">\" + a.p[i]\n",
    "                   : \"RECV_\" + g + \":\" + tn + \":\" + a.m[i] + \"<\" + a.p[i];\n",
    "  }\n",
    "  /* first op index whose end >= t (starts are non-decreasing in program order) */\n",
    "  function first(a, t) {\n",
    "    var lo = 0, hi = a.s.length;\n",
    "    while (lo < hi) { var mid = (lo + hi) >> 1; if (a.s[mid] < t) lo = mid + 1; else hi = mid; }\n",
    "    while (lo > 0 && a.e[lo - 1] >= t) lo--;\n",
    "    return lo;\n",
    "  }\n",
    "  function fmt(ms) { return ms >= 100 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(3) : ms.toPrecision(3); }\n",
    "  function step(span, n) {\n",
    "    var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;\n",
    "    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;\n",
    "  }\n",
    "  function resize() {\n",
    "    var dpr = window.devicePixelRatio || 1, w = wrap.clientWidth - 80;\n",
    "    if (w < 200) w = 200;\n",
    "    var h = AXIS + P * LANE_H;\n",
    "    cv.style.width = w + \"px\"; cv.style.height = h + \"px\";\n",
    "    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);\n",
    "    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);\n",
    "    draw();\n",
    "  }\n",
    "  function draw() {\n",
    "    var w = W(), h = AXIS + P * LANE_H;\n",
    "    ctx.clearRect(0, 0, w, h);\n",
    "    ctx.font = \"10px sans-serif\"; ctx.textBaseline = \"middle\";\n",
    "    var st = step(view.t1 - view.t0, Math.max(2, Math.floor(w / 90)));\n",
    "    ctx.fillStyle = \"#555\"; ctx.strokeStyle = \"#e0e0e0\"; ctx.textAlign = \"center\";\n",
    "    for (var t = Math.ceil(view.t0 / st) * st; t <= view.t1; t += st) {\n",
    "      var x = xOf(t);\n",
    "      ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS - 4); ctx.lineTo(x + 0.5, h); ctx.stroke();\n",
    "      ctx.textAlign = x < 24 ? \"left\" : x > w - 30 ? \"right\" : \"center\";\n",
    "      ctx.fillText(+t.toPrecision(6) + \" ms\", x < 24 ? Math.max(x, 0) : Math.min(x, w), 9);\n",
    "    }\n",
    "    for (var r = 0; r < P; r++) {\n",
    "      var a = R[r], y = AXIS + r * LANE_H;\n",
    "      ctx.fillStyle = \"#e6e6e6\"; ctx.fillRect(0, y, w, LANE_BAR);\n",
    "      var i = first(a, view.t0), lastPx = -1;\n",
    "      for (; i < a.s.length && a.s[i] <= view.t1; i++) {\n",
    "        var k = a.k[i];\n",
    "        if (k > K) { /* recv: time blocked */\n",
    "          if (a.e[i] > a.s[i]) {\n",
    "            ctx.fillStyle = showCrit && a.c[i] ? \"#111\" : \"#d62728\";\n",
    "            var bx = xOf(a.s[i]);\n",
    "            ctx.fillRect(bx, y + LANE_BAR - 3, Math.max(1, xOf(a.e[i]) - bx), 3);\n",
    "          }\n",
    "          continue;\n",
    "        }\n",
    "        if (k === K) continue;\n",
    "        var x0 = xOf(a.s[i]), x1 = xOf(a.e[i]), px = Math.floor(x0);\n",
    "        if (x1 - x0 < 1 && px === lastPx) continue;  /* one op per pixel column when zoomed out */\n",
    "        lastPx = px;\n",
    "        ctx.fillStyle = D.kinds[k].color;\n",
    "        ctx.fillRect(x0, y, Math.max(x1 - x0, 0.6), LANE_BAR);\n",
    "        if (showCrit && a.c[i]) { ctx.fillStyle = \"#111\"; ctx.fillRect(x0, y, Math.max(x1 - x0, 0.6), 3); ctx.fillRect(x0, y + LANE_BAR - 3, Math.max(x1 - x0, 0.6), 3); }\n",
    "        if (x1 - x0 > 4) { ctx.fillStyle = \"#fff\"; ctx.fillRect(x1 - 0.5, y, 0.5, LANE_BAR); }\n",
    "        if (x1 - x0 > 26) {\n",
    "          var lb = label(r, i);\n",
    "          if (lb.length * 6 + 4 < x1 - x0) {\n",
    "            ctx.fillStyle = D.kinds[k].pass === \"F\" ? \"#222\" : \"#fff\"; ctx.textAlign = \"center\";\n",
    "            ctx.fillText(lb, (Math.max(x0, 0) + Math.min(x1, w)) / 2, y + LANE_BAR / 2);\n",
    "          }\n",
    "        }\n",
    "      }\n",
    "      /* memory: stacked step areas per role, scaled to the largest total over ranks */\n",
    "      var base = y + LANE_BAR + LANE_MEM;\n",
    "      ctx.fillStyle = \"#f7fbff\"; ctx.fillRect(0, base - LANE_MEM + 2, w, LANE_MEM - 2);\n",
    "      if (memMax > 0 && a.mt.length) {\n",
    "        var layers = [[\"mg\", \"#fdae6b\"], [\"mb\", \"#9ecae1\"], [\"me\", \"#a1d99b\"]];\n",
    "        for (var L = 0; L < 3; L++) {\n",
    "          ctx.beginPath(); ctx.moveTo(0, base);\n",
    "          var lastY = base;\n",
    "          var j0 = 0, lo = 0, hi = a.mt.length;\n",
    "          while (lo < hi) { var md = (lo + hi) >> 1; if (a.mt[md] < view.t0) lo = md + 1; else hi = md; }\n",
    "          j0 = lo > 0 ? lo - 1 : 0;\n",
    "          for (var j = j0; j < a.mt.length && a.mt[j] <= view.t1; j++) {\n",
    "            var v = 0;\n",
    "            if (L <= 0) v += a.mg[j]; if (L <= 1) v += a.mb[j]; v += a.me[j];\n",
    "            var yy = base - (v / 100) / memMax * (LANE_MEM - 4);\n",
    "            var xx = Math.max(0, xOf(a.mt[j]));\n",
    "            ctx.lineTo(xx, lastY); ctx.lineTo(xx, yy); lastY = yy;\n",
    "          }\n",
    "          ctx.lineTo(w, lastY); ctx.lineTo(w, base); ctx.closePath();\n",
    "          ctx.fillStyle = layers[L][1]; ctx.fill();\n",
    "        }\n",
    "      }\n",
    "    }\n",
    "    if (hover && hover.wr >= 0) {\n",
    "      var ha = R[hover.r], wa = R[hover.wr];\n",
    "      var hx = xOf(ha.s[hover.i]), hy = AXIS + hover.r * LANE_H + LANE_BAR / 2;\n",
    "      var wx = xOf(wa.e[hover.wo]), wy = AXIS + hover.wr * LANE_H + LANE_BAR / 2;\n",
    "      ctx.strokeStyle = \"#000\"; ctx.lineWidth = 1.5;\n",
    "      ctx.strokeRect(xOf(wa.s[hover.wo]), wy - LANE_BAR / 2, Math.max(2, wx - xOf(wa.s[hover.wo])), LANE_BAR);\n",
    "      ctx.beginPath(); ctx.moveTo(wx, wy); ctx.lineTo(hx, hy); ctx.stroke();\n",
    "      ctx.lineWidth = 1;\n",
    "    }\n",
    "    document.getElementById(\"range\").textContent =\n",
    "      \"showing \" + fmt(view.t0) + \" .. \" + fmt(view.t1) + \" ms of \" + fmt(MS) + \" ms\";\n",
    "  }\n",
    "  function zoom(f, tc) {\n",
    "    var span = (view.t1 - view.t0) * f, full = MS > 0 ? MS : 1;\n",
    "    if (span > full) span = full;\n",
    "    if (span < full * 1e-7) span = full * 1e-7;\n",
    "    var t0 = tc - (tc - view.t0) * span / (view.t1 - view.t0);\n",
    "    if (t0 < 0) t0 = 0;\n",
    "    if (t0 + span > full) t0 = full - span;\n",
    "    view.t0 = t0; view.t1 = t0 + span; draw();\n",
    "  }\n",
    "  function pan(dt) {\n",
    "    var span = view.t1 - view.t0, full = MS > 0 ? MS : 1, t0 = view.t0 + dt;\n",
    "    if (t0 < 0) t0 = 0;\n",
    "    if (t0 + span > full) t0 = full - span;\n",
    "    view.t0 = t0; view.t1 = t0 + span; draw();\n",
    "  }\n",
    "  cv.addEventListener(\"wheel\", function (ev) {\n",
    "    ev.preventDefault();\n",
    "    var rect = cv.getBoundingClientRect();\n",
    "    if (ev.shiftKey) { pan((ev.deltaY + ev.deltaX) / W() * (view.t1 - view.t0)); return; }\n",
    "    zoom(ev.deltaY > 0 ? 1.25 : 0.8, tOf(ev.clientX - rect.left));\n",
    "  }, {passive: false});\n",
    "  var drag = null;\n",
    "  cv.addEventListener(\"mousedown\", function (ev) { drag = {x: ev.clientX}; });\n",
    "  window.addEventListener(\"mouseup\", function () { drag = null; });\n",
    "  window.addEventListener(\"mousemove\", function (ev) {\n",
    "    if (!drag) return;\n",
    "    var dx = ev.clientX - drag.x; drag.x = ev.clientX;\n",
    "    pan(-dx / W() * (view.t1 - view.t0));\n",
    "  });\n",
    "  document.getElementById(\"zin\").onclick = function () { zoom(0.5, (view.t0 + view.t1) / 2); };\n",
    "  document.getElementById(\"zout\").onclick = function () { zoom(2, (view.t0 + view.t1) / 2); };\n",
    "  document.getElementById(\"left\").onclick = function () { pan(-(view.t1 - view.t0) / 3); };\n",
    "  document.getElementById(\"right\").onclick = function () { pan((view.t1 - view.t0) / 3); };\n",
    "  document.getElementById(\"crit\").onclick = function () { showCrit = !showCrit; this.setAttribute(\"aria-pressed\", showCrit ? \"true\" : \"false\"); draw(); };\n",
    "  document.getElementById(\"reset\").onclick = function () { view.t0 = 0; view.t1 = MS > 0 ? MS : 1; draw(); };\n",
    "  cv.addEventListener(\"mouseleave\", function () { tip.style.display = \"none\"; if (hover) { hover = null; draw(); } });\n",
    "  cv.addEventListener(\"mousemove\", function (ev) {\n",
    "    if (drag) return;\n",
    "    var rect = cv.getBoundingClientRect(), x = ev.clientX - rect.left, y = ev.clientY - rect.top;\n",
    "    var r = Math.floor((y - AXIS) / LANE_H), yin = (y - AXIS) - r * LANE_H, t = tOf(x), html = \"\";\n",
    "    var old = hover; hover = null;\n",
    "    if (r >= 0 && r < P) {\n",
    "      var a = R[r];\n",
    "      if (yin < LANE_BAR) {\n",
    "        var tol = (view.t1 - view.t0) / W() * 2, best = -1;\n",
    "        for (var i = first(a, t - tol); i < a.s.length && a.s[i] <= t + tol; i++) {\n",
    "          if (a.k[i] === K) continue;\n",
    "          if (a.k[i] > K && a.e[i] <= a.s[i]) continue;\n",
    "          if (a.s[i] - tol <= t && t <= a.e[i] + tol) { best = i; if (a.s[i] <= t && t <= a.e[i]) break; }\n",
    "        }\n",
    "        if (best >= 0) {\n",
    "          var i2 = best, k = a.k[i2];\n",
    "          html = \"<b>\" + esc(label(r, i2)) + \"</b> on rank \" + r + \" (op #\" + i2 + \")<br>\";\n",
    "          if (k < K) html += esc(D.kinds[k].mod) + \" (\" + D.kinds[k].role + \"), pass \" + D.kinds[k].pass + \", microbatch \" + a.m[i2] + (D.kinds[k].bb ? \", chunk \" + a.x[i2] : \"\") + \"<br>\";\n",
    "          else html += \"blocked in recv<br>\";\n",
    "          if (a.c[i2]) html += \"<b>on the critical path</b><br>\";\n",
    "          html += \"start \" + fmt(a.s[i2]) + \" ms, duration \" + fmt(a.e[i2] - a.s[i2]) + \" ms, end \" + fmt(a.e[i2]) + \" ms<br>\";\n",
    "          if (a.wr[i2] >= 0) {\n",
    "            var wr = a.wr[i2], wo = a.wo[i2];\n",
    "            var what = R[wr].k[wo] === K ? \"sent at \" : \"ended \", ready = a.s[i2] - a.rd[i2] / 1e6;\n",
    "            html += \"waited for <b>\" + esc(label(wr, wo)) + \"</b> on rank \" + wr + \" (\" + what + fmt(R[wr].e[wo]) + \" ms)<br>\";\n",
    "            html += a.rd[i2] > 1000 ? \"input ready at \" + fmt(ready) + \" ms: started \" + fmt(a.rd[i2] / 1e6) + \" ms later (rank busy)\"\n",
    "                                    : \"started when its input was ready\";\n",
    "            hover = {r: r, i: i2, wr: wr, wo: wo};\n",
    "          } else html += \"waited for nothing (inputs ready)\";\n",
    "        } else {\n",
    "          html = \"rank \" + r + \" idle at \" + fmt(t) + \" ms\";\n",
    "        }\n",
    "      } else if (yin < LANE_BAR + LANE_MEM) {\n",
    "        var lo = 0, hi = a.mt.length;\n",
    "        while (lo < hi) { var md = (lo + hi) >> 1; if (a.mt[md] <= t) lo = md + 1; else hi = md; }\n",
    "        var j = lo - 1;\n",
    "        var e = j >= 0 ? a.me[j] / 100 : 0, b = j >= 0 ? a.mb[j] / 100 : 0, g = j >= 0 ? a.mg[j] / 100 : 0;\n",
    "        html = \"rank \" + r + \" at \" + fmt(t) + \" ms: live activations \" + (e + b + g).toFixed(2) + \" MiB<br>encoder \" + e.toFixed(2) + \", backbone \" + b.toFixed(2) + \", generator \" + g.toFixed(2) + \" MiB\";\n",
    "      }\n",
    "    }\n",
    "    if ((old && !hover) || hover) draw();\n",
    "    if (html) {\n",
    "      tip.innerHTML = html; tip.style.display = \"block\";\n",
    "      var wr2 = wrap.getBoundingClientRect();\n",
    "      var tx = ev.clientX - wr2.left + 14, ty = ev.clientY - wr2.top + 14;\n",
    "      if (tx + 320 > wr2.width) tx = ev.clientX - wr2.left - 330;\n",
    "      tip.style.left = tx + \"px\"; tip.style.top = ty + \"px\";\n",
    "    } else tip.style.display = \"none\";\n",
    "  });\n",
    "  function esc(s) { return String(s).replace(/[&<>\"]/g, function (c) { return {\"&\": \"&amp;\", \"<\": \"&lt;\", \">\": \"&gt;\", '\"': \"&quot;\"}[c]; }); }\n",
    "  window.addEventListener(\"resize\", resize);\n",
    "  resize();\n",
    "  document.body.setAttribute(\"data-ready\", \"1\");\n",
    "})();\n",
    NULL};

/* A JSON string safe inside <script>: '<', '>' and '&' as \u escapes. */
void bm_report_js_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&') fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static long long ns(double ms)
{
    return (long long)llround(ms * 1e6);
}

static long long centi(double mib)
{
    return (long long)llround(mib * 100);
}

/* Per-rank data arrays (see the file comment). */
static void put_rank(FILE *f, const struct bm_table *t, const struct bm_timeline *tl, int r, int K,
                     const uint8_t *crit)
{
    const struct bm_rank_ops *ro = &t->ranks[r];
    const struct bm_rank_timeline *rt = &tl->ranks[r];
    int n = ro->n_ops;
    fprintf(f, "{\"k\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op *op = &ro->ops[i];
        int k = op->kind == BM_OP_COMPUTE ? op->module * 3 + op->pass : op->kind == BM_OP_SEND ? K : K + 1;
        fprintf(f, "%s%d", i ? "," : "", k);
    }
    fprintf(f, "],\n\"m\":[");
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ro->ops[i].mb);
    fprintf(f, "],\n\"x\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op *op = &ro->ops[i];
        fprintf(f, "%s%d", i ? "," : "", op->kind == BM_OP_COMPUTE ? (op->chunk >= 0 ? op->chunk : 0) : op->tensor);
    }
    fprintf(f, "],\n\"p\":[");
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ro->ops[i].peer >= 0 ? ro->ops[i].peer : 0);
    fprintf(f, "],\n\"s\":[");
    long long prev = 0;
    for (int i = 0; i < n; i++) {
        long long s = ns(rt->ops[i].start_ms);
        fprintf(f, "%s%lld", i ? "," : "", s - prev);
        prev = s;
    }
    fprintf(f, "],\n\"d\":[");
    for (int i = 0; i < n; i++) {
        long long d = ns(rt->ops[i].end_ms) - ns(rt->ops[i].start_ms);
        fprintf(f, "%s%lld", i ? "," : "", d > 0 ? d : 0);
    }
    fprintf(f, "],\n\"wr\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op_time *ot = &rt->ops[i];
        int ok = ot->wait_rank >= 0 && ot->wait_rank < t->pp && ot->wait_op >= 0 &&
                 ot->wait_op < t->ranks[ot->wait_rank].n_ops;
        fprintf(f, "%s%d", i ? "," : "", ok ? ot->wait_rank : -1);
    }
    fprintf(f, "],\n\"wo\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op_time *ot = &rt->ops[i];
        int ok = ot->wait_rank >= 0 && ot->wait_rank < t->pp && ot->wait_op >= 0 &&
                 ot->wait_op < t->ranks[ot->wait_rank].n_ops;
        fprintf(f, "%s%d", i ? "," : "", ok ? ot->wait_op : -1);
    }
    fprintf(f, "],\n\"rd\":[");
    for (int i = 0; i < n; i++) {
        long long rd = ns(rt->ops[i].start_ms) - ns(rt->ops[i].ready_ms);
        fprintf(f, "%s%lld", i ? "," : "", rd > 0 ? rd : 0);
    }
    fprintf(f, "],\n\"c\":[");
    for (int i = 0, k = 0; i < n; i++)
        if (crit && crit[i]) fprintf(f, "%s%d", k++ ? "," : "", i);
    /* memory: all points, or the per-bucket maximum when there are too many */
    fprintf(f, "],\n");
    int nm = rt->n_mem, buckets = nm > MEM_POINTS ? MEM_POINTS : 0;
    double ms = tl->makespan_ms > 0 ? tl->makespan_ms : 1;
    const char *keys[4] = {"mt", "me", "mb", "mg"};
    for (int q = 0; q < 4; q++) {
        fprintf(f, "\"%s\":[", keys[q]);
        long long prevt = 0;
        int out = 0, k = 0;
        while (k < nm) {
            /* one point, or (too many points) the maximum over one time bucket, placed at the
             * bucket's first point: an upper envelope of the curve */
            double v[BM_N_ROLES];
            memcpy(v, rt->mem[k].act_mib, sizeof v);
            int k2 = k + 1;
            if (buckets) {
                int b = (int)(rt->mem[k].t_ms / ms * buckets);
                while (k2 < nm && (int)(rt->mem[k2].t_ms / ms * buckets) == b) {
                    for (int j = 0; j < BM_N_ROLES; j++)
                        if (rt->mem[k2].act_mib[j] > v[j]) v[j] = rt->mem[k2].act_mib[j];
                    k2++;
                }
            }
            long long tt = ns(rt->mem[k].t_ms);
            fprintf(f, "%s%lld", out++ ? "," : "", q == 0 ? tt - prevt : centi(v[q - 1]));
            prevt = tt;
            if (k2 == nm && k2 - 1 > k) {  /* end on the trace's final level */
                long long t2 = ns(rt->mem[nm - 1].t_ms);
                fprintf(f, ",%lld", q == 0 ? t2 - prevt : centi(rt->mem[nm - 1].act_mib[q - 1]));
            }
            k = k2;
        }
        fprintf(f, "]%s", q < 3 ? "," : "");
    }
    fprintf(f, "}");
}

static void put_td_mib(FILE *f, double v)
{
    fprintf(f, "<td>%.1f</td>", v);
}

/* A table placed over hosts (sim/hosts.h): which ranks share a host and what crosses. */
static void put_hosts(FILE *f, const struct bm_table *t)
{
    if (t->device.ranks_per_host <= 0) return;
    struct bm_host_traffic h;
    bm_cost_host_traffic(t, &h);
    fprintf(f, "<h2>Hosts</h2>\n<p id=\"hosts\">%d host%s of %d ranks (rank r on host r / %d); between hosts %g GB/s, "
               "%g us: %ld of %ld transfers cross hosts, %.3f MiB, %.3f ms in flight (%.3f ms on the intra-host "
               "link)</p>\n",
            h.hosts, h.hosts == 1 ? "" : "s", t->device.ranks_per_host, t->device.ranks_per_host,
            t->device.inter_host_gbytes_per_s,
            t->device.inter_host_latency_us, h.cross, h.sends, h.cross_mib, h.cross_ms, h.cross_intra_ms);
}
static int render_html(const struct bm_table *t, const struct bm_timeline *tl, const struct bm_report_compare *cmp,
                       const struct bm_timeline *sim, const char *title, FILE *f);

int bm_render_html(const struct bm_table *t, const struct bm_timeline *tl,
                   const struct bm_report_compare *cmp, const char *title, FILE *f)
{
    return render_html(t, tl, cmp, NULL, title, f);
}

int bm_render_html_vs(const struct bm_table *t, const struct bm_timeline *tl, const struct bm_timeline *sim,
                      const char *title, FILE *f)
{
    return render_html(t, tl, NULL, sim, title, f);
}

static int render_html(const struct bm_table *t, const struct bm_timeline *tl, const struct bm_report_compare *cmp,
                       const struct bm_timeline *sim, const char *title, FILE *f)
{
    static const char *const roles[BM_N_ROLES] = {"encoder", "backbone", "generator"};
    if (!title) title = "bigmac schedule";
    int K = t->n_modules * 3;
    struct bm_critical crit;
    struct bm_err cerr;
    if (bm_critical_path(t, tl, &crit, &cerr)) return BM_ERR;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    bm_report_xml_escape(f, title);
    fprintf(f, " — bigmac</title>\n<style>\n");
    for (int i = 0; report_css[i]; i++) fputs(report_css[i], f);
    bm_html_views_css(f);
    fprintf(f, "</style></head>\n<body>\n<h1>");
    bm_report_xml_escape(f, title);
    fprintf(f, "</h1>\n<p class=\"sub\">%s timeline · policy <b>%s</b> · backbone %s · P=%d V=%d M=%d U=%d",
            tl->measured ? "measured" : "simulated", bm_policy_name(t->policy),
            bm_backbone_name(t->backbone), t->pp, t->vpp, t->microbatches, t->unit);
    if (t->window) fprintf(f, " W=%d", t->window);
    fprintf(f, " · makespan <b>%.3f ms</b> · bubble ratio %.3f · peak memory %.2f GiB%s</p>\n",
            tl->makespan_ms, tl->bubble_ratio, tl->peak_mib / 1024.0,
            tl->oom ? " <b style=\"color:#c00\">OUT OF MEMORY</b>" : "");
    fprintf(f, "<div id=\"controls\"><button id=\"zin\" title=\"zoom in\">+</button>"
               "<button id=\"zout\" title=\"zoom out\">&#8722;</button>"
               "<button id=\"left\" title=\"pan left\">&#8592;</button>"
               "<button id=\"right\" title=\"pan right\">&#8594;</button>"
               "<button id=\"reset\">reset</button>"
               "<button id=\"crit\" title=\"outline the critical path\" aria-pressed=\"true\">critical path</button>"
               "<span id=\"range\"></span>"
               "<span>wheel: zoom · drag or shift+wheel: pan · hover: op, times, what it waited for</span></div>\n");
    fprintf(f, "<div id=\"legend\">");
    for (int m = 0; m < t->n_modules; m++)
        for (int p = 0; p < 2; p++) {
            char col[8];
            bm_report_color(t, m, p, col);
            fprintf(f, "<span class=\"sw\" style=\"background:%s\"></span>", col);
            bm_report_xml_escape(f, t->modules[m].name);
            fprintf(f, " %s", p ? "backward" : "forward");
        }
    fprintf(f, "<span class=\"sw\" style=\"background:#e6e6e6\"></span>idle"
               "<span class=\"sw\" style=\"background:#d62728;height:4px\"></span>blocked in recv"
               "<span class=\"sw\" style=\"background:#fff;border-top:3px solid #111;border-bottom:3px solid #111;height:6px\"></span>critical path"
               "<span class=\"sw\" style=\"background:#a1d99b\"></span>encoder"
               "<span class=\"sw\" style=\"background:#9ecae1\"></span>backbone"
               "<span class=\"sw\" style=\"background:#fdae6b\"></span>generator activations (MiB, curve under each lane)</div>\n");
    fprintf(f, "<div id=\"tl\"><div id=\"labels\"></div><canvas id=\"cv\"></canvas><div id=\"tip\"></div></div>\n");
    /* metrics */
    fprintf(f, "<h2>Metrics</h2>\n<table><tr><th>makespan</th><th>bubble ratio</th><th>samples/s</th>"
               "<th>peak memory (GiB)</th>");
    for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<th>peak %s act. (MiB)</th>", roles[k]);
    fprintf(f, "<th>memory cap (GiB)</th><th>OOM</th></tr>\n<tr><td>%.3f ms</td><td>%.4f</td><td>%.3f</td><td>%.3f</td>",
            tl->makespan_ms, tl->bubble_ratio, tl->samples_per_s, tl->peak_mib / 1024.0);
    for (int k = 0; k < BM_N_ROLES; k++) put_td_mib(f, tl->peak_act_mib[k]);
    fprintf(f, "<td>%.2f</td><td%s>%s</td></tr></table>\n", tl->memory_cap_mib / 1024.0,
            tl->oom ? " class=\"oom\"" : "", tl->oom ? "yes" : "no");
    put_hosts(f, t);
    bm_html_critical_section(f, &crit);
    fprintf(f, "<h2>Per rank</h2>\n<table><tr><th>rank</th><th>busy (ms)</th>");
    for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<th>%s busy</th>", roles[k]);
    fprintf(f, "<th>idle lead</th><th>idle mid</th><th>idle tail</th><th>state (MiB)</th>");
    for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<th>peak %s act.</th>", roles[k]);
    fprintf(f, "<th>peak total (MiB)</th><th>OOM</th></tr>\n");
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        fprintf(f, "<tr><td>rank %d</td><td>%.3f</td>", r, rt->busy_ms);
        for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<td>%.3f</td>", rt->busy_role_ms[k]);
        fprintf(f, "<td>%.3f</td><td>%.3f</td><td>%.3f</td>", rt->idle_lead_ms, rt->idle_mid_ms, rt->idle_tail_ms);
        put_td_mib(f, rt->state_mib);
        for (int k = 0; k < BM_N_ROLES; k++) put_td_mib(f, rt->peak_act_mib[k]);
        put_td_mib(f, rt->peak_mib);
        fprintf(f, "<td%s>%s</td></tr>\n", rt->oom ? " class=\"oom\"" : "", rt->oom ? "yes" : "no");
    }
    fprintf(f, "</table>\n");
    if (cmp) {
        double ref = -1;
        for (int i = 0; i < cmp->n_rows; i++)
            if (cmp->rows[i].policy == BM_POL_BIGMAC && cmp->rows[i].ok) ref = cmp->rows[i].makespan_ms;
        fprintf(f, "<h2>Policy comparison</h2>\n<table id=\"compare\"><tr><th>policy</th><th>makespan (ms)</th>"
                   "<th>ratio to bigmac</th><th>bubble ratio</th><th>peak encoder act. (MiB)</th>"
                   "<th>peak generator act. (MiB)</th><th>peak memory (GiB)</th><th>window</th><th>OOM</th></tr>\n");
        for (int i = 0; i < cmp->n_rows; i++) {
            const struct bm_report_policy_row *row = &cmp->rows[i];
            fprintf(f, "<tr%s><td>%s</td>", row->policy == t->policy && !row->recompute ? " class=\"best\"" : "",
                    bm_report_row_name(row));
            if (!row->ok) {
                fprintf(f, "<td colspan=\"8\">cannot plan: ");
                bm_report_xml_escape(f, row->error);
                fprintf(f, "</td></tr>\n");
                continue;
            }
            fprintf(f, "<td>%.3f</td>", row->makespan_ms);
            if (ref > 0) fprintf(f, "<td>%.3f</td>", row->makespan_ms / ref);
            else fprintf(f, "<td>n/a</td>");
            fprintf(f, "<td>%.4f</td>", row->bubble_ratio);
            put_td_mib(f, row->peak_act_mib[BM_ROLE_ENCODER]);
            put_td_mib(f, row->peak_act_mib[BM_ROLE_GENERATOR]);
            char win[24] = "&#8212;";
            if (row->window) snprintf(win, sizeof win, "%d", row->window);
            fprintf(f, "<td>%.3f</td><td>%s</td><td%s>%s</td></tr>\n", row->peak_mib / 1024.0, win,
                    row->oom ? " class=\"oom\"" : "", row->oom ? "yes" : "no");
        }
        char ratio[32] = "n/a";
        if (ref > 0) snprintf(ratio, sizeof ratio, "%.3f", cmp->bound_ms / ref);
        if (cmp->bound_ms >= 0)
            fprintf(f, "<tr><td>zero-added-bubble bound</td><td>%.3f</td><td>%s</td><td colspan=\"7\">none's makespan + the largest per-rank nested (encoder + generator) busy time of the bigmac table</td></tr>\n",
                    cmp->bound_ms, ratio);
        if (cmp->lower_ms > 0) {
            if (ref > 0) snprintf(ratio, sizeof ratio, "%.3f", cmp->lower_ms / ref);
            fprintf(f, "<tr><td>lower bound</td><td>%.3f</td><td>%s</td><td colspan=\"7\">no order of this work that keeps the backbone order is faster, for any policy's placement (docs/simulator.md)</td></tr>\n",
                    cmp->lower_ms, ratio);
        }
        fprintf(f, "</table>\n<p class=\"note\">Every policy is planned and simulated with the same parallel settings. "
                   "bigmac and ideal differ only in the encoder window (ideal: unlimited memory); optimus hoists "
                   "encoder forwards and defers backwards, so its encoder memory grows with M; unified runs "
                   "encoders on rank 0 and generators on rank P-1; optimus+recompute (shown when optimus does not "
                   "fit) recomputes every encoder and generator, the memory-equal compute-first baseline.</p>\n");
    }
    bm_html_views_body(f, cmp);
    if (sim) bm_html_vs_body(f, t, tl, sim);
    /* data + script */
    fprintf(f, "<script>\nconst D = {\"P\":%d,\"ms\":%.9g,\n\"kinds\":[", t->pp, tl->makespan_ms);
    for (int m = 0; m < t->n_modules; m++)
        for (int p = 0; p < 3; p++) {
            char col[8];
            bm_report_color(t, m, p, col);
            fprintf(f, "%s{\"mod\":", m || p ? "," : "");
            bm_report_js_str(f, t->modules[m].name);
            fprintf(f, ",\"role\":\"%s\",\"pass\":\"%s\",\"bb\":%d,\"color\":\"%s\"}",
                    roles[t->modules[m].role], bm_pass_name((enum bm_pass)p),
                    m == t->backbone_module, col);
        }
    fprintf(f, "],\n\"tensors\":[");
    for (int i = 0; i < t->n_tensors; i++) {
        if (i) fputc(',', f);
        bm_report_js_str(f, t->tensors[i].name);
    }
    fprintf(f, "],\n\"tgrad\":[");
    for (int i = 0; i < t->n_tensors; i++) fprintf(f, "%s%d", i ? "," : "", t->tensors[i].grad);
    fprintf(f, "],\n\"ranks\":[\n");
    for (int r = 0; r < t->pp; r++) {
        if (r) fprintf(f, ",\n");
        put_rank(f, t, tl, r, K, crit.on ? crit.on[r] : NULL);
    }
    fprintf(f, "]};\n</script>\n<script>\n");
    for (int i = 0; report_js[i]; i++) fputs(report_js[i], f);
    fprintf(f, "</script>\n");
    bm_html_views_script(f, cmp);
    if (sim) bm_html_vs_script(f, t, tl, sim);
    fprintf(f, "</body></html>\n");
    bm_critical_free(t, &crit);
    return ferror(f) ? BM_ERR : BM_OK;
}
