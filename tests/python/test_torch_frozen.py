"""Frozen modules in the torch executor (issue 30): "trainable": false gives a module no gradient,
no optimizer step and no all-reduce; with nothing upstream training it has no backward at all
(its forward runs under no_grad and keeps nothing). The ViT frozen, and the backbone frozen with
the ViT training through it: the torch executor (P = 2, 1F1B and the split zb-h1) and
bigmac.torch.reference equal the C reference trainer with the same modules frozen (losses 1e-4
relative, parameters 1e-5), and a frozen module's parameters are its initial ones, bit for bit."""
import json
import os
import subprocess
import tempfile

import numpy as np

from check import check, done
import bigmac
import bigmac.torch as bt

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
BASE = "examples/tiny-mllm.json"
STEPS = 3
tmp = tempfile.mkdtemp()


def losses(path):
    return [json.loads(l)["loss"] for l in open(path)]


def same_losses(a, b):
    return len(a) == len(b) == STEPS and all(abs(x - y) <= 1e-4 * max(abs(x), abs(y)) for x, y in zip(a, b))


def variant(name, frozen):
    sd = json.load(open(BASE))
    for m in sd["modules"]:
        if m["name"] in frozen:
            m["trainable"] = False
    path = os.path.join(tmp, name + ".json")
    json.dump(sd, open(path, "w"))
    return path


CASES = {"vit": variant("frozen-vit", {"vit"}), "gpt": variant("frozen-gpt", {"gpt"})}
ref = {}
for key, spec in CASES.items():
    log, dump = os.path.join(tmp, key + "-c.jsonl"), os.path.join(tmp, key + "-c.bin")
    subprocess.run([BIGMAC, "train", spec, "--reference", "--steps", str(STEPS), "--log", log, "--dump-params", dump],
                   check=True, capture_output=True)
    ref[key] = (losses(log), np.fromfile(dump, "<f4"))
    # the torch reference freezes the same modules
    tl, td = os.path.join(tmp, key + "-t.jsonl"), os.path.join(tmp, key + "-t.bin")
    t_loss = bt.reference(spec, steps=STEPS, log=tl, dump=td, progress=open(os.devnull, "w"))
    check("torch_frozen_reference_%s" % key, same_losses(ref[key][0], list(t_loss)), "%s vs %s" % (ref[key][0], list(t_loss)))
    tp = np.fromfile(td, "<f4")
    check("torch_frozen_reference_params_%s" % key, tp.size == ref[key][1].size and np.abs(tp - ref[key][1]).max() <= 1e-5)

# the ViT's initial parameters: the first part of every dump (spec module order)
spec0 = bigmac.load_spec(CASES["vit"])
vit0 = np.asarray(bigmac.module_init(spec0, "vit"), dtype=np.float32)

CONFIGS = [(key, bb) for key in CASES for bb in ("1f1b", "zb-h1")]


def run(rank):
    out = []
    for key, bb in CONFIGS:
        tag = "%s_%s" % (key, bb)
        log, dump = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + ".bin")
        bt.train(CASES[key], steps=STEPS, log=log, dump=dump, pp=2, vpp=1, backbone=bb, policy="bigmac",
                 progress=open(os.devnull, "w"))
        out.append((key, tag, log, dump))
    return out


for key, tag, log, dump in bt.spawn(run, 2, (), timeout=200)[0]:
    e_loss, e_par = losses(log), np.fromfile(dump, "<f4")
    c_loss, c_par = ref[key]
    check("torch_frozen_losses_%s" % tag, same_losses(c_loss, e_loss), "%s vs %s" % (c_loss, e_loss))
    check("torch_frozen_params_%s" % tag, e_par.size == c_par.size and np.abs(e_par - c_par).max() <= 1e-5,
          "max diff %s" % (np.abs(e_par - c_par).max() if e_par.size == c_par.size else "size"))
    if key == "vit":  # the frozen ViT trained not at all; the rest did
        check("torch_frozen_vit_unchanged_%s" % tag, np.array_equal(e_par[:vit0.size], vit0))
        check("torch_frozen_rest_trained_%s" % tag, not np.array_equal(e_par, c_par * 0) and
              np.abs(e_par[vit0.size:]).sum() > 0)
    else:  # the ViT trains through the frozen backbone: its parameters moved
        check("torch_frozen_vit_trains_through_backbone_%s" % tag, not np.array_equal(e_par[:vit0.size], vit0))
done()
