#!/usr/bin/env bash
# test_html_chromium.sh — open the HTML report in real headless Chromium: after the page's
# script ran, the DOM has one labelled lane per rank ("rank N", data-rank) and the screenshot is
# not blank (its PNG is several times larger than a blank page's, measured here the same way).
# Without chromium (a dev machine) the test is skipped; under CI (CI set) it fails.
. "$(dirname "$0")/lib.sh"
T=$TEST_TMP
need_chromium html_chromium

check_report() {  # NAME HTML P
    local name=$1 html=$2 P=$3
    chrome --dump-dom --virtual-time-budget=5000 "file://$html" >"$T/$name.dom"
    local lanes labels ready
    lanes=$(grep -o 'class="lane" data-rank="[0-9]*"' "$T/$name.dom" | sort -u | wc -l)
    labels=$(grep -o '>rank [0-9]*</div>' "$T/$name.dom" | sort -u | wc -l)
    if [ "$lanes" = "$P" ] && [ "$labels" = "$P" ]; then echo "PASS ${name}_dom_lanes"; else
        echo "FAIL ${name}_dom_lanes: $lanes lanes, $labels labels, wanted $P"; fi
    if grep -q 'data-ready="1"' "$T/$name.dom"; then echo "PASS ${name}_script_ran"; else
        echo "FAIL ${name}_script_ran (no data-ready on body: a script error?)"; fi
    rm -f "$T/$name.png"
    (cd "$T" && chrome --screenshot="$T/$name.png" --window-size=1400,900 "file://$html" >/dev/null)
    local size
    size=$(stat -c %s "$T/$name.png" 2>/dev/null || echo 0)
    if [ "$size" -gt $((blank * 3)) ]; then echo "PASS ${name}_screenshot_not_blank"; else
        echo "FAIL ${name}_screenshot_not_blank: $size bytes, a blank page is $blank"; fi
}

# a blank page's screenshot, for comparison
printf '<!DOCTYPE html><html><body></body></html>\n' >"$T/blank.html"
(cd "$T" && chrome --screenshot="$T/blank.png" --window-size=1400,900 "file://$T/blank.html" >/dev/null)
blank=$(stat -c %s "$T/blank.png" 2>/dev/null || echo 0)
if [ "$blank" -gt 0 ]; then echo "PASS html_chromium_blank_screenshot"; else
    echo "FAIL html_chromium_blank_screenshot: chromium wrote no screenshot"; exit 0; fi

"$BIGMAC" render examples/tiny-mllm.json --format html -o "$T/spec.html" 2>/dev/null
check_report html_spec "$T/spec.html" 4
"$BIGMAC" render examples/tiny-mllm.json --pp 8 --vpp 1 --backbone 1f1b --microbatches 16 \
    --policy optimus --format html -o "$T/p8.html" 2>/dev/null
check_report html_p8 "$T/p8.html" 8
# the report re-rendered from a Chrome trace
"$BIGMAC" render examples/tiny-mllm.json --format trace -o "$T/t.json" 2>/dev/null
"$BIGMAC" render "$T/t.json" --format html -o "$T/trace.html" 2>/dev/null
check_report html_trace "$T/trace.html" 4
# the SVG renders too
"$BIGMAC" render examples/tiny-mllm.json --format svg -o "$T/s.svg" 2>/dev/null
(cd "$T" && chrome --screenshot="$T/svg.png" --window-size=1200,400 "file://$T/s.svg" >/dev/null)
size=$(stat -c %s "$T/svg.png" 2>/dev/null || echo 0)
if [ "$size" -gt $((blank * 3)) ]; then echo "PASS svg_screenshot_not_blank"; else
    echo "FAIL svg_screenshot_not_blank: $size bytes"; fi

# interaction: hover over a lane (every 1% of its width: searched plans leave little idle to
# hit) shows the op, its times, what it waited for and idle time; the zoom
# button narrows the shown range (events dispatched by a script appended to a copy)
sed 's|</body></html>||' "$T/spec.html" >"$T/hover.html"
cat >>"$T/hover.html" <<'JS'
<script>
(function () {
  var cv = document.getElementById("cv"), r = cv.getBoundingClientRect(), out = [];
  for (var lane = 0; lane < 4; lane++)
    for (var f = 0.01; f < 1; f += 0.01) {
      cv.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + f * r.width, clientY: r.top + 24 + lane * 58 + 10, bubbles: true}));
      out.push(document.getElementById("tip").textContent);
    }
  var before = document.getElementById("range").textContent;
  document.getElementById("zin").click();
  var after = document.getElementById("range").textContent;
  cv.dispatchEvent(new WheelEvent("wheel", {clientX: r.left + 100, clientY: r.top + 30, deltaY: -100, bubbles: true, cancelable: true}));
  var wheel = document.getElementById("range").textContent;
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = out.join("\n") + "\nRANGE " + before + "\nZOOMED " + after + "\nWHEEL " + wheel;
  document.body.appendChild(pre);
})();
</script></body></html>
JS
chrome --dump-dom --virtual-time-budget=5000 "file://$T/hover.html" >"$T/hover.dom"
probe=$(sed -n '/<pre id="probe">/,/<\/pre>/p' "$T/hover.dom")
if printf '%s' "$probe" | grep -q "start .* ms, duration .* ms"; then echo "PASS html_hover_shows_times"; else
    echo "FAIL html_hover_shows_times"; printf '%s\n' "$probe" | head -5; fi
if printf '%s' "$probe" | grep -q "waited for .* on rank [0-9]"; then echo "PASS html_hover_shows_wait"; else
    echo "FAIL html_hover_shows_wait"; fi
if printf '%s' "$probe" | grep -q "idle at"; then echo "PASS html_hover_shows_idle"; else
    echo "FAIL html_hover_shows_idle"; fi
b=$(printf '%s\n' "$probe" | sed -n 's/^RANGE //p'); z=$(printf '%s\n' "$probe" | sed -n 's/^ZOOMED //p')
w=$(printf '%s\n' "$probe" | sed -n 's/^WHEEL //p')
if [ -n "$b" ] && [ -n "$z" ] && [ "$b" != "$z" ] && [ -n "$w" ] && [ "$w" != "$z" ]; then
    echo "PASS html_zoom_changes_range"; else echo "FAIL html_zoom_changes_range ('$b' / '$z' / '$w')"; fi
