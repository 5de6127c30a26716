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
After the walk: every replicated module's (encoders, generators) gradients are summed over the
ranks, then the optimizer (AdamW with the spec's "train" settings) steps. The per-step JSONL log
and the Chrome trace are those of `bigmac train` (the trace is written by the C library).
"""
import math
import time

import numpy as np
import torch
import torch.distributed as dist

import bigmac

ROLE = {"encoder": 0, "backbone": 1, "generator": 2}
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32]
HDR = 10  # header: dtype code, ndim, up to 8 dims


class _Acts:
    """Saved-tensor hooks: bytes of every distinct non-parameter storage saved for backward."""

    def __init__(self, params):
        self.params = params
        self.seen = set()
        self.bytes = 0

    def pack(self, t):
        st = t.storage()
        key = (st.data_ptr(), t.device)
        if st.data_ptr() not in self.params and key not in self.seen:
            self.seen.add(key)
            self.bytes += st.nbytes()
        return t

    @staticmethod
    def unpack(t):
        return t


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
    the spec's. So is a table with a recomputed module (not implemented here: no silent default)."""
    names = [m.name for m in spec.modules]
    where = spec.path or spec.name
    if table.module_names != names or table.backbone_module != spec.backbone_module:
        raise bigmac.Error("the table's modules %s are not the spec's %s (%s)\nhint: plan the table from "
                           "this spec" % (table.module_names, names, where))
    for m, tm in zip(spec.modules, table.to_dict()["modules"]):
        if tm.get("recompute", "none") != "none":
            raise bigmac.Error("table module \"%s\" is recomputed (\"recompute\": \"%s\"), which the torch executor "
                               "does not do yet (%s)\nhint: plan without recompute for torch, or train this table "
                               "with bigmac train" % (m.name, tm["recompute"], where))
        if m.role != tm["role"]:
            raise bigmac.Error("table module \"%s\" is a %s, the spec's (%s) a %s" % (m.name, tm["role"], where, m.role))
        for k, v in m.cost.items():
            tv = tm.get("cost", {}).get(k, 0.0)
            if abs(tv - v) > 1e-6 * max(1.0, abs(v)):
                raise bigmac.Error("the table was planned from another spec: module \"%s\" has cost.%s %g in the "
                                   "table, %g in %s\nhint: plan the table from this spec" % (m.name, k, tv, v, where))


class Executor:
    """Pipeline rank `rank` of table for spec: modules from build(name, layer_begin, layer_end),
    microbatches from data(step, mb). group: the torch.distributed group of the P ranks (None:
    the default group; a one-rank table needs none)."""

    def __init__(self, spec, table, build, data, rank, device="cpu", optimizer=None, group=None):
        self.spec = spec = bigmac.load_spec(spec)
        check_table(spec, table)
        self.t, self.build, self.data, self.rank, self.group = table, build, data, rank, group
        self.device = torch.device(device)
        self.P, self.V, self.M = table.pp, table.vpp, table.microbatches
        if dist.is_available() and dist.is_initialized():
            ws = dist.get_world_size(group)
            if ws != self.P:
                raise bigmac.Error("the table has pp %d but %d ranks run it\nhint: --nproc %d (or plan with --pp %d)"
                                   % (self.P, ws, self.P, ws))
            self.comm_cpu = dist.get_backend(group) == "gloo"
        elif self.P != 1:
            raise bigmac.Error("the table has pp %d: initialise torch.distributed with %d ranks first "
                               "(bigmac.torch.spawn or torch.distributed.run)" % (self.P, self.P))
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
        for j in range(self.V):
            c = j * self.P + rank
            a, b = ranges[c]
            if b <= a:
                raise bigmac.Error("backbone chunk %d gets no layer\nhint: use fewer chunks (--pp/--vpp) or more layers" % c)
            self.inst_of[(self.bb, c)] = len(self.inst)
            self.inst.append(self._make(spec.modules[self.bb], c, a, b))
        self.params = [list(x["mod"].parameters()) for x in self.inst]
        self.param_ptrs = {p.data_ptr() for ps in self.params for p in ps}
        tr = spec.train
        allp = [p for ps in self.params for p in ps]
        self.opt = optimizer(allp) if optimizer else torch.optim.AdamW(
            allp, lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"], weight_decay=tr["weight_decay"])
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
        if not isinstance(mod, torch.nn.Module):
            raise bigmac.Error("module \"%s\": the factory returned %s, not a torch.nn.Module" % (m.name, type(mod).__name__))
        return {"module": m.index, "chunk": chunk, "mod": mod.to(self.device), "role": m.role, "name": m.name,
                "replicated": chunk < 0}

    # ------------------------------------------------------------ helpers

    def _fail(self, k, msg):
        return bigmac.Error("rank %d: op #%d %s: %s" % (self.rank, k, self.ops[k].name, msg))

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
        b = self.batches[op.mb]
        if c.pass_ == "B":
            ctx = self.ctx.get((self.inst_of[(c.module, c.chunk if c.module == self.bb else -1)], op.mb))
            if ctx is not None and ctx["out"] is not None:
                return tuple(ctx["out"].shape)
            return None
        needs = self.flow[j][0]
        if len(needs) > 1:  # chunk 0: one encoder's part
            enc = self.inst[self.inst_of[(self.tensor_module[op.tensor], -1)]]["mod"]
            return tuple(enc.out_shape(b)) if hasattr(enc, "out_shape") else None
        mod = inst["mod"]
        return tuple(mod.in_shape(b)) if hasattr(mod, "in_shape") else None

    # ------------------------------------------------------------ step

    def step(self, step):
        """One training step (0-based): the walk, the replicas' all-reduce, the optimizer."""
        self.step_no = step
        self.batches = {}
        for op in self.ops:
            if op.mb not in self.batches:
                self.batches[op.mb] = self.data(step, op.mb)
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
                raise self._fail(k, "no later compute op on rank %d consumes this tensor" % self.rank)
        # post every recv's header now
        self.hdr = {}
        for k, op in enumerate(self.ops):
            if op.kind == bigmac.OP_RECV:
                if (op.tensor, op.mb) in self.hdr:
                    raise self._fail(k, "the same tensor is received twice")
                h = torch.zeros(HDR, dtype=torch.int64)
                if not self.comm_cpu:
                    h = h.to(self.device)
                self.hdr[(op.tensor, op.mb)] = (h, dist.irecv(h, src=op.peer, group=self.group,
                                                              tag=2 * (op.tensor * self.M + op.mb)))
        # the shared clock origin: rank 0's
        o = torch.tensor([time.time()], dtype=torch.float64)
        if self.P > 1:
            dist.broadcast(o if self.comm_cpu else o.to(self.device), src=0, group=self.group)
        self.origin = float(o[0])
        self.opt.zero_grad(set_to_none=False)
        for ps in self.params:
            for p in ps:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
        t0 = time.time()
        self.mem.append((self._now(), 0.0, 0.0, 0.0))
        mb_pend = [0.0] * self.M
        mb_last = [0.0] * self.M
        for k, op in enumerate(self.ops):
            tm = self.times[k]
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
        for reqs in self.sends:
            for r in reqs:
                r.wait()
        self.sends, self.keep = [], []
        for (i, mb) in self.ctx:
            raise bigmac.Error("rank %d: %s microbatch %d: forward without a backward in the table"
                               % (self.rank, self.inst[i]["name"], mb))
        for (i, mb) in self.wctx:
            raise bigmac.Error("rank %d: %s microbatch %d: backward (B) without its weight gradient (W) in the table"
                               % (self.rank, self.inst[i]["name"], mb))
        for (tsr, mb), v in self.store.items():
            raise bigmac.Error("rank %d: tensor %s of microbatch %d was never used up" % (self.rank, self.tensor_names[tsr], mb))
        self.ms = (time.time() - t0) * 1e3
        self._allreduce()
        self.opt.step()
        return self.ms

    def _release(self, key):
        self.uses[key] = self.uses.get(key, 0) - 1
        if self.uses[key] <= 0:
            self.store.pop(key, None)

    def _recv(self, k, op):
        key = (op.tensor, op.mb)
        h, req = self.hdr.pop(key)
        req.wait()
        h = h.cpu().tolist()
        code, nd = h[0], h[1]
        if not (0 <= code < len(_DTYPES)) or not (0 <= nd <= HDR - 2):
            raise self._fail(k, "malformed tensor header from rank %d" % op.peer)
        shape = tuple(h[2:2 + nd])
        exp = self._expected(k)
        if exp is not None and tuple(exp) != shape:
            raise self._fail(k, "tensor %s of microbatch %d from rank %d has shape %s; rank %d expects %s"
                             % (self.tensor_names[op.tensor], op.mb, op.peer, list(shape), self.rank, list(exp)))
        buf = torch.empty(shape, dtype=_DTYPES[code], device="cpu" if self.comm_cpu else self.device)
        dist.irecv(buf, src=op.peer, group=self.group, tag=2 * (op.tensor * self.M + op.mb) + 1).wait()
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
        self.sends.append((dist.isend(h, dst=op.peer, group=self.group, tag=tag),
                           dist.isend(x, dst=op.peer, group=self.group, tag=tag + 1)))
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
                torch.autograd.backward(tensors, grads, inputs=params)
            self.live[role] -= nbytes
            return
        if op.pass_ == "F":
            if (ik, op.mb) in self.ctx:
                raise self._fail(k, "forward run twice")
            leaves = [self.store[(n, op.mb)].detach().requires_grad_(self.store[(n, op.mb)].is_floating_point())
                      for n in needs]
            x = None
            if len(leaves) == 1:
                x = leaves[0]
            elif len(leaves) > 1:
                x = torch.cat(leaves, 0)
            acts = _Acts(self.param_ptrs)
            try:
                with torch.autograd.graph.saved_tensors_hooks(acts.pack, acts.unpack):
                    out, loss = split_result(inst["mod"](x, b), inst["name"])
            except bigmac.Error as e:
                raise self._fail(k, str(e))
            if loss is not None and not math.isfinite(float(loss)):
                raise self._fail(k, "loss is %s" % ("NaN" if math.isnan(float(loss)) else "Inf"))
            if out is not None and not torch.isfinite(out).all():
                raise self._fail(k, "output is not finite (NaN or Inf)")
            self.ctx[(ik, op.mb)] = {"in": leaves, "out": out, "loss": loss, "bytes": acts.bytes}
            self.op_bytes[k] = acts.bytes
            self.live[role] += acts.bytes
            self.peak[role] = max(self.peak[role], self.live[role])
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
                tensors.append(loss * (1.0 / self.M))
                grads.append(None)
            if out is not None and dout is not None and out.requires_grad:
                tensors.append(out)
                grads.append(dout.to(out.dtype))
            leaves = ctx["in"]
            if split:  # B: the inputs' gradients only; W later takes the weights' from the kept graph
                need = [x for x in leaves if x.requires_grad]
                if tensors and need:
                    torch.autograd.backward(tensors, grads, inputs=need, retain_graph=True)
                self.wctx[(ik, op.mb)] = (tensors, grads, ctx["bytes"])
            elif tensors:
                torch.autograd.backward(tensors, grads)
            if makes:
                if len(makes) != len(leaves):
                    raise self._fail(k, "makes %d gradients for %d inputs" % (len(makes), len(leaves)))
                for n, leaf in zip(makes, leaves):
                    g = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
                    if not torch.isfinite(g).all():
                        raise self._fail(k, "gradient is not finite (NaN or Inf)")
                    self.store[(n, op.mb)] = g
                    if self.uses.get((n, op.mb), 0) == 0:
                        self.store.pop((n, op.mb))
        for n in needs:
            self._release((n, op.mb))

    def _allreduce(self):
        if self.P == 1:
            return
        for i, x in enumerate(self.inst):
            if not x["replicated"] or not self.params[i]:
                continue
            flat = torch.cat([p.grad.reshape(-1) for p in self.params[i]])
            f = self._comm(flat)
            dist.all_reduce(f, op=dist.ReduceOp.SUM, group=self.group)
            f = f.to(self.device)
            at = 0
            for p in self.params[i]:
                p.grad.copy_(f[at:at + p.numel()].reshape(p.shape))
                at += p.numel()

    # ------------------------------------------------------------ results

    def record(self):
        """This rank's figures of the last step (gathered to rank 0 by train())."""
        return {"rank": self.rank, "peak": list(self.peak), "ms": self.ms, "lm": list(self.lm), "gen": list(self.gen),
                "times": [list(t) for t in self.times], "mem": [list(m) for m in self.mem],
                "bytes": list(self.msg_bytes)}

    def flat_params(self):
        """[(module, chunk, flat float32 numpy)] of the rank's instances (twins: C layout)."""
        out = []
        for x in self.inst:
            mod = x["mod"]
            v = mod.flat() if hasattr(mod, "flat") else torch.cat([p.detach().reshape(-1).cpu() for p in mod.parameters()])
            out.append((x["module"], x["chunk"], v.numpy().astype(np.float32)))
        return out


def step_loss(records, M):
    """Losses summed as the C executor does: per microbatch the ranks' float losses, then / M."""
    lm = gen = 0.0
    for m in range(M):
        a = np.float32(0)
        g = np.float32(0)
        for r in records:
            a = np.float32(a + np.float32(r["lm"][m]))
            g = np.float32(g + np.float32(r["gen"][m]))
        lm += float(np.float32(a / np.float32(M)))
        gen += float(np.float32(g / np.float32(M)))
    return lm + gen, lm, gen


def log_line(step, loss, lm, gen, ms, peaks):
    """One line of `bigmac train --log` (step is 1-based)."""
    ranks = ", ".join('{"rank": %d, "peak_act_bytes": {"encoder": %.0f, "backbone": %.0f, "generator": %.0f}}'
                      % (r, p[0], p[1], p[2]) for r, p in enumerate(peaks))
    return '{"step": %d, "loss": %.6f, "lm": %.6f, "gen": %.6f, "ms": %.3f, "ranks": [%s]}' % (
        step, loss, lm, gen, ms, ranks)
