"""Measured activation peaks of the torch executor equal the simulator's (issues 25 and 30; run
by tests/test_python_peaks.sh, a time limit of its own).

The executor measures what every forward keeps for its backward (the distinct storages of the
tensors autograd saves, less parameters, buffers and the batch's own tensors) and, for a split
backward, what stays from B to W; bigmac.simulate(table, act_bytes=, act_w_bytes=) simulates the
same table with those bytes in place of the spec's act_mib. Checked here, per pipeline rank and
role, measured peak == simulated peak exactly (integers of bytes, no tolerance):

- P = 2: 1f1b, interleaved, zb-h1, zb-interleaved, zb-v, dualpipe-v x bigmac, optimus, unified
  (tiny-mllm: a ViT encoder, the GPT backbone, a DiT generator; M = 4, 2 steps, the last step's
  bytes and peaks);
- P = 4: 1f1b/optimus, zb-h1/bigmac and every V shape x policy (M = 8: past the warm-up, where
  zb-h1 defers its W), and pp 2 x dp 2
  (replica 0's pipeline, reported on every rank);
- frozen modules (docs/spec.md "Frozen modules"): the ViT frozen (its forwards keep 0 bytes, its
  peak is 0 on every rank) under 1f1b, zb-h1 and zb-v, the backbone frozen with the ViT training
  through it under 1f1b and zb-h1, and ViT + GPT frozen (nothing before the GPT trains: neither
  keeps anything) under 1f1b;
- the accounting counts storages once: with every saved tensor held alive (so no address is
  reused), no storage counted by one forward is counted by another forward of the same step on
  that rank (so the sum over live forwards is the bytes actually held), and every counted
  storage is neither a parameter's or buffer's nor the batch's;
- recomputation (tests/specs/exec-recompute.json, every module "recompute": "full"): the losses
  equal the C reference trainer's, the peaks equal the simulator's given the measured forward and
  kept-input bytes (in_bytes), and no tensor the first forward saved outlives its F op but the
  input it keeps (and parameters, buffers and batch tensors, which live anyway);
- what the executor stops counting is released then: after every B that is not split and every
  W, no tensor the forward's graph saved is alive any more (weak references, no gc.collect()), in
  recomputed, plain, split and frozen-backbone runs;
- a Result returned through spawn (pickled: its table as JSON) still simulates; a Spec refuses to
  be pickled (its C handle would be freed twice); `python3 -m bigmac.torch train` prints the
  measured and simulated peaks and exits 0;
- bigmac.simulate's measured bytes on hand-computed figures (1000 bytes per forward over a table
  whose op order is written below) and its refusals (a missing, unknown or repeated key, a
  negative or fractional size, a spec instead of a table).
"""
import collections
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import weakref

from check import check, raises, done
import bigmac
import bigmac.torch as bt
from bigmac.torch import executor as ex

SPEC = "examples/tiny-mllm.json"
STEPS = 2
tmp = tempfile.mkdtemp()
V2 = ("interleaved", "zb-interleaved", "zb-v", "dualpipe-v")


def variant(name, frozen):
    sd = json.load(open(SPEC))
    for m in sd["modules"]:
        if m["name"] in frozen:
            m["trainable"] = False
    path = os.path.join(tmp, name + ".json")
    json.dump(sd, open(path, "w"))
    return path


FROZEN = {"vit": variant("frozen-vit", {"vit"}), "gpt": variant("frozen-gpt", {"gpt"}),
          "vitgpt": variant("frozen-vitgpt", {"vit", "gpt"})}


# ---- bigmac.simulate with measured bytes, by hand (no executor)
t = bigmac.plan(SPEC, pp=2, vpp=1, microbatches=4, backbone="1f1b", policy="bigmac")
order = [[o.name for o in ops if o.kind == bigmac.OP_COMPUTE] for ops in t.ops]
# rank 0: vit:F0 0F0 0F1 vit:F2 0F2 dit:F0 dit:B0 0F3 dit:F2 dit:B2 0B0 vit:B0 0B1 0B2 0B3 vit:B2
#   ViT: F0, F2 live together (2000); GPT: F0..F3 before B0 (4 x 10000); DiT: one at a time (100)
# rank 1: vit:F3 vit:F1 1F0 1F1 dit:F1 dit:B1 1F2 1B0 1F3 dit:F3 dit:B3 1B1 1B2 1B3 vit:B1 vit:B3
#   ViT: F3, F1 (2000); GPT: F0, F1, F2 before B0 (30000); DiT: 100
check("torch_peaks_hand_table_order", order == [
    "vit:F0 0F0 0F1 vit:F2 0F2 dit:F0 dit:B0 0F3 dit:F2 dit:B2 0B0 vit:B0 0B1 0B2 0B3 vit:B2".split(),
    "vit:F3 vit:F1 1F0 1F1 dit:F1 dit:B1 1F2 1B0 1F3 dit:F3 dit:B3 1B1 1B2 1B3 vit:B1 vit:B3".split()], str(order))
size = {"vit": 1000, "gpt": 10000, "dit": 100}
fwd = {(n, -1 if n != "gpt" else o.chunk, o.mb): size[n] for ops in t.ops for o in ops
       if o.kind == bigmac.OP_COMPUTE and o.pass_ == "F" for n in [t.module_names[o.module]]}
sim = bigmac.simulate(t, act_bytes=fwd)
check("torch_peaks_hand_simulate", [r["peak_act_bytes"] for r in sim["ranks"]] == [
    {"encoder": 2000, "backbone": 40000, "generator": 100}, {"encoder": 2000, "backbone": 30000, "generator": 100}],
    str([r["peak_act_bytes"] for r in sim["ranks"]]))
plain = bigmac.simulate(t)
check("torch_peaks_simulate_plain_unchanged", "peak_act_bytes" not in plain["ranks"][0] and
      plain == bigmac.simulate(t) and sim["makespan_ms"] == plain["makespan_ms"])
# module indices are as good as names; chunk None is -1
by_index = {(t.module_names.index(m), None if c < 0 else c, mb): v for (m, c, mb), v in fwd.items()}
check("torch_peaks_simulate_index_keys", bigmac.simulate(t, act_bytes=by_index)["ranks"] == sim["ranks"])
# split: zb-h1 with W keeping 400 of a GPT forward's 10000: the same peaks order-wise only if B frees 9600
tz = bigmac.plan(SPEC, pp=2, vpp=1, microbatches=4, backbone="zb-h1", policy="bigmac")
fz = {(n, -1 if n != "gpt" else o.chunk, o.mb): size[n] for ops in tz.ops for o in ops
      if o.kind == bigmac.OP_COMPUTE and o.pass_ == "F" for n in [tz.module_names[o.module]]}
wz = {(tz.module_names[o.module], o.chunk if o.module == tz.backbone_module else -1, o.mb): 400
      for ops in tz.ops for o in ops if o.kind == bigmac.OP_COMPUTE and o.pass_ == "W"}
full = bigmac.simulate(tz, act_bytes=fz, act_w_bytes={k: fz[k] for k in wz})  # W keeps all: nothing freed at B
part = bigmac.simulate(tz, act_bytes=fz, act_w_bytes=wz)
gp = [r["peak_act_bytes"]["backbone"] for r in full["ranks"]], [r["peak_act_bytes"]["backbone"] for r in part["ranks"]]
check("torch_peaks_simulate_act_w_bytes", all(a >= b for a, b in zip(*gp)) and gp[0] != gp[1] and
      all(v % 400 == 0 for v in gp[1]), str(gp))

bad = dict(fwd)
k0 = next(iter(bad))
raises("torch_peaks_simulate_missing_key", lambda: bigmac.simulate(t, act_bytes={k: v for k, v in fwd.items() if k != k0}),
       bigmac.Error, ["act_bytes", "no bytes for module", "1 of"])
raises("torch_peaks_simulate_unknown_key", lambda: bigmac.simulate(t, act_bytes=dict(fwd) | {("gpt", 5, 0): 5}),
       bigmac.Error, ["act_bytes", "chunk = 5"])
raises("torch_peaks_simulate_encoder_chunk", lambda: bigmac.simulate(t, act_bytes=dict(fwd) | {("vit", 0, 0): 5}),
       bigmac.Error, ["no such forward"])
raises("torch_peaks_simulate_twice", lambda: bigmac.simulate(t, act_bytes=dict(fwd) | {(0, -1, 0): 5}),
       bigmac.Error, ["given twice"])
raises("torch_peaks_simulate_negative", lambda: bigmac.simulate(t, act_bytes=dict(fwd) | {k0: -1}),
       bigmac.Error, ["whole number of bytes"])
raises("torch_peaks_simulate_fraction", lambda: bigmac.simulate(t, act_bytes=dict(fwd) | {k0: 0.5}),
       bigmac.Error, ["whole number of bytes"])
raises("torch_peaks_simulate_not_dict", lambda: bigmac.simulate(t, act_bytes=[1, 2]), bigmac.Error, ["expected a dict"])
raises("torch_peaks_simulate_w_not_split", lambda: bigmac.simulate(t, act_bytes=fwd, act_w_bytes={("gpt", 0, 0): 1}),
       bigmac.Error, ["act_w_bytes", "split backward"])
raises("torch_peaks_simulate_spec", lambda: bigmac.simulate(SPEC, act_bytes=fwd), bigmac.Error, ["need a Table"])
raises("torch_peaks_simulate_in_bytes_no_recompute", lambda: bigmac.simulate(t, in_bytes={k0: 1}), bigmac.Error,
       ["in_bytes", "no such forward"])


# ---- the executor: measured == simulated
class Audit(ex._Acts):
    """The executor's saved-tensor hooks, keeping every saved tensor alive (so no storage address
    is reused within a step) and what each forward counted."""
    forwards = []

    def __init__(self, params, data=()):
        super().__init__(params, data)
        self.kept = []
        self.state = params
        Audit.forwards.append(self)

    def pack(self, t):
        self.kept.append(t)
        return super().pack(t)


def audit():
    """(storages counted by two forwards of the step, counted storages that are state or data)."""
    owner = collections.defaultdict(set)
    wrong = 0
    for i, a in enumerate(Audit.forwards):
        for p, _ in a.seen:
            owner[p].add(i)
            wrong += p in a.state or p in a.data
    return sum(1 for v in owner.values() if len(v) > 1), wrong


def configs(P):
    if P == 2:
        run = [(SPEC, "", bb, pol) for bb in ("1f1b", "interleaved", "zb-h1", "zb-interleaved", "zb-v", "dualpipe-v")
               for pol in ("bigmac", "optimus", "unified")]
        run += [(FROZEN[k], "frozen_%s_" % k, bb, "bigmac") for k, bbs in (("vit", ("1f1b", "zb-h1", "zb-v")),
                                                                            ("gpt", ("1f1b", "zb-h1")),
                                                                            ("vitgpt", ("1f1b",))) for bb in bbs]
        return run
    # every V shape x policy (issue 25 asks P = 2 and 4 for them), two others, and pp 2 x dp 2
    return [(SPEC, "", "1f1b", "optimus"), (SPEC, "", "zb-h1", "bigmac")] + \
        [(SPEC, "", bb, pol) for bb in ("zb-v", "dualpipe-v") for pol in ("bigmac", "optimus", "unified")] + \
        [(SPEC, "dp2_", "zb-h1", "bigmac")]


def run(rank, P):
    ex._Acts = Audit
    out = []
    for spec, tag, bb, pol in configs(P):
        M = 2 * P if bb == "dualpipe-v" or P == 4 else 4
        D = 2 if tag == "dp2_" else 1
        table = bigmac.plan(spec, pp=P // D, dp=D, vpp=2 if bb in V2 else 1, microbatches=M, backbone=bb, policy=pol)
        steps = []

        def on_step(s, info):
            steps.append(audit())
            Audit.forwards = []
        Audit.forwards = []
        res = bt.train(spec, table=table, steps=STEPS, progress=io.StringIO(), on_step=on_step)
        sim = res.simulate()
        out.append(("%s%s_%s_p%d" % (tag, bb, pol, P // D), res.peak_act_bytes, [r["peak_act_bytes"] for r in sim["ranks"]],
                    dict(res.act_bytes), steps, spec))
    return out


for P in (2, 4):
    by_rank = bt.spawn(run, P, (P,), timeout=200)
    for i, (tag, meas, sim, acts, _, spec) in enumerate(by_rank[0]):
        check("torch_peaks_equal_%s" % tag, meas == sim and len(meas) == P // (2 if "dp2_" in tag else 1),
              "measured %s, simulated %s" % (meas, sim))
        # what must keep bytes: the ViT unless frozen, the GPT unless nothing before it trains (the
        # ViT frozen too: no backward at all), the DiT always
        kind = tag.split("_")[1] if tag.startswith("frozen_") else ""
        role_sum = {ro: sum(m[ro] for m in meas) for ro in bigmac.ROLES}
        check("torch_peaks_nonzero_%s" % tag, role_sum["generator"] > 0 and
              (role_sum["encoder"] == 0) == (kind in ("vit", "vitgpt")) and
              (role_sum["backbone"] == 0) == (kind == "vitgpt") and
              (kind == "vitgpt" or all(m["backbone"] > 0 for m in meas)), str(meas))
        # every forward of the table measured (the simulator refuses fewer), on every rank alike
        # (with dp: replica 0's pipeline, on the other replica's ranks too)
        check("torch_peaks_same_on_every_rank_%s" % tag, all(r[i][3] == acts for r in by_rank))
        # no storage in two forwards, no state or data counted: per rank and step
        au = [s for r in by_rank for s in r[i][4]]
        check("torch_peaks_storages_counted_once_%s" % tag, len(au) == P * STEPS and all(a == (0, 0) for a in au), str(au))
        if kind in ("vit", "vitgpt"):  # a frozen ViT without backward keeps nothing, yet is measured
            check("torch_peaks_frozen_vit_keeps_nothing_%s" % tag,
                  all(v == 0 for (m, c, mb), v in acts.items() if m == "vit") and any(m == "vit" for m, c, mb in acts))

# ---- a Result travels between processes (spawn pickles it): its table as JSON, so the parent
# simulates it too; the command line prints measured and simulated peaks, and exits 0
def one(rank):
    return bt.train(FROZEN["vit"], pp=2, vpp=1, microbatches=4, backbone="zb-h1", steps=1, progress=io.StringIO())


res0 = bt.spawn(one, 2, (), timeout=200)[0]
sim0 = res0.simulate()
check("torch_peaks_result_pickled", res0.table is not None and res0.table.to_json() == bigmac.plan(
    FROZEN["vit"], pp=2, vpp=1, microbatches=4, backbone="zb-h1").to_json() and
    res0.peak_act_bytes == [r["peak_act_bytes"] for r in sim0["ranks"]], str(res0.peak_act_bytes))
raises("torch_peaks_spec_not_pickled", lambda: pickle.dumps(bigmac.load_spec(SPEC)), bigmac.Error, ["cannot be pickled"])
cli = subprocess.run([sys.executable, "-m", "bigmac.torch", "train", FROZEN["vit"], "--nproc", "2", "--pp", "2",
                      "--steps", "2"], capture_output=True, text=True, timeout=200)
lines = [l for l in cli.stdout.splitlines() if l.startswith("  rank ")]
check("torch_peaks_cli_prints_peaks", cli.returncode == 0 and "activation peaks, step 2, bytes: measured / simulated"
      in cli.stdout and len(lines) == 2 and all(l.endswith("(equal)") and "encoder 0 / 0 / 0 " in l for l in lines),
      "rc %d: %s %s" % (cli.returncode, cli.stdout[-600:], cli.stderr[-600:]))

# ---- recomputation ("recompute": "full" on every module): F keeps only its input, B reruns it
RC = "tests/specs/exec-recompute.json"
rc_log = os.path.join(tmp, "rc-c.jsonl")
subprocess.run([os.environ.get("BIGMAC", "bin/bigmac"), "train", RC, "--reference", "--steps", str(STEPS), "--log",
                rc_log], check=True, capture_output=True)
rc_ref = [json.loads(l)["loss"] for l in open(rc_log)]


class Weak(ex._Acts):
    """The executor's hooks, keeping a weak reference to every saved tensor."""
    made = []

    def __init__(self, params, data=()):
        super().__init__(params, data)
        self.refs = []
        Weak.made.append(self)

    def pack(self, t):
        self.refs.append(weakref.ref(t))
        return super().pack(t)


def alive(w, but=()):
    """How many tensors w (a Weak) saw saved are still alive, but for the objects in but and
    tensors of the modules' state or the batch (which live anyway)."""
    return sum(1 for t in (r() for r in w.refs) if t is not None and not any(t is x for x in but) and
               t.storage().data_ptr() not in w.params and t.storage().data_ptr() not in w.data)


def run_freed(rank):
    """After a recomputed F, which of its saved tensors are alive (must be only its input); after
    a B that is not split, or a W, which of the graph's saved tensors are alive (must be none):
    the bytes the executor stops counting are released then, by reference counting alone (no
    gc.collect())."""
    ex._Acts = Weak
    orig = ex.Executor._compute
    outlived, unfreed, graphs = [], [], {}

    def compute(self, k, op):
        n0 = len(Weak.made)
        ik = self.inst_of[(op.module, op.chunk if op.module == self.bb else -1)]
        orig(self, k, op)
        key = (ik, op.mb)
        if op.pass_ == "F" and ik not in self.no_bwd:
            graphs[key] = Weak.made[n0]
            if ik in self.rc:
                outlived.append(alive(Weak.made[n0], self.ctx[key]["in"]))
        elif op.pass_ == "B" and ik in self.rc:
            graphs[key] = Weak.made[n0]  # the rerun's graph
        if (op.pass_ == "B" and key not in self.split) or op.pass_ == "W":
            unfreed.append(alive(graphs.pop(key)))
        Weak.made = []
    ex.Executor._compute = compute
    out = []
    for spec, bb, pol in ((RC, "1f1b", "bigmac"), (RC, "zb-h1", "optimus"), (RC, "zb-v", "unified"),
                          (RC, "interleaved", "bigmac"), (SPEC, "zb-h1", "bigmac"), (SPEC, "dualpipe-v", "unified"),
                          (FROZEN["gpt"], "1f1b", "bigmac")):
        table = bigmac.plan(spec, pp=2, vpp=2 if bb in V2 else 1, microbatches=4, backbone=bb, policy=pol)
        outlived.clear()
        unfreed.clear()
        res = bt.train(spec, table=table, steps=STEPS, progress=io.StringIO())
        sim = res.simulate()
        out.append(("%s%s_%s_p2" % ("recompute_" if spec == RC else "frozen_gpt_" if spec != SPEC else "", bb, pol),
                    list(res), res.peak_act_bytes, [r["peak_act_bytes"] for r in sim["ranks"]], dict(res.in_bytes),
                    dict(res.act_bytes), list(outlived), list(unfreed), graphs == {}))
    return out


for r, per_rank in enumerate(bt.spawn(run_freed, 2, (), timeout=200)):
    for tag, losses, meas, sim, inb, act, outlived, unfreed, none_left in per_rank:
        rc = tag.startswith("recompute_")
        if rc:
            check("torch_peaks_%s_outlived_r%d" % (tag, r), len(outlived) > 0 and sum(outlived) == 0, str(outlived))
        check("torch_peaks_freed_%s_r%d" % (tag, r), len(unfreed) > 0 and sum(unfreed) == 0 and none_left, str(unfreed))
        if r or not rc:
            continue
        check("torch_peaks_%s_losses" % tag, len(losses) == STEPS and all(
            abs(a - b) <= 1e-4 * max(abs(a), abs(b)) for a, b in zip(rc_ref, losses)), "%s vs %s" % (losses, rc_ref))
        check("torch_peaks_%s_equal" % tag, meas == sim, "measured %s, simulated %s" % (meas, sim))
        # the kept input: 0 for the encoder (it reads data), the received hidden states elsewhere,
        # always less than what the forward's graph held
        check("torch_peaks_%s_in_bytes" % tag, set(inb) == set(act) and
              all(v == 0 for (m, c, mb), v in inb.items() if m == "vit") and
              all(0 < v < act[key] for key, v in inb.items() if key[0] != "vit"), str(sorted(inb.items())[:4]))
done()
