"""bigmac.torch: train torch modules with bigmac's plans (docs/python.md).

    import bigmac, bigmac.torch as bt
    spec = bigmac.load_spec("my-mllm.json")        # modules declare produces/consumes only
    def build(name, layer_begin, layer_end):      # backbone chunks get their layer range
        return {"vit": MyViT, "llm": lambda: MyLLM(layer_begin, layer_end), ...}[name]()
    def data(step, mb): return my_batch(step, mb) # the same on every rank
    r = bt.train(spec, build, data, pp=2, steps=10, log="run.jsonl", trace="trace.json",
                 checkpoint="ck", checkpoint_every=5, gather=True)
    model_llm.load_state_dict(r.state_dicts["llm"], strict=True)   # rank 0: every module whole

Run one process per pipeline rank under `python3 -m torch.distributed.run --nproc_per_node P
script.py` (or bigmac.torch.spawn in tests); with dp=D, P*D processes (global rank p*D + d). A module is called module(x, batch) and returns
its output, or (output or None, loss); x is None for encoders, the encoders' outputs
concatenated along dim 0 for the backbone's first chunk.
"""
import datetime
import math
import os
import pickle
import queue
import signal
import socket
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import bigmac
from bigmac.torch import executor as _ex
from bigmac.torch.executor import (Executor, log_line, split_result, step_loss, _Acts, heartbeat, check_timeout,
                                   where_raised, DEFAULT_TIMEOUT)
from bigmac.torch import twins

__all__ = ["Executor", "Result", "train", "reference", "from_dataset", "spawn", "init_from_env", "finish", "profile", "twins", "dump_params",
           "heartbeat", "check_output", "DEFAULT_TIMEOUT"]


# ---------------------------------------------------------------- processes

def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _spawn_entry(rank, nproc, port, fn, args, q, backend, beat, timeout):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(nproc))
    _ex._beat = (beat, rank)
    try:
        heartbeat()
        dist.init_process_group(backend, rank=rank, world_size=nproc, timeout=datetime.timedelta(seconds=timeout))
        heartbeat()
        res = fn(rank, *args)
        # plain pickle: tensors travel as bytes (torch's queue would share them through file
        # descriptors, which die with this process)
        q.put((rank, True, pickle.dumps(res)))
    except BaseException as e:  # report to the parent, which raises
        ours = isinstance(e, bigmac.Error)
        info = {"kind": getattr(e, "kind", "error"), "peer": getattr(e, "peer", None),
                "traceback": traceback.format_exc()}
        if ours:
            msg = str(e)
        else:  # one line naming the rank (the traceback stays in the Error's .tracebacks)
            msg = "rank %d: %s: %s%s" % (rank, type(e).__name__, str(e).strip() or "(no message)", where_raised(e))
        q.put((rank, False, (ours, msg, info)))
        q.close()
        q.join_thread()  # the message reaches the parent before this process ends
        os._exit(1)
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def _proc_state(pid):
    """'stopped' when the process is stopped (SIGSTOP, a debugger), else None (Linux /proc)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read().rsplit(")", 1)[1].split()[0]
        return "stopped" if st in ("T", "t") else None
    except (OSError, IndexError):
        return None


def _ended(code):
    if code is not None and code < 0:
        try:
            return "was killed by %s" % signal.Signals(-code).name
        except ValueError:
            return "was killed by signal %d" % -code
    return "exited with status %s without a message" % code


def _last_beat(beat, r, now):
    t, step, op = beat[3 * r], int(beat[3 * r + 1]), int(beat[3 * r + 2])
    where = ("step %d, op #%d" % (step + 1, op)) if step >= 0 and op >= 0 else \
        ("step %d" % (step + 1)) if step >= 0 else "start-up"
    return "last progress %.0f s ago, at %s" % (now - t, where)


def _blame(errs, res, procs, beat, nproc, timeout, stalled):
    """One message for a failed spawn: the cause first (a rank's own error, a rank that died, or
    the rank the others timed out waiting for), then the message of the rank that saw it."""
    now = time.time()
    own = [r for r in sorted(errs) if errs[r][2].get("kind") == "error"]
    if own:  # a rank's own failure; bigmac's message before a foreign exception
        ours = [r for r in own if errs[r][0]] or own
        e = errs[ours[0]]
        return e[1], [v[2].get("traceback") for v in errs.values()]
    tbs = [v[2].get("traceback") for v in errs.values()]
    dead = [r for r in sorted(errs) if errs[r][2].get("kind") == "died"]
    waits = [r for r in sorted(errs) if errs[r][2].get("kind") in ("timeout", "broken")]
    silent = [r for r in range(nproc) if r not in errs and r not in res]

    def follow(r):  # the end of the chain of ranks waiting for each other
        seen = set()
        while r in errs and errs[r][2].get("peer") is not None and r not in seen:
            seen.add(r)
            r = errs[r][2]["peer"]
        return r
    if dead:
        culprits = dead
    else:
        ends = {follow(r) for r in waits if errs[r][2].get("peer") is not None}
        culprits = sorted(c for c in ends if c in silent) or sorted(stalled or silent,
                                                                     key=lambda r: beat[3 * r])
    lines = []
    for c in culprits:
        if c in errs:
            lines.append(errs[c][1])
            continue
        pid = procs[c].pid
        state = "is stopped (SIGSTOP or a debugger)" if _proc_state(pid) == "stopped" else \
            "made no progress for %.0f s (stopped, hung, or slower than the timeout)" % (now - beat[3 * c])
        lines.append("rank %d (pid %d) %s: %s" % (c, pid, state, _last_beat(beat, c, now)))
    if not culprits and not waits:
        return "spawn: the run failed without a message", tbs
    # the message of a rank that waited for the culprit (or any waiting rank)
    w = [r for r in waits if errs[r][2].get("peer") in culprits] or waits
    if w:
        lines.append(errs[w[0]][1])
    elif stalled:
        lines.append("spawn: no rank made progress for %g s (timeout)" % timeout)
    return "\n".join(lines), tbs


def spawn(fn, nproc, args=(), backend="gloo", timeout=DEFAULT_TIMEOUT):
    """Run fn(rank, *args) in nproc processes of one torch.distributed group (gloo on loopback
    by default). Returns the ranks' return values (rank order); raises bigmac.Error with one
    message naming the cause: a rank's own error, a rank that died (its signal), or the rank the
    others timed out waiting for (stopped, hung). The processes are forked (fn need not be
    importable).

    timeout (seconds): the process group's timeout, and how long a rank may go without progress
    (bigmac.torch.train reports every op; other functions call bigmac.torch.heartbeat()) before
    the run is ended. A run that keeps progressing is never ended, however long it takes."""
    timeout = check_timeout(timeout)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    beat = ctx.Array("d", 3 * nproc, lock=False)
    t0 = time.time()
    for r in range(nproc):
        beat[3 * r], beat[3 * r + 1], beat[3 * r + 2] = t0, -1, -1
    port = _free_port()
    procs = [ctx.Process(target=_spawn_entry, args=(r, nproc, port, fn, args, q, backend, beat, timeout))
             for r in range(nproc)]
    for p in procs:
        p.start()
    res, errs = {}, {}
    grace = min(5.0, max(1.0, timeout / 2))  # for the ranks' own messages, which name ops and peers
    first_err = None
    gone = {}  # rank -> when its process was seen ended without a message
    stalled = []
    try:
        while len(res) + len(errs) < nproc:
            now = time.time()
            if first_err is not None and now - first_err > min(grace, 2.0):
                break
            try:
                r, ok, v = q.get(timeout=0.2)
            except queue.Empty:
                pass
            else:
                (res if ok else errs)[r] = v
                if not ok and first_err is None:
                    first_err = time.time()
                continue
            for i, p in enumerate(procs):
                if i in res or i in errs or p.is_alive():
                    continue
                gone.setdefault(i, now)
                if now - gone[i] > 1.0:  # its message would have arrived by now
                    errs[i] = (True, "rank %d (pid %d) %s: %s" % (i, p.pid, _ended(p.exitcode), _last_beat(beat, i, now)),
                               {"kind": "died" if p.exitcode != 0 else "error"})
                    if first_err is None:
                        first_err = now
            if first_err is None:
                stalled = [i for i in range(nproc) if i not in res and i not in errs
                           and now - beat[3 * i] > timeout + grace]
                if stalled:
                    break
        if errs or stalled:  # while the processes are as they were (a stopped one still stopped)
            msg, tbs = _blame(errs, res, procs, beat, nproc, timeout, stalled)
    finally:
        for p in procs:
            if p.is_alive() and (errs or stalled):
                if _proc_state(p.pid) == "stopped":
                    p.kill()  # SIGTERM waits for a stopped process to continue
                else:
                    p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    if errs or stalled:
        e = bigmac.Error(msg)
        e.tracebacks = [t for t in tbs if t]
        raise e
    return [pickle.loads(res[r]) for r in range(nproc)]


def init_from_env(backend=None, timeout=DEFAULT_TIMEOUT):
    """Under torch.distributed.run (RANK, WORLD_SIZE set): initialise the default group (gloo on
    CPU, nccl when CUDA is available) with timeout (seconds) and return (rank, world size);
    (0, 1) otherwise."""
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"),
                                timeout=datetime.timedelta(seconds=check_timeout(timeout)))
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


def check_output(path, what):
    """Before step 1: path can be written (its directory exists, it is not a directory, the file
    system takes writes). An existing file is opened without truncating it; a new one is created
    and removed again. Raises bigmac.Error naming what (the flag or argument) and the path."""
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(21, "is a directory")
        if os.path.exists(path):
            with open(path, "r+b"):
                pass
        else:
            with open(path, "xb"):
                pass
            os.unlink(path)
    except OSError as e:
        raise bigmac.Error("%s %s: cannot write it: %s (checked before step 1, so no run is lost)"
                           % (what, path, e.strerror or e)) from e


def dump_params(path, spec, flats):
    """Write the final parameters as `bigmac train --dump-params` does: raw float32, spec module
    order, the backbone's chunks in global chunk order. flats: [(module, chunk, array)]."""
    with open(path, "wb") as f:
        for i, m in enumerate(spec.modules):
            parts = sorted((c, v) for (mod, c, v) in flats if mod == i)
            for _, v in parts:
                f.write(np.asarray(v, dtype="<f4").tobytes())


def _check_dp(dp):
    if dp is None:
        return None
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise bigmac.Error("dp: expected a positive integer (data-parallel replicas), got %r" % (dp,))
    return dp


def _layout(spec, table, dp, world, group, plan_args):
    """The data-parallel replicas D (dp=, else the table's, else the spec's parallel.dp) and the
    pipeline size P, checked against the world: P*D ranks, or one clear line why not."""
    D = _check_dp(dp)
    if D is None and table is not None:
        D = table.to_dict().get("dp")
    if D is None:
        D = spec.to_dict().get("parallel", {}).get("dp")
    D = D if isinstance(D, int) and D > 1 else 1
    if D > 1 and group is not None:
        raise bigmac.Error("dp %d: data parallel builds its process groups from the default group; train(group=) "
                           "cannot be combined with dp > 1" % D)
    if table is not None:
        P = table.pp
    else:
        P = plan_args.get("pp")
        if P is None:
            if world % D:
                raise bigmac.Error("%d ranks cannot hold %d data-parallel replicas of one pipeline (not a multiple)"
                                   "\nhint: --nproc %d, or --dp %d" % (world, D, max(1, world // D) * D, world))
            P = world // D
    if dist.is_initialized() and P * D != world:
        if D > 1:
            raise bigmac.Error("the layout pp %d \u00d7 dp %d needs %d ranks but %d run it\nhint: --nproc %d%s" % (
                P, D, P * D, world, P * D, ", or --pp %d" % (world // D) if world % D == 0 and table is None else ""))
        raise bigmac.Error("the table has pp %d but %d ranks run it\nhint: --nproc %d (or plan with --pp %d)"
                           % (P, world, P, world))
    return P, D


def _measured(res, table, recs, spec):
    """res.table, .act_bytes, .act_w_bytes, .peak_act_bytes from one pipeline's records of a step."""
    names = [m.name for m in spec.modules]
    res.table = table
    res.act_bytes, res.act_w_bytes, res.in_bytes = {}, {}, {}
    for r in recs:
        for src, dst in ((r["act_bytes"], res.act_bytes), (r["act_w_bytes"], res.act_w_bytes),
                         (r["in_bytes"], res.in_bytes)):
            for (m, c, mb), v in src.items():
                dst[(names[m], c, mb)] = v
    res.peak_act_bytes = [{role: r["peak"][i] for i, role in enumerate(bigmac.ROLES)} for r in recs]


def _print_peaks(res, step, D, out):
    """The last step's activation peaks per pipeline rank and role: measured, simulated from the
    measured bytes (equal unless the executor and the simulator disagree on the schedule's
    memory), and simulated from the spec's act_mib (what plan and simulate assume)."""
    meas = res.simulate()
    model = bigmac.simulate(res.table)
    print("activation peaks, step %d%s, bytes: measured / simulated from the measured bytes / from the spec's "
          "act_mib" % (step, " (replica 0)" if D > 1 else ""), file=out)
    for r, got in enumerate(res.peak_act_bytes):
        sim = meas["ranks"][r]["peak_act_bytes"]
        spec = model["ranks"][r]["peak_act_gib"]
        print("  rank %d: %s  (%s)" % (r, "  ".join("%s %d / %d / %.0f" % (ro, got[ro], sim[ro], spec[ro] * 2 ** 30)
                                                 for ro in bigmac.ROLES),
                                     "equal" if got == sim else "measured and simulated DIFFER"), file=out)


class Result(list):
    """What train() and reference() return: the per-step losses (a list; train(): rank 0's, the
    other ranks' is empty; on_step gets every step's loss on every rank) with

      .state_dicts  {module name: state dict}: the trained modules under the spec's module names,
                    the backbone's chunks merged into one state dict by layer (the single-process
                    model's own key names, buffers included), loadable with
                    load_state_dict(strict=True) into the modules build(name, 0, layers) makes.
                    Without gather=True each rank holds its own modules (its chunks' layers
                    only); with gather=True rank 0 holds every module whole.
      .state_dicts_error  why .state_dicts is None (a backbone whose chunks cannot be merged:
                    name its layer list with bigmac_layers); gather=True raises it instead
      .grad_norms   the global gradient norm of every step (clip_grad_norm given), else []
      .start_step   the first step this call ran (after resume=, the checkpoint's step)
      .act_bytes    train() only, every rank, the last step of replica 0's pipeline: what each
                    forward kept {(module name, chunk or -1, microbatch): bytes} (its saved
                    tensors, docs/python.md "Measured activation bytes"); .act_w_bytes: what each
                    split backward kept from B to W; .in_bytes: what each recomputed forward
                    kept (its input); .peak_act_bytes: every pipeline rank's measured peak
                    {role: bytes}; .table: the table it ran
      .simulate()   bigmac.simulate(.table, act_bytes=.act_bytes, act_w_bytes=.act_w_bytes,
                    in_bytes=.in_bytes): the simulation of this run's own bytes, whose ranks'
                    "peak_act_bytes" are the peaks the run should measure"""
    state_dicts = None
    state_dicts_error = None
    grad_norms = None
    start_step = 0
    table = None
    act_bytes = None
    act_w_bytes = None
    in_bytes = None
    peak_act_bytes = None

    def simulate(self, **kw):
        if self.table is None or self.act_bytes is None:
            raise bigmac.Error("Result.simulate: no measured run (train() fills .table and .act_bytes after a step)")
        return bigmac.simulate(self.table, act_bytes=self.act_bytes, act_w_bytes=self.act_w_bytes,
                               in_bytes=self.in_bytes if self.in_bytes else None, **kw)


_CKPT_FORMAT = "bigmac-torch-checkpoint"


def _sha(obj):
    import hashlib
    import json as _json
    return hashlib.sha1(_json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def _ckpt_meta(spec, table):
    sd = spec.to_dict()
    sd.pop("doc", None)
    sd.get("train", {}).pop("steps", None)
    td = table.to_dict()
    td.pop("dp", None)
    return {"format": _CKPT_FORMAT, "version": 1, "spec": _sha(sd), "spec_name": spec.name, "pp": table.pp,
            "vpp": table.vpp, "table": _sha(td), "policy": table.policy, "backbone": table.backbone}


def _ckpt_dir(d, step):
    return os.path.join(d, "step-%08d" % step)


def _latest_ckpt(d):
    """(step, directory) of the newest complete checkpoint set in d, or None."""
    best = None
    try:
        names = os.listdir(d)
    except OSError:
        return None
    for n in names:
        if n.startswith("step-") and n[5:].isdigit() and os.path.exists(os.path.join(d, n, "COMPLETE")):
            st = int(n[5:])
            if best is None or st > best[0]:
                best = (st, os.path.join(d, n))
    return best


def _save_ckpt(x, d, step, meta, grank, world):
    """Checkpoint after `step` steps: replica 0's ranks write their pipeline rank's file, every
    rank waits until all are written (a failure anywhere raises on every rank), then rank 0
    marks the set complete (COMPLETE, then the `latest` file) and removes the older sets."""
    import random
    sd = _ckpt_dir(d, step)
    err = None
    heartbeat()
    if x.replica == 0:
        try:
            os.makedirs(sd, exist_ok=True)
            st = x.ckpt_state()
            st.update(meta=meta, step=step, rank=x.rank,
                      rng={"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()})
            path = os.path.join(sd, "rank-%d.pt" % x.rank)
            torch.save(st, path + ".tmp")
            os.replace(path + ".tmp", path)
        except Exception as e:
            err = "rank %d: checkpoint %s: cannot write it: %s" % (grank, sd, e)
    errs = x.gather(err, "every rank's checkpoint write", world=True) if world > 1 else [err]
    bad = [e for e in errs if e]
    if bad:
        raise bigmac.Error(bad[0])
    if grank == 0:
        try:
            with open(os.path.join(sd, "COMPLETE"), "w") as f:
                f.write("%d\n" % step)
            with open(os.path.join(d, "latest.tmp"), "w") as f:
                f.write("step-%08d\n" % step)
            os.replace(os.path.join(d, "latest.tmp"), os.path.join(d, "latest"))
            import shutil
            for n in os.listdir(d):
                if n.startswith("step-") and n != os.path.basename(sd):
                    shutil.rmtree(os.path.join(d, n), ignore_errors=True)
        except OSError as e:
            err = "rank 0: checkpoint %s: cannot mark it complete: %s" % (sd, e)
    heartbeat()
    errs = x.gather(err, "rank 0's checkpoint commit", world=True) if world > 1 else [err]
    if any(errs):
        raise bigmac.Error([e for e in errs if e][0])


def _load_ckpt(x, d, meta):
    """The newest complete set of d into this rank's executor; returns its step."""
    import random
    found = _latest_ckpt(d)
    if found is None:
        raise bigmac.Error("resume %s: no complete checkpoint there (a set is complete once its COMPLETE marker is "
                           "written)" % d)
    step, sd = found
    path = os.path.join(sd, "rank-%d.pt" % x.rank)
    if not os.path.exists(path):
        raise bigmac.Error("resume %s: the set of step %d has no file for pipeline rank %d (%s)\nhint: it was "
                           "written by a run with another pp" % (d, step, x.rank, path))
    try:
        st = torch.load(path, map_location=x.device)
    except Exception as e:
        raise bigmac.Error("resume %s: cannot read it: %s" % (path, e)) from e
    m = st.get("meta", {}) if isinstance(st, dict) else {}
    if m.get("format") != _CKPT_FORMAT:
        raise bigmac.Error("resume %s: not a bigmac.torch checkpoint" % path)
    why = []
    if m["pp"] != meta["pp"] or m["vpp"] != meta["vpp"]:
        why.append("it was written with pp %d, vpp %d; this run has pp %d, vpp %d" % (m["pp"], m["vpp"], meta["pp"],
                                                                                       meta["vpp"]))
    if m["spec"] != meta["spec"]:
        why.append("it was written for another spec (\"%s\", hash %s; this run's \"%s\" is %s)" % (
            m["spec_name"], m["spec"], meta["spec_name"], meta["spec"]))
    if not why and m["table"] != meta["table"]:
        why.append("it was written for another table (policy %s, backbone %s, hash %s; this run: policy %s, "
                   "backbone %s, hash %s)" % (m["policy"], m["backbone"], m["table"], meta["policy"],
                                              meta["backbone"], meta["table"]))
    if why:
        raise bigmac.Error("resume %s: refused: %s" % (path, "; ".join(why)))
    heartbeat()
    x.load_ckpt_state(st, "resume " + path)
    rng = st["rng"]
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])
    return step


def _compare(what_of, hashes, kind):
    """hashes: every rank's {key: hash}; raises naming the key's module and the ranks that differ."""
    seen = {}
    for r, hs in enumerate(hashes):
        for k, v in hs.items():
            seen.setdefault(k, []).append((r, v))
    for k in sorted(seen, key=str):
        vals = seen[k]
        if len({v for _, v in vals}) > 1:
            first = vals[0]
            other = next(r for r, v in vals if v != first[1])
            raise bigmac.Error(what_of(k, first[0], other))


def _user_hook(fn, rank, step, info):
    """on_step(step, info); an exception from it becomes bigmac.Error naming the rank and step."""
    try:
        fn(step, info)
    except bigmac.Error:
        raise
    except Exception as e:
        raise bigmac.Error("rank %d: step %d: on_step raised %s: %s%s" % (rank, step + 1, type(e).__name__, e,
                                                                        where_raised(e))) from e


def _roles(spec):
    return "roles: " + ", ".join("%s %s" % (m.name, m.role) for m in spec.modules)


def train(spec, build=None, data=None, table=None, steps=None, log=None, trace=None, dump=None, device="cpu",
          progress=None, group=None, verify=True, timeout=DEFAULT_TIMEOUT, dp=None, optimizer=None,
          lr_scheduler=None, clip_grad_norm=None, grad_scaler=None, on_step=None, checkpoint=None,
          checkpoint_every=None, resume=None, gather=False, track_memory=True, check_data="first",
          check_init=True, **plan_args):
    """Train spec pipelined on this process's rank of the torch.distributed group (every rank
    calls it); docs/python.md "bigmac.torch reference" describes every argument.

    build(name, layer_begin, layer_end) -> nn.Module, data(step, mb[, inputs=]) -> batch
    (default: the built-in models' twins and the C dataset); table, or plan_args (pp, vpp,
    microbatches, policy, backbone, window, unit); dp: data-parallel replicas (global rank
    p*D + d, data gets global microbatch d*M + m). The loop: optimizer (params -> Optimizer;
    default AdamW from the spec's "train"), lr_scheduler (optimizer -> scheduler),
    clip_grad_norm (global norm over all ranks), grad_scaler (GradScaler's protocol),
    on_step(step, info) on every rank. checkpoint=DIR, checkpoint_every=N, resume=DIR: committed
    checkpoint sets. gather=True: rank 0's Result.state_dicts holds every module whole.
    track_memory=False: no saved-tensor accounting. check_data ("first", "every", False) and
    check_init (True/False): the batch-hash and parameter-hash checks. log, trace, dump: rank 0's
    outputs; timeout: seconds any wait may take. Returns a Result (rank 0: the losses; every
    rank: .state_dicts of its own modules); raises bigmac.Error."""
    spec = bigmac.load_spec(spec)
    timeout = check_timeout(timeout)
    grank = dist.get_rank(group) if dist.is_initialized() else 0
    world = dist.get_world_size(group) if dist.is_initialized() else 1
    if table is not None and plan_args:
        raise bigmac.Error("train: plan arguments (%s) given with a table" % ", ".join(plan_args))
    if check_data not in ("first", "every", False, None):
        raise bigmac.Error("check_data: expected \"first\", \"every\" or False, got %r" % (check_data,))
    if checkpoint_every is not None and (isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int)
                                         or checkpoint_every < 1):
        raise bigmac.Error("checkpoint_every: expected a positive integer (steps), got %r" % (checkpoint_every,))
    if checkpoint_every is not None and not checkpoint:
        raise bigmac.Error("checkpoint_every given without checkpoint= (the directory)")
    P, D = _layout(spec, table, dp, world, group, plan_args)
    if grank == 0:
        for path, what in ((log, "log"), (trace, "trace"), (dump, "dump")):
            if path:
                check_output(path, what)
        if checkpoint:
            try:
                os.makedirs(checkpoint, exist_ok=True)
                check_output(os.path.join(checkpoint, "latest.tmp"), "checkpoint")
            except OSError as e:
                raise bigmac.Error("checkpoint %s: cannot create it: %s" % (checkpoint, e.strerror or e)) from e
    if table is None:
        plan_args["pp"] = P
        if D > 1:
            plan_args["dp"] = D
        table = bigmac.plan(spec, **plan_args)
    if verify:
        bigmac.verify(table)
    build, data = _default_parts(spec, build, data, device)
    kw = dict(device=device, timeout=timeout, optimizer=optimizer, lr_scheduler=lr_scheduler,
              clip_grad_norm=clip_grad_norm, grad_scaler=grad_scaler, track_memory=track_memory)
    if D > 1:  # every rank creates every group, in the same order (torch.distributed.new_group)
        td = datetime.timedelta(seconds=timeout)
        pipes = [dist.new_group([p * D + d for p in range(P)], timeout=td) for d in range(D)]
        stages = [dist.new_group([p * D + d for d in range(D)], timeout=td) for p in range(P)]
        rank, replica = grank // D, grank % D
        x = Executor(spec, table, build, data, rank, group=pipes[replica], dp=D, replica=replica,
                     dp_group=stages[rank], **kw)
    else:
        x = Executor(spec, table, build, data, grank, group=group, **kw)
    heartbeat()  # built: start-up counts as progress for spawn's watchdog
    steps = steps or spec.steps
    meta = _ckpt_meta(spec, table)
    start = _load_ckpt(x, resume, meta) if resume else 0
    # replicas initialised identically: every encoder/generator on every rank, every chunk over its replicas
    fwd_mbs = sorted({op.mb for op in x.ops if op.kind == bigmac.OP_COMPUTE and op.pass_ == "F"})
    loads = (len(fwd_mbs), sorted({i for mb in fwd_mbs for i in x.rank_inputs(mb)}) if x.data_inputs else None)
    # with each rank's host: a collective whose group spans hosts is logged on the inter-host link
    both = x.gather((x.param_hashes() if check_init else {}, loads, socket.gethostname()),
                    "every rank's parameter hashes", world=True) if world > 1 else [({}, loads, socket.gethostname())]
    x.hosts = [h for _, _, h in both]
    both = [(h, ld) for h, ld, _ in both]
    hs = [h for h, _ in both]
    names = [m.name for m in spec.modules]
    _compare(lambda k, r0, r1: "module \"%s\"%s is initialised differently on rank %d and rank %d (its parameters' "
             "and buffers' hashes differ)\nhint: build it the same on every rank: seed the factory (torch.manual_seed "
             "with the same seed, not the rank) or load the same weights" % (
                 names[k[0]], " chunk %d" % k[1] if k[1] >= 0 else "", r0, r1), hs, "init")
    res = Result()
    res.start_step, res.grad_norms = start, []
    logf = open(log, "w") if (log and grank == 0) else None
    try:
        out = progress if progress is not None else sys.stdout
        if grank == 0:
            print(_roles(spec), file=out)
        if progress and grank == 0:
            if D > 1:
                print("layout: pp %d \u00d7 dp %d, rank = p*%d + d" % (P, D, D), file=progress)
            print("%s: %d ranks, %s backbone, policy %s, %d microbatches/step, %d steps (torch)%s" % (
                spec.name, table.pp * D, table.backbone, table.policy, table.microbatches * D, steps,
                ", resumed at step %d" % start if resume else ""), file=progress)
            print("data per step: " + ", ".join("rank %d loads %d microbatches%s" % (
                r, n, "" if ins is None else " (%s)" % (", ".join(ins) or "no inputs")) for r, (_, (n, ins))
                in enumerate(both)), file=progress)
        for s in range(start, steps):
            t0 = time.time()
            x.step(s)
            ms = (time.time() - t0) * 1e3
            rec = x.record()
            if check_data == "every" or (check_data == "first" and s == start):
                # keyed by the inputs asked for too: with data(step, mb, inputs=) ranks asking for other
                # inputs legitimately get other batches
                rec["data"] = {(x.replica * x.M + mb, x.rank_inputs(mb) if x.data_inputs else None):
                               _ex.tensor_hash(b).hexdigest() for mb, b in x.batches.items()}
            recs = x.gather(rec, "every rank's record of the step", world=True) if world > 1 else [rec]
            if "data" in rec:
                _compare(lambda k, r0, r1: "step %d: rank %d and rank %d loaded different data for microbatch %d "
                         "(the hashes of its tensors differ)\nhint: data(step, mb) must give the same batch on every "
                         "rank: no rank-dependent order, seed or augmentation" % (s + 1, r0, r1, k[0]),
                         [r["data"] for r in recs], "data")
            loss, lm, gen = step_loss(recs, table.microbatches, D)
            _measured(res, table, [recs[p * D] for p in range(P)], spec)
            if not math.isfinite(loss) and grad_scaler is None:
                raise bigmac.Error("step %d: loss is not finite" % (s + 1))
            if x.grad_norm is not None:
                res.grad_norms.append(x.grad_norm)
            if grank == 0:
                res.append(loss)
                if logf:
                    logf.write(log_line(s + 1, loss, lm, gen, ms, [r["peak"] for r in recs], D,
                                        [r.get("tail") for r in recs]) + "\n")
                    logf.flush()
                if progress:
                    print("step %4d/%d  loss %.4f  (lm %.4f  gen %.4f)  %.1f ms" % (s + 1, steps, loss, lm, gen, ms),
                          file=progress)
                last = [recs[p * D] for p in range(P)]  # replica 0's pipeline (every replica walks the same table)
            if checkpoint and ((checkpoint_every and (s + 1) % checkpoint_every == 0) or s + 1 == steps):
                _save_ckpt(x, checkpoint, s + 1, meta, grank, world)
            if on_step is not None:
                _user_hook(on_step, grank, s, {
                    "loss": loss, "lm": lm, "gen": gen, "ms": ms, "lr": x.lr, "grad_norm": x.grad_norm, "rank": grank,
                    "pp_rank": x.rank, "replica": x.replica, "peak_act_bytes": list(x.peak)})
        if progress and grank == 0 and track_memory and res.act_bytes is not None:
            _print_peaks(res, steps, D, progress)
        if dump:  # before the trace: a failing trace write loses nothing else
            flats = x.flat_params()
            allf = x.gather(flats, "every rank's final parameters") if P > 1 else [flats]
            if grank == 0:
                merged = [f for f in allf[0] if f[1] < 0] + [f for fl in allf for f in fl if f[1] >= 0]
                dump_params(dump, spec, merged)
        if trace and grank == 0 and steps > start:
            table.write_trace([r["times"] for r in last], [r["mem"] for r in last], trace,
                              msg_bytes=[r["bytes"] for r in last])
        # the trained modules; a model whose chunks cannot be merged loses nothing of the run:
        # .state_dicts is None and .state_dicts_error says why (gather=True raises it, on every rank)
        try:
            own, parts = x.state_dicts()
            err = None
        except bigmac.Error as e:
            own, parts, err = None, [], str(e)
        if gather and P > 1:
            allp = x.gather((parts, err), "every rank's trained backbone chunks")
            errs = [e for _, e in allp if e]
            if errs:
                raise bigmac.Error(errs[0])
            if grank == 0:  # the others keep their own
                parts = [q for ps, _ in allp for q in ps]
        elif gather and err:
            raise bigmac.Error(err)
        bbname = spec.modules[spec.backbone_module].name
        if own is not None:
            try:
                own[bbname] = _ex.merge_chunks(bbname, parts)
            except bigmac.Error as e:
                if gather:
                    raise
                own, err = None, str(e)
        res.state_dicts = None if own is None else {m.name: own[m.name] for m in spec.modules if m.name in own}
        res.state_dicts_error = err
    finally:
        if logf:
            logf.close()
    return res


def from_dataset(dataset, microbatch_size, microbatches_per_step, collate_fn=None, shuffle=True, seed=0,
                 sampler=None):
    """data(step, mb) over a torch.utils.data.Dataset (any object with __len__ and
    __getitem__): global microbatch n = step * microbatches_per_step + mb (pass the step's D*M
    with data parallel) takes samples n*microbatch_size .. (n+1)*microbatch_size - 1 of the
    epochs' concatenated sample orders. An epoch's order is a permutation from a generator
    seeded with seed + epoch (shuffle=True), the dataset's order (shuffle=False), or
    list(sampler) when sampler (a torch.utils.data.Sampler, iterated once per epoch; it must give
    the same order on every rank) is given. collate_fn (default torch's default_collate) makes the
    batch. Every rank computes the same indices, so every rank sees the same batch, and a rank
    loads only the microbatches it is asked for."""
    from torch.utils.data import default_collate
    n = len(dataset)
    for name, v in (("microbatch_size", microbatch_size), ("microbatches_per_step", microbatches_per_step)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bigmac.Error("from_dataset: %s: expected a positive integer, got %r" % (name, v))
    if n < 1:
        raise bigmac.Error("from_dataset: the dataset is empty")
    collate = collate_fn or default_collate
    orders = {}

    def order(epoch):
        if epoch not in orders:
            if sampler is not None:
                if hasattr(sampler, "set_epoch"):
                    sampler.set_epoch(epoch)
                o = [int(i) for i in sampler]
            elif shuffle:
                o = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
            else:
                o = list(range(n))
            if len(orders) > 4:
                orders.clear()
            orders[epoch] = o
        return orders[epoch]

    def data(step, mb):
        if not (0 <= mb < microbatches_per_step):
            raise bigmac.Error("from_dataset: microbatch %d is outside 0..%d (microbatches_per_step)"
                               % (mb, microbatches_per_step - 1))
        first = (step * microbatches_per_step + mb) * microbatch_size
        samples = []
        for i in range(first, first + microbatch_size):
            o = order(i // len(order(0)))
            samples.append(dataset[o[i % len(o)]])
        return collate(samples)
    return data


def reference(spec, build=None, data=None, steps=None, log=None, dump=None, device="cpu", progress=None, dp=1,
              optimizer=None, lr_scheduler=None, clip_grad_norm=None, grad_scaler=None, on_step=None,
              track_memory=True):
    """One process, no pipeline (as `bigmac train --reference`): per microbatch every encoder,
    the whole backbone, every generator, backward of (LM + generator losses) / M; then the
    optimizer. dp=D: the step of D data-parallel replicas, D*M microbatches (as `bigmac train
    --reference --dp D`). optimizer, lr_scheduler, clip_grad_norm (torch.nn.utils.clip_grad_norm_
    over every parameter), grad_scaler, on_step and track_memory as train()'s. Same log format.
    Returns a Result: the per-step losses with .state_dicts (every module whole) and .grad_norms."""
    spec = bigmac.load_spec(spec)
    for path, what in ((log, "log"), (dump, "dump")):
        if path:
            check_output(path, what)
    build, data = _default_parts(spec, build, data, device)
    M = (spec.microbatches or 1) * (_check_dp(dp) or 1)
    mods = []
    for m in spec.modules:
        L = m.layers if m.role == "backbone" else 0
        mod = build(m.name, 0, L)
        if not isinstance(mod, torch.nn.Module):
            raise bigmac.Error("module \"%s\": the factory returned %s, not a torch.nn.Module" % (m.name, type(mod).__name__))
        mods.append(mod.to(device))
    for m, md in zip(spec.modules, mods):  # frozen modules: no gradient, not optimized
        if not m.trainable:
            for p in md.parameters():
                p.requires_grad_(False)
    params = [p for md in mods for p in md.parameters() if p.requires_grad]
    ptrs = _ex.state_ptrs(mods)
    opt = _ex.make_optimizer(optimizer, params, spec)
    sched = _ex.make_scheduler(lr_scheduler, opt)
    clip = _ex.check_clip(clip_grad_norm)
    print(_roles(spec), file=progress if progress is not None else sys.stdout)
    enc = [i for i, m in enumerate(spec.modules) if m.role == "encoder"]
    gens = [i for i, m in enumerate(spec.modules) if m.role == "generator"]
    bb = spec.backbone_module
    steps = steps or spec.steps
    losses = Result()
    losses.grad_norms = []
    logf = open(log, "w") if log else None

    def run(i, x, b, peak):
        acts = _Acts(ptrs, _ex.data_ptrs(b) if track_memory else ())
        if not track_memory:
            return split_result(mods[i](x, b), spec.modules[i].name) + (0,)
        with torch.autograd.graph.saved_tensors_hooks(acts.pack, acts.unpack):
            out, loss = split_result(mods[i](x, b), spec.modules[i].name)
        if loss is not None and loss.numel() != 1:
            raise bigmac.Error("module \"%s\" returned a loss of shape %s; the loss must be a scalar (reduce a "
                               "per-sample loss with .mean() or .sum())" % (spec.modules[i].name, list(loss.shape)))
        return out, loss, acts.bytes

    def scaled(t):
        return grad_scaler.scale(t) if grad_scaler is not None else t

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
                x = None if not outs else outs[0] if len(outs) == 1 else torch.cat(outs, 0)
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
                    scaled(total).backward()
                lm_sum += float(np.float32(np.float32(float(lm) if lm is not None else 0.0) / np.float32(M)))
                gen_sum += float(np.float32(gl / np.float32(M)))
            if grad_scaler is not None:
                grad_scaler.unscale_(opt)
            norm = None
            if clip is not None:
                norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
                losses.grad_norms.append(norm)
            lr = opt.param_groups[0]["lr"]
            if grad_scaler is not None:
                grad_scaler.step(opt)
                grad_scaler.update()
            else:
                opt.step()
            if sched is not None:
                sched.step()
            ms = (time.time() - t0) * 1e3
            loss = lm_sum + gen_sum
            losses.append(loss)
            if on_step is not None:
                _user_hook(on_step, 0, s, {
                    "loss": loss, "lm": lm_sum, "gen": gen_sum, "ms": ms, "lr": lr, "grad_norm": norm, "rank": 0,
                    "pp_rank": 0, "replica": 0, "peak_act_bytes": peak})
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
        losses.state_dicts = {m.name: {k: v.detach().cpu() for k, v in md.state_dict().items()}
                              for m, md in zip(spec.modules, mods)}
    finally:
        if logf:
            logf.close()
    return losses



from bigmac.torch.profile import profile  # noqa: E402
