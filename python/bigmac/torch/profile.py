"""bigmac.torch.profile: measure a torch model's modules and the torch executor's own costs on
this machine and return the spec with them, so `bigmac simulate` (or bigmac.simulate) predicts
the torch run's step (docs/python.md "bigmac.torch.profile").

Every measurement runs on two ranks of a process group at once (both busy, as in a pipeline):
the default group when torch.distributed is initialised (every rank calls profile(); ranks 0
and 1 measure the transfers; every rank gets rank 0's spec), else a 2-process gloo group on
loopback that profile() starts (bigmac.torch.spawn; build and data run in the forked processes).
On each rank:

The modules, each alone (tensors between modules are detached leaves), over `repeats`
microbatches data(0, 0), data(0, 1), ...:
  act_mib    median bytes its forward saves for backward (saved-tensor hooks, parameters
             excluded), as the executor counts them
  state_mib  parameters + gradients + AdamW's two moments: 4 x parameter bytes (the whole
             module; the planner splits the backbone's by layers)
  out_mib    median bytes of its output (what travels to the next module)
  hooks_us   its forward with the executor's saved-tensor hooks against without (0, not
             measured, with track_memory=False)

The executor's own walk (Executor.step) of a one-rank table of the spec over those modules (the
backbone whole; a one-rank process group):
  fwd_ms, bwd_ms  each module's F / B op as the executor runs it (its work around the module's
                  call: leaves, hooks, checks, the stored outputs): the median over the walk's
                  steps of each step's mean op (a step sums its ops, microbatches of every size)
  w_ms            when the table the prediction is for splits the backward: the walk is a
                  zb-h1 table's, the backbone's bwd_ms its B + W and w_ms its W
  chunk cost      the same walk with the backbone in two chunks: the two chunks' op less the
                  whole's is what a chunk costs whatever its layers (taken out of the
                  backbone's costs, put on each backbone op of the table through the dispatch)
  dispatch        the mean gap between an op's end and the next op's start
  setup           data(step, mb) per call, the walk's first op's start less one dispatch

The optimizer (the executor's default, AdamW with the spec's "train" settings) over the
parameters the table's rank 0 (and rank 1) holds: every module but the backbone and that rank's
backbone chunks (built by build): its step() per GiB of the state the simulator gives that rank.

The executor's transfers between ranks 0 and 1: Executor._send and Executor._recv themselves
(on an Executor made without its constructor), the header's receive posted ahead as
Executor.step does, at 64 B .. 1 MiB payloads:
  latency   a ping-pong while the receiver waits: half the round trip; a line through the sizes
  arrived   a receive started after its message was sent (gloo sends the payload only once the
            receive is posted: a round trip)
  send      the sender's time in _send (the header's and the payload's isend) while the
            receiver computes, as most of a pipeline's sends find it (the receiver waiting in
            its receive, a ping-pong's send, is recorded too: ~2x as long)
  wake      each module's forward right after a receive that waited (slept) for the other
            rank's message against right after another module's forward: the op after a
            sleeping wait runs on a core gone cold
  posting a header's receive, the step's start broadcast
  all-reduce Executor._allreduce itself, one replicated module (every module but the backbone)
            at a time with its parameters' shapes, as the step after the walk runs them

Into the spec's device (the keys `bigmac calibrate` fits from a trace, with the same meaning to
the simulator, docs/simulator.md): op_overhead_us (dispatch, plus the sends, the backbone
chunks' own cost and the wake of each compute op right after a receive, spread over the ops of
the table's rank 0), recv_overhead_us, link_latency_us, link_gbytes_per_s, step_lead_us
(data x forward microbatches + header posts x receives + broadcast + setup + the first op's
cold start: the larger of a wake and the walk's first op over its slot's others),
optimizer_ms_per_gib, coll_latency_us and coll_gbytes_per_s (calibrate's ring fit of the
all-reduces). A modelled data.encoder_cost_scale is set to none (the encoders were measured on
the data). The returned Spec's .overheads holds every measured figure.
"""
import copy
import datetime
import statistics
import time
import types

import torch
import torch.distributed as dist

import bigmac
from bigmac.torch.executor import _Acts, state_ptrs, data_ptrs, split_result, Executor, HDR, check_timeout, check_table, _takes_inputs, \
    DEFAULT_TIMEOUT, chunk_ranges, make_optimizer

MIB = 1048576.0
GIB = 1073741824.0
# the payload sizes (float32 elements) the transfers are measured at: 64 B to 1 MiB
SIZES = (16, 4096, 65536, 262144)
WALK_STEPS = 5  # measured steps of each one-rank walk (after one warm-up step)


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _median(v, default=0.0):
    return statistics.median(v) if v else default


def _spin(seconds):
    """Wait without sleeping (a sleeping thread wakes on a cold core: the timed call after it
    would pay that, which the executor's ops, one after the other, do not)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _at(points, x):
    """The piecewise-linear interpolation of [(x, y)] (sorted by x) at x, the end values beyond."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def _line(points):
    """Least-squares a + b*x through [(x, y)]; b >= 0 (a falling line: the mean, b = 0)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
    if b <= 0:
        return my, 0.0
    return my - b * mx, b


# ---------------------------------------------------------------- transfers

class _Link:
    """Executor._send / Executor._recv over two ranks of group, on an Executor made without its
    constructor: the attributes those two methods (and _wait, _fail, _release) read."""

    def __init__(self, group, rank, ranks, comm_cpu, device, timeout):
        x = object.__new__(Executor)
        x.group, x.rank, x.ranks, x.me = group, rank, ranks, ranks[rank]
        x.P, x.D, x.M, x.step_no = 2, 1, 1, 0
        x.comm_cpu, x.device = comm_cpu, torch.device(device)
        x.timeout = check_timeout(timeout)
        x.td = datetime.timedelta(seconds=x.timeout)
        x.store, x.uses, x.hdr, x.sends, x.keep = {}, {}, {}, [], []
        x.tensor_names, x.ops, x.msg_bytes = [], [], []
        x._expected = lambda k: None  # the shape check: no consumer module here
        self.x, self.n = x, 0

    def _op(self, kind, tensor):
        x = self.x
        while len(x.tensor_names) <= tensor:
            x.tensor_names.append("profile%d" % len(x.tensor_names))
        x.ops.append(types.SimpleNamespace(kind=kind, tensor=tensor, mb=0, peer=1 - x.rank,
                                           name="%s:profile%d" % ("SEND" if kind == bigmac.OP_SEND else "RECV", tensor)))
        x.msg_bytes.append(0)
        return len(x.ops) - 1, x.ops[-1]

    def post(self, tensor):
        """The header's receive of tensor, posted ahead as Executor.step posts them; seconds."""
        x = self.x
        t0 = time.perf_counter()
        h = torch.zeros(HDR, dtype=torch.int64)
        if not x.comm_cpu:
            h = h.to(x.device)
        req = dist.irecv(h, src=x.ranks[1 - x.rank], group=x.group, tag=2 * tensor)
        x.hdr[(tensor, 0)] = (h, req)
        return time.perf_counter() - t0

    def send(self, tensor, t):
        x = self.x
        k, op = self._op(bigmac.OP_SEND, tensor)
        x.store[(tensor, 0)] = t
        x.uses[(tensor, 0)] = 1
        x._send(k, op)

    def recv(self, tensor):
        x = self.x
        k, op = self._op(bigmac.OP_RECV, tensor)
        x._recv(k, op)
        x.uses[(tensor, 0)] = 1
        x._release((tensor, 0))

    def finish(self):
        """The sends' completion (as at the end of Executor.step)."""
        x = self.x
        for k, reqs in x.sends:
            for r in reqs:
                x._wait(r, k, "the profile's send")
        x.sends, x.keep = [], []

    def barrier(self):
        self.x._wait(lambda: dist.barrier(group=self.x.group, async_op=True), None, "the profile's barrier")


def _transfers(group, rank, ranks, comm_cpu, device, timeout, repeats):
    """Rank 0 and 1's side of the transfer measurements (every figure in microseconds, per size
    in bytes); rank 0's dict is the result."""
    ln = _Link(group, rank, ranks, comm_cpu, device, timeout)
    dev = torch.device("cpu" if comm_cpu else device)
    tid = 0
    lat, arrived, send, send_busy, posts = {}, {}, {}, {}, []
    for n in SIZES:
        x = torch.randn(n, device=dev)
        nbytes = n * 4
        rtt, rcv, snd, sbusy = [], [], [], []
        for i in range(repeats + 1):
            # the receiver waits: rank 0 sends, rank 1 answers with the same tensor
            a, b = tid, tid + 1
            tid += 2
            posts.append(ln.post(b if rank == 0 else a))
            ln.barrier()
            if rank == 0:
                _spin(0.002)  # rank 1 is in its receive by now
                t0 = time.perf_counter()
                ln.send(a, x)
                t1 = time.perf_counter()
                ln.recv(b)
                t2 = time.perf_counter()
                if i:
                    rtt.append(t2 - t0)
                    snd.append(t1 - t0)
            else:
                ln.recv(a)
                ln.send(b, ln.x.store.pop((a, 0), x))
            ln.finish()
            # the message is there before the receive starts: rank 1 times its receive; rank 0
            # times its send while rank 1 computes (spins), as a pipeline's sends mostly find
            # their receiver busy
            c = tid
            tid += 1
            if rank == 1:
                ln.post(c)
            ln.barrier()
            if rank == 0:
                _spin(0.0005)  # rank 1 is in its spin by now
                t0 = time.perf_counter()
                ln.send(c, x)
                if i:
                    sbusy.append(time.perf_counter() - t0)
            else:
                _spin(0.002)
            ln.barrier()
            if rank == 1:
                _spin(0.002)  # the header has arrived by now
                t0 = time.perf_counter()
                ln.recv(c)
                if i:
                    rcv.append(time.perf_counter() - t0)
                ln.x.store.pop((c, 0), None)
            ln.finish()
            ln.x.ops, ln.x.msg_bytes = [], []
        lat[nbytes] = _median(rtt) / 2 * 1e6
        send[nbytes] = _median(snd) * 1e6
        send_busy[nbytes] = _median(sbusy) * 1e6
        arrived[nbytes] = rcv
    # rank 1's arrived receives to rank 0
    mine = {k: _median(v) * 1e6 for k, v in arrived.items()} if rank == 1 else None
    obj = [mine]
    dist.broadcast_object_list(obj, src=ranks[1], group=group)
    arrived = obj[0]
    # the step's start broadcast (Executor.step: rank 0's clock)
    bc = []
    for i in range(repeats + 1):
        o = torch.tensor([time.time()], dtype=torch.float64)
        o = o if comm_cpu else o.to(device)
        t0 = time.perf_counter()
        ln.x._wait(lambda: dist.broadcast(o, src=ranks[0], group=group, async_op=True), None, "the profile's broadcast")
        if i:
            bc.append(time.perf_counter() - t0)
    return {"latency_us": lat, "send_us": send, "send_busy_us": send_busy, "arrived_recv_us": arrived,
            "post_us": _median(posts) * 1e6,
            "broadcast_us": _median(bc) * 1e6}


def _ring_fit(points, n=2, f=2):
    """calibrate's fit of the collectives (src/calib/step_log.c fit_ring): least squares through
    the origin of t = f(n-1)/n * bytes / bw + f(n-1) * latency over [(bytes, t us)]; (latency us,
    GB/s); when the sizes cannot tell the two apart (one size, or a fit outside the physical),
    latency alone, the bytes free (GB/s None). Sizes within a factor 4 of each other count as one
    size: their time differences are the machine's noise, not the bytes'."""
    x1 = [f * (n - 1) / n * b for b, _ in points]
    x2 = [f * (n - 1.0)] * len(points)
    t = [v for _, v in points]
    s11, s12, s22 = sum(a * a for a in x1), sum(a * b for a, b in zip(x1, x2)), sum(b * b for b in x2)
    s1t, s2t = sum(a * v for a, v in zip(x1, t)), sum(b * v for b, v in zip(x2, t))
    det = s11 * s22 - s12 * s12
    a = b = 0.0
    sizes = [nb for nb, _ in points]
    if len(points) >= 2 and det > 1e-12 * s11 * s22 and max(sizes) >= 4 * min(sizes):
        a, b = (s1t * s22 - s2t * s12) / det, (s2t * s11 - s1t * s12) / det
    if not a > 0 or b < 0:
        return max(0.0, s2t / s22 if s22 > 0 else 0.0), None
    return b, 1e-3 / a  # a: us per byte


def _collectives(group, rank, ranks, comm_cpu, device, timeout, shapes, repeats):
    """Executor._allreduce itself (on an Executor made without its constructor), one replicated
    module at a time on ranks 0 and 1, with that module's trainable parameters' shapes (shapes:
    [(name, [shape])]): {name: (bytes, median us)} (rank 0's; the ranks start each together)."""
    x = object.__new__(Executor)
    x.group = x.world_group = group
    x.rank, x.ranks, x.me = rank, ranks, ranks[rank]
    x.P, x.D, x.M, x.step_no = 2, 1, 1, 0
    x.comm_cpu, x.device = comm_cpu, torch.device(device)
    x.timeout = check_timeout(timeout)
    x.td = datetime.timedelta(seconds=x.timeout)
    x.ops = []
    x.origin = time.time()
    out = {}
    for name, shp in shapes:
        ps = []
        for sh in shp:
            q = torch.nn.Parameter(torch.randn(sh, device=x.device))
            q.grad = torch.randn(sh, device=x.device)
            ps.append(q)
        x.inst, x.params = [{"replicated": True, "name": name, "chunk": -1, "role": "encoder"}], [ps]
        x.last_bwd = [-1]  # its backward done before the walk's first op: _allreduce starts it
        ts = []
        for i in range(repeats + 1):
            x.colls, x.pending, x.started = [], [], set()
            _Link.barrier(types.SimpleNamespace(x=x))
            _spin(0.001)  # both ranks out of the barrier's wait
            t0 = time.perf_counter()
            x._allreduce()
            if i:
                ts.append((time.perf_counter() - t0) * 1e6)
        out[name] = (sum(q.numel() * q.element_size() for q in ps), _median(ts))
    return out


def _wake(group, rank, ranks, comm_cpu, device, timeout, calls, wait_s, repeats):
    """What a receive that sleeps costs the op after it: each of calls (a module's forward) timed
    right after another module's call (as the walk, which measured the op costs, runs them one
    after the other) and right after Executor._recv waited wait_s for the other rank's message
    (it computes meanwhile: spins), as a pipeline's receiver waits for its peer's op; ranks 0 and
    1 take turns waiting. This rank's median over repeats of (after the wait - after another op)
    per call, us (at least 0)."""
    ln = _Link(group, rank, ranks, comm_cpu, device, timeout)
    one = torch.zeros(16, device=torch.device("cpu" if comm_cpu else device))
    tid = 0
    out = []
    for j, f in enumerate(calls):
        diff = []
        for i in range(repeats + 1):
            ln.barrier()
            calls[j - 1]()
            t0 = time.perf_counter()
            f()
            hot = time.perf_counter() - t0
            for w in (0, 1):
                if rank == w:
                    ln.post(tid)
                ln.barrier()
                if rank == w:
                    ln.recv(tid)
                    t0 = time.perf_counter()
                    f()
                    if i:  # paired with the same repeat's: the machine's slow spells cancel
                        diff.append(time.perf_counter() - t0 - hot)
                    ln.x.store.pop((tid, 0), None)
                else:
                    _spin(wait_s)
                    ln.send(tid, one)
                ln.finish()
                ln.x.ops, ln.x.msg_bytes = [], []
                tid += 1
        out.append(max(0.0, _median(diff)) * 1e6)
    return out


# ---------------------------------------------------------------- the executor's walk

class _Walk:
    """A one-rank Executor of a table of vpp backbone chunks on mods (the modules profile()
    built; with vpp > 1 the chunks built by user_build). step(s, keep) runs one step; kept
    steps add to .dur (module, chunk, pass) -> [ms] (chunk -1 but for the backbone), .steps
    (per step: the same key -> mean ms), .gaps (us between ops), .first (the first op's start,
    us), .calls (data() per call, us) and .opt_ms (the optimizer's step)."""

    def __init__(self, spec, mods, user_build, data, backbone, vpp, M, device, track_memory, group):
        table = bigmac.plan(spec, pp=1, vpp=vpp, backbone=backbone, microbatches=M)
        names = [m.name for m in spec.modules]
        self.bb = spec.backbone_module
        self.dur, self.steps, self.gaps, self.first, self.calls, self.opt_ms = {}, [], [], [], [], []
        self.first_extra = []
        calls = self._calls = []

        def build(name, a, b):
            i = names.index(name)
            if vpp > 1 and i == spec.backbone_module:
                return user_build(name, a, b)
            return mods[i]

        if _takes_inputs(data):
            def timed_data(step, mb, inputs=None):
                t0 = time.perf_counter()
                r = data(step, mb, inputs=inputs)
                calls.append(time.perf_counter() - t0)
                return r
        else:
            def timed_data(step, mb):
                t0 = time.perf_counter()
                r = data(step, mb)
                calls.append(time.perf_counter() - t0)
                return r
        self.x = x = Executor(spec, table, build, timed_data, 0, device=device, group=group, track_memory=track_memory)
        step_fn = x.opt.step
        self._opt = []

        def opt_step(*a, **k):
            t0 = time.perf_counter()
            r = step_fn(*a, **k)
            self._opt.append((time.perf_counter() - t0) * 1e3)
            return r
        x.opt.step = opt_step

    def step(self, s, keep):
        del self._calls[:], self._opt[:]
        x = self.x
        x.step(s)
        if not keep:
            return
        self.calls += [c * 1e6 for c in self._calls]
        self.opt_ms += self._opt
        prev = None
        mine = {}
        for op, t in zip(x.ops, x.times):
            if op.kind != bigmac.OP_COMPUTE:
                continue
            c = op.chunk if op.module == self.bb else -1
            self.dur.setdefault((op.module, c, op.pass_), []).append(t[1] - t[0])
            mine.setdefault((op.module, c, op.pass_), []).append(t[1] - t[0])
            if prev is None:
                self.first.append(t[0] * 1e3)
                first = ((op.module, c, op.pass_), t[1] - t[0])
            else:
                self.gaps.append((t[0] - prev) * 1e3)
            prev = t[1]
        self.steps.append({k: sum(v) / len(v) for k, v in mine.items()})  # a step sums its ops: their mean
        if prev is not None and len(mine[first[0]]) > 1:  # the first op against its slot's others
            rest = mine[first[0]][1:]
            self.first_extra.append((first[1] - sum(rest) / len(rest)) * 1e3)


def _single_group():
    """A one-rank group of this process, for the one-rank walk (every rank of the default group
    makes every one-rank group, in order, as torch.distributed.new_group requires)."""
    gs = [dist.new_group([r]) for r in range(dist.get_world_size())]
    return gs[dist.get_rank()]


def _mix(table):
    """(compute, send, recv ops, F microbatches, compute ops right after a recv) of rank 0 of table."""
    ops = table.ops[0]
    return (sum(o.kind == bigmac.OP_COMPUTE for o in ops), sum(o.kind == bigmac.OP_SEND for o in ops),
            sum(o.kind == bigmac.OP_RECV for o in ops),
            len({o.mb for o in ops if o.kind == bigmac.OP_COMPUTE and o.pass_ == "F"}),
            sum(o.kind == bigmac.OP_COMPUTE and p.kind == bigmac.OP_RECV for p, o in zip(ops, ops[1:])))


# ---------------------------------------------------------------- the modules alone

def _modules(spec, build, data, repeats, warmup, dev, track_memory):
    """Build every module (the backbone whole) and run each alone on `repeats` microbatches:
    (modules, {name: fwd_ms, bwd_ms, act bytes, out bytes, hook us}) (medians)."""
    mods = []
    for m in spec.modules:
        L = m.layers if m.role == "backbone" else 0
        mod = build(m.name, 0, L)
        if not isinstance(mod, torch.nn.Module):
            raise bigmac.Error("profile: module \"%s\": the factory returned %s, not a torch.nn.Module"
                               % (m.name, type(mod).__name__))
        mods.append(mod.to(dev))
    ptrs = state_ptrs(mods)  # the executor's rules: state and the batch's own tensors are not activations
    n = len(spec.modules)
    fwd, bwd, act, out, bare = ([[] for _ in range(n)] for _ in range(5))
    enc = [i for i, m in enumerate(spec.modules) if m.role == "encoder"]
    gens = [i for i, m in enumerate(spec.modules) if m.role == "generator"]
    bb = spec.backbone_module
    M = spec.microbatches or 1

    def fw(i, x, b, hooks=True):
        acts = _Acts(ptrs, data_ptrs(b))
        _sync(dev)
        t0 = time.perf_counter()
        if hooks:
            with torch.autograd.graph.saved_tensors_hooks(acts.pack, acts.unpack):
                o, loss = split_result(mods[i](x, b), spec.modules[i].name)
        else:
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

    def run(i, x, b, rec):
        if track_memory:  # the same forward without the hooks: what the accounting costs
            rec.setdefault("bare", {})[i] = fw(i, x, b, hooks=False)[2]
        return fw(i, x, b)

    for r in range(warmup + repeats):
        b = data(0, r % M)
        rec = {}
        eouts = []
        for i in enc:
            o, _, ms, nb = run(i, None, b, rec)
            rec[i] = (ms, nb, o.numel() * o.element_size())
            eouts.append(o)
        leaves = [o.detach().requires_grad_() for o in eouts]
        x = leaves[0] if len(leaves) == 1 else torch.cat(leaves, 0) if leaves else None
        hid, lm, ms, nb = run(bb, x, b, rec)
        rec[bb] = (ms, nb, hid.numel() * hid.element_size() if hid is not None else 0)
        hleaf = hid.detach().requires_grad_() if hid is not None else None
        gl = []
        for g in gens:
            _, l, ms, nb = run(g, hleaf, b, rec)
            rec[g] = (ms, nb, 0)
            gl.append(l)
        bt = {}
        for g, l in zip(gens, gl):
            bt[g] = bw([l * (1.0 / M) if l is not None else None], [None])
        dh = hleaf.grad if hleaf is not None and hleaf.grad is not None else None
        bt[bb] = bw([lm * (1.0 / M) if lm is not None else None, hid], [None, dh])
        for k, i in enumerate(enc):
            g = leaves[k].grad
            bt[i] = bw([eouts[k]], [g if g is not None else torch.zeros_like(eouts[k])])
        for md in mods:
            md.zero_grad(set_to_none=True)
        if r >= warmup:
            for i in range(n):
                fwd[i].append(rec[i][0])
                act[i].append(rec[i][1])
                out[i].append(rec[i][2])
                bwd[i].append(bt[i])
                bare[i].append(rec.get("bare", {}).get(i, rec[i][0]))
    res = {}
    for i, m in enumerate(spec.modules):
        res[m.name] = {"fwd_ms": max(1e-6, _median(fwd[i])), "bwd_ms": max(1e-6, _median(bwd[i])), "act": _median(act[i]),
                       "out": _median(out[i]), "params": sum(p.numel() * p.element_size() for p in mods[i].parameters()),
                       "hooks_us": max(0.0, (_median(fwd[i]) - _median(bare[i])) * 1e3) if track_memory else 0.0}
    return mods, res


# ---------------------------------------------------------------- every measurement, on one rank

def _forwards(spec, mods, data):
    """A call per module: its forward on microbatch data(0, 0) (the backbone on the encoders'
    outputs, a generator on the backbone's), under autograd as the executor runs it."""
    b = data(0, 0)
    bb = spec.backbone_module
    ins = {}
    outs = []
    with torch.no_grad():
        for i, m in enumerate(spec.modules):
            if m.role == "encoder":
                ins[i] = None
                outs.append(split_result(mods[i](None, b), m.name)[0])
        x = outs[0] if len(outs) == 1 else torch.cat(outs, 0) if outs else None
        ins[bb] = x
        hid = split_result(mods[bb](x, b), spec.modules[bb].name)[0]
    for i, m in enumerate(spec.modules):
        if m.role == "generator":
            ins[i] = hid
    calls = []
    for i in sorted(ins):
        x = ins[i].detach().requires_grad_() if ins[i] is not None else None
        calls.append(lambda i=i, x=x: mods[i](x, b))
    return calls


def _optimizer(rank, spec, table, mods, build, dev, repeats):
    """The optimizer's step (the executor's default: AdamW with the spec's "train" settings) over
    the parameters pipeline rank `rank` of table holds: every module but the backbone (the
    executor keeps each on every rank) and the backbone chunks on that rank, built by build;
    (median ms, the rank's optimizer state in bytes as the simulator counts it: 2 x the trainable
    parameter bytes of each module, the backbone's by its chunks' weights)."""
    bb = spec.backbone_module
    params = [p for i, md in enumerate(mods) if i != bb for p in md.parameters() if p.requires_grad]
    ranges, weights = chunk_ranges(spec, table), table.to_dict().get("chunk_weights") or []
    share = 0.0
    bbm = spec.modules[bb]
    for c, r in enumerate(table.chunk_ranks()):
        if r != rank:
            continue
        a, b = ranges[c]
        params += [p for p in build(bbm.name, a, b).to(dev).parameters() if p.requires_grad]
        share += weights[c] if c < len(weights) else (b - a) / max(1, bbm.layers)
    if not params:
        return 0.0, 0.0
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = make_optimizer(None, params, spec)
    ts = []
    for i in range(repeats + 1):
        _sync(dev)
        t0 = time.perf_counter()
        opt.step()
        _sync(dev)
        if i:
            ts.append((time.perf_counter() - t0) * 1e3)

    def nbytes(md):
        return sum(p.numel() * p.element_size() for p in md.parameters() if p.requires_grad)
    state = sum(2 * nbytes(md) for i, md in enumerate(mods) if i != bb and spec.modules[i].trainable)
    if bbm.trainable:
        state += 2 * nbytes(mods[bb]) * share
    return _median(ts), state


def _measure(rank, group, ranks, comm_cpu, spec, build, data, repeats, warmup, device, track_memory, split, walk_mb,
             timeout, table):
    """Rank `rank` (0 or 1 measure, every rank of group runs the modules and the walk at once,
    as a pipeline keeps every rank busy) of group: the modules alone, the one-rank walk, the
    transfers. Rank 0 returns the figures, compute figures averaged over ranks 0 and 1."""
    dev = torch.device(device)
    one = _single_group()
    # ranks 0 and 1's own group: the transfers' barriers and broadcasts involve them only
    pair = group if dist.get_world_size(group) == 2 else dist.new_group(ranks)
    dist.barrier(group=group)
    mods, alone = _modules(spec, build, data, repeats, warmup, dev, track_memory)
    whole = _Walk(spec, mods, build, data, "zb-h1" if split else "1f1b", 1, walk_mb, device, track_memory, one)
    # the backbone in two chunks: what a chunk costs whatever its layers (its call, the
    # executor's work around it) is the two chunks' sum less the whole, step by step, the two
    # walks' steps taking turns (the machine the same for both)
    halves = None
    if (spec.modules[spec.backbone_module].layers or 0) >= 2:
        halves = _Walk(spec, mods, build, data, "zb-interleaved" if split else "interleaved", 2, walk_mb, device,
                       track_memory, one)
    for s in range(1 + WALK_STEPS):
        whole.step(s, s >= 1)
        if halves is not None:
            halves.step(s, s >= 1)
    bb = spec.backbone_module
    fixed = {}
    for p in ("F", "B", "W"):
        v = [h[(bb, 0, p)] + h[(bb, 1, p)] - w[(bb, 0, p)] for w, h in zip(whole.steps, halves.steps if halves else [])
             if (bb, 0, p) in w and (bb, 0, p) in h and (bb, 1, p) in h]
        if v:
            fixed[p] = min(max(0.0, _median(v)), 0.9 * _median(whole.dur[(bb, 0, p)]))
    optim = sum(2 * sum(p.numel() * p.element_size() for p in md.parameters() if p.requires_grad) for md in mods)
    # what a sleeping receive costs the op after it (ranks 0 and 1; the wait: a mean op's time)
    wake = None
    if rank < 2:
        durs = [d for v in whole.dur.values() for d in v]
        wait = min(0.02, max(2e-4, sum(durs) / len(durs) / 1e3)) if durs else 1e-3
        dist.barrier(group=pair)
        wake = _wake(pair, rank, ranks, comm_cpu, device, timeout, _forwards(spec, mods, data), wait, max(2 * repeats, 10))
    # the optimizer as the table's rank `rank` holds it (ranks 0 and 1 at once)
    opt_rank = _optimizer(rank, spec, table, mods, build, dev, max(repeats, 5)) if rank < min(2, table.pp) else None
    # the replicated modules' gradients (Executor._allreduce: every module but the backbone)
    shapes = [(m.name, [tuple(p.shape) for p in mods[i].parameters() if p.requires_grad])
              for i, m in enumerate(spec.modules) if i != bb and m.trainable]
    shapes = [(n, s) for n, s in shapes if s]
    del mods
    # each op's cost: the median over the walk's steps of the step's mean op (the run's step sums
    # its ops, microbatches of other sizes included; the median step, as the run is measured)
    ops = {k: _median([st[k] for st in whole.steps if k in st]) for k in whole.dur}
    mine = {"alone": alone, "ops": ops, "fixed": fixed,
            "dispatch_us": sum(whole.gaps) / len(whole.gaps) if whole.gaps else 0.0, "first_us": _median(whole.first),
            "first_extra_us": max(0.0, _median(whole.first_extra)), "data_us": _median(whole.calls), "optimizer_ms": _median(whole.opt_ms), "optim_bytes": optim,
            "opt_rank": opt_rank, "wake_us": wake}
    dist.barrier(group=group)
    tr = _transfers(pair, rank, ranks, comm_cpu, device, timeout, max(2 * repeats, 10)) if rank < 2 else None
    if rank < 2:
        tr["collectives"] = _collectives(pair, rank, ranks, comm_cpu, device, timeout, shapes, max(2 * repeats, 10))
    obj = [mine if rank == 1 else None]
    dist.broadcast_object_list(obj, src=ranks[1], group=group)
    if rank != 0:
        return None
    other = obj[0]

    def avg(a, b):  # the two ranks' figures, averaged (dicts: key by key)
        if isinstance(a, dict):
            return {k: avg(a[k], b[k]) if k in b else a[k] for k in a}
        return (a + b) / 2.0 if isinstance(a, float) else a
    out = avg(mine, other)
    out["transfers"] = tr
    out["opt_rank"] = [x for x in (mine["opt_rank"], other["opt_rank"]) if x is not None]
    out["wake_us"] = [(a + b) / 2 for a, b in zip(mine["wake_us"], other["wake_us"])]
    return out


def _measure_spawned(rank, *args):
    return _measure(rank, None, [0, 1], True, *args)


# ---------------------------------------------------------------- profile

def profile(spec, build, data, repeats=5, warmup=1, device="cpu", track_memory=True, executor=True, table=None,
            timeout=DEFAULT_TIMEOUT):
    """Measure every module of spec (built by build(name, layer_begin, layer_end), fed by
    data(step, mb)) and, with executor=True (the default), the torch executor's own costs, and
    return a new bigmac.Spec whose modules carry the measured "cost" and whose "device" the
    executor's figures (the keys `bigmac calibrate` writes); .overheads holds every figure.

    track_memory: as train(track_memory=): whether the saved-tensor accounting runs in the
    measured ops. table: the table the prediction is for (default: the spec planned with its
    own settings at pp >= 2): its ops' mix spreads the sends' cost over the per-op dispatch, and
    a split backward in it (zb-h1, ...) has the backbone's B and W measured as split. The
    process group: the default group when one is initialised (of two ranks or more: every rank
    calls profile(), ranks 0 and 1 measure the transfers, every rank gets the same spec);
    without one, profile() starts a 2-process gloo group on loopback (bigmac.torch.spawn: build
    and data run in the forked processes). timeout: seconds any wait may take (train's).
    executor=False: the modules alone in this process (compute only), no group."""
    spec = bigmac.load_spec(spec)
    for name, v, lo in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise bigmac.Error("profile: %s: expected an integer >= %d, got %r" % (name, lo, v))
    for name, v in (("track_memory", track_memory), ("executor", executor)):
        if not isinstance(v, bool):
            raise bigmac.Error("profile: %s: expected True or False, got %r" % (name, v))
    if table is not None and not isinstance(table, bigmac.Table):
        raise bigmac.Error("profile: table: expected a bigmac.Table, got %s" % type(table).__name__)
    timeout = check_timeout(timeout)
    d = copy.deepcopy(spec.to_dict())
    over = {"track_memory": track_memory, "executor": executor}
    # the encoders' costs are measured on the data itself (its microbatches, whatever their
    # images): a modelled per-microbatch multiplier would count the data's variation twice
    dd = d.get("data", {})
    if dd.get("encoder_cost_scale", {}).get("dist", "none") != "none" or "values" in dd.get("encoder_cost_scale", {}):
        over["encoder_cost_scale_dropped"] = dd["encoder_cost_scale"]
        dd["encoder_cost_scale"] = {"dist": "none"}
    if not executor:
        _, alone = _modules(spec, build, data, repeats, warmup, torch.device(device), track_memory)
        _costs(d, alone)
        over["module_ms"] = {k: (v["fwd_ms"], v["bwd_ms"]) for k, v in alone.items()}
        over["hooks_us"] = {k: v["hooks_us"] for k, v in alone.items()}
        return _spec(d, spec, over)
    if table is None:
        try:
            table = bigmac.plan(spec, pp=max(2, spec.pp))
        except bigmac.Error as e:
            raise bigmac.Error("profile: planning %s at pp %d for the op mix: %s\nhint: pass table= (the table you "
                               "will run)" % (spec.path or spec.name, max(2, spec.pp), e)) from e
    else:
        try:
            check_table(spec, table)
        except bigmac.Error as e:
            raise bigmac.Error("profile: table: %s" % e) from e
    split = any(o.kind == bigmac.OP_COMPUTE and o.pass_ == "W" for ops in table.ops for o in ops)
    M = spec.microbatches or 1
    # the walk runs every microbatch of a step (up to 16): its ops' mean is over the data's mix
    # of microbatches, as the run's step (a few of them leaned on their images' count: -11%)
    args = (spec, build, data, repeats, warmup, device, track_memory, split, max(1, min(M, 16)), timeout,
            table)
    if dist.is_available() and dist.is_initialized():
        group = None
        n = dist.get_world_size(group)
        if n < 2:
            raise bigmac.Error("profile: the process group in use has %d rank; the transfers need two\nhint: call "
                               "profile() on every rank of a group of two or more, before initialising one (profile() "
                               "then starts its own), or with executor=False (the modules alone)" % n)
        ranks = list(range(n))
        backend = dist.get_backend(group)
        res = _measure(dist.get_rank(group), group, ranks[:2], backend == "gloo", *args)
        obj = [res]
        dist.broadcast_object_list(obj, src=ranks[0], group=group)
        res = obj[0]
        over["transfers_on"] = "the process group in use (%s, ranks %d and %d of %d)" % (backend, ranks[0], ranks[1], n)
    else:
        from bigmac.torch import spawn
        res = spawn(_measure_spawned, 2, args, timeout=timeout)[0]
        over["transfers_on"] = "a 2-process gloo group on loopback started by profile()"
    alone, tr = res["alone"], res["transfers"]
    _costs(d, alone)
    over["module_ms"] = {k: (v["fwd_ms"], v["bwd_ms"]) for k, v in alone.items()}
    over["hooks_us"] = {k: v["hooks_us"] for k, v in alone.items()}
    # the modules' ops as the executor's walk ran them
    bb = spec.backbone_module
    ops = res["ops"]
    for i, m in enumerate(d["modules"]):
        c = 0 if i == bb else -1
        for p, key in (("F", "fwd_ms"), ("B", "bwd_ms")):
            if ops.get((i, c, p)):
                m["cost"][key] = round(max(1e-6, ops[(i, c, p)]), 6)
    # the backbone's cost per chunk whatever its layers: on every backbone op of the table
    # (through the dispatch, below), out of the layers' share
    fixed = res["fixed"]
    over["chunk_fixed_ms"] = fixed
    bbc = d["modules"][bb]["cost"]
    if "F" in fixed:
        bbc["fwd_ms"] = round(max(1e-6, ops[(bb, 0, "F")] - fixed["F"]), 6)
    bs, ws = ops.get((bb, 0, "B"), 0.0) - fixed.get("B", 0.0), ops.get((bb, 0, "W"), 0.0) - fixed.get("W", 0.0)
    over["split_backward"] = split
    if split and bs > 0 and ws > 0:  # the split B takes bwd_ms - w_ms, W w_ms (docs/spec.md)
        bbc["bwd_ms"] = round(bs + ws, 6)
        bbc["w_ms"] = round(ws, 6)
    elif bs > 0:
        bbc["bwd_ms"] = round(bs, 6)
    nc, ns, nr, nf, na = _mix(table)
    outs = [v["out"] for v in alone.values() if v["out"] > 0]
    typ = _median(outs, 4.0)
    lat0, lat1 = _line(sorted(tr["latency_us"].items()))
    send_us = _at(sorted(tr["send_busy_us"].items()), typ)
    dispatch = res["dispatch_us"]
    setup_us = max(0.0, res["first_us"] - dispatch)  # zeroing the gradients, the walk's start
    gib = res["optim_bytes"] / GIB
    dv = d.setdefault("device", {})
    nbb = {p: sum(o.kind == bigmac.OP_COMPUTE and o.module == bb and o.pass_ == p for o in table.ops[0])
           for p in ("F", "B", "W")}
    chunk_us = sum(fixed.get(p, 0.0) * 1e3 * n for p, n in nbb.items())
    # the wake: a compute op right after a receive (every gloo receive waits, asleep, at least for
    # its payload's round trip) runs on a core gone cold; the mean over the modules' forwards of
    # what a wait added, on each such op of the table's rank 0 (through the dispatch, as the
    # sends). The step's first op starts cold as well (after the step's setup and the start
    # broadcast's wait): the larger of a wake and what the walk's first op took over its slot's
    # other ops, once per step
    wake_us = sum(res["wake_us"]) / len(res["wake_us"]) if res["wake_us"] else 0.0
    first_us = max(wake_us, res["first_extra_us"])
    dv["op_overhead_us"] = round(dispatch + (send_us * ns + chunk_us + wake_us * na) / max(1, nc + ns + nr), 3)
    dv["recv_overhead_us"] = round(_at(sorted(tr["arrived_recv_us"].items()), typ), 3)
    dv["link_latency_us"] = round(max(0.0, lat0), 3)
    dv["link_gbytes_per_s"] = round(min(1e6, 1e-3 / lat1), 6) if lat1 > 0 else 1e6
    dv["step_lead_us"] = round(nf * res["data_us"] + nr * tr["post_us"] + tr["broadcast_us"] + setup_us + first_us, 3)
    # the optimizer: the table's ranks 0 and 1 (their parameters), per GiB of the state the
    # simulator gives them; the whole model's (the walk's) when they hold none
    ot, ob = sum(t for t, _ in res["opt_rank"]), sum(b for _, b in res["opt_rank"]) / GIB
    if ob > 0:
        dv["optimizer_ms_per_gib"] = round(ot / ob, 6)
    else:
        dv["optimizer_ms_per_gib"] = round(res["optimizer_ms"] / gib, 6) if gib > 0 else 0.0
    # the gradient all-reduces (Executor._allreduce, the executor's work around each included)
    colls = tr["collectives"]
    if colls:
        clat, cbw = _ring_fit(list(colls.values()))
        dv["coll_latency_us"] = round(clat, 3)
        dv["coll_gbytes_per_s"] = round(min(1e6, cbw), 6) if cbw else 1e6
    over.update({
        "dispatch_us": dispatch, "send_us": send_us, "data_us": res["data_us"], "setup_us": setup_us,
        "first_op_us": first_us, "first_extra_us": res["first_extra_us"],
        "wake_us": wake_us, "wake_us_by_module": dict(zip([m.name for m in spec.modules], res["wake_us"])),
        "header_post_us": tr["post_us"], "broadcast_us": tr["broadcast_us"], "optimizer_ms": res["optimizer_ms"],
        "optimizer_rank_ms": [t for t, _ in res["opt_rank"]], "optimizer_rank_bytes": [b for _, b in res["opt_rank"]],
        "latency_us": tr["latency_us"], "arrived_recv_us": tr["arrived_recv_us"], "send_us_by_size": tr["send_busy_us"],
        "send_waiting_us_by_size": tr["send_us"],
        "allreduce_us": {k: v[1] for k, v in colls.items()}, "allreduce_bytes": {k: v[0] for k, v in colls.items()},
        "mix": {"compute": nc, "send": ns, "recv": nr, "forward_microbatches": nf, "after_recv": na, "backbone": nbb},
        "message_bytes": typ})
    return _spec(d, spec, over)


def _costs(d, alone):
    for m in d["modules"]:
        a = alone[m["name"]]
        m["cost"] = {"fwd_ms": round(a["fwd_ms"], 6), "bwd_ms": round(a["bwd_ms"], 6),
                     "act_mib": round(a["act"] / MIB, 9), "state_mib": round(4 * a["params"] / MIB, 9),
                     "out_mib": round(a["out"] / MIB, 9)}


def _spec(d, spec, over):
    s = bigmac.load_spec(d, name=(spec.path or spec.name) + " (profiled)")
    s.overheads = over
    return s
