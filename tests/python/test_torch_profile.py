"""bigmac.torch.profile measures the torch executor's own costs (issue 29): the modules' ops as the
executor's walk runs them, its per-op dispatch, the transfers of Executor._send/_recv on a
2-process gloo group (one profile() starts, or the default group in use), the step's setup and
the optimizer, written into the spec's device keys that `bigmac calibrate` writes. Checked: the
keys are there and sane, the derived keys are the documented sums of the measured parts and
the table's op mix (counted here from the table), the spec simulates (and the executor's costs
lengthen the prediction), a split-backward table gets w_ms, track_memory=False costs no hooks,
the byte figures are deterministic, bad arguments are refused. No wall-clock figure is
asserted."""
from check import check, raises, done
import bigmac
import bigmac.torch as bt
from bigmac.torch import twins

SPEC = "tests/specs/exec-small.json"
KEYS = ("op_overhead_us", "recv_overhead_us", "link_latency_us", "link_gbytes_per_s", "step_lead_us",
        "optimizer_ms_per_gib")
build, data = twins.factory(SPEC), twins.dataset(SPEC)
t1f1b = bigmac.plan(SPEC, pp=2, vpp=1, backbone="1f1b")
tzb = bigmac.plan(SPEC, pp=2, vpp=1, backbone="zb-h1")

p = bt.profile(SPEC, build, data, repeats=2, table=t1f1b)
dv = p.to_dict()["device"]
o = p.overheads
names = [m.name for m in p.modules]
check("profile_device_keys", all(k in dv for k in KEYS), str(dv))
check("profile_device_sane", dv["op_overhead_us"] > 0 and dv["recv_overhead_us"] > 0 and dv["link_latency_us"] >= 0
      and dv["link_gbytes_per_s"] > 0 and dv["step_lead_us"] > 0 and dv["optimizer_ms_per_gib"] > 0, str(dv))
check("profile_transfers_measured", sorted(o["latency_us"]) == sorted(o["arrived_recv_us"]) == sorted(o["send_us_by_size"])
      == [64, 16384, 262144, 1048576] and all(v > 0 for k in ("latency_us", "arrived_recv_us", "send_us_by_size")
                                              for v in o[k].values()) and o["send_us"] > 0 and o["broadcast_us"] > 0
      and o["header_post_us"] > 0, str(o))
check("profile_transfers_own_group", o["transfers_on"] == "a 2-process gloo group on loopback started by profile()",
      o["transfers_on"])
# the op mix: rank 0's ops of the table, counted here
ops = t1f1b.ops[0]
mix = {"compute": sum(x.kind == bigmac.OP_COMPUTE for x in ops), "send": sum(x.kind == bigmac.OP_SEND for x in ops),
       "recv": sum(x.kind == bigmac.OP_RECV for x in ops),
       "forward_microbatches": len({x.mb for x in ops if x.kind == bigmac.OP_COMPUTE and x.pass_ == "F"}),
       "after_recv": sum(ops[k].kind == bigmac.OP_COMPUTE and ops[k - 1].kind == bigmac.OP_RECV
                         for k in range(1, len(ops))),
       "backbone": {q: sum(x.kind == bigmac.OP_COMPUTE and x.module == t1f1b.backbone_module and x.pass_ == q for x in ops)
                    for q in ("F", "B", "W")}}
check("profile_mix_is_the_tables", o["mix"] == mix and mix["send"] > 0 and mix["recv"] > 0 and mix["after_recv"] > 0,
      "%s vs %s" % (o["mix"], mix))
n = mix["compute"] + mix["send"] + mix["recv"]
fixed = o["chunk_fixed_ms"]
check("profile_chunk_fixed_measured", sorted(fixed) == ["B", "F"] and all(0 <= v for v in fixed.values()), str(fixed))
want = o["dispatch_us"] + (o["send_us"] * mix["send"] + 1e3 * sum(fixed[q] * mix["backbone"][q] for q in fixed)
                           + o["wake_us"] * mix["after_recv"]) / n
check("profile_op_overhead_is_dispatch_sends_chunks_wakes", abs(dv["op_overhead_us"] - want) <= 1e-3 + 1e-9 * want,
      "%g vs %g" % (dv["op_overhead_us"], want))
ar = list(o["arrived_recv_us"].values())
check("profile_recv_overhead_within_measured", min(ar) - 1e-3 <= dv["recv_overhead_us"] <= max(ar) + 1e-3,
      "%g vs %s" % (dv["recv_overhead_us"], ar))
lead = mix["forward_microbatches"] * o["data_us"] + mix["recv"] * o["header_post_us"] + o["broadcast_us"] + o["setup_us"] \
    + max(o["wake_us"], o["first_extra_us"])
check("profile_first_op", o["first_extra_us"] >= 0 and o["first_op_us"] == max(o["wake_us"], o["first_extra_us"]),
      "%s %s" % (o["first_extra_us"], o["first_op_us"]))
check("profile_wake_measured", o["wake_us"] >= 0 and sorted(o["wake_us_by_module"]) == sorted(names)
      and all(v >= 0 for v in o["wake_us_by_module"].values())
      and abs(o["wake_us"] - sum(o["wake_us_by_module"].values()) / len(names)) <= 1e-6 * max(1.0, o["wake_us"]),
      str(o["wake_us_by_module"]))
check("profile_send_timed_both_ways", sorted(o["send_waiting_us_by_size"]) == sorted(o["send_us_by_size"])
      and all(v > 0 for v in o["send_waiting_us_by_size"].values())
      and min(o["send_us_by_size"].values()) - 1e-3 <= o["send_us"] <= max(o["send_us_by_size"].values()) + 1e-3,
      str(o["send_us_by_size"]))
# the gradient all-reduces: every module but the backbone, at its trainable parameters' bytes
# (counted here from modules built by the factory)
want_bytes = {m.name: sum(q.numel() * q.element_size() for q in build(m.name, 0, 0).parameters() if q.requires_grad)
              for m in p.modules if m.role != "backbone"}
check("profile_allreduce_per_module", o["allreduce_bytes"] == want_bytes and sorted(o["allreduce_us"]) ==
      sorted(want_bytes) and all(v > 0 for v in o["allreduce_us"].values()), "%s vs %s" % (o["allreduce_bytes"], want_bytes))
check("profile_coll_keys", dv["coll_latency_us"] >= 0 and dv["coll_gbytes_per_s"] > 0, str(dv))
# the optimizer: the table's ranks' own state, as the simulator counts it (its optimizer_state_gib
# for the profiled spec's plan of the same table), and the rate their summed time over it
simr = bigmac.simulate(bigmac.plan(p, pp=2, vpp=1, backbone="1f1b"))["ranks"]
check("profile_optimizer_state_is_the_simulators", len(o["optimizer_rank_bytes"]) == 2 and all(
    abs(b / 2 ** 30 - r["optimizer_state_gib"]) <= 1e-9 for b, r in zip(o["optimizer_rank_bytes"], simr)),
      "%s vs %s" % (o["optimizer_rank_bytes"], [r["optimizer_state_gib"] for r in simr]))
rate = sum(o["optimizer_rank_ms"]) / (sum(o["optimizer_rank_bytes"]) / 2 ** 30)
check("profile_optimizer_rate_is_the_ranks", abs(dv["optimizer_ms_per_gib"] - rate) <= 1e-5 * rate,
      "%g vs %g" % (dv["optimizer_ms_per_gib"], rate))
check("profile_step_lead_is_the_setup", abs(dv["step_lead_us"] - lead) <= 1e-3 + 1e-9 * lead,
      "%g vs %g" % (dv["step_lead_us"], lead))
check("profile_costs_positive", all(m.cost["fwd_ms"] > 0 and m.cost["bwd_ms"] > 0 and m.cost["act_mib"] > 0
                                    and m.cost["state_mib"] > 0 for m in p.modules), str([m.cost for m in p.modules]))
check("profile_unsplit_has_no_w", not o["split_backward"] and all("w_ms" not in m["cost"] for m in p.to_dict()["modules"]))
check("profile_hooks_measured", sorted(o["hooks_us"]) == sorted(names) and all(v >= 0 for v in o["hooks_us"].values())
      and o["track_memory"] is True, str(o["hooks_us"]))

# the spec simulates, and the executor's costs lengthen the prediction against the same modules'
# costs without them (every device key of the profile at 0; the link as fast as allowed)
sims = {}
for b, v in (("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)):
    sims[b] = bigmac.simulate(p, pp=2, vpp=v, backbone=b)
check("profile_spec_simulates", all(s["makespan_ms"] > 0 and s["step_ms"] >= s["makespan_ms"] for s in sims.values()),
      str({b: (s["makespan_ms"], s["step_ms"]) for b, s in sims.items()}))
d0 = p.to_dict()
d0["device"].update({"op_overhead_us": 0, "recv_overhead_us": 0, "link_latency_us": 0, "link_gbytes_per_s": 1e6,
                     "step_lead_us": 0, "optimizer_ms_per_gib": 0})
bare = bigmac.simulate(d0, pp=2, vpp=1, backbone="1f1b")
check("profile_overheads_lengthen_the_step", sims["1f1b"]["step_ms"] > bare["step_ms"],
      "%g vs %g" % (sims["1f1b"]["step_ms"], bare["step_ms"]))

# a split backward: the backbone's B and W measured as the executor splits them
pz = bt.profile(SPEC, build, data, repeats=2, table=tzb)
bbc = pz.to_dict()["modules"][pz.backbone_module]["cost"]
check("profile_split_gets_w", pz.overheads["split_backward"] and 0 < bbc["w_ms"] < bbc["bwd_ms"]
      and sorted(pz.overheads["chunk_fixed_ms"]) == ["B", "F", "W"] and pz.overheads["mix"]["backbone"]["W"] > 0, str(bbc))
check("profile_split_simulates", bigmac.simulate(pz, pp=2, vpp=1, backbone="zb-h1")["makespan_ms"] > 0)

# accounting off: no hook cost; the byte figures do not depend on it and repeat exactly
pf = bt.profile(SPEC, build, data, repeats=2, table=t1f1b, track_memory=False)
check("profile_no_tracking_no_hooks", pf.overheads["track_memory"] is False and
      pf.overheads["hooks_us"] == {k: 0.0 for k in names}, str(pf.overheads["hooks_us"]))
check("profile_bytes_deterministic", [(m.cost["act_mib"], m.cost["state_mib"], m.cost["out_mib"]) for m in pf.modules]
      == [(m.cost["act_mib"], m.cost["state_mib"], m.cost["out_mib"]) for m in p.modules])
check("profile_structure_deterministic", sorted(pf.overheads) == sorted(o) and pf.overheads["mix"] == o["mix"]
      and sorted(pf.to_dict()["device"]) == sorted(dv))

# compute only: the spec's device untouched
pc = bt.profile(SPEC, build, data, repeats=2, executor=False)
spec_dev = bigmac.load_spec(SPEC).to_dict().get("device", {})
check("profile_compute_only_keeps_device", pc.to_dict().get("device", {}) == spec_dev and
      pc.overheads["executor"] is False, str(pc.to_dict().get("device")))

# default table: the spec planned with its own settings (at least 2 ranks)
pd = bt.profile(SPEC, build, data, repeats=1)
own = bigmac.plan(SPEC, pp=2)
check("profile_default_mix_is_the_specs_plan", pd.overheads["mix"]["send"] == sum(
    x.kind == bigmac.OP_SEND for x in own.ops[0]), str(pd.overheads["mix"]))


# the process group in use: every rank calls profile(), ranks 0 and 1 measure, all get one spec
def in_group(rank):
    q = bt.profile(SPEC, twins.factory(SPEC), twins.dataset(SPEC), repeats=1, table=t1f1b)
    return q.to_dict(), q.overheads["transfers_on"]


r = bt.spawn(in_group, 2, timeout=240)
check("profile_group_in_use", r[0] == r[1] and r[0][1].startswith("the process group in use (gloo, ranks 0 and 1 of 2)")
      and all(k in r[0][0]["device"] for k in KEYS), r[0][1])

# three ranks: ranks 0 and 1 measure the transfers on their own, rank 2 waits for them
r = bt.spawn(in_group, 3, timeout=240)
check("profile_group_of_three", r[0] == r[1] == r[2] and "ranks 0 and 1 of 3" in r[0][1], r[0][1])

# calibrate's ring fit (src/calib/step_log.c), by hand: t = bytes / bw + 2 latency at n = 2 (1 GB/s
# is 1000 bytes per us); sizes within a factor 4 of each other: latency alone, the mean t / 2
from bigmac.torch.profile import _ring_fit
lat, bw = _ring_fit([(1000, 1 + 100.0), (100000, 100 + 100.0)])
check("profile_ring_fit_by_hand", abs(lat - 50) < 1e-9 and abs(bw - 1.0) < 1e-12, "%r %r" % (lat, bw))
lat, bw = _ring_fit([(17000, 300.0), (23000, 500.0)])
check("profile_ring_fit_one_size", bw is None and abs(lat - 200.0) < 1e-9, "%r %r" % (lat, bw))

# a modelled encoder_cost_scale is dropped: the encoders were measured on the data itself
TINY = "examples/tiny-mllm.json"
pt = bt.profile(TINY, twins.factory(TINY), twins.dataset(TINY), repeats=1, executor=False)
check("profile_drops_encoder_cost_scale", pt.to_dict()["data"]["encoder_cost_scale"] == {"dist": "none"} and
      pt.overheads["encoder_cost_scale_dropped"] == bigmac.load_spec(TINY).to_dict()["data"]["encoder_cost_scale"]
      and bigmac.plan(pt, pp=2).to_dict()["mb_scale"] == [1] * 8, str(pt.to_dict()["data"]))

raises("profile_rejects_repeats", lambda: bt.profile(SPEC, build, data, repeats=0), bigmac.Error, ("repeats",))
raises("profile_rejects_track_memory", lambda: bt.profile(SPEC, build, data, track_memory="no"), bigmac.Error,
       ("track_memory",))
raises("profile_rejects_foreign_table", lambda: bt.profile(SPEC, build, data, table=bigmac.plan(
    "examples/tiny-mllm.json", pp=2)), bigmac.Error, ("profile: table:", "another spec"))
raises("profile_rejects_table_type", lambda: bt.profile(SPEC, build, data, table="t.json"), bigmac.Error, ("table",))
done()
