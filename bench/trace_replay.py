#!/usr/bin/python3
"""trace_replay.py -- where a measured step's makespan comes from, by replaying it.

    /usr/bin/python3 bench/trace_replay.py RUN.step4.json RUN.step5.json ...

Each executor trace (`bigmac train --trace F --trace-from K`, docs/trace.md) is replayed through
its own table's DAG (program order on each rank, each recv after its send), the way the
simulator runs a table (src/sim/sim.c), with parts of the measured times replaced by what a
model would put there. With nothing replaced the replay gives the measured makespan back; each
variant's error (replayed / measured - 1, mean, min and max over the traces) shows what the
replaced part costs the prediction. Variants:

  measured                 every op start, duration and recv end as measured (check: 0)
  gaps = their mean        the gap before every op (the executor's dispatch) = the trace's
                           mean gap (device.op_overhead_us)
  gaps drawn (gamma)       ... drawn from a gamma of the gaps' mean and sd (op_overhead_sd_us)
  no step lead             each rank's first op one mean gap after the step's start
                           instead of when it started (device.step_lead_us = 0)
  no recv overhead         a recv of an arrived message takes no time (recv_overhead_us = 0)
  compute = slot means     every compute op the mean of its (rank, module, chunk, pass)
                           slot in the trace (what calibrated costs and rank scales give)
  compute drawn (slot)     ... a random duration of the same slot in the trace
  compute drawn (lognormal) ... the slot mean times a lognormal of the slot's sigma of
                           log(duration / mean) (module cost.spread)
  model, deterministic     slot means, mean gaps, no lead, no recv overhead: the model
                           before the session that added the three dispatch numbers
  model + lead + recv      ... with the measured step lead and recv overhead
  model, expected          ... and compute and gaps drawn (lognormal, gamma): the expected
                           makespan `simulate` gives for a trace calibrated with --spread

Draws: 16 replays per trace (seeded), their mean. In every other variant the transfers stay
as measured: the time from a send's issue to the end of a recv that waited for it, and the
mean of those for a recv that did not wait. (Traces of `train --local`, whose ranks take turns
in one process, replay exactly only in the first variant: a rank's wait there includes the
other rank's work.) Figures: bench/RESULTS.md "Issue 16: the expected makespan".
"""
import json
import math
import random
import statistics as st
import sys
from collections import defaultdict

DRAWS = 16


def load(path):
    """Every rank's op events in program order, and the measured makespan (us)."""
    with open(path) as f:
        doc = json.load(f)
    ops = defaultdict(dict)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            ops[e["pid"]][e["args"]["op"]] = e
    ranks = [[ops[r][k] for k in sorted(ops[r])] for r in sorted(ops)]
    makespan = max(e["ts"] + e["dur"] for seq in ranks for e in seq)
    return ranks, makespan


def kind(e):
    return e["cat"] if e["cat"] in ("send", "recv") else "compute"


def slot(r, e):
    a = e["args"]
    return (r, a["module"], a.get("chunk", -1), a["pass"])


class Trace:
    def __init__(self, path):
        self.ranks, self.makespan = load(path)
        R = self.ranks
        self.send_of = {}  # id(recv) -> the matching send event (the trace names it)
        for seq in R:
            for e in seq:
                if kind(e) == "recv":
                    self.send_of[id(e)] = R[e["args"]["wait_rank"]][e["args"]["wait_op"]]
        self.gap = {}
        for seq in R:
            for a, b in zip(seq, seq[1:]):
                self.gap[id(b)] = max(0.0, b["ts"] - a["ts"] - a["dur"])
        g = list(self.gap.values())
        self.gap_mean, self.gap_sd = st.mean(g), st.pstdev(g)
        xfer = [r["ts"] + r["dur"] - s["ts"] for seq in R for r in seq if kind(r) == "recv"
                for s in [self.send_of[id(r)]] if s["ts"] >= r["ts"]]
        self.xfer_mean = st.mean(xfer) if xfer else 0.0
        # recvs whose message was there: sent at least the mean transfer time before
        there = [r["dur"] for seq in R for r in seq if kind(r) == "recv"
                 and self.send_of[id(r)]["ts"] + self.xfer_mean <= r["ts"]]
        self.recv_there = st.mean(there) if there else 0.0
        self.lead = st.mean(seq[0]["ts"] for seq in R) - self.gap_mean
        durs = defaultdict(list)
        for r, seq in enumerate(R):
            for e in seq:
                if kind(e) == "compute":
                    durs[slot(r, e)].append(e["dur"])
        self.slot_durs = durs
        self.slot_mean = {k: st.mean(v) for k, v in durs.items()}
        self.slot_sigma = {k: (math.sqrt(st.pvariance([math.log(x / self.slot_mean[k]) for x in v if x > 0]))
                               if len(v) > 1 and min(v) > 0 else 0.0) for k, v in durs.items()}

    def waited(self, r_ev):
        return self.send_of[id(r_ev)]["ts"] >= r_ev["ts"]

    def replay(self, gap, first, compute, recv_min, transfer):
        """Makespan of the DAG with these rules (each a function of the measured event)."""
        R = self.ranks
        P = len(R)
        pc, tfree = [0] * P, [0.0] * P
        start = {}
        moved = True
        while moved:
            moved = False
            for r in range(P):
                seq = R[r]
                while pc[r] < len(seq):
                    i = pc[r]
                    e = seq[i]
                    k = kind(e)
                    if k == "recv" and id(self.send_of[id(e)]) not in start:
                        break  # its send is not issued yet
                    t0 = first(r, e) if i == 0 else tfree[r] + gap(e)
                    if k == "compute":
                        t1 = t0 + compute(r, e)
                    elif k == "send":
                        t1 = t0
                    else:
                        s = self.send_of[id(e)]
                        t1 = max(t0 + recv_min(e), start[id(s)] + transfer(e, s))
                    start[id(e)] = t0
                    tfree[r] = t1
                    pc[r] += 1
                    moved = True
        return max(tfree)


def variants(tr, rng):
    meas_gap = lambda e: tr.gap[id(e)]
    meas_first = lambda r, e: e["ts"]
    meas_compute = lambda r, e: e["dur"]
    meas_recv = lambda e: 0.0 if tr.waited(e) else e["dur"]
    meas_xfer = lambda e, s: (e["ts"] + e["dur"] - s["ts"]) if tr.waited(e) else tr.xfer_mean
    exact_xfer = lambda e, s: e["ts"] + e["dur"] - s["ts"]  # every recv ends as measured
    mean_gap = lambda e: tr.gap_mean
    k_g = (tr.gap_mean / tr.gap_sd) ** 2 if tr.gap_sd > 0 else 0
    gamma_gap = (lambda e: rng.gammavariate(k_g, tr.gap_sd ** 2 / tr.gap_mean)) if k_g > 0 else mean_gap
    no_lead = lambda r, e: tr.gap_mean
    lead = lambda r, e: tr.lead + tr.gap_mean
    no_recv = lambda e: 0.0
    recv = lambda e: tr.recv_there
    slot_mean = lambda r, e: tr.slot_mean[slot(r, e)]
    slot_draw = lambda r, e: rng.choice(tr.slot_durs[slot(r, e)])

    def lognormal(r, e):
        k = slot(r, e)
        s = tr.slot_sigma[k]
        return tr.slot_mean[k] * math.exp(s * rng.gauss(0, 1) - s * s / 2)

    M = (meas_gap, meas_first, meas_compute, meas_recv, meas_xfer)
    return [
        ("measured", M[:4] + (exact_xfer,), 1),
        ("gaps = their mean", (mean_gap,) + M[1:], 1),
        ("gaps drawn (gamma)", (gamma_gap,) + M[1:], DRAWS),
        ("no step lead", (meas_gap, no_lead) + M[2:], 1),
        ("no recv overhead", M[:3] + (no_recv, meas_xfer), 1),
        ("compute = slot means", M[:2] + (slot_mean,) + M[3:], 1),
        ("compute drawn (slot)", M[:2] + (slot_draw,) + M[3:], DRAWS),
        ("compute drawn (lognormal)", M[:2] + (lognormal,) + M[3:], DRAWS),
        ("model, deterministic", (mean_gap, no_lead, slot_mean, no_recv, meas_xfer), 1),
        ("model + lead + recv", (mean_gap, lead, slot_mean, recv, meas_xfer), 1),
        ("model, expected", (gamma_gap, lead, lognormal, recv, meas_xfer), DRAWS),
    ]


def main(paths):
    if not paths:
        sys.exit("usage: trace_replay.py TRACE.json...  (executor traces, `bigmac train --trace`)")
    rng = random.Random(1)
    errs = defaultdict(list)
    order = []
    for p in paths:
        try:
            tr = Trace(p)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"trace_replay.py: {p}: not an executor trace ({e})")
        for name, rules, n in variants(tr, rng):
            if name not in errs:
                order.append(name)
            m = st.mean(tr.replay(*rules) for _ in range(n))
            errs[name].append((m - tr.makespan) / tr.makespan * 100)
    print(f"{len(paths)} traces; replayed makespan vs measured (%):")
    print()
    print("| variant | mean | min | max |")
    print("|---|---|---|---|")
    for name in order:
        v = errs[name]
        print(f"| {name} | {st.mean(v):+.2f} | {min(v):+.2f} | {max(v):+.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
