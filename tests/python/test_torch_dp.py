"""Data parallel in the torch executor (issue 23 part 4): bigmac.torch.train(dp=D) over P*D
ranks (global rank p*D + d) equals bigmac.torch.reference on D*M microbatches (1e-4 relative)
and the C trainer on the twins (`bigmac train --reference --dp D`, and `mpirun -np 4 bigmac
train --pp 2 --dp 2` when mpirun is there) for P x D in {2x2, 1x2, 2x1}, two policies and two
backbones; data(step, mb) receives the global microbatch index; bad layouts are refused with
one line."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from check import check, raises, done
import bigmac
import bigmac.torch as bt

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
SPEC = "tests/specs/exec-small.json"
STEPS = 3
M = 4  # the spec's microbatches per replica
tmp = tempfile.mkdtemp()


def losses(path):
    return [json.loads(l)["loss"] for l in open(path)]


def close(a, b):
    return len(a) == len(b) == STEPS and all(abs(x - y) <= 1e-4 * max(abs(x), abs(y)) for x, y in zip(a, b))


def params(path):
    return np.fromfile(path, "<f4")


def same_params(a, b):
    return a.size == b.size and a.size > 0 and np.abs(a - b).max() <= 1e-5


# the references: the C trainer and the torch twins on D*M microbatches
ref = {}
for D in (1, 2):
    cl, cb = os.path.join(tmp, "c%d.jsonl" % D), os.path.join(tmp, "c%d.bin" % D)
    subprocess.run([BIGMAC, "train", SPEC, "--reference", "--dp", str(D), "--steps", str(STEPS), "--log", cl,
                    "--dump-params", cb], check=True, capture_output=True)
    tl = bt.reference(SPEC, steps=STEPS, dp=D)
    check("torch_reference_dp%d_vs_c" % D, close(losses(cl), tl), "%s vs %s" % (losses(cl), tl))
    ref[D] = (losses(cl), params(cb), tl)


def run(rank, configs):
    out = []
    for P, D, pol, bb in configs:
        tag = "p%dd%d_%s_%s" % (P, D, pol, bb)
        log, dump = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + ".bin")
        seen = []
        base = bt.twins.dataset(SPEC)

        def data(step, mb):
            seen.append((step, mb))
            return base(step, mb)
        bt.train(SPEC, data=data, steps=STEPS, log=log, dump=dump, pp=P, dp=D, vpp=2 if bb == "interleaved" else 1,
                 policy=pol, backbone=bb, trace=os.path.join(tmp, tag + ".trace.json"))
        out.append((tag, log, dump, sorted(set(seen))))
    # a layout the world cannot run: every rank refuses it before any collective
    try:
        bt.train(SPEC, steps=1, pp=3, dp=2)
        bad = None
    except bigmac.Error as e:
        bad = str(e)
    return out, bad


RUNS = {4: [(2, 2, "bigmac", "1f1b"), (2, 2, "optimus", "interleaved")],
        2: [(1, 2, "bigmac", "1f1b"), (2, 1, "unified", "1f1b")]}
for world, configs in RUNS.items():
    res = bt.spawn(run, world, (configs,), timeout=200)
    for (P, D, pol, bb), (tag, log, dump, _) in zip(configs, res[0][0]):
        c_loss, c_par, t_loss = ref[D]
        e = losses(log)
        check("torch_dp_%s_vs_torch_reference" % tag, close(e, t_loss), "%s vs %s" % (e, t_loss))
        check("torch_dp_%s_vs_c_reference" % tag, close(e, c_loss) and same_params(params(dump), c_par),
              "%s vs %s, params %s" % (e, c_loss, np.abs(params(dump) - c_par).max()
                                       if params(dump).size == c_par.size else "size"))
        first = json.loads(open(log).readline())
        ok = len(first["ranks"]) == P * D and (D == 1 or (first.get("layout") == {"pp": P, "dp": D} and all(
            (r["pp"], r["dp"]) == (r["rank"] // D, r["rank"] % D) for r in first["ranks"])))
        check("torch_dp_%s_log_layout" % tag, ok, json.dumps(first)[:300])
        # replica d's ranks load global microbatches d*M .. d*M + M-1 of every step
        for g in range(world):
            d = g % D
            want = sorted((s, d * M + m) for s in range(STEPS) for m in range(M))
            got = [x for x in res[g][0][configs.index((P, D, pol, bb))][3]]
            if got != want:
                break
        check("torch_dp_%s_global_microbatches" % tag, got == want, "rank %d: %s" % (g, got[:8]))
    check("torch_dp_bad_layout_world%d" % world, all(r[1] and "the layout pp 3 \u00d7 dp 2 needs 6 ranks but %d run it"
                                                     % world in r[1] for r in res), str(res[0][1]))

# checkpoint and resume with D = 2: replica 0's ranks write one file per pipeline rank, every
# replica loads it; the resumed losses are the uninterrupted run's
ck = os.path.join(tmp, "ck")


def run_ckpt(rank):
    bt.train(SPEC, steps=2, pp=2, dp=2, checkpoint=ck)
    files = sorted(os.listdir(os.path.join(ck, "step-00000002")))
    r = bt.train(SPEC, steps=STEPS, pp=2, dp=2, resume=ck)
    return list(r), files


res = bt.spawn(run_ckpt, 4, timeout=200)
full = losses(os.path.join(tmp, "p2d2_bigmac_1f1b.jsonl"))
check("torch_dp_checkpoint_resume", res[0][1] == ["COMPLETE", "rank-0.pt", "rank-1.pt"] and
      close(full[:2] + res[0][0], full), "%s vs %s, %s" % (res[0][0], full, res[0][1]))

# the C executor itself over 4 ranks (pp 2 x dp 2) on the same twins
if shutil.which("mpirun"):
    cl, cb = os.path.join(tmp, "mpi.jsonl"), os.path.join(tmp, "mpi.bin")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(["timeout", "90", "mpirun", "--oversubscribe", "-np", "4", BIGMAC, "train", SPEC, "--pp", "2",
                        "--dp", "2", "--steps", str(STEPS), "--quiet", "--log", cl, "--dump-params", cb],
                       capture_output=True, text=True, env=env)
    tag = "p2d2_bigmac_1f1b"
    e = losses(os.path.join(tmp, tag + ".jsonl"))
    check("torch_dp_p2d2_vs_c_executor_mpirun", r.returncode == 0 and close(e, losses(cl))
          and same_params(params(os.path.join(tmp, tag + ".bin")), params(cb)), r.stderr[-300:])
else:
    print("SKIP torch_dp_p2d2_vs_c_executor_mpirun: no mpirun")

# the command line: --dp, and bad layouts refused with one line before any process starts
env = dict(os.environ)
cli = [sys.executable, "-m", "bigmac.torch", "train", SPEC]
lg = os.path.join(tmp, "cli.jsonl")
r = subprocess.run(cli + ["--nproc", "2", "--dp", "2", "--steps", str(STEPS), "--log", lg], capture_output=True,
                   text=True, env=env, timeout=200)
check("torch_dp_cli_nproc2_dp2", r.returncode == 0 and "layout: pp 1 \u00d7 dp 2, rank = p*2 + d" in r.stdout
      and close(losses(lg), ref[2][2]), r.stderr[-300:])
for tag, args, want in (("not_multiple", ["--nproc", "3", "--dp", "2"], "--nproc 3 cannot hold 2 data-parallel"),
                        ("pp_times_dp", ["--nproc", "4", "--dp", "2", "--pp", "3"], "the layout pp 3 \u00d7 dp 2 needs 6"),
                        ("dp_zero", ["--nproc", "2", "--dp", "0"], "--dp: expected a positive integer")):
    r = subprocess.run(cli + args, capture_output=True, text=True, env=env, timeout=60)
    lines = [l for l in r.stderr.splitlines() if l.startswith("bigmac: error:")]
    check("torch_dp_cli_refuses_%s" % tag, r.returncode in (1, 2) and len(lines) == 1 and want in lines[0], r.stderr)
raises("torch_dp_zero_refused", lambda: bt.train(SPEC, dp=0), bigmac.Error, ("dp: expected a positive integer",))
raises("torch_reference_dp_zero_refused", lambda: bt.reference(SPEC, dp=0), bigmac.Error, ("dp: expected",))
done()
