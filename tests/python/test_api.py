"""import bigmac: the Python API gives what the CLI gives (same C library)."""
import json
import os
import subprocess
import tempfile

from check import check, raises, done
import bigmac

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
SPEC = "tests/specs/exec-small.json"
tmp = tempfile.mkdtemp()


def cli(*args):
    return subprocess.run([BIGMAC] + list(args), check=True, capture_output=True, text=True).stdout


spec = bigmac.load_spec(SPEC)
check("py_load_spec", [m.name for m in spec.modules] == ["vit", "gpt", "dit"] and spec.pp == 2 and
      spec.module("gpt").role == "backbone" and spec.module("gpt").arch["layers"] == 4)
same = bigmac.load_spec(json.load(open(SPEC)))
check("py_load_spec_dict", same.name == spec.name and len(same.modules) == 3)

for pol, bb, vpp in (("bigmac", "1f1b", 1), ("optimus", "interleaved", 2), ("unified", "1f1b", 1)):
    t = bigmac.plan(spec, pp=2, vpp=vpp, policy=pol, backbone=bb)
    out = os.path.join(tmp, "t.json")
    cli("plan", SPEC, "--pp", "2", "--vpp", str(vpp), "--policy", pol, "--backbone", bb, "-o", out)
    check("py_plan_table_json_%s_%s" % (pol, bb), t.to_json() == open(out).read())
    t.write(os.path.join(tmp, "w.json"))
    check("py_table_write_%s_%s" % (pol, bb), open(os.path.join(tmp, "w.json")).read() == open(out).read())
    check("py_table_ops_%s_%s" % (pol, bb), sum(len(o) for o in t.ops) == sum(
        len(r["ops"]) if isinstance(r, dict) else len(r) for r in json.load(open(out))["ranks"]))
    check("py_verify_%s_%s" % (pol, bb), bigmac.verify(t) is True)
    sim = bigmac.simulate(t)
    ref = json.loads(cli("simulate", SPEC, "--pp", "2", "--vpp", str(vpp), "--policy", pol, "--backbone", bb,
                         "--json"))
    check("py_simulate_dict_%s_%s" % (pol, bb), sim == ref, "%s != %s" % (sim.get("makespan_ms"), ref.get("makespan_ms")))

cmp = bigmac.simulate(spec, compare=True)
ref = json.loads(cli("simulate", SPEC, "--compare", "--json"))
check("py_simulate_compare", cmp == ref)
cmp2 = bigmac.simulate(json.load(open(SPEC)), compare=True)
check("py_simulate_compare_dict_spec", cmp2 == ref)
# with plan arguments and jitter: the same library call the CLI prints (src/study/json.c)
cmp3 = bigmac.simulate(spec, compare=True, vpp=2, backbone="interleaved", microbatches=8, window="fit",
                       jitter=0.1, seed=3)
ref3 = json.loads(cli("simulate", SPEC, "--compare", "--json", "--vpp", "2", "--backbone", "interleaved",
                      "--microbatches", "8", "--window", "fit", "--jitter", "0.1", "--seed", "3"))
check("py_simulate_compare_plan_args", cmp3 == ref3 and cmp3["lower_bound_ms"] is None)
raises("py_simulate_compare_nothing_plans", lambda: bigmac.simulate(spec, compare=True, pp=8), bigmac.Error,
       ("no policy planned", "too few for pp*vpp = 8 chunks"))
raises("py_simulate_compare_policy_arg", lambda: bigmac.simulate(spec, compare=True, policy="bigmac"),
       bigmac.Error, ("unknown plan argument 'policy'",))

t = bigmac.plan(spec)
txt = os.path.join(tmp, "a.txt")
bigmac.render(t, "ascii", txt, width=90)
check("py_render_ascii", open(txt).read() == cli("render", SPEC, "--format", "ascii", "--width", "90"))
tj = os.path.join(tmp, "t.json")
t.write(tj)
bigmac.render(bigmac.load_table(tj), "svg", os.path.join(tmp, "a.svg"), title=tj)
check("py_render_svg", open(os.path.join(tmp, "a.svg")).read() == cli("render", tj, "--format", "svg"))

# a measured trace written from Python: op times, memory points and message sizes (a send's and
# a recv's "bytes"; a compute op's entry is ignored); wrong lengths and negative sizes are errors
times = [[(i * 1.0, i * 1.0 + 0.5, i * 1.0) for i in range(len(ops))] for ops in t.ops]
mem = [[(0.0, 0, 0, 0)] for _ in t.ops]
sizes = [[0 if op.kind == bigmac.OP_COMPUTE else 4096 for op in ops] for ops in t.ops]
tr = os.path.join(tmp, "py.trace.json")
t.write_trace(times, mem, tr, msg_bytes=sizes)
ev = [e for e in json.load(open(tr))["traceEvents"] if e.get("ph") == "X"]
check("py_write_trace_bytes", len(ev) == sum(len(o) for o in t.ops) and
      all(e["args"].get("bytes") == 4096 for e in ev if e["cat"] in ("send", "recv")) and
      all("bytes" not in e["args"] for e in ev if e["cat"] not in ("send", "recv")))
t.write_trace(times, mem, tr)
check("py_write_trace_no_bytes", all("bytes" not in e["args"] for e in json.load(open(tr))["traceEvents"]
                                     if e.get("ph") == "X"))
raises("py_write_trace_bytes_length", lambda: t.write_trace(times, mem, tr, msg_bytes=[s[:-1] for s in sizes]),
       bigmac.Error, ("message sizes, the table",))
raises("py_write_trace_bytes_negative", lambda: t.write_trace(times, mem, tr, msg_bytes=[[-1] * len(s) for s in sizes]),
       bigmac.Error, (">= 0",))

# errors carry the C library's positioned message
bad = os.path.join(tmp, "bad.json")
with open(bad, "w") as f:
    f.write(open(SPEC).read().replace('"layers": 4,', '"layers": "four",', 1))
raises("py_error_spec_position", lambda: bigmac.load_spec(bad), bigmac.Error, (bad + ":",))
raises("py_error_plan", lambda: bigmac.plan(spec, pp=3, vpp=2, backbone="interleaved"), bigmac.Error,
       ("divisible",))
raises("py_error_policy_name", lambda: bigmac.plan(spec, policy="fastest"), bigmac.Error, ("unknown policy",))
raises("py_error_pp_type", lambda: bigmac.plan(spec, pp=0), bigmac.Error, ("pp",))
d = t.to_dict()
for r in d["ranks"]:
    ops = r["ops"] if isinstance(r, dict) else r
    if len(ops) > 3:
        ops[0], ops[-1] = ops[-1], ops[0]
        break
broken = bigmac.load_table(json.dumps(d))
raises("py_verify_refuses_broken", lambda: bigmac.verify(broken), bigmac.Error, ("invariant",))
raises("py_render_bad_format", lambda: bigmac.render(t, "png", os.path.join(tmp, "x")), bigmac.Error,
       ("unknown format",))

# Table.ops: the CLI's ops (every rank, every field, every name), one foreign call per rank
t = bigmac.plan(spec, pp=2, vpp=2, policy="bigmac", backbone="interleaved")
js = json.loads(t.to_json())
calls = {"rank_ops": 0}
real_rank_ops = bigmac._lib.bmpy_table_rank_ops


class Counting:
    def __init__(self, key, f):
        self.key, self.f = key, f

    def __call__(self, *a):
        calls[self.key] += 1
        return self.f(*a)


bigmac._lib.bmpy_table_rank_ops = Counting("rank_ops", real_rank_ops)
try:
    ops = t.ops
finally:
    bigmac._lib.bmpy_table_rank_ops = real_rank_ops
check("py_table_ops_calls_per_rank", calls == {"rank_ops": t.pp})
t.write(os.path.join(tmp, "ops.json"))
csv_rows = cli("render", os.path.join(tmp, "ops.json"), "--format", "csv").splitlines()
csv_names = [row.split(",") for row in csv_rows if row and not row.startswith("#")]
check("py_table_ops_match_json", len(ops) == t.pp and all(
    len(ops[r]) == len(js["ranks"][r]["ops"]) and
    all(o.mb == j["mb"] and o.kind_name == j["op"] for o, j in zip(ops[r], js["ranks"][r]["ops"]))
    for r in range(t.pp)))
check("py_table_ops_names_match_csv", [[o.name for o in ops[r]] for r in range(t.pp)] ==
      [[c for c in row if c] for row in csv_names[-t.pp:]])

# the dataset and initialisation come from the C library
b0, b1 = bigmac.data_batch(spec, 0, 1), bigmac.data_batch(spec, 0, 1)
check("py_data_deterministic", (b0.images == b1.images).all() and (b0.text == b1.text).all() and
      b0.images.shape[0] == int(b0.n_images.sum()))
check("py_data_varies", not (bigmac.data_batch(spec, 1, 1).images.shape == b0.images.shape and
                             (bigmac.data_batch(spec, 1, 1).text == b0.text).all()))
whole = bigmac.module_init(spec, "gpt")
parts = [bigmac.module_init(spec, "gpt", 0, 2), bigmac.module_init(spec, "gpt", 2, 4)]
import numpy as np
check("py_init_split_invariant", len(whole) == sum(len(p) for p in parts) and
      np.array_equal(whole, np.concatenate(parts)))
done()
