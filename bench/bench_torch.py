"""bench_torch.py — the torch executor (bigmac.torch, docs/python.md); figures printed as Markdown
rows, nothing asserted. Run: PYTHONPATH=python /usr/bin/python3 bench/bench_torch.py (or
bash bench/bench_torch.sh; `make bench` runs it).

 1. Measured encoder activation peak (saved-tensor bytes, max over ranks) of the torch executor
    on tests/specs/exec-small.json at P = 2, 1F1B, for bigmac and optimus at M = 32 and 128.
 2. Step time at P = 2 on examples/tiny-mllm.json (1F1B, V = 1, M = 8): the torch executor
    (2 processes, gloo) and the C executor (mpirun -np 2) over the same spec, against the
    simulator's prediction from bigmac.torch.profile of the twins on this machine (and, for
    both executors, from `bigmac calibrate --mean` of the run's own last-step trace).
 3. The profile's prediction against the run (issue 29): at P = 2 on the twins of
    examples/tiny-mllm.json (M = 8) and tests/specs/exec-small.json (M = 4), per schedule
    (1f1b, interleaved with V = 2, zb-h1) bigmac.torch.profile for that table, then right after
    it the torch executor's run of the profiled spec's plan of it (the table predicted); its
    median step (log "ms", steps 3..STEPS) against the predicted step, step_ms of
    bigmac.simulate (the walk, the gradient all-reduces overlapping its end as the executor
    starts them, the optimizer; docs/python.md "The step it predicts"): the ratio, the signed error, every round's measured
    step, and whether the ranking of the three schedules is the measured one (and which measured
    neighbours the rounds cannot tell apart); the compute-only profile (executor=False) beside it.

BENCH=predict runs only section 3 (ROUNDS=3 rounds; under a minute at STEPS=10); it runs at
real-time priority when root (RT=0: normal priority).
"""
import json
import os
import re
import statistics
import subprocess
import tempfile

import bigmac
import bigmac.torch as bt
from bigmac.torch import twins

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
STEPS = int(os.environ.get("STEPS", "10"))
tmp = tempfile.mkdtemp()


def load():
    return os.getloadavg()[0]


def enc_peaks(rank, configs):
    out = []
    for spec, M, pol in configs:
        log = os.path.join(tmp, "mem-%d-%s.jsonl" % (M, pol))
        table = bigmac.plan(spec, pp=2, vpp=1, backbone="1f1b", microbatches=M, policy=pol)
        bt.train(spec, table=table, steps=1, log=log)
        out.append((M, pol, table.window, log))
    return out


def timed(rank, spec, steps, trace):
    log = os.path.join(tmp, "torch-time.jsonl")
    bt.train(spec, steps=steps, log=log, trace=trace, pp=2, vpp=1, backbone="1f1b")
    return log


def makespan(trace):
    r = subprocess.run([BIGMAC, "render", trace, "--format", "ascii", "--width", "60"], capture_output=True, text=True,
                       check=True)
    return float(re.search(r"^makespan ([0-9.]+) ms", r.stdout, re.M).group(1))


SCHEDULES = (("1f1b", 1), ("interleaved", 2), ("zb-h1", 1))


def sched_runs(rank, jobs, steps):
    """Every job (profiled spec's path, its table, build, data, log) trained for steps steps."""
    for path, table, build, data, log in jobs:
        bt.train(path, build, data, table=table, steps=steps, log=log)


def _at(by_size, x):
    from bigmac.torch.profile import _at as at
    return at(sorted(by_size.items()), x)


def predicted(prof, v, b):
    """The profiled spec's table and its predicted step, step_ms: the walk, the gradient
    all-reduces (each started after the rank's last backward of its module, as the executor
    starts them; only what ends after the walk counts, docs/simulator.md "The step") and the
    optimizer."""
    table = bigmac.plan(prof, pp=2, vpp=v, backbone=b)
    sim = bigmac.simulate(table)
    return table, sim["step_ms"]


def predict():
    """Section 3, in ROUNDS rounds (default 3): each round profiles every (spec, schedule) and
    runs it right after; a round's ratio pairs a run with the profile taken just before it (the
    machine's load moves between rounds), the table gives the median over rounds."""
    specs = ["examples/tiny-mllm.json", "tests/specs/exec-small.json"]
    rounds = int(os.environ.get("ROUNDS", "3"))
    l0 = load()
    # as bench/bench_exec.sh: on a shared machine, real-time priority (root; RT=0: off) emulates
    # dedicated cores; the profile and the runs (forked from here) both get it
    rt = os.environ.get("RT", "1") == "1" and os.geteuid() == 0
    if rt:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    try:
        _predict(specs, rounds, l0, rt)
    finally:
        if rt:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _predict(specs, rounds, l0, rt):
    meas, pred, cpred, profs, nwpred = {}, {}, {}, {}, {}
    for rnd in range(rounds):
        jobs = []
        for spec in specs:
            tw = (twins.factory(spec), twins.dataset(spec))
            bare = bt.profile(spec, *tw, executor=False)
            for b, v in SCHEDULES:  # profiled for the table that runs (its op mix, a split backward)
                prof = bt.profile(spec, *tw, table=bigmac.plan(spec, pp=2, vpp=v, backbone=b))
                profs[(spec, b)] = prof
                # the run trains the table predicted: the profiled spec's plan (its costs place the ops)
                table, ms = predicted(prof, v, b)
                pred.setdefault((spec, b), []).append(ms)
                cpred.setdefault((spec, b), []).append(predicted(bare, v, b)[1])
                # the same without the wake (off the dispatch of the ops after a receive, off the lead)
                nw, ov = prof.to_dict(), prof.overheads
                mx = ov["mix"]
                nw["device"]["op_overhead_us"] -= ov["wake_us"] * mx["after_recv"] / max(1, mx["compute"] + mx["send"]
                                                                                          + mx["recv"])
                nw["device"]["step_lead_us"] -= ov["first_op_us"]
                nwpred.setdefault((spec, b), []).append(predicted(bigmac.load_spec(nw), v, b)[1])
                path = os.path.join(tmp, "prof-%d-%s-%s.json" % (rnd, os.path.basename(spec), b))
                with open(path, "w") as f:
                    json.dump(prof.to_dict(), f)
                jobs.append((path, table, tw[0], tw[1], path + "l"))
                bt.spawn(sched_runs, 2, (jobs[-1:], STEPS), timeout=1800)  # right after its profile
        for spec in specs:
            for b, v in SCHEDULES:
                ms = [json.loads(l)["ms"] for l in open(os.path.join(tmp, "prof-%d-%s-%s.jsonl" % (
                    rnd, os.path.basename(spec), b)))]
                meas.setdefault((spec, b), []).append(statistics.median(ms[2:] if len(ms) > 2 else ms))
    print("\nload %.1f at the start of section 3, %.1f at its end; STEPS=%d, ROUNDS=%d, %s" % (
        l0, load(), STEPS, rounds, "real-time priority (SCHED_FIFO 10)" if rt else "normal priority"))
    print("\n| spec (P = 2, twins) | schedule | measured step ms (median, steps 3-%d) | predicted step ms (profile) | "
          "predicted / measured | error | ratio per round | measured ms per round | without the wakes: ratio | "
          "compute-only prediction ms |" % STEPS)
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec in specs:
        name = os.path.basename(spec)
        m, p = {}, {}
        for b, _ in SCHEDULES:
            m[b], p[b] = statistics.median(meas[(spec, b)]), statistics.median(pred[(spec, b)])
            print("| %s | %s | %.1f | %.1f | %.2f | %+.0f%% | %s | %s | %.2f | %.1f |" % (
                name, b, m[b], p[b], p[b] / m[b], 100 * (p[b] / m[b] - 1),
                " ".join("%.2f" % (x / y) for x, y in zip(pred[(spec, b)], meas[(spec, b)])),
                " ".join("%.1f" % x for x in meas[(spec, b)]), statistics.median(nwpred[(spec, b)]) / m[b],
                statistics.median(cpred[(spec, b)])))
        rm, rp = sorted(m, key=m.get), sorted(p, key=p.get)
        # every pair of schedules: in how many rounds the measured order held (a round runs the
        # three within seconds: the pair shares the machine's moment); a pair the rounds do not
        # all order alike is not told apart by the measurement
        pairs, wrong = [], []
        for i, a in enumerate(rm):
            for c in rm[i + 1:]:
                k = sum(x < y for x, y in zip(meas[(spec, a)], meas[(spec, c)]))
                n = len(meas[(spec, a)])
                pairs.append("%s < %s in %d/%d rounds (%+.0f%%)" % (a, c, k, n, 100 * (m[c] / m[a] - 1)))
                if k == n and p[a] >= p[c]:
                    wrong.append("%s < %s" % (a, c))
        print("| %s | ranking | %s | %s | %s; measured: %s; %s | | | | | |" % (
            name, " < ".join(rm), " < ".join(rp), "same" if rm == rp else "differs", "; ".join(pairs),
            "every pair the rounds order alike predicted alike" if not wrong else
            "predicted the other way round: " + ", ".join(wrong)))
    for spec in specs:
        prof = profs[(spec, "1f1b")]
        dv = prof.to_dict()["device"]
        print("\n%s (last round's profile for 1f1b): %s; modules (fwd/bwd ms): %s; transfers on %s" % (
            os.path.basename(spec), ", ".join("%s %g" % (k, dv[k]) for k in (
                "op_overhead_us", "recv_overhead_us", "link_latency_us", "link_gbytes_per_s", "step_lead_us",
                "optimizer_ms_per_gib", "coll_latency_us", "coll_gbytes_per_s")),
            ", ".join("%s %.2f/%.2f" % (mm.name, mm.cost["fwd_ms"], mm.cost["bwd_ms"]) for mm in prof.modules),
            prof.overheads["transfers_on"]))
        ov = prof.overheads
        print("parts (us): dispatch %.1f, send %.1f (the receiver waiting: %.1f), wake %.1f %s x %d ops after a recv, "
              "first op %.1f, all-reduces %s, optimizer per rank %s ms" % (
                  ov["dispatch_us"], ov["send_us"], _at(ov["send_waiting_us_by_size"], ov["message_bytes"]),
                  ov["wake_us"], {k: round(x) for k, x in ov["wake_us_by_module"].items()}, ov["mix"]["after_recv"],
                  ov["first_op_us"], {k: round(x) for k, x in ov["allreduce_us"].items()},
                  [round(x, 2) for x in ov["optimizer_rank_ms"]]))
        zb = profs[(spec, "zb-h1")].to_dict()["modules"][prof.backbone_module]["cost"]
        print("zb-h1's profile: backbone B + W %.2f ms, W %.2f ms (the unsplit backward %.2f ms)" % (
            zb["bwd_ms"], zb["w_ms"], prof.modules[prof.backbone_module].cost["bwd_ms"]))


def main():
    if os.environ.get("BENCH") == "predict":
        predict()
        return
    print("machine: %s, %d cores, load %.1f at start; torch %s" % (
        open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].split(":", 1)[1].strip(), os.cpu_count(), load(),
        __import__("torch").__version__))
    # 1. memory
    spec = "tests/specs/exec-small.json"
    configs = [(spec, M, pol) for M in (32, 128) for pol in ("bigmac", "optimus")]
    print("\n| spec | M | policy | window | encoder peak act bytes (max over ranks) | simulated encoder peak (nominal act_mib) |")
    print("|---|---|---|---|---|---|")
    for M, pol, W, log in bt.spawn(enc_peaks, 2, (configs,), timeout=1800)[0]:
        ranks = json.loads(open(log).readline())["ranks"]
        peak = max(r["peak_act_bytes"]["encoder"] for r in ranks)
        sim = bigmac.simulate(spec, pp=2, vpp=1, backbone="1f1b", microbatches=M, policy=pol)
        print("| exec-small | %d | %s | %s | %d | %.3f MiB |" % (M, pol, W or "-", peak,
                                                             sim["ranks"] and max(r["peak_act_gib"]["encoder"] for r in sim["ranks"]) * 1024))
    # 2. step time
    spec = "examples/tiny-mllm.json"
    trace = os.path.join(tmp, "torch-trace.json")
    log = bt.spawn(timed, 2, (spec, STEPS, trace), timeout=1800)[0]
    tms = [json.loads(l)["ms"] for l in open(log)][2:]
    clog, ctrace = os.path.join(tmp, "c.jsonl"), os.path.join(tmp, "c-trace.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    subprocess.run(["mpirun", "-np", "2", BIGMAC, "train", spec, "--pp", "2", "--vpp", "1", "--backbone", "1f1b",
                    "--steps", str(STEPS), "--log", clog, "--trace", ctrace, "--quiet"], check=True, env=env,
                   capture_output=True)
    cms = [json.loads(l)["ms"] for l in open(clog)][2:]
    prof = bt.profile(spec, twins.factory(spec), twins.dataset(spec), repeats=7)
    pred = bigmac.simulate(prof, pp=2, vpp=1, backbone="1f1b")["makespan_ms"]

    def calibrated(tr):  # bigmac calibrate of the run's own trace (mean costs), simulated
        cal = os.path.join(tmp, "cal.json")
        subprocess.run([BIGMAC, "calibrate", tr, "--spec", spec, "--mean", "-o", cal], check=True, capture_output=True)
        return bigmac.simulate(cal, pp=2, vpp=1, backbone="1f1b")["makespan_ms"]
    print("\n| executor (P = 2, tiny-mllm, 1F1B, M = 8) | step ms (median of steps 3-%d) | traced makespan ms (last step) | simulated from torch profile ms | simulated from its own trace (calibrate --mean) ms |" % STEPS)
    print("|---|---|---|---|---|")
    print("| torch (gloo, twins) | %.1f | %.1f | %.1f | %.1f |" % (statistics.median(tms), makespan(trace), pred, calibrated(trace)))
    print("| C (mpirun -np 2) | %.1f | %.1f | | %.1f |" % (statistics.median(cms), makespan(ctrace), calibrated(ctrace)))
    print("\nprofiled costs (ms fwd/bwd, MiB act):", ", ".join("%s %.2f/%.2f %.3f" % (m.name, m.cost["fwd_ms"],
                                                                                   m.cost["bwd_ms"], m.cost["act_mib"])
                                                          for m in prof.modules))
    print("load at end %.1f" % load())
    predict()


if __name__ == "__main__":
    main()
