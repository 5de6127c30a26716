"""The torch executor of an operator table (docs/python.md): one process per pipeline rank of a
torch.distributed group walks its rank's op list exactly as the C executor (src/exec/exec.c)
does, with torch modules from a user factory.

  F     runs module(x, batch) under saved-tensor hooks (the bytes it saves are the activation
        bytes of its role, from the end of F until its B starts) and keeps (inputs, output, loss)
  B     runs autograd backward from the received output gradient (and loss / M) and sends the
        input gradient
  send  isend of a small header (dtype and shape) and the tensor; completed at the step's end
  recv  the header's irecv is posted for every recv of the step before the walk starts (as the
        C executor posts its receives); at the op, the shape is checked against what this rank
        expects, then the payload is received
The gradients: every replicated module's (encoders, generators) are summed over all ranks, with
data parallel every backbone chunk's over its replicas, each all-reduce started (async) right
after the rank's last backward of it, overlapping the rest of the walk, and waited for after the
walk (the simulator's step model, docs/simulator.md "The step"); then the grad scaler's
unscale, the global gradient-norm clip, the optimizer (AdamW with the spec's "train" settings,
or the user's) and the learning-rate scheduler. The per-step JSONL log
and the Chrome trace are those of `bigmac train` (the trace is written by the C library).

Every wait (a receive, a send's completion, a collective) has the executor's timeout: one that
does not complete in time, or whose connection breaks, raises bigmac.Error naming this rank, the
op and what it waited for (the peer, the tensor). An exception from a user's module, factory or
data function is raised as bigmac.Error tagged with the rank, op, step and microbatch.
"""
import contextlib
import datetime
import hashlib
import inspect
import math
import pickle
import json as _json
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist

import bigmac

ROLE = {"encoder": 0, "backbone": 1, "generator": 2}
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32]
HDR = 10  # header: dtype code, ndim, up to 8 dims
DEFAULT_TIMEOUT = 300.0  # seconds any one wait may take (train(timeout=), --timeout)

# Under bigmac.torch.spawn: (shared array, rank); heartbeat() writes [time, step, op] to the rank's
# slot, which spawn's watchdog reads (a run that keeps progressing is never ended by it).
_beat = None


def heartbeat(step=-1, op=-1):
    """Tell bigmac.torch.spawn's watchdog that this rank is alive and where (a no-op outside
    spawn). bigmac.torch.train calls it at every op; call it from other functions given to spawn."""
    if _beat is not None:
        a, r = _beat
        a[3 * r + 1], a[3 * r + 2] = step, op
        a[3 * r] = time.time()


def check_timeout(t, name="timeout"):
    """t (seconds, a finite number > 0; None: DEFAULT_TIMEOUT) as a float."""
    if t is None:
        return DEFAULT_TIMEOUT
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0 < t <= 1e7):
        raise bigmac.Error("%s: expected a number of seconds in (0, 1e7], got %r" % (name, t))
    return float(t)


def fault(msg, rank, kind="error", peer=None):
    """bigmac.Error(msg) carrying what spawn needs to find the cause: .rank, .kind ("error": this
    rank's own failure; "timeout": it waited too long; "broken": a peer's connection broke) and
    .peer (the rank it waited for; None for a collective)."""
    e = bigmac.Error(msg)
    e.rank, e.kind, e.peer = rank, kind, peer
    return e


def where_raised(e):
    """'file:line in function' of the innermost frame of e's traceback."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return ""
    f = tb[-1]
    return " (at %s:%d in %s)" % (f.filename, f.lineno, f.name)


def _is_timeout(e):
    m = str(e)
    return "imed out" in m or "timeout" in m.lower()


class _Acts:
    """Saved-tensor hooks: the bytes a forward keeps for its backward (docs/python.md "Measured
    activation bytes"): every distinct storage (counted once, whole, by its address, however many
    saved tensors view it) of a tensor autograd saves, except the modules' state (params: the
    storage addresses of parameters and buffers, which live anyway) and the step's input data
    (data: the batch's tensors' storages, which the executor holds for the whole step)."""

    def __init__(self, params, data=()):
        self.params, self.data = params, data
        self.seen = set()
        self.bytes = 0

    def pack(self, t):
        st = t.storage()
        key = (st.data_ptr(), t.device)
        if st.data_ptr() not in self.params and st.data_ptr() not in self.data and key not in self.seen:
            self.seen.add(key)
            self.bytes += st.nbytes()
        # detached: a saved output returned as itself would hold its own grad_fn, a cycle through
        # C++ that Python's collector cannot see (torch 1.13): a graph never run backward (a
        # recomputed forward's first pass) would then never be freed
        return t.detach()

    @staticmethod
    def unpack(t):
        return t


def state_ptrs(mods):
    """The storage addresses of the modules' parameters and buffers (a parameter may view a
    larger storage: a flat buffer of all of them)."""
    return {t.storage().data_ptr() for md in mods for t in list(md.parameters()) + list(md.buffers())}


def data_ptrs(obj, out=None, seen=None):
    """The storage addresses of every tensor in obj (a batch: dicts, lists, tuples, objects'
    __dict__, each container once)."""
    out = set() if out is None else out
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        out.add(obj.storage().data_ptr())
        return out
    if isinstance(obj, (dict, list, tuple)) or hasattr(obj, "__dict__"):
        if id(obj) in seen:
            return out
        seen.add(id(obj))
    if isinstance(obj, dict):
        for v in obj.values():
            data_ptrs(v, out, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            data_ptrs(v, out, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        data_ptrs(vars(obj), out, seen)
    return out


def split_result(res, name):
    """module(...) returns output, or (output or None, loss)."""
    if isinstance(res, tuple):
        if len(res) != 2:
            raise bigmac.Error("module \"%s\" returned a tuple of %d; expected output or (output, loss)" % (name, len(res)))
        return res[0], res[1]
    if res is None or isinstance(res, torch.Tensor):
        return res, None
    raise bigmac.Error("module \"%s\" returned %s; expected a tensor or (output, loss)" % (name, type(res).__name__))


def chunk_ranges(spec, table):
    """[(a, b)] layers of every global backbone chunk."""
    P, V = table.pp, table.vpp
    L = spec.modules[spec.backbone_module].layers
    cl = table.chunk_layers()
    C = P * V
    if cl:
        if sum(cl) != L and L:
            raise bigmac.Error("the table splits %d backbone layers over its chunks, the model has %d" % (sum(cl), L))
        out, acc = [], 0
        for n in cl:
            out.append((acc, acc + n))
            acc += n
        return out
    if L <= 0:
        raise bigmac.Error("backbone \"%s\": the table carries no layer split and the spec no \"layers\""
                           % spec.modules[spec.backbone_module].name)
    return [(c * L // C, (c + 1) * L // C) for c in range(C)]


def check_table(spec, table):
    """A table planned from another spec is refused: its modules (names, roles, costs) must be
    the spec's. A recomputed module ("recompute": "full") is recomputed (Executor._compute)."""
    names = [m.name for m in spec.modules]
    where = spec.path or spec.name
    if table.module_names != names or table.backbone_module != spec.backbone_module:
        raise bigmac.Error("the table's modules %s are not the spec's %s (%s)\nhint: plan the table from "
                           "this spec" % (table.module_names, names, where))
    for m, tm in zip(spec.modules, table.to_dict()["modules"]):
        if tm.get("recompute", "none") not in ("none", "full"):
            raise bigmac.Error("table module \"%s\" has \"recompute\": \"%s\", which the torch executor does not know "
                               "(%s)\nhint: \"none\" or \"full\"" % (m.name, tm["recompute"], where))
        if m.role != tm["role"]:
            raise bigmac.Error("table module \"%s\" is a %s, the spec's (%s) a %s" % (m.name, tm["role"], where, m.role))
        for k, v in m.cost.items():
            tv = tm.get("cost", {}).get(k, 0.0)
            if abs(tv - v) > 1e-6 * max(1.0, abs(v)):
                raise bigmac.Error("the table was planned from another spec: module \"%s\" has cost.%s %g in the "
                                   "table, %g in %s\nhint: plan the table from this spec" % (m.name, k, tv, v, where))


def make_optimizer(optimizer, params, spec):
    """optimizer(params) -> torch.optim.Optimizer (the user's), else AdamW with the spec's "train"
    settings."""
    if optimizer is None:
        tr = spec.train
        return torch.optim.AdamW(params, lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"],
                                 weight_decay=tr["weight_decay"])
    if not callable(optimizer):
        raise bigmac.Error("optimizer: expected a callable params -> torch.optim.Optimizer, got %s"
                           % type(optimizer).__name__)
    opt = optimizer(params)
    if not isinstance(opt, torch.optim.Optimizer):
        raise bigmac.Error("optimizer: the callable returned %s, not a torch.optim.Optimizer" % type(opt).__name__)
    return opt


def make_scheduler(lr_scheduler, opt):
    """lr_scheduler(optimizer) -> a scheduler with .step() (stepped after every optimizer step)."""
    if lr_scheduler is None:
        return None
    if not callable(lr_scheduler):
        raise bigmac.Error("lr_scheduler: expected a callable optimizer -> scheduler, got %s"
                           % type(lr_scheduler).__name__)
    sch = lr_scheduler(opt)
    if not hasattr(sch, "step"):
        raise bigmac.Error("lr_scheduler: the callable returned %s, which has no step()" % type(sch).__name__)
    return sch


def check_clip(v):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
        raise bigmac.Error("clip_grad_norm: expected a finite number > 0 (the largest global gradient norm), got %r"
                           % (v,))
    return float(v)


def _takes_inputs(fn):
    """Whether data(step, mb, inputs=...) may be called."""
    try:
        ps = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "inputs" in ps or any(p.kind == p.VAR_KEYWORD for p in ps.values())


def tensor_hash(obj, h=None, seen=None):
    """sha1 of every tensor (and number, string) in obj: dicts, lists, tuples, objects' __dict__
    (each container once: a cycle ends)."""
    h = h or hashlib.sha1()
    seen = set() if seen is None else seen
    if isinstance(obj, (dict, list, tuple)) or (hasattr(obj, "__dict__") and not isinstance(obj, torch.Tensor)):
        if id(obj) in seen:
            return h
        seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        h.update(str((obj.dtype, tuple(obj.shape))).encode())
        h.update(obj.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
                 if obj.numel() else b"")
    elif isinstance(obj, np.ndarray):
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            h.update(str(k).encode())
            tensor_hash(obj[k], h, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            tensor_hash(v, h, seen)
    elif isinstance(obj, (int, float, str, bytes, bool)) or obj is None:
        h.update(repr(obj).encode())
    elif hasattr(obj, "__dict__"):
        tensor_hash(vars(obj), h, seen)
    return h


def layer_list(mod, n, name):
    """The dotted name of mod's list of layers (an nn.ModuleList or nn.Sequential of n entries):
    mod.bigmac_layers when set, else the only such list (or the only one named layers, blocks, h
    or layer)."""
    explicit = getattr(mod, "bigmac_layers", None)
    if explicit:
        return explicit
    cands = [k for k, m in mod.named_modules() if k and isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential))
             and len(m) == n]
    if len(cands) == 1:
        return cands[0]
    named = [k for k in cands if k.split(".")[-1] in ("layers", "blocks", "h", "layer")]
    if len(named) == 1:
        return named[0]
    raise bigmac.Error("module \"%s\": cannot tell which list of %d submodules holds its layers (%s)\nhint: set the "
                       "attribute bigmac_layers = \"name.of.the.ModuleList\" on the module"
                       % (name, n, ", ".join(cands) if cands else "none has that length"))


def chunk_state(mod, a, b, name):
    """mod.state_dict() with its layers renumbered a..b-1 (the single-process model's keys)."""
    pre = layer_list(mod, b - a, name) + "."
    out = {}
    for k, v in mod.state_dict().items():
        if k.startswith(pre):
            i, _, tail = k[len(pre):].partition(".")
            if i.isdigit():
                k = "%s%d%s" % (pre, int(i) + a, "." + tail if tail else "")
        out[k] = v
    return out


def merge_chunks(name, parts):
    """One state dict from [(chunk, a, b, renumbered state dict)]: every layer once, a key
    outside the layer list in one chunk (or in several with the same value: a constant buffer)."""
    out, owner = {}, {}
    for c, a, b, sd in sorted(parts, key=lambda t: t[0]):
        for k, v in sd.items():
            if k in out:
                a0 = out[k]
                if isinstance(a0, torch.Tensor) and isinstance(v, torch.Tensor) and a0.shape == v.shape and \
                        a0.dtype == v.dtype and torch.equal(a0, v):
                    continue  # the same value in several chunks (a constant buffer, a causal mask): once
                raise bigmac.Error("module \"%s\": key %s is in chunk %d and chunk %d with different values; a "
                                   "chunk's state outside its layer list must live in one chunk only (the first "
                                   "chunk's embedding, the last's head)" % (name, k, owner[k], c))
            out[k], owner[k] = v, c
    return out


class Executor:
    """Pipeline rank `rank` of table for spec: modules from build(name, layer_begin, layer_end),
    microbatches from data(step, mb). group: the torch.distributed group of the P ranks of this
    pipeline (None: the default group; a one-rank table needs none).

    Data parallel (dp=D > 1, docs/python.md "Data parallel"): this is pipeline rank `rank` of
    replica `replica`; group is the replica's pipeline group, dp_group the group of the D ranks
    holding this rank's backbone chunks (their gradients are summed over it), world_group the
    group of all P*D ranks (the replicated encoders' and generators' gradients are summed over
    it). data(step, mb) gets the global microbatch index replica*M + m; the losses are averaged
    over the D*M microbatches of the step."""

    def __init__(self, spec, table, build, data, rank, device="cpu", optimizer=None, group=None, timeout=None,
                 dp=1, replica=0, dp_group=None, world_group=None, lr_scheduler=None, clip_grad_norm=None,
                 grad_scaler=None, track_memory=True):
        self.spec = spec = bigmac.load_spec(spec)
        check_table(spec, table)
        self.t, self.build, self.data, self.rank, self.group = table, build, data, rank, group
        self.timeout = check_timeout(timeout)
        self.td = datetime.timedelta(seconds=self.timeout)
        self.step_no = -1
        self.device = torch.device(device)
        self.P, self.V, self.M = table.pp, table.vpp, table.microbatches
        self.D, self.replica, self.dp_group = dp, replica, dp_group
        self.world_group = group if world_group is None and dp == 1 else world_group
        if dist.is_available() and dist.is_initialized():
            ws = dist.get_world_size(group)
            if ws != self.P:
                raise bigmac.Error("the table has pp %d but %d ranks run it\nhint: --nproc %d (or plan with --pp %d)"
                                   % (self.P, ws, self.P, ws))
            self.comm_cpu = dist.get_backend(group) == "gloo"
            # the global ranks of this pipeline's ranks (sends, receives and broadcasts name them)
            self.ranks = list(range(self.P)) if group is None else [int(r) for r in dist.get_process_group_ranks(group)]
        elif self.P != 1:
            raise bigmac.Error("the table has pp %d: initialise torch.distributed with %d ranks first "
                               "(bigmac.torch.spawn or torch.distributed.run)" % (self.P, self.P))
        else:
            self.ranks = [0]
        self.me = self.ranks[rank]  # this process's global rank (messages name global ranks)
        self.ops = table.ops[rank]
        self.bb = spec.backbone_module
        ranges = chunk_ranges(spec, table)
        # instances: replicas in spec order, then local chunks (as the C executor)
        self.inst, self.inst_of = [], {}
        for i, m in enumerate(spec.modules):
            if i == self.bb:
                continue
            self.inst_of[(i, -1)] = len(self.inst)
            self.inst.append(self._make(m, -1, 0, 0))
        # the rank's chunks in global chunk order, from the table's chunk -> rank map (c mod P,
        # or a V shape's: zb-v and dualpipe-v put the first and the last chunk on rank 0)
        for c in [c for c, r in enumerate(table.chunk_ranks()) if r == rank]:
            a, b = ranges[c]
            if b <= a:
                raise bigmac.Error("backbone chunk %d gets no layer\nhint: use fewer chunks (--pp/--vpp) or more layers" % c)
            self.inst_of[(self.bb, c)] = len(self.inst)
            self.inst.append(self._make(spec.modules[self.bb], c, a, b))
        # frozen modules ("trainable": false, docs/spec.md "Frozen modules"): no gradient, no
        # optimizer state, no gradient all-reduce; a module the table gives no backward at all
        # runs its forward under no_grad and keeps nothing (self.no_bwd)
        bwd = {o.module for ops in table.ops for o in ops if o.kind == bigmac.OP_COMPUTE and o.pass_ == "B"}
        self.no_bwd = set()
        for i, x in enumerate(self.inst):
            if not spec.modules[x["module"]].trainable:
                for p in x["mod"].parameters():
                    p.requires_grad_(False)
                if x["module"] not in bwd:
                    self.no_bwd.add(i)
        # recomputed instances ("recompute": "full", docs/spec.md): F keeps only its input, B reruns
        # the forward first (as the C executor does); a module without backward keeps nothing anyway
        rc = {i for i, m in enumerate(table.to_dict()["modules"]) if m.get("recompute", "none") == "full"}
        self.rc = {i for i, x in enumerate(self.inst) if x["module"] in rc and i not in self.no_bwd}
        self.params = [[p for p in x["mod"].parameters() if p.requires_grad] for x in self.inst]
        self.param_ptrs = state_ptrs([x["mod"] for x in self.inst])
        tr = spec.train
        allp = [p for ps in self.params for p in ps]
        self.opt = make_optimizer(optimizer, allp, spec)
        self.sched = make_scheduler(lr_scheduler, self.opt)
        self.clip = check_clip(clip_grad_norm)
        self.scaler, self.track = grad_scaler, bool(track_memory)
        self.grad_norm = None
        self.data_inputs = _takes_inputs(data)
        sd = spec.to_dict()
        self.inputs = set(sd.get("inputs", []))
        self.consumes = [m.get("consumes", []) for m in sd.get("modules", [])]
        # static dataflow and use counts (the C executor's uses0)
        self.flow = []
        self.uses0 = {}
        self.split = set()  # (instance, mb) whose backward is split: B input grads, W weight grads
        for k, op in enumerate(self.ops):
            if op.kind == bigmac.OP_COMPUTE:
                key = (op.module, op.chunk if op.module == self.bb else -1)
                if key not in self.inst_of:
                    raise bigmac.Error("rank %d: op #%d %s: no instance of this module/chunk on rank %d" % (rank, k, op.name, rank))
                if op.pass_ == "W":  # needs only its own B, on this rank; makes nothing
                    self.split.add((self.inst_of[key], op.mb))
                    self.flow.append(([], []))
                    continue
                needs, makes = table.flow(op.module, key[1], op.pass_)
                self.flow.append((needs, makes))
                for n in needs:
                    self.uses0[(n, op.mb)] = self.uses0.get((n, op.mb), 0) + 1
            else:
                self.flow.append(None)
                if op.kind == bigmac.OP_SEND:
                    self.uses0[(op.tensor, op.mb)] = self.uses0.get((op.tensor, op.mb), 0) + 1
        # each instance's last backward (B or W) on this rank: its gradients are final after that
        # op, and its all-reduce starts there (Megatron's overlap; _sync_start); -1: none here
        self.last_bwd = [-1] * len(self.inst)
        for k, op in enumerate(self.ops):
            if op.kind == bigmac.OP_COMPUTE and op.pass_ != "F":
                self.last_bwd[self.inst_of[(op.module, op.chunk if op.module == self.bb else -1)]] = k
        self.tensor_names = [table.tensor_name(i) for i in range(table.n_tensors)]
        self.tensor_module = [table.tensor_module(i) for i in range(table.n_tensors)]
        self.times = [[0.0, 0.0, 0.0] for _ in self.ops]
        self.msg_bytes = [0] * len(self.ops)  # a send's or recv's message bytes (the trace's "bytes")
        self.mem = []
        self.peak = [0, 0, 0]

    def _make(self, m, chunk, a, b):
        try:
            mod = self.build(m.name, a, b)
        except bigmac.Error:
            raise
        except KeyError as e:
            raise bigmac.Error("module \"%s\": the factory builds no module by that name (%s)" % (m.name, e))
        except Exception as e:
            raise fault("rank %d: module \"%s\"%s: the factory raised %s: %s%s" % (
                self.me, m.name, " chunk %d" % chunk if chunk >= 0 else "", type(e).__name__, e, where_raised(e)),
                self.me) from e
        if not isinstance(mod, torch.nn.Module):
            raise bigmac.Error("module \"%s\": the factory returned %s, not a torch.nn.Module" % (m.name, type(mod).__name__))
        return {"module": m.index, "chunk": chunk, "mod": mod.to(self.device), "role": m.role, "name": m.name,
                "replicated": chunk < 0, "a": a, "b": b}

    # ------------------------------------------------------------ helpers

    def _fail(self, k, msg, kind="error", peer=None):
        return fault("rank %d: op #%d %s (step %d): %s" % (self.me, k, self.ops[k].name, self.step_no + 1, msg),
                     self.me, kind, peer)

    def _where(self, k):
        """'rank r: op #k NAME (step s)' or, between ops, 'rank r: step s'."""
        if k is None:
            return "rank %d: step %d" % (self.me, self.step_no + 1)
        return "rank %d: op #%d %s (step %d)" % (self.me, k, self.ops[k].name, self.step_no + 1)

    def _wait(self, work, k, what, peer=None, phase=""):
        """work.wait() within the timeout (work: a Work, or a function that posts one: posting on a
        broken connection fails as the wait does). what: what it waits for ("tensor X of microbatch m from
        rank p"); peer: the rank it waits on (None: a collective, any rank; with two ranks, the
        other). A timeout or a broken connection raises bigmac.Error naming this rank, the op (or
        phase) and what."""
        if peer is None and self.P == 2 and self.D == 1:
            peer = self.ranks[1 - self.rank]
        try:
            if callable(work):
                work = work()
            work.wait(timeout=self.td)
        except RuntimeError as e:
            raise self._comm_error(k, what, peer, e, phase) from e

    def _comm_error(self, k, what, peer, e, phase=""):
        at = self._where(k) + (", " + phase if phase else "")
        if _is_timeout(e):
            if peer is not None:
                msg = ("%s: waited %g s for %s: rank %d did not answer: it is stopped, hung or slower than the "
                       "timeout\nhint: if rank %d is only slow, raise the limit (--timeout S, train(timeout=S))"
                       % (at, self.timeout, what, peer, peer))
            else:
                msg = ("%s: waited %g s for %s: not every rank joined: one is stopped, hung or slower than the "
                       "timeout\nhint: if it is only slow, raise the limit (--timeout S, train(timeout=S))"
                       % (at, self.timeout, what))
            return fault(msg, self.me, "timeout", peer)
        if peer is not None:
            msg = "%s: the connection to rank %d broke while waiting for %s (rank %d ended?): %s" % (
                at, peer, what, peer, str(e).strip())
        else:
            msg = "%s: a connection broke while waiting for %s (a rank ended?): %s" % (at, what, str(e).strip())
        return fault(msg, self.me, "broken", peer)

    def gather(self, obj, what, world=False):
        """Every rank's obj (rank order), like dist.all_gather_object but within the timeout: over
        this pipeline's ranks, or over all P*D ranks (world=True; global rank order)."""
        group, n = (self.world_group, self.P * self.D) if world else (self.group, self.P)
        data = pickle.dumps(obj)
        dev = "cpu" if self.comm_cpu else self.device
        ln = torch.tensor([len(data)], dtype=torch.int64, device=dev)
        sizes = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(n)]
        self._wait(lambda: dist.all_gather(sizes, ln, group=group, async_op=True), None, what + " (sizes)")
        sizes = [int(x.item()) for x in sizes]
        buf = torch.zeros(max(sizes), dtype=torch.uint8)
        buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        buf = buf.to(dev)
        outs = [torch.zeros(max(sizes), dtype=torch.uint8, device=dev) for _ in range(n)]
        self._wait(lambda: dist.all_gather(outs, buf, group=group, async_op=True), None, what)
        return [pickle.loads(o[:m].cpu().numpy().tobytes()) for o, m in zip(outs, sizes)]

    def _now(self):
        return (time.time() - self.origin) * 1e3

    def _comm(self, t):
        return t.cpu() if self.comm_cpu else t

    def _expected(self, k):
        """The shape this rank expects for recv op k (None when the receiving module does not say):
        a gradient: its local forward output's; a forward input: the consumer's in_shape."""
        op = self.ops[k]
        j = self.recv_consumer[k]
        c = self.ops[j]
        inst = self.inst[self.inst_of[(c.module, c.chunk if c.module == self.bb else -1)]]
        b = self.batches.get(op.mb)
        if c.pass_ == "B":
            ctx = self.ctx.get((self.inst_of[(c.module, c.chunk if c.module == self.bb else -1)], op.mb))
            return ctx.get("out_shape") if ctx is not None else None
        needs = self.flow[j][0]
        if len(needs) > 1:  # chunk 0: one encoder's part
            enc = self.inst[self.inst_of[(self.tensor_module[op.tensor], -1)]]["mod"]
            return tuple(enc.out_shape(b)) if hasattr(enc, "out_shape") else None
        mod = inst["mod"]
        return tuple(mod.in_shape(b)) if hasattr(mod, "in_shape") and b is not None else None

    # ------------------------------------------------------------ step

    def step(self, step):
        """One training step (0-based): the walk, the replicas' all-reduce, the optimizer."""
        self.step_no = step
        heartbeat(step, -1)
        self.batches = {}
        for op in self.ops:
            if op.kind == bigmac.OP_COMPUTE and op.pass_ == "F" and op.mb not in self.batches:
                try:
                    g = self.replica * self.M + op.mb
                    if self.data_inputs:
                        self.batches[op.mb] = self.data(step, g, inputs=self.rank_inputs(op.mb))
                    else:
                        self.batches[op.mb] = self.data(step, g)
                except bigmac.Error:
                    raise
                except Exception as e:
                    raise fault("rank %d: step %d: data(%d, %d) raised %s: %s%s" % (
                        self.me, step + 1, step, self.replica * self.M + op.mb, type(e).__name__, e, where_raised(e)), self.me) from e
        # the batches' own storages: a forward that saves its input data keeps nothing extra
        self.batch_ptrs = {mb: data_ptrs(b) for mb, b in self.batches.items()} if self.track else {}
        self.store = {}
        self.uses = dict(self.uses0)
        self.ctx = {}
        self.wctx = {}
        self.lm = [0.0] * self.M
        self.gen = [0.0] * self.M
        self.live = [0, 0, 0]
        self.peak = [0, 0, 0]
        self.mem = []
        self.times = [[0.0, 0.0, 0.0] for _ in self.ops]
        self.msg_bytes = [0] * len(self.ops)  # a send's or recv's message bytes (the trace's "bytes")
        self.op_bytes = [0] * len(self.ops)
        # what each forward keeps (table key (module, chunk, mb), chunk -1 off the backbone): its
        # saved tensors' bytes from F to B; a split backward's, kept from B to W (torch retains the
        # whole graph for W, so all of them); given to bigmac.simulate(act_bytes=, act_w_bytes=)
        self.act_bytes, self.act_w_bytes = {}, {}
        self.in_bytes = {}  # a recomputed forward's: the input it keeps (bigmac.simulate(in_bytes=))
        self.sends, self.keep = [], []
        # which local compute op consumes each recv
        self.recv_consumer = {}
        for k, op in enumerate(self.ops):
            if op.kind != bigmac.OP_RECV:
                continue
            for j in range(k + 1, len(self.ops)):
                c = self.ops[j]
                if c.kind == bigmac.OP_COMPUTE and c.mb == op.mb and op.tensor in self.flow[j][0]:
                    self.recv_consumer[k] = j
                    break
            else:
                raise self._fail(k, "no later compute op on rank %d consumes this tensor" % self.me)
        # post every recv's header now
        self.hdr = {}
        for k, op in enumerate(self.ops):
            if op.kind == bigmac.OP_RECV:
                if (op.tensor, op.mb) in self.hdr:
                    raise self._fail(k, "the same tensor is received twice")
                h = torch.zeros(HDR, dtype=torch.int64)
                if not self.comm_cpu:
                    h = h.to(self.device)
                try:
                    req = dist.irecv(h, src=self.ranks[op.peer], group=self.group, tag=2 * (op.tensor * self.M + op.mb))
                except RuntimeError as e:
                    raise self._comm_error(k, "tensor %s of microbatch %d from rank %d (posting its header's receive)"
                                           % (self.tensor_names[op.tensor], op.mb, self.ranks[op.peer]), self.ranks[op.peer], e) from e
                self.hdr[(op.tensor, op.mb)] = (h, req)
        # the shared clock origin: rank 0's
        o = torch.tensor([time.time()], dtype=torch.float64)
        if self.P > 1:
            o = o if self.comm_cpu else o.to(self.device)
            self._wait(lambda: dist.broadcast(o, src=self.ranks[0], group=self.group, async_op=True), None,
                       "rank %d's clock (broadcast at the start of the step)" % self.ranks[0],
                       self.ranks[0] if self.rank else None)
        self.origin = float(o[0])
        self.opt.zero_grad(set_to_none=False)
        for ps in self.params:
            for p in ps:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
        self._sync_begin()
        t0 = time.time()
        self.mem.append((self._now(), 0.0, 0.0, 0.0))
        mb_pend = [0.0] * self.M
        mb_last = [0.0] * self.M
        for k, op in enumerate(self.ops):
            heartbeat(step, k)
            tm = self.times[k]
            try:
                if op.kind == bigmac.OP_RECV:
                    tm[0] = self._now()
                    self._recv(k, op)
                    tm[1] = tm[2] = self._now()
                    mb_pend[op.mb] = max(mb_pend[op.mb], tm[1])
                elif op.kind == bigmac.OP_SEND:
                    tm[0] = tm[1] = tm[2] = self._now()
                    self._send(k, op)
                else:
                    tm[0] = self._now()
                    ready = max(mb_pend[op.mb], mb_last[op.mb])
                    self._compute(k, op)
                    tm[1] = self._now()
                    tm[2] = ready
                    mb_last[op.mb], mb_pend[op.mb] = tm[1], 0.0
                    self.mem.append((tm[1] if op.pass_ == "F" else tm[0],) + tuple(float(v) for v in self.live))
                    if op.pass_ != "F":
                        self._sync_start(k)
            except bigmac.Error:
                raise
            except Exception as e:  # not the user's code (that is tagged in _compute): name the op all the same
                if op.kind != bigmac.OP_COMPUTE and isinstance(e, RuntimeError):
                    raise self._comm_error(k, "tensor %s of microbatch %d (%s rank %d)" % (
                        self.tensor_names[op.tensor], op.mb, "to" if op.kind == bigmac.OP_SEND else "from", self.ranks[op.peer]),
                        self.ranks[op.peer], e) from e
                raise self._fail(k, "%s: %s%s" % (type(e).__name__, e, where_raised(e))) from e
        heartbeat(step, len(self.ops))
        for k, reqs in self.sends:
            op = self.ops[k]
            for r in reqs:
                self._wait(r, k, "rank %d to take tensor %s of microbatch %d (the send's completion at the step's end)"
                           % (self.ranks[op.peer], self.tensor_names[op.tensor], op.mb), self.ranks[op.peer])
        self.sends, self.keep = [], []
        for (i, mb) in self.ctx:
            raise bigmac.Error("rank %d: %s microbatch %d: forward without a backward in the table"
                               % (self.me, self.inst[i]["name"], mb))
        for (i, mb) in self.wctx:
            raise bigmac.Error("rank %d: %s microbatch %d: backward (B) without its weight gradient (W) in the table"
                               % (self.me, self.inst[i]["name"], mb))
        for (tsr, mb), v in self.store.items():
            raise bigmac.Error("rank %d: tensor %s of microbatch %d was never used up" % (self.me, self.tensor_names[tsr], mb))
        self.ms = (time.time() - t0) * 1e3
        # the step after the walk, for the log (docs/simulator.md "The step"): from the first
        # all-reduce's start (inside the walk) to the last one's end
        self.sync_start_ms = self._now()
        self._allreduce()
        if self.colls:
            self.sync_start_ms = min(self.sync_start_ms, min(c["start_ms"] for c in self.colls))
        self.sync_end_ms = self._now()
        self.grad_norm = None
        if self.scaler is not None:
            self._sync_overflow()
            self.scaler.unscale_(self.opt)
        if self.clip is not None:
            self.grad_norm = self._clip_norm()
        self.lr = self.opt.param_groups[0]["lr"]  # the step's (before the scheduler moves it)
        o0 = self._now()
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        self.optimizer_ms = self._now() - o0
        # the optimizer state the rank holds (AdamW's exp_avg and exp_avg_sq; not the scalar step)
        self.optimizer_state_bytes = sum(v.numel() * v.element_size() for st in self.opt.state.values()
                                         for v in st.values() if torch.is_tensor(v) and v.dim() > 0)
        if self.sched is not None:
            self.sched.step()
        return self.ms

    def rank_inputs(self, mb):
        """The spec inputs this rank's modules consume for microbatch mb (its F ops' modules)."""
        names = set()
        for op in self.ops:
            if op.kind == bigmac.OP_COMPUTE and op.pass_ == "F" and op.mb == mb:
                names.update(c for c in self.consumes[op.module] if c in self.inputs)
        return tuple(sorted(names))

    def _pipe_sum(self, v, what):
        """v (a float64 tensor) summed over this pipeline's ranks."""
        if self.P == 1:
            return v
        f = v if self.comm_cpu else v.to(self.device)
        self._wait(lambda: dist.all_reduce(f, op=dist.ReduceOp.SUM, group=self.group, async_op=True), None, what)
        return f.cpu()

    def _clip_norm(self):
        """torch.nn.utils.clip_grad_norm_ over the whole model: the global 2-norm of every
        gradient (replicated modules counted once, on pipeline rank 0; every replica holds the
        same gradients after the all-reduce), then every gradient scaled by max/(norm + 1e-6)
        when that is below 1. Returns the norm."""
        sq = torch.zeros(1, dtype=torch.float64)
        for i, x in enumerate(self.inst):
            if x["replicated"] and self.rank != 0:
                continue
            for p in self.params[i]:
                if p.grad is not None:
                    sq += p.grad.detach().double().pow(2).sum().cpu()
        norm = float(self._pipe_sum(sq, "the sum of squared gradients over the ranks (clip_grad_norm)")[0].sqrt())
        coef = self.clip / (norm + 1e-6)
        if coef < 1.0:
            for ps in self.params:
                for p in ps:
                    if p.grad is not None:
                        p.grad.mul_(coef)
        return norm

    def _sync_overflow(self):
        """A grad scaler skips the step when a gradient overflowed: make every rank see it when
        any rank does (a non-finite gradient on one rank poisons one gradient on every other, so
        every rank's scaler skips the step and lowers its scale alike)."""
        bad = any(p.grad is not None and not torch.isfinite(p.grad).all() for ps in self.params for p in ps)
        f = torch.tensor([1.0 if bad else 0.0], dtype=torch.float64)
        if self.P * self.D > 1:
            f = f if self.comm_cpu else f.to(self.device)
            self._wait(lambda: dist.all_reduce(f, op=dist.ReduceOp.MAX, group=self.world_group, async_op=True), None,
                       "every rank's gradient overflow flag (grad_scaler)")
        if float(f[0]) > 0 and not bad:
            for ps in self.params:
                for p in ps:
                    if p.grad is not None:
                        p.grad.view(-1)[0:1].fill_(float("inf"))
                        return

    def _release(self, key):
        self.uses[key] = self.uses.get(key, 0) - 1
        if self.uses[key] <= 0:
            self.store.pop(key, None)

    def _recv(self, k, op):
        key = (op.tensor, op.mb)
        h, req = self.hdr.pop(key)
        what = "tensor %s of microbatch %d from rank %d" % (self.tensor_names[op.tensor], op.mb, self.ranks[op.peer])
        self._wait(req, k, what + " (its header)", self.ranks[op.peer])
        h = h.cpu().tolist()
        code, nd = h[0], h[1]
        if not (0 <= code < len(_DTYPES)) or not (0 <= nd <= HDR - 2):
            raise self._fail(k, "malformed tensor header from rank %d" % self.ranks[op.peer])
        shape = tuple(h[2:2 + nd])
        exp = self._expected(k)
        if exp is not None and tuple(exp) != shape:
            raise self._fail(k, "tensor %s of microbatch %d from rank %d has shape %s; rank %d expects %s"
                             % (self.tensor_names[op.tensor], op.mb, self.ranks[op.peer], list(shape), self.me, list(exp)))
        buf = torch.empty(shape, dtype=_DTYPES[code], device="cpu" if self.comm_cpu else self.device)
        self._wait(lambda: dist.irecv(buf, src=self.ranks[op.peer], group=self.group, tag=2 * (op.tensor * self.M + op.mb) + 1), k, what,
                   self.ranks[op.peer])
        self.msg_bytes[k] = buf.numel() * buf.element_size()
        self.store[key] = buf.to(self.device)

    def _send(self, k, op):
        key = (op.tensor, op.mb)
        if key not in self.store:
            raise self._fail(k, "sends %s of microbatch %d before it is made or received here"
                             % (self.tensor_names[op.tensor], op.mb))
        x = self._comm(self.store[key]).contiguous()
        h = torch.zeros(HDR, dtype=torch.int64)
        if x.dim() > HDR - 2:
            raise self._fail(k, "tensors of more than %d dimensions cannot travel" % (HDR - 2))
        h[0], h[1] = _DTYPES.index(x.dtype), x.dim()
        h[2:2 + x.dim()] = torch.tensor(list(x.shape), dtype=torch.int64)
        if not self.comm_cpu:
            h = h.to(self.device)
        tag = 2 * (op.tensor * self.M + op.mb)
        self.sends.append((k, (dist.isend(h, dst=self.ranks[op.peer], group=self.group, tag=tag),
                               dist.isend(x, dst=self.ranks[op.peer], group=self.group, tag=tag + 1))))
        self.keep.append((h, x))  # isend's buffers stay alive until the step's end
        self.msg_bytes[k] = x.numel() * x.element_size()
        self._release(key)

    def _compute(self, k, op):
        ik = self.inst_of[(op.module, op.chunk if op.module == self.bb else -1)]
        inst = self.inst[ik]
        needs, makes = self.flow[k]
        b = self.batches[op.mb]
        role = ROLE[inst["role"]]
        for n in needs:
            if (n, op.mb) not in self.store:
                raise self._fail(k, "input %s of microbatch %d is not here (no earlier recv or producer on this rank)"
                                 % (self.tensor_names[n], op.mb))
        if op.pass_ == "W":
            w = self.wctx.pop((ik, op.mb), None)
            if w is None:
                raise self._fail(k, "weight gradient (W) before its backward (B) on this rank")
            tensors, grads, nbytes = w
            params = [p for p in self.params[ik] if p.requires_grad]
            if tensors and params:
                with self._user(k, inst, "weight gradient (W)"):
                    torch.autograd.backward(tensors, grads, inputs=params)
            self.live[role] -= nbytes
            return
        if op.pass_ == "F":
            if (ik, op.mb) in self.ctx:
                raise self._fail(k, "forward run twice")
            leaves = [self.store[(n, op.mb)].detach().requires_grad_(self.store[(n, op.mb)].is_floating_point())
                      for n in needs]
            rng = self._rng_state() if ik in self.rc else None  # the rerun draws the same numbers
            out, loss, acts = self._forward(k, op, inst, ik, leaves, b, "forward")
            if loss is None and inst["chunk"] == self.P * self.V - 1:
                raise self._fail(k, "module \"%s\" chunk %d (layers %d..%d, the last chunk) returned no loss: the "
                                 "backbone never reaches its loss\nhint: the last chunk must return (output, loss); "
                                 "does the spec's \"layers\" (%d) match the model's?" % (
                                     inst["name"], inst["chunk"], inst["a"], inst["b"] - 1, inst["b"]))
            if loss is not None and loss.numel() != 1:
                raise self._fail(k, "module \"%s\" returned a loss of shape %s; the loss must be a scalar (reduce a "
                                 "per-sample loss with .mean() or .sum())" % (inst["name"], list(loss.shape)))
            if loss is not None and not math.isfinite(float(loss)) and self.scaler is None:
                raise self._fail(k, "loss is %s" % ("NaN" if math.isnan(float(loss)) else "Inf"))
            if out is not None and not torch.isfinite(out).all():
                raise self._fail(k, "output is not finite (NaN or Inf)")
            shape = tuple(out.shape) if out is not None else None
            keep = acts.bytes  # live for the role from the end of F until B (W when split)
            if ik in self.no_bwd:  # frozen, no backward in the table: nothing is kept
                acts.bytes = keep = 0
            elif ik in self.rc:  # recomputed: the graph's bytes while F ran, then only its input
                kin = _Acts(self.param_ptrs, self.batch_ptrs[op.mb] if self.track else ())
                for t in leaves:
                    kin.pack(t)
                keep = kin.bytes
                self.ctx[(ik, op.mb)] = {"in": leaves, "bytes": keep, "rc": rng, "out_shape": shape}
                self.in_bytes[(op.module, inst["chunk"], op.mb)] = keep
            else:
                self.ctx[(ik, op.mb)] = {"in": leaves, "out": out, "loss": loss, "bytes": keep, "out_shape": shape}
            self.op_bytes[k] = acts.bytes
            self.act_bytes[(op.module, inst["chunk"], op.mb)] = acts.bytes
            self.peak[role] = max(self.peak[role], self.live[role] + acts.bytes)
            self.live[role] += keep
            if loss is not None:
                if role == 1:
                    self.lm[op.mb] = float(loss)
                elif role == 2:
                    self.gen[op.mb] += float(loss)
            for n in makes:
                if out is None:
                    raise self._fail(k, "module \"%s\" returned no output, the table sends %s" % (inst["name"], self.tensor_names[n]))
                self.store[(n, op.mb)] = out.detach()
                if self.uses.get((n, op.mb), 0) == 0:
                    self.store.pop((n, op.mb))
        else:
            ctx = self.ctx.pop((ik, op.mb), None)
            if ctx is None:
                raise self._fail(k, "backward without its forward on this rank")
            if "rc" in ctx:  # recomputed: the kept input goes, the rerun forward's graph comes
                self.live[role] -= ctx["bytes"]
                with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
                    self._set_rng_state(ctx["rc"])
                    out, loss, acts = self._forward(k, op, inst, ik, ctx["in"], b, "recomputed forward")
                ctx = {"in": ctx["in"], "out": out, "loss": loss, "bytes": acts.bytes}
                self.live[role] += acts.bytes
                self.peak[role] = max(self.peak[role], self.live[role])
            split = (ik, op.mb) in self.split
            if not split:  # a split backward's graph, and so its activations, lives until W
                self.live[role] -= ctx["bytes"]
            out, loss = ctx["out"], ctx["loss"]
            dout = None
            for n in needs:
                g = self.store[(n, op.mb)]
                if out is None or tuple(g.shape) != tuple(out.shape):
                    raise self._fail(k, "gradient %s has shape %s, the module's output %s" % (
                        self.tensor_names[n], list(g.shape), None if out is None else list(out.shape)))
                dout = g if dout is None else dout + g
            tensors, grads = [], []
            if loss is not None and loss.requires_grad:
                ls = loss * (1.0 / (self.D * self.M))
                tensors.append(self.scaler.scale(ls) if self.scaler is not None else ls)
                grads.append(None)
            if out is not None and dout is not None and out.requires_grad:
                tensors.append(out)
                grads.append(dout.to(out.dtype))
            leaves = ctx["in"]
            if split:  # B: the inputs' gradients only; W later takes the weights' from the kept graph
                need = [x for x in leaves if x.requires_grad]
                if tensors and need:
                    with self._user(k, inst, "backward"):
                        torch.autograd.backward(tensors, grads, inputs=need, retain_graph=True)
                self.wctx[(ik, op.mb)] = (tensors, grads, ctx["bytes"])
                self.act_w_bytes[(op.module, inst["chunk"], op.mb)] = ctx["bytes"]
            elif tensors:
                with self._user(k, inst, "backward"):
                    torch.autograd.backward(tensors, grads)
            if makes:
                if len(makes) != len(leaves):
                    raise self._fail(k, "makes %d gradients for %d inputs" % (len(makes), len(leaves)))
                for n, leaf in zip(makes, leaves):
                    g = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
                    if self.scaler is None and not torch.isfinite(g).all():
                        raise self._fail(k, "gradient is not finite (NaN or Inf)")
                    self.store[(n, op.mb)] = g
                    if self.uses.get((n, op.mb), 0) == 0:
                        self.store.pop((n, op.mb))
        for n in needs:
            self._release((n, op.mb))

    def _forward(self, k, op, inst, ik, leaves, b, what):
        """inst's module called on leaves (one: itself; several: concatenated along dim 0) and
        batch b under the saved-tensor hooks (no_grad for a module without backward): (output,
        loss, the _Acts that counted what it saved)."""
        x = None
        if len(leaves) == 1:
            x = leaves[0]
        elif len(leaves) > 1:
            x = torch.cat(leaves, 0)
        acts = _Acts(self.param_ptrs, self.batch_ptrs[op.mb] if self.track else ())
        hooks = torch.autograd.graph.saved_tensors_hooks(acts.pack, acts.unpack) if self.track else \
            contextlib.nullcontext()
        nograd = torch.no_grad() if ik in self.no_bwd else contextlib.nullcontext()
        try:
            with hooks, nograd, self._user(k, inst, what):
                out, loss = split_result(inst["mod"](x, b), inst["name"])
        except bigmac.Error as e:
            if getattr(e, "rank", None) is not None:
                raise
            raise self._fail(k, str(e))
        return out, loss, acts

    def _rng_state(self):
        """The RNG states a forward draws from (CPU, and the device's on CUDA), for its rerun."""
        return (torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None)

    def _set_rng_state(self, st):
        torch.set_rng_state(st[0])
        if st[1] is not None:
            torch.cuda.set_rng_state(st[1], self.device)

    def _user(self, k, inst, what):
        """A context in which an exception from the user's module becomes bigmac.Error tagged with
        the rank, op, step, module and microbatch (and where it was raised)."""
        ex = self

        class _Tag:
            def __enter__(self):
                return self

            def __exit__(self, typ, e, tb):
                if e is None or isinstance(e, bigmac.Error) or not isinstance(e, Exception):
                    return False
                op = ex.ops[k]
                chunk = " chunk %d" % op.chunk if inst["chunk"] >= 0 else ""
                raise ex._fail(k, "module \"%s\"%s raised %s: %s in its %s of microbatch %d%s" % (
                    inst["name"], chunk, type(e).__name__, e, what, op.mb, where_raised(e))) from e
        return _Tag()

    def _sync_begin(self):
        """The step's gradient all-reduces (Megatron's overlap, docs/simulator.md "The step"): each
        instance's starts (async_op) right after the rank's last backward of it (_sync_start) and
        runs on gloo's threads while the walk goes on; _allreduce waits for them before the
        optimizer. Replicated modules sum over all P*D ranks, whose op lists differ: theirs start
        in one fixed order (generators, then encoders, each in spec order), each once its own
        backward and every earlier one's are done; backbone chunks sum over the D replicas of this pipeline rank, which walk
        the same op list, and start as they become ready."""
        self.colls, self.pending, self.started = [], [], set()
        self._sync_start(-1)  # an instance without a backward on this rank: its zeros at once

    def _sync_start(self, k):
        world_wait = False
        # the replicated modules' in one fixed order: generators first (their backward runs
        # first), then the encoders, each in spec order (the C executor's and the simulator's)
        order = sorted(range(len(self.inst)), key=lambda i: (self.inst[i]["replicated"] and self.inst[i]["role"] != "generator", i))
        for i in order:
            x = self.inst[i]
            if i in self.started or not self.params[i]:
                continue
            if x["replicated"]:
                if self.P * self.D == 1:
                    continue
                if world_wait or self.last_bwd[i] > k:
                    world_wait = True
                    continue
                group, over = self.world_group, "the ranks"
            else:
                if self.D == 1 or self.last_bwd[i] > k:
                    continue
                group, over = self.dp_group, "the data-parallel replicas"
            self.started.add(i)
            flat = torch.cat([p.grad.reshape(-1) for p in self.params[i]])
            f = self._comm(flat)
            c0 = self._now()
            what = "the sum of module %s%s's gradients over %s (all_reduce)" % (
                x["name"], " chunk %d" % x["chunk"] if x["chunk"] >= 0 else "", over)
            try:
                work = dist.all_reduce(f, op=dist.ReduceOp.SUM, group=group, async_op=True)
            except RuntimeError as e:
                raise self._comm_error(None, what, None, e) from e
            self.pending.append((i, f, work, c0, what, k < len(self.ops) - 1))

    def _link(self, world):
        """The link class of a collective over all P*D ranks (world) or over this pipeline rank's
        D replicas: "inter" when its ranks run on more than one host (self.hosts: every rank's
        host name in global rank order, rank = p*D + d, gathered by train(); one host when
        unknown), as the C executor logs it."""
        hosts = getattr(self, "hosts", None)
        if not hosts or len(hosts) != self.P * self.D:
            return "intra"
        members = hosts if world else hosts[self.rank * self.D:(self.rank + 1) * self.D]
        return "inter" if len(set(members)) > 1 else "intra"

    def _allreduce(self):
        """Wait for the step's all-reduces (_sync_begin), in the order they started, and put the
        sums back into the gradients; each one's start, end (when its wait returned) and bytes
        into self.colls (the step log's "collectives", as the C executor's)."""
        self._sync_start(len(self.ops))  # any left (none: every backward has run)
        for i, f, work, c0, what, in_walk in self.pending:
            x = self.inst[i]
            self._wait(work, None, what)
            c = {"op": "all_reduce", "of": "grads", "module": x["name"]}
            if not x["replicated"]:
                c["chunk"] = x["chunk"]
            c.update({"group": "world" if x["replicated"] else "dp", "ranks": self.P * self.D if x["replicated"] else self.D,
                      "link": self._link(x["replicated"]), "bytes": f.numel() * f.element_size(), "start_ms": round(c0, 3),
                      "end_ms": round(self._now(), 3)})
            if in_walk:  # started before the rank's last op: its end is when the wait returned
                c["in_walk"] = True
            self.colls.append(c)
            f = f.to(self.device)
            at = 0
            for p in self.params[i]:
                p.grad.copy_(f[at:at + p.numel()].reshape(p.shape))
                at += p.numel()
        self.pending = []

    # ------------------------------------------------------------ results

    def record(self):
        """This rank's figures of the last step (gathered to rank 0 by train())."""
        return {"rank": self.rank, "replica": self.replica, "peak": list(self.peak), "ms": self.ms, "lm": list(self.lm), "gen": list(self.gen),
                "times": [list(t) for t in self.times], "mem": [list(m) for m in self.mem],
                "bytes": list(self.msg_bytes), "act_bytes": dict(self.act_bytes), "act_w_bytes": dict(self.act_w_bytes),
                "in_bytes": dict(self.in_bytes), "tail": self.tail()}

    def tail(self):
        """The step after the walk, as the C executor's log has it per rank: walk_ms,
        sync_start_ms / sync_end_ms (the gradient all-reduces, from the step's origin),
        optimizer_ms, optimizer_state_bytes, each collective (op, of, module, chunk, group,
        ranks, link, bytes, start_ms, end_ms) and each instance's weights (params: module,
        chunk, bytes)."""
        return {"walk_ms": round(self.ms, 3), "sync_start_ms": round(self.sync_start_ms, 3),
                "sync_end_ms": round(self.sync_end_ms, 3), "optimizer_ms": round(self.optimizer_ms, 3),
                "optimizer_state_bytes": self.optimizer_state_bytes, "collectives": list(self.colls),
                "params": [dict([("module", x["name"])] + ([("chunk", x["chunk"])] if not x["replicated"] else []) +
                                [("bytes", sum(p.numel() * p.element_size() for p in x["mod"].parameters()))])
                           for x in self.inst]}

    def state_dicts(self):
        """{module name: state dict} of this rank's instances: replicated modules whole, the
        backbone's local chunks merged with their layers renumbered as in the whole model."""
        out, parts = {}, []
        for x in self.inst:
            if x["replicated"]:
                out[x["name"]] = {k: v.detach().cpu() for k, v in x["mod"].state_dict().items()}
            else:
                sd = chunk_state(x["mod"], x["a"], x["b"], x["name"])
                parts.append((x["chunk"], x["a"], x["b"], {k: v.detach().cpu() for k, v in sd.items()}))
        return out, parts

    def param_hashes(self):
        """{(module, chunk): sha1 of the instance's parameters and buffers}."""
        return {(x["module"], x["chunk"]): tensor_hash(x["mod"].state_dict()).hexdigest() for x in self.inst}

    def ckpt_state(self):
        return {"modules": {(x["module"], x["chunk"]): x["mod"].state_dict() for x in self.inst},
                "opt": self.opt.state_dict(),
                "sched": self.sched.state_dict() if self.sched is not None and hasattr(self.sched, "state_dict") else None,
                "scaler": self.scaler.state_dict() if self.scaler is not None and hasattr(self.scaler, "state_dict")
                else None}

    def load_ckpt_state(self, st, where):
        have = {(x["module"], x["chunk"]) for x in self.inst}
        if set(st["modules"]) != have:
            raise bigmac.Error("%s: holds modules/chunks %s, this rank runs %s" % (where, sorted(st["modules"]),
                                                                                 sorted(have)))
        for x in self.inst:
            try:
                x["mod"].load_state_dict(st["modules"][(x["module"], x["chunk"])])
            except RuntimeError as e:
                raise bigmac.Error("%s: module \"%s\" does not load: %s" % (where, x["name"], str(e).strip())) from e
        self.opt.load_state_dict(st["opt"])
        if st.get("sched") is not None and self.sched is not None:
            self.sched.load_state_dict(st["sched"])
        if st.get("scaler") is not None and self.scaler is not None:
            self.scaler.load_state_dict(st["scaler"])

    def flat_params(self):
        """[(module, chunk, flat float32 numpy)] of the rank's instances (twins: C layout)."""
        out = []
        for x in self.inst:
            mod = x["mod"]
            v = mod.flat() if hasattr(mod, "flat") else torch.cat([p.detach().reshape(-1).cpu() for p in mod.parameters()])
            out.append((x["module"], x["chunk"], v.numpy().astype(np.float32)))
        return out


def step_loss(records, M, D=1):
    """Losses summed as the C executor does: per global microbatch d*M + m the float losses of
    replica d's ranks, then / (D*M). records: every rank's record (replica 0's alone when D = 1)."""
    lm = gen = 0.0
    DM = np.float32(D * M)
    for d in range(D):
        rs = [r for r in records if r.get("replica", 0) == d]
        for m in range(M):
            a = np.float32(0)
            g = np.float32(0)
            for r in rs:
                a = np.float32(a + np.float32(r["lm"][m]))
                g = np.float32(g + np.float32(r["gen"][m]))
            lm += float(np.float32(a / DM))
            gen += float(np.float32(g / DM))
    return lm + gen, lm, gen


def log_line(step, loss, lm, gen, ms, peaks, dp=1, tails=None):
    """One line of `bigmac train --log` (step is 1-based; peaks in global rank order; with
    dp > 1 the layout and every rank's pp/dp, as the C executor writes them; tails: each rank's
    Executor.tail(), the step after the walk, in the same order)."""
    P = len(peaks) // dp

    def tail(r):
        if not tails or tails[r] is None:
            return ""
        return ", " + _json.dumps(tails[r])[1:-1]
    ranks = ", ".join('{"rank": %d, %s"peak_act_bytes": {"encoder": %.0f, "backbone": %.0f, "generator": %.0f}%s}'
                      % (r, '"pp": %d, "dp": %d, ' % (r // dp, r % dp) if dp > 1 else "", p[0], p[1], p[2], tail(r))
                      for r, p in enumerate(peaks))
    layout = '"layout": {"pp": %d, "dp": %d}, ' % (P, dp) if dp > 1 else ""
    return '{"step": %d, "loss": %.6f, "lm": %.6f, "gen": %.6f, "ms": %.3f, %s"ranks": [%s]}' % (
        step, loss, lm, gen, ms, layout, ranks)
