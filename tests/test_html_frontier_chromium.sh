#!/usr/bin/env bash
# test_html_frontier_chromium.sh — the report's frontier chart, stacked policy timelines and
# critical path in real headless Chromium (as test_html_chromium.sh does for the timeline):
# the elements are there (one chart point per frontier point, the Pareto staircase, the device
# memory line, the policy canvas drawn, the critical-path table), hovering a point shows its
# configuration, clicking another shows its timeline, hovering the policy canvas names an op,
# the main timeline's hover says when an op is on the critical path, the button toggles it.
# Without chromium (a dev machine) the test is skipped; under CI (CI set) it fails.
. "$(dirname "$0")/lib.sh"
T=$TEST_TMP
need_chromium html_frontier_chromium

"$BIGMAC" render tests/specs/recompute-oom.json --format html -o "$T/f.html" 2>/dev/null
npts=$("$BIGMAC" sweep tests/specs/recompute-oom.json --frontier --json 2>/dev/null | grep -c '"policy"')
sed 's|</body></html>||' "$T/f.html" >"$T/probe.html"
cat >>"$T/probe.html" <<'JS'
<script>
(function () {
  var out = [], svg = document.getElementById("frontier"), pts = svg ? svg.querySelectorAll(".fpt") : [];
  out.push("POINTS " + pts.length + " DATA " + V.front.pts.length);
  out.push("PARETO " + (svg && svg.querySelector("path.pareto") ? 1 : 0) + " MEMLINE " + (svg && svg.querySelector("line.memline") ? 1 : 0));
  var pcv = document.getElementById("pcv");
  out.push("PCV " + (pcv ? pcv.height : 0) + " POLICIES " + V.pol.length);
  out.push("CRITTABLE " + (document.getElementById("critical") ? 1 : 0));
  out.push("VIEWS " + document.body.getAttribute("data-views-ready"));
  function hover(el) {
    var b = el.getBoundingClientRect();
    el.dispatchEvent(new MouseEvent("mouseover", {clientX: b.left + b.width / 2, clientY: b.top + b.height / 2, bubbles: true}));
  }
  if (pts.length > 1) {
    hover(pts[0]);
    out.push("TIP " + document.getElementById("ftip").textContent);
    var before = document.getElementById("fsel").textContent;
    var k = 0; /* a point with another configuration than the one shown */
    for (var i = 0; i < pts.length; i++) if (!pts[i].classList.contains("sel")) { k = i; break; }
    pts[k].dispatchEvent(new MouseEvent("click", {bubbles: true}));
    var p = V.front.pts[+pts[k].getAttribute("data-i")];
    out.push("SELBEFORE " + before);
    out.push("SELAFTER " + document.getElementById("fsel").textContent);
    out.push("WANT " + p.policy + (p.window ? " window " + p.window : "") + ", recompute " + p.rc);
    out.push("SELCLASS " + pts[k].classList.contains("sel"));
  }
  /* the policy canvas: sweep the first block's rank 0 lane */
  var r = pcv.getBoundingClientRect(), tips = [];
  for (var f = 0.12; f < 0.6; f += 0.02) {
    pcv.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + f * r.width, clientY: r.top + 18 + 16 + 3, bubbles: true}));
    tips.push(document.getElementById("ptip").textContent);
  }
  out.push("PTIP " + tips.join(" | "));
  /* the main timeline: hover the middle of the longest compute op on the critical path */
  var cv = document.getElementById("cv"), c = cv.getBoundingClientRect(), crit = 0, K = D.kinds.length;
  var br = -1, bt = 0, bd = -1;
  for (var q = 0; q < D.P; q++) {
    var a = D.ranks[q], acc = 0, on = {};
    for (var ci = 0; ci < a.c.length; ci++) on[a.c[ci]] = 1;
    for (var j = 0; j < a.k.length; j++) {
      acc += a.s[j];
      if (on[j] && a.k[j] < K && a.d[j] > bd) { bd = a.d[j]; br = q; bt = (acc + a.d[j] / 2) / 1e6; }
    }
  }
  if (br >= 0) {
    cv.dispatchEvent(new MouseEvent("mousemove", {clientX: c.left + bt / D.ms * c.width, clientY: c.top + 24 + br * 58 + 10, bubbles: true}));
    if (document.getElementById("tip").textContent.indexOf("on the critical path") >= 0) crit++;
  }
  out.push("CRITHOVER " + crit);
  var b = document.getElementById("crit");
  b.click();
  out.push("CRITBUTTON " + b.getAttribute("aria-pressed"));
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = out.join("\n");
  document.body.appendChild(pre);
})();
</script></body></html>
JS
chrome --dump-dom --virtual-time-budget=5000 "file://$T/probe.html" >"$T/probe.dom"
probe=$(sed -n '/<pre id="probe">/,/<\/pre>/p' "$T/probe.dom")
line() { printf '%s\n' "$probe" | sed 's/<[^>]*>//g' | sed -n "s/^$1 //p"; }
if [ "$(line POINTS)" = "$npts DATA $npts" ] && [ "$npts" -gt 5 ]; then echo "PASS html_frontier_points"; else
    echo "FAIL html_frontier_points: '$(line POINTS)', sweep has $npts"; fi
[ "$(line PARETO)" = "1 MEMLINE 1" ] && echo "PASS html_frontier_staircase_and_memory_line" || echo "FAIL html_frontier_staircase_and_memory_line: $(line PARETO)"
pcv=$(line PCV)
if [ "${pcv%% *}" -gt 100 ] && [ "${pcv##* }" = 7 ]; then echo "PASS html_policy_timelines_drawn"; else
    echo "FAIL html_policy_timelines_drawn: $pcv (7 rows: six policies and optimus+recompute)"; fi
[ "$(line CRITTABLE)" = 1 ] && echo "PASS html_critical_table" || echo "FAIL html_critical_table"
[ "$(line VIEWS)" = 1 ] && echo "PASS html_views_script_ran" || echo "FAIL html_views_script_ran"
tip=$(line TIP)
if printf '%s' "$tip" | grep -q "window" && printf '%s' "$tip" | grep -q "recompute" &&
   printf '%s' "$tip" | grep -q "GiB per rank" && printf '%s' "$tip" | grep -q "samples/s"; then
    echo "PASS html_frontier_hover_shows_configuration"; else echo "FAIL html_frontier_hover_shows_configuration: '$tip'"; fi
want=$(line WANT); after=$(line SELAFTER); before=$(line SELBEFORE)
if [ -n "$want" ] && [ "$after" != "$before" ] && printf '%s' "$after" | grep -qF "timeline of: $want" &&
   [ "$(line SELCLASS)" = true ]; then echo "PASS html_frontier_click_shows_timeline"; else
    echo "FAIL html_frontier_click_shows_timeline: '$before' -> '$after', wanted '$want'"; fi
if printf '%s' "$(line PTIP)" | grep -q "on rank 0 (bigmac)"; then echo "PASS html_policy_timelines_hover"; else
    echo "FAIL html_policy_timelines_hover: $(line PTIP | cut -c1-300)"; fi
n=$(line CRITHOVER)
[ "${n:-0}" -gt 0 ] && echo "PASS html_critical_path_hover" || echo "FAIL html_critical_path_hover: $n"
[ "$(line CRITBUTTON)" = false ] && echo "PASS html_critical_path_toggle" || echo "FAIL html_critical_path_toggle"

# ---- the measured run with its simulated twin: both drawn, hovering the simulated lane says how
# far the op is from the measured one
"$BIGMAC" plan tests/specs/exec-small.json -o "$T/vt.json" >/dev/null 2>&1
OPENBLAS_NUM_THREADS=1 timeout 120 "$BIGMAC" train tests/specs/exec-small.json --local --steps 2 --table "$T/vt.json" \
    --trace "$T/vtr.json" >/dev/null 2>&1
"$BIGMAC" render "$T/vtr.json" --table "$T/vt.json" --format html -o "$T/vs.html" 2>/dev/null
sed 's|</body></html>||' "$T/vs.html" >"$T/vsprobe.html"
cat >>"$T/vsprobe.html" <<'JS'
<script>
(function () {
  var pcv = document.getElementById("pcv"), r = pcv.getBoundingClientRect(), tips = [];
  var m0 = V.minis[0], y1 = 18 + 16 + m0.P * 8 + 8 + 16 + 3; /* the second block's rank 0 lane */
  for (var f = 0.1; f < 1; f += 0.01) {
    pcv.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + f * r.width, clientY: r.top + y1, bubbles: true}));
    tips.push(document.getElementById("ptip").textContent);
  }
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = "BLOCKS " + V.pol.length + " H " + pcv.height + "\nTIPS " + tips.join(" | ");
  document.body.appendChild(pre);
})();
</script></body></html>
JS
chrome --dump-dom --virtual-time-budget=5000 "file://$T/vsprobe.html" >"$T/vsprobe.dom"
probe=$(sed -n '/<pre id="probe">/,/<\/pre>/p' "$T/vsprobe.dom" | sed 's/<[^>]*>//g')
if printf '%s' "$probe" | grep -q "^BLOCKS 2 H [1-9]"; then echo "PASS html_vs_two_timelines"; else
    echo "FAIL html_vs_two_timelines: $(printf '%s' "$probe" | head -1)"; fi
if printf '%s' "$probe" | grep -q "on rank 0 (simulated (calibrated))start .* ms, duration .* msagainst the measured op: start .* ms, duration .* ms (.*%)"; then
    echo "PASS html_vs_hover_shows_deviation"; else echo "FAIL html_vs_hover_shows_deviation: $(printf '%s' "$probe" | cut -c1-300 | tail -1)"; fi
