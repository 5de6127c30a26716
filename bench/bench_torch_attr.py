"""bench_torch_attr.py — where the profiled prediction of a torch pipelined step and the measured
step part (issue 29): a run's ops (every step's, both ranks) against the simulator's timeline of
the profiled spec, op kind by op kind. Figures printed, nothing asserted.

Run: PYTHONPATH=python /usr/bin/python3 bench/bench_torch_attr.py [SPEC ...] [SCHEDULE ...]
(default: tests/specs/exec-small.json and examples/tiny-mllm.json; 1f1b, interleaved (V = 2),
zb-h1; STEPS=10, steps 3..STEPS measured; real-time priority when root, RT=0: normal; BIGMAC:
the CLI, default bin/bigmac).

Per (spec, schedule) at P = 2: bigmac.torch.profile for that table, then right after it a run of
the profiled spec's plan of it (the table simulated, op for op); printed: the step (log "ms",
rank 0's Executor.step) against the prediction (makespan + all-reduces + optimizer); per rank
the lead (step start to the first op), the walk (first op to the last op's end), the sends'
completion, the gradient all-reduces and the optimizer, measured (medians over steps) and
simulated; `bigmac calibrate --mean` of the run's last step key by key against the profile; per
op kind the summed durations (compute by module and pass, recvs, the gaps between ops) measured
and simulated; each compute op's excess over its profiled cost by the op before it (compute,
send, recv, the step's first); ops after a blocking recv against the same module's others; the
sends' cost in the run (receiver already waiting or not) against the profile's.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

import bigmac
import bigmac.torch as bt
import bigmac.torch.executor as ex
from bigmac.torch import twins

STEPS = int(os.environ.get("STEPS", "10"))
tmp = tempfile.mkdtemp()
V = {"1f1b": 1, "interleaved": 2, "zb-h1": 1}


def run(rank, spec, build, data, table, steps):
    """Train, keeping every step's ops (times since the step's origin, ms), the step's
    start/end against the origin and the executor's tail."""
    out = []
    step0 = ex.Executor.step

    def step(self, s):
        import time
        t0 = time.time()
        r = step0(self, s)
        t1 = time.time()
        out.append({"start": (t0 - self.origin) * 1e3, "end": (t1 - self.origin) * 1e3,
                    "times": [list(t) for t in self.times], "walk_ms": self.ms, "sync": (self.sync_start_ms, self.sync_end_ms),
                    "opt": self.optimizer_ms,
                    "kinds": [(o.kind, o.module, o.chunk, o.pass_) for o in self.ops],
                    "names": [o.name for o in self.ops]})
        return r
    ex.Executor.step = step
    try:
        bt.train(spec, build, data, table=table, steps=steps, log=os.path.join(tmp, "l.jsonl") if rank == 0 else None,
                 trace=os.path.join(tmp, "trace.json") if rank == 0 else None)
    finally:
        ex.Executor.step = step0
    return out


def sim_ops(prof, v, b):
    """The profiled spec's plan and its simulated timeline: (table, {rank: [(start ms, dur ms, name)]} in op
    order, {rank: [the step thread's (name, start ms, dur ms)]}, bigmac.simulate's dict)."""
    table = bigmac.plan(prof, pp=2, vpp=v, backbone=b)
    path = os.path.join(tmp, "sim.json")
    bigmac.render(table, "trace", path)
    d = json.load(open(path))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    ops = {0: {}, 1: {}}
    step = {0: [], 1: []}
    for e in ev:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "step":
            step[e["pid"]].append((e["name"], e["ts"] / 1e3, e["dur"] / 1e3))
            continue
        ops[e["pid"]][e["args"]["op"]] = (e["ts"] / 1e3, e["dur"] / 1e3, e["name"])
    return table, {r: [ops[r][k] for k in sorted(ops[r])] for r in ops}, step, bigmac.simulate(table)


def key(kind, module, chunk, p, names):
    if kind == bigmac.OP_SEND:
        return "send"
    if kind == bigmac.OP_RECV:
        return "recv"
    return "%s %s" % (names[module], p)


def main():
    specs = [a for a in sys.argv[1:] if a.endswith(".json")] or ["tests/specs/exec-small.json", "examples/tiny-mllm.json"]
    scheds = [a for a in sys.argv[1:] if a in V] or list(V)
    rt = os.environ.get("RT", "1") == "1" and os.geteuid() == 0
    if rt:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    print("load %.1f" % os.getloadavg()[0])
    for spec in specs:
        sp = bigmac.load_spec(spec)
        names = [m.name for m in sp.modules]
        tw = (twins.factory(spec), twins.dataset(spec))
        for b in scheds:
            v = V[b]
            prof = bt.profile(spec, *tw, table=bigmac.plan(spec, pp=2, vpp=v, backbone=b))
            table, sops, sstep, sim = sim_ops(prof, v, b)
            ppath = os.path.join(tmp, "prof.json")
            with open(ppath, "w") as f:
                json.dump(prof.to_dict(), f)
            recs = bt.spawn(run, 2, (ppath, tw[0], tw[1], table, STEPS), timeout=600)
            logms = [json.loads(l)["ms"] for l in open(os.path.join(tmp, "l.jsonl"))]
            keep = range(2, STEPS)
            dv = prof.to_dict()["device"]
            print("\n## %s %s (load %.1f)" % (os.path.basename(spec), b, os.getloadavg()[0]))
            print("profile: %s" % ", ".join("%s %g" % (k, dv.get(k, 0)) for k in (
                "op_overhead_us", "recv_overhead_us", "link_latency_us", "step_lead_us", "optimizer_ms_per_gib")))
            ov = prof.overheads
            print("  parts: dispatch %.1f us, send %.1f us, data %.1f us, setup %.1f us, post %.1f us, bcast %.1f us, chunk %s" % (
                ov["dispatch_us"], ov["send_us"], ov["data_us"], ov["setup_us"], ov["header_post_us"],
                ov["broadcast_us"], {k: round(x, 3) for k, x in ov["chunk_fixed_ms"].items()}))
            med = statistics.median
            # the step's parts, measured on rank 0 (its log ms) and per rank
            m_step = med([logms[s] for s in keep])
            pr = sim["step_ms"]  # the executor overlaps the all-reduces with the walk, as step_ms
            print("step ms: measured %.2f (log), predicted %.2f = makespan %.2f + exposed all-reduces %.2f (of %.2f)"
                  " + optimizer %.2f -> %.2f" % (m_step, pr, sim["makespan_ms"], sim["sync_exposed_ms"],
                                                sim["sync_total_ms"], sim["optimizer_ms"], pr / m_step))
            print("| part | rank | measured ms (median) | simulated ms |")
            print("|---|---|---|---|")
            for r in (0, 1):
                R = [recs[r][s] for s in keep]
                first = med([x["times"][0][0] - x["start"] for x in R])
                last = med([max(t[1] for t in x["times"]) - x["start"] for x in R])
                walk_end = med([x["sync"][0] - x["start"] for x in R])
                sync = med([x["sync"][1] - x["sync"][0] for x in R])
                opt = med([x["opt"] for x in R])
                end = med([x["end"] - x["start"] for x in R])
                s_first = sops[r][0][0]
                s_last = max(t[0] + t[1] for t in sops[r])
                print("| lead: step start -> first op | %d | %.2f | %.2f |" % (r, first, s_first))
                print("| first op -> last op end | %d | %.2f | %.2f |" % (r, last - first, s_last - s_first))
                print("| last op end -> walk end (sends' completion) | %d | %.2f | |" % (r, walk_end - last))
                print("| gradient all-reduces | %d | %.2f | %s |" % (r, sync, sstep[r]))
                print("| optimizer | %d | %.2f | |" % (r, opt))
                print("| step (this rank's Executor.step) | %d | %.2f | |" % (r, end))
            for r in (0, 1):
                if [n for _, _, n in sops[r]] != recs[r][0]["names"]:
                    raise SystemExit("rank %d: the simulated ops are not the run's" % r)
            # the trace route on the run's last step: bigmac calibrate --mean against the profile, key by key
            cal = os.path.join(tmp, "cal.json")
            subprocess.run([os.environ.get("BIGMAC", "bin/bigmac"), "calibrate", os.path.join(tmp, "trace.json"),
                            "--spec", ppath, "--mean", "-o", cal], check=True, capture_output=True)
            cd = json.load(open(cal))
            cs = bigmac.simulate(bigmac.load_spec(cal), pp=2, vpp=v, backbone=b)
            print("calibrate (the run's last step) vs profile: %s; modules F/B: %s; its step %.2f (makespan %.2f)" % (
                ", ".join("%s %.1f/%.1f" % (k, cd["device"].get(k, 0), dv.get(k, 0)) for k in (
                    "op_overhead_us", "recv_overhead_us", "link_latency_us", "step_lead_us")),
                ", ".join("%s %.2f/%.2f vs %.2f/%.2f" % (m["name"], m["cost"]["fwd_ms"], m["cost"]["bwd_ms"],
                                                         pm.cost["fwd_ms"], pm.cost["bwd_ms"])
                          for m, pm in zip(cd["modules"], prof.modules)),
                cs["step_ms"], cs["makespan_ms"]))
            # per op kind, summed durations and gaps
            print("| op kind | rank | n | measured sum ms | simulated sum ms | measured/simulated |")
            print("|---|---|---|---|---|---|")
            for r in (0, 1):
                R = [recs[r][s] for s in keep]
                kinds = R[0]["kinds"]
                agg_m, agg_s = {}, {}
                for k, kd in enumerate(kinds):
                    name = key(*kd, names)
                    d_m = med([x["times"][k][1] - x["times"][k][0] for x in R])
                    agg_m.setdefault(name, []).append(d_m)
                    agg_s.setdefault(name, []).append(sops[r][k][1])
                    if k:
                        g_m = med([x["times"][k][0] - x["times"][k - 1][1] for x in R])
                        g_s = sops[r][k][0] - (sops[r][k - 1][0] + sops[r][k - 1][1])
                        agg_m.setdefault("gap (dispatch)", []).append(g_m)
                        agg_s.setdefault("gap (dispatch)", []).append(g_s)
                for name in sorted(agg_m):
                    a, s = sum(agg_m[name]), sum(agg_s[name])
                    print("| %s | %d | %d | %.2f | %.2f | %s |" % (name, r, len(agg_m[name]), a, s,
                                                                 "%.2f" % (a / s) if s > 0 else "-"))
            # compute ops after a blocking receive (> 50 us: the rank slept) against the others:
            # measured / simulated duration, all steps pooled
            woke, ran = {}, {}
            for r in (0, 1):
                for x in (recs[r][s] for s in keep):
                    waited = False
                    for k, kd in enumerate(x["kinds"]):
                        d = x["times"][k][1] - x["times"][k][0]
                        if kd[0] == bigmac.OP_RECV:
                            waited = waited or d > 0.05
                        elif kd[0] == bigmac.OP_COMPUTE:
                            (woke if waited else ran).setdefault(key(*kd, names), []).append(d)
                            waited = False
            # every compute op against its profiled cost (the backbone's with the chunk's own cost),
            # by what came before it on the rank: the run's extra per op, us
            fixed = prof.overheads["chunk_fixed_ms"]
            extra = {}
            for r in (0, 1):
                for x in (recs[r][s] for s in keep):
                    for k, kd in enumerate(x["kinds"]):
                        if kd[0] != bigmac.OP_COMPUTE:
                            continue
                        want = sops[r][k][1] + (fixed.get(kd[3], 0.0) if kd[1] == sp.backbone_module else 0.0)
                        prev = "first" if k == 0 else {bigmac.OP_RECV: "recv", bigmac.OP_SEND: "send"}.get(
                            x["kinds"][k - 1][0], "compute")
                        extra.setdefault(prev, []).append((x["times"][k][1] - x["times"][k][0] - want) * 1e3)
            print("run's op less its profiled cost, by the op before it (median us, n): %s" % ", ".join(
                "after %s %.0f (%d)" % (k, med(v), len(v)) for k, v in sorted(extra.items())))
            print("compute ops after a blocking recv / the others, same module and pass (median ms): %s; wake_us "
                  "%.1f (%s) x %d ops after a recv" % (
                      ", ".join("%s %.3f/%.3f (n %d/%d)" % (k, med(woke[k]), med(ran[k]), len(woke[k]), len(ran[k]))
                                for k in sorted(woke) if k in ran),
                      ov.get("wake_us", 0), {k: round(v, 1) for k, v in ov.get("wake_us_by_module", {}).items()},
                      ov["mix"]["after_recv"]))
            # a send's cost in the run: from the send op's start to the next op's start; the
            # gaps before the other ops (the dispatch)
            snd, gap, swait, sbusy = [], [], [], []
            for r in (0, 1):
                for s in keep:
                    x, y = recs[r][s], recs[1 - r][s]
                    rstart = {}
                    for k, n in enumerate(y["names"]):
                        if n.startswith("RECV"):
                            rstart[n.split(":", 1)[1].rsplit("<", 1)[0]] = y["times"][k][0]
                    for k in range(1, len(x["kinds"])):
                        g = (x["times"][k][0] - x["times"][k - 1][1]) * 1e3
                        if x["kinds"][k - 1][0] == bigmac.OP_SEND:
                            snd.append(g)
                            peer = rstart.get(x["names"][k - 1].split(":", 1)[1].rsplit(">", 1)[0])
                            if peer is not None:
                                (swait if peer < x["times"][k - 1][0] else sbusy).append(g)
                        else:
                            gap.append(g)
            print("run: send op start -> next op start median %.1f us (mean %.1f, n %d; the receiver in its recv "
                  "already: %.1f n %d, not yet: %.1f n %d); other gaps median %.1f us (mean %.1f)"
                  % (med(snd), sum(snd) / len(snd), len(snd), med(swait) if swait else 0, len(swait),
                     med(sbusy) if sbusy else 0, len(sbusy), med(gap), sum(gap) / len(gap)))
            print("profile: send_us by size %s (the receiver waiting: %s), message bytes %s" % (
                {k: round(v, 1) for k, v in ov["send_us_by_size"].items()},
                {k: round(v, 1) for k, v in ov.get("send_waiting_us_by_size", {}).items()}, ov["message_bytes"]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
