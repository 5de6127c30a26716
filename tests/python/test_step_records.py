"""The whole step from Python (issue 24): bigmac.simulate(..., zero=) and plan(zero=) against the
ZeRO-1 memory model by hand and against `bigmac simulate --zero`; the torch executor's step log
records what the C executor's does (walk, each gradient collective with start/end/bytes, the
optimizer's time and state), checked against the model's real sizes (bigmac.module_init), and
`bigmac calibrate --step-log` reads it."""
import json
import os
import subprocess
import tempfile

from check import check, raises, done
import bigmac
import bigmac.torch as bt

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
SPEC = "examples/tiny-mllm.json"
tmp = tempfile.mkdtemp()
MIB = 1 / 1024.0  # GiB per MiB

# tiny-mllm at pp 2 (vpp 2) x dp 2: param_mib = state_mib / 4, optimizer = state - 2 params =
# state / 2: vit 0.5, dit 0.5, gpt 2 MiB, gpt chunks 1/4 each, rank 0 holds chunks 0 and 2.
# ZeRO 0: 0.5 + 0.5 + 2 * 0.5 = 2 MiB; ZeRO 1: 0.5/4 + 0.5/4 (every rank of 4) + 1/2 (dp 2) = 0.75
z0 = bigmac.simulate(SPEC, pp=2, dp=2, zero=0)
z1 = bigmac.simulate(SPEC, pp=2, dp=2, zero=1)
check("simulate_zero0_optimizer_by_hand", abs(z0["ranks"][0]["optimizer_state_gib"] - 2 * MIB) < 1e-12,
      str(z0["ranks"][0]["optimizer_state_gib"]))
check("simulate_zero1_optimizer_by_hand", abs(z1["ranks"][0]["optimizer_state_gib"] - 0.75 * MIB) < 1e-12,
      str(z1["ranks"][0]["optimizer_state_gib"]))
cli = json.loads(subprocess.run([BIGMAC, "simulate", SPEC, "--pp", "2", "--dp", "2", "--zero", "1", "--json"],
                                check=True, capture_output=True, text=True).stdout)
check("simulate_zero1_equals_cli", z1 == cli)
check("plan_zero1_table", bigmac.plan(SPEC, pp=2, dp=2, zero=1).to_dict().get("zero") == 1)
check("plan_zero_default_spec", "zero" not in bigmac.plan(SPEC, pp=2).to_dict())
cmp1 = bigmac.simulate(SPEC, compare=True, pp=2, dp=2, zero=1)
cmp_cli = json.loads(subprocess.run([BIGMAC, "simulate", SPEC, "--pp", "2", "--dp", "2", "--zero", "1", "--compare",
                                     "--json"], check=True, capture_output=True, text=True).stdout)
check("simulate_compare_zero1_equals_cli", cmp1 == cmp_cli)
raises("simulate_zero_2_refused", lambda: bigmac.simulate(SPEC, zero=2), bigmac.Error, ("zero: expected 0 or 1",))
raises("simulate_zero_bool_refused", lambda: bigmac.simulate(SPEC, zero=True), bigmac.Error, ("zero",))
# the spec is left as it was: a plan after zero=1 without zero= is ZeRO 0 again
check("simulate_zero_leaves_spec", bigmac.simulate(SPEC, pp=2, dp=2) == z0)


# the torch executor's step records at pp 1 x dp 2
def run(rank):
    bt.train(SPEC, steps=3, pp=1, vpp=1, dp=2, log=os.path.join(tmp, "t.jsonl"), trace=os.path.join(tmp, "t.json"))


bt.spawn(run, 2, (), timeout=200)
lines = [json.loads(l) for l in open(os.path.join(tmp, "t.jsonl"))]
n = {m: len(bigmac.module_init(SPEC, m)) for m in ("vit", "dit", "gpt")}
want_state = 8 * sum(n.values())  # AdamW m and v of every parameter (dp 2 holds the whole model)
want_bytes = {("vit", None): 4 * n["vit"], ("dit", None): 4 * n["dit"], ("gpt", 0): 4 * n["gpt"]}
ok, why = True, []
for j in lines:
    for r in j["ranks"]:
        got = {(c["module"], c.get("chunk")): c["bytes"] for c in r["collectives"]}
        span = all(r["sync_start_ms"] <= c["start_ms"] <= c["end_ms"] <= r["sync_end_ms"] + 1e-3
                   for c in r["collectives"])
        if (r["optimizer_state_bytes"] != want_state or got != want_bytes or not span or not r["optimizer_ms"] > 0 or
                r["walk_ms"] <= 0 or any(c["ranks"] != 2 or c["op"] != "all_reduce" for c in r["collectives"])):
            ok = False
            why.append("step %d rank %d: %s" % (j["step"], r["rank"], {k: r[k] for k in r if k != "peak_act_bytes"}))
check("torch_step_records_match_model_sizes", ok and len(lines) == 3, "; ".join(why[:2]))
# one host: every collective on the intra-host link; the link class from every rank's host (global
# rank p*D + d), as the C executor's: the world group spans hosts, a replica group may not
check("torch_collectives_on_one_host_are_intra", all(c["link"] == "intra" for j in lines for r in j["ranks"]
                                                      for c in r["collectives"]))
from bigmac.torch.executor import Executor
fake = object.__new__(Executor)
fake.P, fake.D, fake.rank, fake.hosts = 2, 2, 0, ["a", "a", "b", "b"]  # pipeline rank 0 on host a, 1 on b
links = [fake._link(True), fake._link(False)]
fake.rank = 1
links.append(fake._link(False))
fake.hosts = ["a", "b", "a", "b"]  # each rank's replicas on two hosts
links.append(fake._link(False))
fake.hosts = None
links.append(fake._link(True))
check("torch_collective_link_class_from_hosts", links == ["inter", "intra", "intra", "inter", "intra"], links)
params = [{(e["module"], e.get("chunk")): e["bytes"] for e in r["params"]} for j in lines for r in j["ranks"]]
check("torch_step_records_params", all(p == want_bytes for p in params), str(params[:1]))
# the C executor records the same optimizer state for the same layout
c_log = os.path.join(tmp, "c.jsonl")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
rc = subprocess.run(["timeout", "120", "mpirun", "-np", "2", BIGMAC, "train", SPEC, "--pp", "1", "--vpp", "1", "--dp", "2",
                     "--steps", "1", "--quiet", "--log", c_log], env=env, capture_output=True).returncode
if rc == 0:
    cr = json.loads(open(c_log).readline())["ranks"][0]
    check("c_step_records_params", {(e["module"], e.get("chunk")): e["bytes"] for e in cr["params"]} == want_bytes,
          str(cr["params"]))
    check("torch_step_records_state_equals_c", cr["optimizer_state_bytes"] == want_state and
          sorted((c["module"], c.get("chunk"), c["bytes"]) for c in cr["collectives"]) ==
          sorted((m, ch, b) for (m, ch), b in want_bytes.items()), str(cr))
else:
    check("torch_step_records_state_equals_c", False, "mpirun exited %d" % rc)
out = os.path.join(tmp, "cal.json")
p = subprocess.run([BIGMAC, "calibrate", os.path.join(tmp, "t.json"), "--spec", SPEC, "--step-log",
                    os.path.join(tmp, "t.jsonl"), "-o", out], capture_output=True, text=True)
dev = json.load(open(out))["device"] if p.returncode == 0 else {}
check("calibrate_reads_torch_step_log", p.returncode == 0 and dev.get("optimizer_ms_per_gib", 0) > 0 and
      dev.get("coll_latency_us", -1) >= 0, p.stderr)
done()
