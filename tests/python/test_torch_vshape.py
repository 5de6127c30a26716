"""The torch executor over V-shaped backbones (issue 25): zb-v and dualpipe-v put the first and
the last backbone chunk on rank 0 (the table's chunk -> rank map); every policy at P = 2 and 4
trains to the C reference trainer's losses (1e-4 relative) and parameters (1e-5 absolute), and
builds exactly the chunks the table places on each rank."""
import json
import os
import subprocess
import tempfile

import numpy as np

from check import check, done
import bigmac
import bigmac.torch as bt

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
SPEC = "examples/tiny-mllm.json"  # 8 backbone layers: 2 per chunk at P = 2 (V = 2), 1 at P = 4
STEPS = 2
tmp = tempfile.mkdtemp()


def losses(path):
    return [json.loads(l)["loss"] for l in open(path)]


c_log, c_bin = os.path.join(tmp, "c.jsonl"), os.path.join(tmp, "c.bin")
subprocess.run([BIGMAC, "train", SPEC, "--reference", "--steps", str(STEPS), "--log", c_log, "--dump-params", c_bin],
               check=True, capture_output=True)
c_loss, c_par = losses(c_log), np.fromfile(c_bin, "<f4")

# the map the executor follows: rank 0 holds chunks 0 and 2P-1
for bb in ("zb-v", "dualpipe-v"):
    t = bigmac.plan(SPEC, pp=4, vpp=2, backbone=bb, policy="bigmac")
    check("torch_vshape_chunk_ranks_%s" % bb, t.chunk_ranks() == [0, 1, 2, 3, 3, 2, 1, 0], t.chunk_ranks())

CONFIGS = [(pol, bb) for pol in ("bigmac", "optimus", "unified") for bb in ("zb-v", "dualpipe-v")]


def run(rank, P):
    import torch.distributed as dist
    out = []
    for pol, bb in CONFIGS:
        tag = "%s_%s_p%d" % (pol, bb, P)
        log, dump = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + ".bin")
        bt.train(SPEC, steps=STEPS, log=log, dump=dump, pp=P, vpp=2, policy=pol, backbone=bb)
        out.append((tag, log, dump))
        dist.barrier()
    return out


for P in (2, 4):
    for tag, log, dump in bt.spawn(run, P, (P,), timeout=200)[0]:
        e_loss, e_par = losses(log), np.fromfile(dump, "<f4")
        check("torch_vshape_losses_%s" % tag, len(e_loss) == STEPS and
              all(abs(a - b) <= 1e-4 * max(abs(a), abs(b)) for a, b in zip(c_loss, e_loss)), "%s vs %s" % (c_loss, e_loss))
        check("torch_vshape_params_%s" % tag, e_par.size == c_par.size and np.abs(e_par - c_par).max() <= 1e-5,
              "max diff %s" % (np.abs(e_par - c_par).max() if e_par.size == c_par.size else "size"))
done()
