#!/usr/bin/env bash
# test_assets.sh — the HTML report's script and style (src/report/assets/) are files that JS and
# CSS tools can read: each .js parses (node --check), each .css is well formed (balanced blocks,
# every declaration "property: value;"), and the report embeds every file byte for byte (the
# Makefile turns them into C string literals; escaping must not change a character).
. "$(dirname "$0")/lib.sh"
T=$TEST_TMP
PY=/usr/bin/python3

NODE=$(command -v node || command -v nodejs || true)
for js in src/report/assets/*.js; do
    n=assets_js_parses_$(basename "$js" .js)
    if [ -z "$NODE" ]; then
        if [ -n "${CI:-}" ]; then echo "FAIL $n: node not installed (make deps installs nodejs)"
        else echo "SKIP $n: node not installed (make deps installs nodejs)"; fi
        continue
    fi
    expect_exit "$n" 0 "$NODE" --check "$js"
done

for css in src/report/assets/*.css; do
    expect_exit "assets_css_well_formed_$(basename "$css" .css)" 0 $PY - "$css" <<'PYEOF'
import re, sys
path = sys.argv[1]
text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
pos, n = 0, 0
for m in re.finditer(r"([^{}]*)\{([^{}]*)\}", text):
    if text[pos:m.start()].strip():
        sys.exit("%s: text outside a rule: %r" % (path, text[pos:m.start()].strip()[:40]))
    pos = m.end()
    if not m.group(1).strip():
        sys.exit("%s: a rule without a selector" % path)
    for d in [d.strip() for d in m.group(2).split(";")][:-1]:
        if not re.fullmatch(r"-?[a-z][a-z-]*\s*:\s*\S.*", d):
            sys.exit("%s: bad declaration %r in %s" % (path, d, m.group(1).strip()))
    if m.group(2).strip() and not m.group(2).strip().endswith(";"):
        sys.exit("%s: declaration without ';' in %s" % (path, m.group(1).strip()))
    n += 1
if text[pos:].strip():
    sys.exit("%s: unbalanced or trailing text: %r" % (path, text[pos:].strip()[:40]))
if n == 0:
    sys.exit("%s: no rules" % path)
PYEOF
done

# the report from a spec carries the timeline script, the style and the comparison views
"$BIGMAC" render examples/tiny-mllm.json --format html -o "$T/r.html" >/dev/null 2>&1
for a in src/report/assets/*; do
    expect_exit "assets_embedded_verbatim_$(basename "$a" | tr . _)" 0 $PY -c '
import sys
a, h = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
sys.exit(0 if a in h else "%s not found verbatim in the report" % sys.argv[1])' "$a" "$T/r.html"
done
