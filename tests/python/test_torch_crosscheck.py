"""Cross-check: the C reference trainer, the single-process torch twins and the torch executor
(P = 2: bigmac, optimus, unified x 1f1b, interleaved; P = 4: bigmac 1f1b) give the same
per-step losses (1e-4 relative) over 5 steps and the same parameters after them. The twins
use autograd, so this checks every C forward kernel and hand-written backward."""
import json
import os
import subprocess
import tempfile

import numpy as np

from check import check, done
import bigmac
import bigmac.torch as bt

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
SPEC = "tests/specs/exec-small.json"
STEPS = 5
tmp = tempfile.mkdtemp()


def losses(path):
    return [json.loads(l)["loss"] for l in open(path)]


def same_losses(a, b):
    return len(a) == len(b) == STEPS and all(abs(x - y) <= 1e-4 * max(abs(x), abs(y)) for x, y in zip(a, b))


def same_params(a, b):
    return a.size == b.size and a.size > 0 and np.abs(a - b).max() <= 1e-5


def params(path):
    return np.fromfile(path, "<f4")


# C reference trainer
c_log, c_bin = os.path.join(tmp, "c.jsonl"), os.path.join(tmp, "c.bin")
subprocess.run([BIGMAC, "train", SPEC, "--reference", "--steps", str(STEPS), "--log", c_log, "--dump-params", c_bin],
               check=True, capture_output=True)
c_loss, c_par = losses(c_log), params(c_bin)

# single-process torch twins
t_log, t_bin = os.path.join(tmp, "t.jsonl"), os.path.join(tmp, "t.bin")
t_loss = bt.reference(SPEC, steps=STEPS, log=t_log, dump=t_bin)
check("torch_reference_vs_c_losses", same_losses(c_loss, t_loss), "%s vs %s" % (c_loss, t_loss))
d = np.abs(params(t_bin) - c_par).max() if params(t_bin).size == c_par.size else None
check("torch_reference_vs_c_params", same_params(params(t_bin), c_par), "max diff %s" % d)
check("torch_reference_log_format", [sorted(json.loads(l)) for l in open(t_log)] ==
      [sorted(json.loads(l)) for l in open(c_log)])

CONFIGS = [(pol, bb) for pol in ("bigmac", "optimus", "unified") for bb in ("1f1b", "interleaved")]


def run_configs(rank, configs, P):
    out = []
    for pol, bb in configs:
        tag = "%s_%s_p%d" % (pol, bb, P)
        vpp = 2 if bb == "interleaved" else 1
        log, dump = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + ".bin")
        trace = os.path.join(tmp, tag + ".trace.json")
        bt.train(SPEC, steps=STEPS, log=log, dump=dump, trace=trace, pp=P, vpp=vpp, policy=pol, backbone=bb)
        out.append((pol, bb, log, dump, trace))
    return out


for P, configs in ((2, CONFIGS), (4, [("bigmac", "1f1b")])):
    res = bt.spawn(run_configs, P, (configs, P), timeout=200)[0]
    for pol, bb, log, dump, trace in res:
        tag = "%s_%s_p%d" % (pol, bb, P)
        e_loss = losses(log)
        check("torch_exec_losses_%s" % tag, same_losses(c_loss, e_loss) and same_losses(t_loss, e_loss),
              "%s vs %s" % (c_loss, e_loss))
        check("torch_exec_params_%s" % tag, same_params(params(dump), c_par),
              "max diff %s" % (np.abs(params(dump) - c_par).max() if params(dump).size == c_par.size else "size"))
        peaks = json.loads(open(log).readline())["ranks"]
        check("torch_exec_log_ranks_%s" % tag, len(peaks) == P and all(r["peak_act_bytes"]["backbone"] > 0 for r in peaks))
    # the trace is the C executor's format: bigmac render reads it back
    pol, bb, log, dump, trace = res[0]
    r = subprocess.run([BIGMAC, "render", trace, "--format", "ascii", "--width", "80"], capture_output=True, text=True)
    check("torch_exec_trace_renders_p%d" % P, r.returncode == 0 and "measured timeline" in r.stdout, r.stderr)
    cal = os.path.join(tmp, "calibrated-p%d.json" % P)
    r = subprocess.run([BIGMAC, "calibrate", trace, "--spec", SPEC, "-o", cal], capture_output=True, text=True)
    check("torch_exec_trace_calibrates_p%d" % P, r.returncode == 0 and bigmac.load_spec(cal).module("gpt").cost["fwd_ms"] > 0,
          r.stderr)
    # every send and recv carries its message's size, the same as the C executor's on the same
    # table and data (its last step traced too)
    ctrace = os.path.join(tmp, "c-p%d.trace.json" % P)
    subprocess.run([BIGMAC, "train", SPEC, "--local", "--pp", str(P), "--vpp", "2" if bb == "interleaved" else "1",
                    "--policy", pol, "--backbone", bb, "--steps", str(STEPS), "--trace", ctrace, "--quiet"],
                   check=True, capture_output=True)

    def sizes(path):
        return {(e["pid"], e["args"]["op"], e["name"]): e["args"].get("bytes")
                for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X" and e["cat"] in ("send", "recv")}

    a, b = sizes(trace), sizes(ctrace)
    check("torch_exec_trace_message_sizes_p%d" % P, a == b and len(a) > 0 and all(v and v > 0 for v in a.values()),
          "%d torch vs %d C messages, first differing: %s"
          % (len(a), len(b), next(((k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)), None)))

# two encoders (chunk 0 takes their outputs one after another) and two generators (the last
# chunk's backward sums their gradients): C reference vs torch executor at P = 2
OTHER = ["tests/specs/exec-2enc.json", "tests/specs/exec-2gen.json"]


def run_other(rank):
    out = []
    for sp in OTHER:
        tag = os.path.basename(sp)[:-5]
        log, dump = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + ".bin")
        bt.train(sp, steps=3, log=log, dump=dump, pp=2, vpp=1, backbone="1f1b", policy="bigmac")
        out.append((sp, log, dump))
    return out


for sp, log, dump in bt.spawn(run_other, 2, timeout=200)[0]:
    tag = os.path.basename(sp)[:-5]
    cl, cb = os.path.join(tmp, tag + "-c.jsonl"), os.path.join(tmp, tag + "-c.bin")
    subprocess.run([BIGMAC, "train", sp, "--reference", "--steps", "3", "--log", cl, "--dump-params", cb], check=True,
                   capture_output=True)
    a, b = losses(cl), losses(log)
    check("torch_exec_vs_c_%s" % tag, len(a) == len(b) == 3 and all(abs(x - y) <= 1e-4 * abs(x) for x, y in zip(a, b))
          and same_params(params(dump), params(cb)), "%s vs %s" % (a, b))

# split backward: every B's weight gradient deferred to a W op at the end of its rank's list
# (hand-made table; the planner does not emit W yet): the inputs' gradients flow at B, the
# weights' at W, and training is the same
def with_w(P):
    d = bigmac.plan(SPEC, pp=P, policy="bigmac").to_dict()
    for r in d["ranks"]:
        ops = r["ops"]
        ops += [dict(o, **{"pass": "W"}) for o in ops if o["op"] == "compute" and o["pass"] == "B"]
    return json.dumps(d)


def run_w(rank, text):
    log, dump = os.path.join(tmp, "w.jsonl"), os.path.join(tmp, "w.bin")
    bt.train(SPEC, table=bigmac.load_table(text), steps=STEPS, log=log, dump=dump, verify=False)
    return log, dump


log, dump = bt.spawn(run_w, 2, (with_w(2),), timeout=200)[0]
check("torch_exec_split_backward_w_losses", same_losses(c_loss, losses(log)), str(losses(log)))
check("torch_exec_split_backward_w_params", same_params(params(dump), c_par))
def bb_peaks(path):  # rank 1 holds 3 backbone contexts at most under 1F1B, all 4 when W waits
    return [r["peak_act_bytes"]["backbone"] for r in json.loads(open(path).readline())["ranks"]]


w_peak, b_peak = bb_peaks(log)[1], bb_peaks(os.path.join(tmp, "bigmac_1f1b_p2.jsonl"))[1]
check("torch_exec_split_backward_w_holds_activations", w_peak > b_peak, "%d vs %d" % (w_peak, b_peak))
done()
