"""bigmac.torch refuses bad input clearly: a module the factory does not build, a tensor whose
shape differs from what the receiving rank expects (op, rank and tensor named), a table from
another spec, bad command lines."""
import os
import subprocess
import sys
import tempfile

import torch

from check import check, raises, done
import bigmac
import bigmac.torch as bt
from bigmac.torch import twins

SPEC = "tests/specs/exec-small.json"
spec = bigmac.load_spec(SPEC)
tmp = tempfile.mkdtemp()
table1 = bigmac.plan(spec, pp=1)


def no_dit(name, a, b):
    if name == "dit":
        raise KeyError(name)
    return twins.factory(spec)(name, a, b)


raises("torch_err_factory_missing_module", lambda: bt.Executor(spec, table1, no_dit, twins.dataset(spec), 0),
       bigmac.Error, ('module "dit"', "factory builds no module"))
raises("torch_err_factory_not_module", lambda: bt.Executor(spec, table1, lambda n, a, b: "vit", twins.dataset(spec), 0),
       bigmac.Error, ("not a torch.nn.Module",))

other = bigmac.plan("examples/tiny-mllm.json", pp=1, vpp=1, backbone="1f1b")
raises("torch_err_table_other_spec", lambda: bt.Executor(spec, other, twins.factory(spec), twins.dataset(spec), 0),
       bigmac.Error, ("another spec", "cost.fwd_ms"))
rc_spec = bigmac.load_spec("tests/specs/exec-recompute.json")
# recomputed tables were refused here; the executor recomputes them now (tests/python/peaks_torch.py)
rc_x = bt.Executor(rc_spec, bigmac.plan(rc_spec, pp=1), twins.factory(rc_spec), twins.dataset(rc_spec), 0)
check("torch_recompute_table_taken", rc_x.rc == set(range(len(rc_x.inst))), str(rc_x.rc))
table2 = bigmac.plan(spec, pp=2)
raises("torch_err_table_needs_group", lambda: bt.Executor(spec, table2, twins.factory(spec), twins.dataset(spec), 0),
       bigmac.Error, ("pp 2",))


class Shorter(torch.nn.Module):
    """Wraps backbone chunk 0 and drops its last row: the next rank expects [T, C]."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, b):
        return self.inner(x, b)[:-1]


def wrong_shape(rank):
    build = twins.factory(spec)

    def b2(name, a, b):
        m = build(name, a, b)
        return Shorter(m) if name == "gpt" and a == 0 else m
    bt.train(spec, build=b2, steps=1, pp=2, policy="bigmac")


try:
    bt.spawn(wrong_shape, 2, timeout=60)
    check("torch_err_shape_mismatch", False, "no error")
except bigmac.Error as e:
    msg = str(e)
    check("torch_err_shape_mismatch", msg.startswith("rank 1: op #") and "RECV_F:gpt.c0.out" in msg and
          "tensor gpt.c0.out" in msg and "rank 1 expects" in msg, msg)


def run(*args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "bigmac.torch"] + list(args), capture_output=True, text=True, env=env)


r = run("train", SPEC, "--steps", "zero")
check("torch_cli_bad_flag_usage", r.returncode == 2 and "--steps: expected an integer" in r.stderr, r.stderr)
r = run("train", SPEC, "--reference", "--nproc", "2")
check("torch_cli_reference_nproc_usage", r.returncode == 2 and "--reference" in r.stderr, r.stderr)
bad = os.path.join(tmp, "bad.json")
open(bad, "w").write(open(SPEC).read().replace('"microbatches": 4', '"microbatches": -4'))
r = run("train", bad, "--reference")
check("torch_cli_bad_spec_positioned", r.returncode == 1 and ("bigmac: error: " + bad + ":") in r.stderr, r.stderr)
r = run("train", SPEC, "--nproc", "2", "--pp", "3")
check("torch_cli_pp_vs_nproc", r.returncode == 1 and "pp 3" in r.stderr and "2 ranks" in r.stderr, r.stderr)

# and the command line works: --nproc 2 trains as bigmac train --reference does
log, clog = os.path.join(tmp, "cli.jsonl"), os.path.join(tmp, "c.jsonl")
r = run("train", SPEC, "--nproc", "2", "--steps", "2", "--policy", "optimus", "--log", log)
subprocess.run([os.environ.get("BIGMAC", "bin/bigmac"), "train", SPEC, "--reference", "--steps", "2", "--log", clog],
               check=True, capture_output=True)
import json
a = [json.loads(l)["loss"] for l in open(log)] if r.returncode == 0 else []
b = [json.loads(l)["loss"] for l in open(clog)]
check("torch_cli_nproc_trains", r.returncode == 0 and len(a) == 2 and all(abs(x - y) <= 1e-4 * y for x, y in zip(a, b)),
      r.stderr + str(a) + str(b))
done()
