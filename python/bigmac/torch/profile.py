"""bigmac.torch.profile: measure a torch model's modules on this machine and return the spec with
those costs, so `bigmac simulate` (or bigmac.simulate) predicts the torch run.

For each of `repeats` microbatches (data(0, 0), data(0, 1), ...) every module runs forward and
backward on its own autograd graph (tensors between modules are detached leaves), so each
module's time is its own:
  fwd_ms, bwd_ms  median wall time of its forward / its backward
  act_mib         median bytes its forward saves for backward (saved-tensor hooks, parameters
                  excluded), as the executor counts them
  state_mib       parameters + gradients + AdamW's two moments: 4 x parameter bytes (the whole
                  module; the planner splits the backbone's by layers)
  out_mib         median bytes of its output (what travels to the next module)
The backbone is built whole (layers 0..L).
"""
import copy
import statistics
import time

import torch

import bigmac
from bigmac.torch.executor import _Acts, split_result

MIB = 1048576.0


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def profile(spec, build, data, repeats=5, warmup=1, device="cpu"):
    """Measure every module of spec (built by build(name, layer_begin, layer_end), fed by
    data(step, mb)) and return a new bigmac.Spec whose modules carry the measured "cost"."""
    spec = bigmac.load_spec(spec)
    dev = torch.device(device)
    mods = []
    for m in spec.modules:
        L = m.layers if m.role == "backbone" else 0
        mod = build(m.name, 0, L)
        if not isinstance(mod, torch.nn.Module):
            raise bigmac.Error("profile: module \"%s\": the factory returned %s, not a torch.nn.Module"
                               % (m.name, type(mod).__name__))
        mods.append(mod.to(dev))
    ptrs = {p.data_ptr() for md in mods for p in md.parameters()}
    n = len(spec.modules)
    fwd, bwd, act, out = ([[] for _ in range(n)] for _ in range(4))
    enc = [i for i, m in enumerate(spec.modules) if m.role == "encoder"]
    gens = [i for i, m in enumerate(spec.modules) if m.role == "generator"]
    bb = spec.backbone_module
    M = spec.microbatches or 1

    def fw(i, x, b):
        acts = _Acts(ptrs)
        _sync(dev)
        t0 = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(acts.pack, acts.unpack):
            o, loss = split_result(mods[i](x, b), spec.modules[i].name)
        _sync(dev)
        return o, loss, (time.perf_counter() - t0) * 1e3, acts.bytes

    def bw(tensors, grads):
        tensors, grads = [t for t, g in zip(tensors, grads) if t is not None and t.requires_grad], \
                         [g for t, g in zip(tensors, grads) if t is not None and t.requires_grad]
        _sync(dev)
        t0 = time.perf_counter()
        if tensors:
            torch.autograd.backward(tensors, grads)
        _sync(dev)
        return (time.perf_counter() - t0) * 1e3

    for r in range(warmup + repeats):
        b = data(0, r % M)
        keep = r >= warmup
        rec = {}
        eouts = []
        for i in enc:
            o, _, ms, nb = fw(i, None, b)
            rec[i] = (ms, nb, o.numel() * o.element_size())
            eouts.append(o)
        leaves = [o.detach().requires_grad_() for o in eouts]
        x = leaves[0] if len(leaves) == 1 else torch.cat(leaves, 0)
        hid, lm, ms, nb = fw(bb, x, b)
        rec[bb] = (ms, nb, hid.numel() * hid.element_size() if hid is not None else 0)
        hleaf = hid.detach().requires_grad_() if hid is not None else None
        gl = []
        for g in gens:
            _, l, ms, nb = fw(g, hleaf, b)
            rec[g] = (ms, nb, 0)
            gl.append(l)
        bt = {}
        for g, l in zip(gens, gl):
            bt[g] = bw([l * (1.0 / M)], [None])
        dh = hleaf.grad if hleaf is not None and hleaf.grad is not None else None
        bt[bb] = bw([lm * (1.0 / M) if lm is not None else None, hid], [None, dh])
        for k, i in enumerate(enc):
            g = leaves[k].grad
            bt[i] = bw([eouts[k]], [g if g is not None else torch.zeros_like(eouts[k])])
        for md in mods:
            md.zero_grad(set_to_none=True)
        if keep:
            for i in range(n):
                fwd[i].append(rec[i][0])
                act[i].append(rec[i][1])
                out[i].append(rec[i][2])
                bwd[i].append(bt[i])
    d = copy.deepcopy(spec.to_dict())
    for i, m in enumerate(d["modules"]):
        pbytes = sum(p.numel() * p.element_size() for p in mods[i].parameters())
        m["cost"] = {"fwd_ms": round(statistics.median(fwd[i]), 6), "bwd_ms": round(statistics.median(bwd[i]), 6),
                     "act_mib": round(statistics.median(act[i]) / MIB, 9), "state_mib": round(4 * pbytes / MIB, 9),
                     "out_mib": round(statistics.median(out[i]) / MIB, 9)}
    return bigmac.load_spec(d, name=(spec.path or spec.name) + " (profiled)")
