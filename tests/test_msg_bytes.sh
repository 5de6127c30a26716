#!/usr/bin/env bash
# test_msg_bytes.sh — the executor's traces carry every message's size (a send's or recv's
# args.bytes, docs/trace.md), and `calibrate` fits each module's out_mib from them and the link
# latency against them. Reference, by hand from tiny-mllm's arch: the backbone (hidden 48, text
# seq 32) runs 32 + 16 tokens per image (16x16 images in 4x4 patches), so a backbone message of
# a microbatch with k images is (32 + 16k) x 48 x 4 bytes and its encoder output 16k x 48 x 4.
cd "$(dirname "$0")/.."
. tests/lib.sh
export OPENBLAS_NUM_THREADS=1
PY=${PYTHON:-/usr/bin/python3}
SPEC=examples/tiny-mllm.json
T=$TEST_TMP/msg_bytes
mkdir -p "$T"

expect_exit msg_bytes_train 0 "$BIGMAC" train $SPEC --local --pp 2 --unit 2 --steps 2 --trace "$T/r.json" --quiet
r=$("$PY" - "$T/r.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
by = {(e["pid"], e["args"]["op"]): e for e in ev}
k = {}  # images per microbatch, from the encoder outputs
bad = []
for e in ev:
    a = e["args"]
    if e["cat"] not in ("send", "recv"):
        if "bytes" in a: bad.append("compute op with bytes: " + e["name"])
        continue
    if "bytes" not in a: bad.append("no bytes: " + e["name"]); continue
    if a["tensor"].endswith("vis_emb"):
        n, rem = divmod(a["bytes"], 16 * 48 * 4)
        if rem or n not in (1, 2) or k.setdefault(a["mb"], n) != n: bad.append("vis_emb: %s %d" % (e["name"], a["bytes"]))
kb = {}  # images per microbatch, from the backbone messages (every microbatch has some)
for e in ev:
    a = e["args"]
    if e["cat"] in ("send", "recv") and not a["tensor"].endswith("vis_emb") and "bytes" in a:
        n, rem = divmod(a["bytes"] - 32 * 48 * 4, 16 * 48 * 4)
        if rem or n not in (1, 2) or kb.setdefault(a["mb"], n) != n:
            bad.append("%s: %d bytes, not (32 + 16k) x 48 x 4 for one k" % (e["name"], a["bytes"]))
for mb, n in k.items():
    if kb.get(mb) != n: bad.append("mb %d: %s images by its encoder output, %s by its backbone" % (mb, n, kb.get(mb)))
    if e["cat"] == "recv" and "bytes" in a:
        s = by[(a["wait_rank"], a["wait_op"])]
        if s["args"].get("bytes") != a["bytes"]: bad.append("recv %s and its send differ" % e["name"])
sends = [e["args"] for e in ev if e["cat"] == "send"]
gpt = [a["bytes"] for a in sends if a["tensor"].startswith("gpt.") or a["tensor"] == "hidden"]
vit = [a["bytes"] for a in sends if a["tensor"] == "vis_emb"]
print("ok" if not bad and len(kb) == 8 and k else "bad " + "; ".join(bad[:3]) + " images %s %s" % (k, kb))
print(sum(gpt) / len(gpt) / 1048576, sum(vit) / len(vit) / 1048576)
PY
)
if [ "$(printf '%s\n' "$r" | head -1)" = ok ]; then echo "PASS msg_bytes_by_hand_and_recv_equals_send"
else echo "FAIL msg_bytes_by_hand_and_recv_equals_send: $r"; fi
want=$(printf '%s\n' "$r" | sed -n 2p)
# calibrate: out_mib of gpt and vit are the means of their tensors' messages (6 digits written);
# dit sends only gradients, so its out_mib stays nominal
expect_exit msg_bytes_calibrate 0 "$BIGMAC" calibrate "$T/r.json" -o "$T/costs.json"
got=$("$PY" -c '
import json, sys
m = {x["name"]: x["cost"]["out_mib"] for x in json.load(open(sys.argv[1]))["modules"]}
print(m["gpt"], m["vit"], m["dit"])' "$T/costs.json")
r=$(awk -v w="$want" -v g="$got" 'BEGIN{split(w, a, " "); split(g, b, " ")
    ok = (b[1] / a[1] - 1) ^ 2 < 1e-10 && (b[2] / a[2] - 1) ^ 2 < 1e-10 && b[3] == 0.1; print ok ? "ok" : "bad"}')
if [ "$r" = ok ]; then echo "PASS msg_bytes_calibrate_out_mib"
else echo "FAIL msg_bytes_calibrate_out_mib: got $got (gpt, vit, dit), want $want and dit's nominal 0.1"; fi
# no warning that the nominal out_mib overstate the tensors: the bytes are the measured ones
if printf '%s' "$OUT_TXT" | grep -q overstate; then
    echo "FAIL msg_bytes_no_overstate_warning"; else echo "PASS msg_bytes_no_overstate_warning"; fi
# the loader: bytes on a compute op, or negative, is a positioned error naming the field
sed '0,/"pass":"F"/s/"pass":"F"/"pass":"F","bytes":5/' "$T/r.json" >"$T/bad.json"
expect_exit msg_bytes_on_compute_refused 1 "$BIGMAC" render "$T/bad.json" --format ascii
expect_contains msg_bytes_on_compute_message '"bytes" (a message'"'"'s size) must be a number >= 0 on a send or recv'
sed '0,/"bytes":[0-9]*/s/"bytes":[0-9]*/"bytes":-1/' "$T/r.json" >"$T/neg.json"
expect_exit msg_bytes_negative_refused 1 "$BIGMAC" render "$T/neg.json" --format ascii
expect_contains msg_bytes_negative_names_file "neg.json:"
