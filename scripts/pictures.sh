#!/usr/bin/env bash
# pictures.sh — regenerate the README's schedule pictures: the same spec planned with bigmac,
# optimus and unified, rendered by `bigmac render --format svg` and screenshot with headless
# Chromium into docs/img/<policy>.png.
#   scripts/pictures.sh [SPEC] [extra plan flags...]     (default: examples/tiny-mllm.json)
# Needs bin/bigmac (make) and chromium (apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
BIGMAC=${BIGMAC:-bin/bigmac}
SPEC=${1:-examples/tiny-mllm.json}
shift || true
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -x "$BIGMAC" ] || { echo "pictures.sh: $BIGMAC not built (run make)" >&2; exit 1; }
[ -n "$CHROME" ] || { echo "pictures.sh: chromium not found (apt-get install chromium)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p docs/img
# one time scale for the three pictures: the longest makespan
span=0
for pol in bigmac optimus unified; do
    ms=$("$BIGMAC" render "$SPEC" --policy "$pol" "$@" --format ascii 2>/dev/null | sed -n 's/^makespan \([0-9.]*\) ms.*/\1/p')
    span=$(awk -v a="$span" -v b="$ms" 'BEGIN{print (b > a) ? b : a}')
done
for pol in bigmac optimus unified; do
    "$BIGMAC" render "$SPEC" --policy "$pol" "$@" --format svg --span "$span" -o "$tmp/$pol.svg" 2>/dev/null
    # the SVG's own size is the window size
    read -r w h < <(sed -n 's/.*<svg [^>]*width="\([0-9]*\)" height="\([0-9]*\)".*/\1 \2/p' "$tmp/$pol.svg" | head -1)
    timeout 90 "$CHROME" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --hide-scrollbars --user-data-dir="$tmp/prof-$pol" --screenshot="$tmp/$pol.png" \
        --window-size="$w,$h" "file://$tmp/$pol.svg" >/dev/null 2>&1
    cp "$tmp/$pol.png" "docs/img/$pol.png"
    echo "docs/img/$pol.png ($w x $h): $("$BIGMAC" render "$SPEC" --policy "$pol" "$@" --format ascii 2>/dev/null | grep '^makespan')"
done
