"""examples/torch_mllm.py (a user's own torch modules, a spec with produces/consumes only) runs as
the README says: under torch.distributed.run its pipelined losses equal its single-process
reference; bigmac.torch.profile measures it into a spec that bigmac simulates."""
import json
import os
import subprocess
import sys
import tempfile

from check import check, done
import bigmac
import bigmac.torch as bt

sys.path.insert(0, "examples")
import torch_mllm as ex  # noqa: E402

tmp = tempfile.mkdtemp()
ref_log, pp_log, trace = (os.path.join(tmp, n) for n in ("ref.jsonl", "pp.jsonl", "trace.json"))
ex.main(["--reference", "--steps", "3", "--log", ref_log])
# the launch line of the README (--redirects/--tee: torch 1.13's launcher needs them on Python 3.11)
r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "2",
                    "--tee", "2", "--master_port", str(bt._free_port()), "examples/torch_mllm.py", "--steps", "3",
                    "--log", pp_log, "--trace", trace], capture_output=True, text=True, timeout=180)
check("example_torchrun_runs", r.returncode == 0, r.stderr[-2000:])
if r.returncode == 0:
    a = [json.loads(l)["loss"] for l in open(ref_log)]
    b = [json.loads(l)["loss"] for l in open(pp_log)]
    check("example_pipelined_equals_reference", len(a) == len(b) == 3 and
          all(abs(x - y) <= 1e-4 * abs(x) for x, y in zip(a, b)), "%s vs %s" % (a, b))
    check("example_log_two_ranks", len(json.loads(open(pp_log).readline())["ranks"]) == 2)
    r2 = subprocess.run([os.environ.get("BIGMAC", "bin/bigmac"), "render", trace, "--format", "ascii"],
                        capture_output=True, text=True)
    check("example_trace_renders", r2.returncode == 0 and "measured timeline" in r2.stdout, r2.stderr)

prof = bt.profile(os.path.join("examples", "torch-mllm.json"), ex.build, ex.data,
                  repeats=3)
costs = {m.name: m.cost for m in prof.modules}
check("profile_costs_measured", all(c["fwd_ms"] > 0 and c["bwd_ms"] > 0 and c["act_mib"] > 0 and c["state_mib"] > 0
                                    for c in costs.values()) and costs["decoder"]["out_mib"] > 0, str(costs))
sim = bigmac.simulate(prof, pp=2)
check("profile_spec_simulates", sim["makespan_ms"] > 0 and sim["pp"] == 2)
done()
