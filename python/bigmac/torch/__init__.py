"""bigmac.torch: train torch modules with bigmac's plans (docs/python.md).

    import bigmac, bigmac.torch as bt
    spec = bigmac.load_spec("my-mllm.json")        # modules declare produces/consumes only
    def build(name, layer_begin, layer_end):      # backbone chunks get their layer range
        return {"vit": MyViT, "llm": lambda: MyLLM(layer_begin, layer_end), ...}[name]()
    def data(step, mb): return my_batch(step, mb) # the same on every rank
    bt.train(spec, build, data, pp=2, steps=10, log="run.jsonl", trace="trace.json")

Run one process per pipeline rank under `python3 -m torch.distributed.run --nproc_per_node P
script.py` (or bigmac.torch.spawn in tests). A module is called module(x, batch) and returns
its output, or (output or None, loss); x is None for encoders, the encoders' outputs
concatenated along dim 0 for the backbone's first chunk.
"""
import math
import os
import socket
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import bigmac
from bigmac.torch.executor import Executor, log_line, split_result, step_loss, _Acts
from bigmac.torch import twins

__all__ = ["Executor", "train", "reference", "spawn", "init_from_env", "finish", "profile", "twins", "dump_params"]


# ---------------------------------------------------------------- processes

def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _spawn_entry(rank, nproc, port, fn, args, q, backend):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(nproc))
    try:
        dist.init_process_group(backend, rank=rank, world_size=nproc)
        res = fn(rank, *args)
        q.put((rank, True, res))
    except BaseException as e:  # report to the parent, which raises
        ours = isinstance(e, bigmac.Error)
        q.put((rank, False, (ours, str(e) if ours else traceback.format_exc())))
        q.close()
        q.join_thread()  # the message reaches the parent before this process ends
        os._exit(1)
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def spawn(fn, nproc, args=(), backend="gloo", timeout=300):
    """Run fn(rank, *args) in nproc processes of one torch.distributed group (gloo on loopback
    by default). Returns the ranks' return values (rank order); raises bigmac.Error with the
    first failing rank's message. The processes are forked (fn need not be importable)."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_spawn_entry, args=(r, nproc, port, fn, args, q, backend)) for r in range(nproc)]
    for p in procs:
        p.start()
    res, errs = {}, {}
    deadline = time.time() + timeout
    try:
        while len(res) + len(errs) < nproc:
            left = deadline - time.time()
            if left <= 0:
                raise bigmac.Error("spawn: ranks %s did not finish within %d s" %
                                   (sorted(set(range(nproc)) - set(res) - set(errs)), timeout))
            try:
                r, ok, v = q.get(timeout=min(left, 1.0))
            except Exception:
                if errs and all(not p.is_alive() or i in res or i in errs for i, p in enumerate(procs)):
                    break
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in res and i not in errs]
                if dead and any(procs[i].exitcode not in (0, None) for i in dead):
                    time.sleep(0.5)
                    if q.empty():
                        for i in dead:
                            errs[i] = (False, "rank %d exited with status %s" % (i, procs[i].exitcode))
                continue
            (res if ok else errs)[r] = v
            if errs:  # one rank failed: its peers may wait forever on it
                time.sleep(0.5)
                while not q.empty():
                    r, ok, v = q.get()
                    (res if ok else errs)[r] = v
                break
    finally:
        for p in procs:
            if p.is_alive() and errs:
                p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    if errs:  # bigmac's own message first (a peer's broken connection is its consequence)
        ours = [v for v in errs.values() if v[0]]
        raise bigmac.Error((ours or list(errs.values()))[0][1])
    return [res[r] for r in range(nproc)]


def init_from_env(backend=None):
    """Under torch.distributed.run (RANK, WORLD_SIZE set): initialise the default group (gloo on
    CPU, nccl when CUDA is available) and return (rank, world size); (0, 1) otherwise."""
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"))
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def finish():
    """End a run begun with init_from_env: destroy the default group (every rank calls it, after
    its last collective). Without it a gloo group's threads can outlive the interpreter at exit and
    the process aborts ("terminate called without an active exception")."""
    if dist.is_initialized():
        dist.destroy_process_group()


# ---------------------------------------------------------------- training

def _default_parts(spec, build, data, device):
    if build is None:
        build = twins.factory(spec, device)
    if data is None:
        data = twins.dataset(spec, device)
    return build, data


def dump_params(path, spec, flats):
    """Write the final parameters as `bigmac train --dump-params` does: raw float32, spec module
    order, the backbone's chunks in global chunk order. flats: [(module, chunk, array)]."""
    with open(path, "wb") as f:
        for i, m in enumerate(spec.modules):
            parts = sorted((c, v) for (mod, c, v) in flats if mod == i)
            for _, v in parts:
                f.write(np.asarray(v, dtype="<f4").tobytes())


def train(spec, build=None, data=None, table=None, steps=None, log=None, trace=None, dump=None, device="cpu",
          progress=None, group=None, verify=True, **plan_args):
    """Train spec pipelined on this process's rank of the torch.distributed group (every rank
    calls it). build/data default to the built-in models' torch twins and the C dataset.
    table: a bigmac.Table (else planned from spec with plan_args; pp defaults to the group's
    size). log: JSONL path (rank 0); trace: Chrome trace of the last step (rank 0); dump: final
    parameters (rank 0). verify=False skips bigmac.verify of the table (the verifier refuses W
    ops until table version 2; the executor runs them). Returns rank 0's per-step losses (other
    ranks: [])."""
    spec = bigmac.load_spec(spec)
    rank = dist.get_rank(group) if dist.is_initialized() else 0
    world = dist.get_world_size(group) if dist.is_initialized() else 1
    if table is None:
        plan_args.setdefault("pp", world)
        table = bigmac.plan(spec, **plan_args)
    elif plan_args:
        raise bigmac.Error("train: plan arguments (%s) given with a table" % ", ".join(plan_args))
    if verify:
        bigmac.verify(table)
    build, data = _default_parts(spec, build, data, device)
    x = Executor(spec, table, build, data, rank, device=device, group=group)
    steps = steps or spec.steps
    losses = []
    logf = open(log, "w") if (log and rank == 0) else None
    try:
        if progress and rank == 0:
            print("%s: %d ranks, %s backbone, policy %s, %d microbatches/step, %d steps (torch)" % (
                spec.name, table.pp, table.backbone, table.policy, table.microbatches, steps), file=progress)
        for s in range(steps):
            t0 = time.time()
            x.step(s)
            ms = (time.time() - t0) * 1e3
            rec = x.record()
            recs = [None] * world
            if world > 1:
                dist.all_gather_object(recs, rec, group=group)
            else:
                recs = [rec]
            if rank == 0:
                loss, lm, gen = step_loss(recs, table.microbatches)
                if not math.isfinite(loss):
                    raise bigmac.Error("step %d: loss is not finite" % (s + 1))
                losses.append(loss)
                if logf:
                    logf.write(log_line(s + 1, loss, lm, gen, ms, [r["peak"] for r in recs]) + "\n")
                    logf.flush()
                if progress:
                    print("step %4d/%d  loss %.4f  (lm %.4f  gen %.4f)  %.1f ms" % (s + 1, steps, loss, lm, gen, ms),
                          file=progress)
                if trace and s == steps - 1:
                    table.write_trace([r["times"] for r in recs], [r["mem"] for r in recs], trace,
                                      msg_bytes=[r["bytes"] for r in recs])
        if dump:
            flats = x.flat_params()
            allf = [None] * world
            if world > 1:
                dist.all_gather_object(allf, flats, group=group)
            else:
                allf = [flats]
            if rank == 0:
                merged = [f for f in allf[0] if f[1] < 0] + [f for fl in allf for f in fl if f[1] >= 0]
                dump_params(dump, spec, merged)
    finally:
        if logf:
            logf.close()
    return losses


def reference(spec, build=None, data=None, steps=None, log=None, dump=None, device="cpu", progress=None):
    """One process, no pipeline (as `bigmac train --reference`): per microbatch every encoder,
    the whole backbone, every generator, backward of (LM + generator losses) / M; then the
    optimizer. Same log format. Returns the per-step losses."""
    spec = bigmac.load_spec(spec)
    build, data = _default_parts(spec, build, data, device)
    M = spec.microbatches or 1
    mods = []
    for m in spec.modules:
        L = m.layers if m.role == "backbone" else 0
        mod = build(m.name, 0, L)
        if not isinstance(mod, torch.nn.Module):
            raise bigmac.Error("module \"%s\": the factory returned %s, not a torch.nn.Module" % (m.name, type(mod).__name__))
        mods.append(mod.to(device))
    params = [p for md in mods for p in md.parameters()]
    ptrs = {p.data_ptr() for p in params}
    tr = spec.train
    opt = torch.optim.AdamW(params, lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"],
                            weight_decay=tr["weight_decay"])
    enc = [i for i, m in enumerate(spec.modules) if m.role == "encoder"]
    gens = [i for i, m in enumerate(spec.modules) if m.role == "generator"]
    bb = spec.backbone_module
    steps = steps or spec.steps
    losses = []
    logf = open(log, "w") if log else None

    def run(i, x, b, peak):
        acts = _Acts(ptrs)
        with torch.autograd.graph.saved_tensors_hooks(acts.pack, acts.unpack):
            out, loss = split_result(mods[i](x, b), spec.modules[i].name)
        return out, loss, acts.bytes

    try:
        for s in range(steps):
            t0 = time.time()
            opt.zero_grad(set_to_none=False)
            lm_sum = gen_sum = 0.0
            peak = [0, 0, 0]
            for mb in range(M):
                b = data(s, mb)
                outs, eb = [], 0
                for i in enc:
                    o, _, nb = run(i, None, b, peak)
                    outs.append(o)
                    eb += nb
                x = outs[0] if len(outs) == 1 else torch.cat(outs, 0)
                hid, lm, nb = run(bb, x, b, peak)
                peak[0], peak[1] = max(peak[0], eb), max(peak[1], nb)
                total = lm * (1.0 / M) if lm is not None else None
                gl = np.float32(0)
                for g in gens:
                    inp = hid if spec.modules[g].grad_to_backbone else hid.detach()
                    _, l, nb = run(g, inp, b, peak)
                    peak[2] = max(peak[2], nb)
                    total = l * (1.0 / M) if total is None else total + l * (1.0 / M)
                    gl = np.float32(gl + np.float32(float(l)))
                if total is not None:
                    total.backward()
                lm_sum += float(np.float32(np.float32(float(lm) if lm is not None else 0.0) / np.float32(M)))
                gen_sum += float(np.float32(gl / np.float32(M)))
            opt.step()
            ms = (time.time() - t0) * 1e3
            loss = lm_sum + gen_sum
            losses.append(loss)
            if logf:
                logf.write(log_line(s + 1, loss, lm_sum, gen_sum, ms, [peak]) + "\n")
                logf.flush()
            if progress:
                print("step %4d/%d  loss %.4f  (lm %.4f  gen %.4f)  %.1f ms (torch reference)" % (
                    s + 1, steps, loss, lm_sum, gen_sum, ms), file=progress)
        if dump:
            flats = []
            for i, md in enumerate(mods):
                v = md.flat() if hasattr(md, "flat") else torch.cat([p.detach().reshape(-1).cpu() for p in md.parameters()])
                flats.append((i, 0 if i == bb else -1, v.numpy()))
            dump_params(dump, spec, flats)
    finally:
        if logf:
            logf.close()
    return losses



from bigmac.torch.profile import profile  # noqa: E402
