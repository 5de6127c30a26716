"""bigmac.torch for a real training run (issue 29), on the user model of examples/torch_mllm.py
(outside code: nn.TransformerEncoderLayer blocks, an embedding in the first chunk, a head in the
last) at P = 2:

  modules back   train(gather=True) returns state dicts under the user's names, chunks merged by
                 layer (buffers included), loadable with strict=True into the single-process
                 model: same eval loss as the reference-trained model
  checkpoint     checkpoint=/checkpoint_every=/resume=: the resumed run's losses equal the
                 uninterrupted run's; the set on disk is the last complete one; another pp,
                 table or spec refused with the reason
  user's loop    optimizer=, lr_scheduler=, clip_grad_norm= (global norm = single-process norm),
                 grad_scaler=, on_step on every rank: the same losses as reference() with them
  mistakes       rank-dependent data, replicas initialised by rank, a backbone that never
                 reaches its loss: each refused naming rank/module; the roles printed
  data per rank  data(step, mb, inputs=) called only for the microbatches a rank runs forward,
                 with the inputs its modules consume; from_dataset
  track_memory   False: same losses, no accounting"""
import io
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist

from check import check, raises, done
import bigmac
import bigmac.torch as bt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import torch_mllm as ex  # noqa: E402

SPEC = "examples/torch-mllm.json"
STEPS = 3
tmp = tempfile.mkdtemp()


def close(a, b, tol=1e-4):
    return len(a) == len(b) > 0 and all(abs(x - y) <= tol * max(abs(x), abs(y), 1e-12) for x, y in zip(a, b))


def build(name, a, b):
    """The example's modules, each decoder layer with a buffer holding its global index."""
    m = ex.build(name, a, b)
    if name == "decoder":
        for i, layer in enumerate(m.layers):
            layer.register_buffer("index", torch.tensor([float(a + i)]))
    if name == "encoder":
        m.register_buffer("scale", torch.tensor([2.5]))
    return m


def eval_loss(sds):
    """The held-out loss of the single-process model with these state dicts (strict load)."""
    mods = {n: build(n, 0, 4 if n == "decoder" else 0) for n in ("encoder", "decoder", "head")}
    for n, m in mods.items():
        m.load_state_dict(sds[n], strict=True)
        m.eval()
    tot = 0.0
    with torch.no_grad():
        for i in range(4):
            b = ex.data(10000 + i, 0)
            h, lm = mods["decoder"](mods["encoder"](None, b), b)
            tot += float(lm) + float(mods["head"](h, b)[1])
    return tot / 4


# ---------------------------------------------------------------- (1) the modules back
def two_lists(name, a, b, named=None):
    """A decoder with a second list of as many entries as it has layers: which holds them is
    ambiguous unless bigmac_layers names it."""
    m = build(name, a, b)
    if name == "decoder":
        m.blocks = torch.nn.ModuleList([torch.nn.Identity() for _ in range(b - a)])
        if named:
            m.bigmac_layers = named
    return m


def run_modules(rank):
    r = bt.train(SPEC, build, ex.data, steps=STEPS, gather=True, progress=io.StringIO())
    own = bt.train(SPEC, build, ex.data, steps=1, progress=io.StringIO())
    amb = bt.train(SPEC, two_lists, ex.data, steps=1, progress=io.StringIO())
    named = bt.train(SPEC, lambda n, a, b: two_lists(n, a, b, "layers"), ex.data, steps=1, gather=True,
                     progress=io.StringIO())
    return (list(r), r.state_dicts, sorted(own.state_dicts["decoder"]), (amb.state_dicts, amb.state_dicts_error),
            named.state_dicts and sorted(named.state_dicts["decoder"]))


res = bt.spawn(run_modules, 2, timeout=200)
ref = bt.reference(SPEC, build, ex.data, steps=STEPS, progress=io.StringIO())
pl, sds = res[0][0], res[0][1]
check("torch_loop_modules_losses", close(pl, list(ref)), "%s vs %s" % (pl, list(ref)))
try:
    e_pipe, e_ref = eval_loss(sds), eval_loss(ref.state_dicts)
    ok = abs(e_pipe - e_ref) <= 1e-4 * abs(e_ref)
except Exception as e:  # a strict load that fails is the failure shown
    ok, e_pipe, e_ref = False, repr(e), None
check("torch_loop_modules_load_strict_same_eval_loss", ok, "%s vs %s" % (e_pipe, e_ref))
dec = sds["decoder"]
check("torch_loop_modules_layers_renumbered_buffers",
      all(float(dec["layers.%d.index" % i]) == i for i in range(4)) and float(sds["encoder"]["scale"]) == 2.5
      and "tok.weight" in dec and "lm.weight" in dec, str(sorted(dec)[:6]))
r1 = res[1][2]  # rank 1 without gather: its own chunk (layers 2, 3 and the head), renumbered
check("torch_loop_modules_own_chunk_only", any(k.startswith("layers.2.") for k in r1) and
      not any(k.startswith("layers.0.") for k in r1) and "lm.weight" in r1 and "tok.weight" not in r1, str(r1[:4]))

amb, named = res[0][3], res[0][4]
check("torch_loop_modules_ambiguous_layers_named", amb[0] is None and "bigmac_layers" in (amb[1] or "")
      and named is not None and "layers.3.linear1.weight" in named, "%s; %s" % (amb[1], named and named[:3]))

# ---------------------------------------------------------------- (2) checkpoint / resume
ck = os.path.join(tmp, "ck")


def loop_args():
    return dict(optimizer=lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
                lr_scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.7), clip_grad_norm=1.0)


def run_ckpt(rank):
    full = bt.train(SPEC, build, ex.data, steps=4, progress=io.StringIO(), **loop_args())
    bt.train(SPEC, build, ex.data, steps=2, checkpoint=ck, checkpoint_every=1, progress=io.StringIO(), **loop_args())
    os.makedirs(os.path.join(ck, "step-00000003"), exist_ok=True)  # a set never completed (a crash mid-write)
    listing = sorted(os.listdir(ck))
    rest = bt.train(SPEC, build, ex.data, steps=4, resume=ck, progress=io.StringIO(), **loop_args())
    msgs = []
    for kw in (dict(policy="optimus"),):
        try:
            bt.train(SPEC, build, ex.data, steps=4, resume=ck, progress=io.StringIO(), **kw, **loop_args())
            msgs.append(None)
        except bigmac.Error as e:
            msgs.append(str(e))
    return list(full), list(rest), rest.start_step, listing, msgs


res = bt.spawn(run_ckpt, 2, timeout=200)
full, rest, start, listing, msgs = res[0]
check("torch_loop_resume_same_losses", start == 2 and close(rest, full[2:], 1e-6), "%s vs %s" % (rest, full))
check("torch_loop_checkpoint_last_complete_set", "latest" in listing and "step-00000002" in listing and
      "step-00000001" not in listing and os.path.exists(os.path.join(ck, "step-00000002", "COMPLETE")) and
      sorted(os.listdir(os.path.join(ck, "step-00000002"))) == ["COMPLETE", "rank-0.pt", "rank-1.pt"], str(listing))
check("torch_loop_resume_other_table_refused", msgs[0] and "another table" in msgs[0] and "policy" in msgs[0],
      str(msgs[0]))
raises("torch_loop_resume_other_pp_refused", lambda: bt.train(SPEC, build, ex.data, steps=4, resume=ck, pp=1,
                                                               progress=io.StringIO()),
       bigmac.Error, ("pp 2", "pp 1"))
other = bigmac.load_spec(SPEC).to_dict()
other["modules"][2]["cost"] = {"fwd_ms": 3}
raises("torch_loop_resume_other_spec_refused", lambda: bt.train(other, build, ex.data, steps=4, resume=ck, pp=1,
                                                                 progress=io.StringIO()),
       bigmac.Error, ("another spec",))
raises("torch_loop_resume_nothing_there", lambda: bt.train(SPEC, build, ex.data, steps=1, resume=tmp, pp=1,
                                                            progress=io.StringIO()),
       bigmac.Error, ("no complete checkpoint",))

# ---------------------------------------------------------------- (3) the user's loop


class StaticScaler:
    """A loss scaler with GradScaler's protocol and a fixed scale of 2^10 (CPU torch has no fp16
    GradScaler): scaling is exact, so the losses must not move."""

    def __init__(self):
        self.s, self.unscaled = 1024.0, 0

    def scale(self, t):
        return t * self.s

    def unscale_(self, opt):
        self.unscaled += 1
        for g in opt.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.grad.div_(self.s)

    def step(self, opt):
        opt.step()

    def update(self):
        pass


class OverflowScaler(StaticScaler):
    """GradScaler's protocol with its skip: an infinite first scale overflows the first step's
    gradients, which unscale_ finds; step() then skips the update and update() drops the scale
    to 2^10. Every rank must skip alike (one rank's overflow is every rank's)."""

    def __init__(self):
        super().__init__()
        self.s, self.found, self.skipped = float("inf"), False, 0

    def unscale_(self, opt):
        self.found = any(not torch.isfinite(p.grad).all() for g in opt.param_groups for p in g["params"]
                         if p.grad is not None)
        super().unscale_(opt)

    def step(self, opt):
        if self.found:
            self.skipped += 1
        else:
            opt.step()

    def update(self):
        if self.found:
            self.s = 1024.0


def run_loop(rank):
    seen = []
    r = bt.train(SPEC, build, ex.data, steps=STEPS, progress=io.StringIO(),
                 on_step=lambda s, i: seen.append((s, i["lr"], i["grad_norm"], i["loss"], i["rank"])), **loop_args())
    sc = StaticScaler()
    scaled = bt.train(SPEC, build, ex.data, steps=STEPS, progress=io.StringIO(), grad_scaler=sc)
    ov = OverflowScaler()
    over = bt.train(SPEC, build, ex.data, steps=STEPS, progress=io.StringIO(), grad_scaler=ov)
    return list(r), r.grad_norms, seen, list(scaled), sc.unscaled, list(over), ov.skipped


res = bt.spawn(run_loop, 2, timeout=200)
norms_ref, seen_ref = [], []
ref = bt.reference(SPEC, build, ex.data, steps=STEPS, progress=io.StringIO(),
                   on_step=lambda s, i: seen_ref.append((s, i["lr"], i["grad_norm"])), **loop_args())
plain = bt.reference(SPEC, build, ex.data, steps=STEPS, progress=io.StringIO())
check("torch_loop_user_optimizer_scheduler_clip_losses", close(res[0][0], list(ref)), "%s vs %s" % (res[0][0], list(ref)))
check("torch_loop_clip_global_norm_equals_single_process", close(res[0][1], ref.grad_norms, 1e-5) and
      close(res[1][1], ref.grad_norms, 1e-5) and max(ref.grad_norms) > 1.0,
      "%s vs %s" % (res[0][1], ref.grad_norms))
check("torch_loop_on_step_every_rank", all([(s, lr) for s, lr, _, _, _ in r[2]] == [(s, lr) for s, lr, _ in seen_ref]
                                           and all(x[4] == k for x in r[2]) for k, r in enumerate(res))
      and [round(x[1], 6) for x in seen_ref] == [0.05, 0.035, 0.0245], str(res[1][2]))
check("torch_loop_grad_scaler_same_losses", close(res[0][3], list(plain), 1e-5) and res[0][4] == STEPS,
      "%s vs %s" % (res[0][3], list(plain)))
ov = OverflowScaler()
over = bt.reference(SPEC, build, ex.data, steps=STEPS, progress=io.StringIO(), grad_scaler=ov)
check("torch_loop_grad_scaler_overflow_skips_on_every_rank", ov.skipped == 1 and all(r[6] == 1 for r in res)
      and close(res[0][5], list(over), 1e-5), "skipped %s vs %d; %s vs %s" % ([r[6] for r in res], ov.skipped,
                                                                              res[0][5], list(over)))
gs = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
check("torch_loop_torch_grad_scaler_reference", close(list(bt.reference(SPEC, build, ex.data, steps=1, grad_scaler=gs,
                                                                        progress=io.StringIO())), list(plain)[:1]))
raises("torch_loop_optimizer_not_callable", lambda: bt.reference(SPEC, build, ex.data, steps=1, optimizer=3,
                                                                  progress=io.StringIO()),
       bigmac.Error, ("optimizer: expected a callable",))
raises("torch_loop_clip_bad", lambda: bt.reference(SPEC, build, ex.data, steps=1, clip_grad_norm=-1,
                                                    progress=io.StringIO()), bigmac.Error, ("clip_grad_norm",))

# ---------------------------------------------------------------- (4) mistakes caught


def bad_data(step, mb):
    return ex.data(step + 100 * dist.get_rank(), mb)  # a rank-dependent order


def bad_build(name, a, b):
    m = ex.build(name, a, b)
    if name == "encoder":
        torch.manual_seed(dist.get_rank())  # seeded by rank
        m = ex.Encoder()
    return m


short = bigmac.load_spec(SPEC).to_dict()
short["modules"][1]["layers"] = 3  # the model has 4: the last chunk never reaches the LM head


def run_mistakes(rank):
    out = []
    for kw in (dict(data=bad_data), dict(build=bad_build), dict(spec=short)):
        a = dict(spec=SPEC, build=build, data=ex.data, steps=1, progress=io.StringIO())
        a.update(kw)
        try:
            bt.train(**a)
            out.append(None)
        except bigmac.Error as e:
            out.append(str(e))
    return out


res = bt.spawn(run_mistakes, 2, timeout=200)
m = res[0]
check("torch_loop_rank_dependent_data_refused", m[0] and "rank 0 and rank 1 loaded different data for microbatch 0"
      in m[0], str(m[0]))
check("torch_loop_replicas_init_differently_refused", m[1] and 'module "encoder" is initialised differently on rank 0 '
      'and rank 1' in m[1], str(m[1]))
check("torch_loop_backbone_never_reaches_loss", all(x[2] for x in res) and any(
    'module "decoder" chunk 1 (layers 1..2, the last chunk) returned no loss: the backbone never reaches its loss'
    in x[2] for x in res), str([x[2] for x in res]))
pr = io.StringIO()
bt.reference(SPEC, build, ex.data, steps=1, progress=pr)
check("torch_loop_roles_printed", "roles: encoder encoder, decoder backbone, head generator" in pr.getvalue(),
      pr.getvalue()[:200])



class PerSample(ex.Head):
    def forward(self, x, batch):
        S = batch["image"].shape[0]
        h = x.reshape(S, ex.PATCHES + ex.SEQ, ex.D)[:, :ex.PATCHES].mean(1)
        return None, ((self.out(h) - batch["image"].mean((2, 3))) ** 2).mean(1)  # not reduced over samples


def per_sample_build(name, a, b):
    return PerSample() if name == "head" else build(name, a, b)


raises("torch_loop_per_sample_loss_named", lambda: bt.reference(SPEC, per_sample_build, ex.data, steps=1,
                                                                 progress=io.StringIO()),
       bigmac.Error, ('module "head" returned a loss of shape [4]', "must be a scalar"))


def run_subgroup(rank):  # ranks 1 and 2 of 3 train in their own group (global ranks 1, 2 address each other)
    g = dist.new_group([1, 2])
    if rank == 0:
        return None
    return list(bt.train(SPEC, build, ex.data, steps=2, group=g, pp=2, progress=io.StringIO()))


res = bt.spawn(run_subgroup, 3, timeout=200)
check("torch_loop_train_subgroup", close(res[1], list(plain)[:2]) and res[2] == [], str(res))

# a spec without an encoder: reference() and the pipelined run agree (reference used to fail
# with torch.cat of an empty list)
NOENC = {"format": "bigmac-spec", "version": 1, "name": "no-encoder", "inputs": ["image", "text"],
         "parallel": {"pp": 2, "vpp": 1, "microbatches": 4}, "schedule": {"backbone": "1f1b", "policy": "bigmac"},
         "modules": [{"name": "decoder", "role": "backbone", "consumes": ["text"], "produces": ["hidden"], "layers": 4},
                     {"name": "head", "role": "generator", "consumes": ["hidden"], "produces": ["loss"]}],
         "train": {"steps": 2, "lr": 0.003, "seed": 1}}


class TextOnly(ex.Decoder):
    """The example's decoder with zero image tokens in place of the encoder's."""

    def forward(self, x, batch):
        if self.first:
            x = torch.zeros(batch["text"].shape[0] * ex.PATCHES, ex.D)
        return super().forward(x, batch)


def noenc_build(name, a, b):
    ex.seeded(name)
    return TextOnly(a, b) if name == "decoder" else ex.Head()


def run_noenc(rank):
    return list(bt.train(NOENC, noenc_build, ex.data, steps=2, progress=io.StringIO()))


try:
    ref_noenc = list(bt.reference(NOENC, noenc_build, ex.data, steps=2, progress=io.StringIO()))
except Exception as e:
    ref_noenc = [repr(e)]
pipe_noenc = bt.spawn(run_noenc, 2, timeout=200)[0]
check("torch_loop_reference_without_encoder", close(pipe_noenc, ref_noenc), "%s vs %s" % (pipe_noenc, ref_noenc))


def bad_hook(step, info):
    raise ValueError("my logger is down")


raises("torch_loop_on_step_error_named", lambda: bt.reference(SPEC, build, ex.data, steps=1, on_step=bad_hook,
                                                               progress=io.StringIO()),
       bigmac.Error, ("rank 0: step 1: on_step raised ValueError: my logger is down",))

# ---------------------------------------------------------------- (5) data per rank


HEADIMG = bigmac.load_spec(SPEC).to_dict()
HEADIMG["modules"][2]["consumes"] = ["hidden", "image"]  # the head reads the images too (the example's does)


def run_data(rank):
    calls = []

    def data(step, mb, inputs=None):  # loads only what it is asked for
        calls.append((step, mb, tuple(inputs)))
        b = ex.data(step, mb)
        return {k: b[k] for k in inputs}
    table = bigmac.plan(HEADIMG, pp=2)
    fwd = sorted({op.mb for op in table.ops[rank] if op.kind == bigmac.OP_COMPUTE and op.pass_ == "F"})
    pr = io.StringIO()
    r = bt.train(HEADIMG, build, data, table=table, steps=2, progress=pr)
    return calls, fwd, list(r), pr.getvalue()


res = bt.spawn(run_data, 2, timeout=200)
ok = all(sorted(c[1] for c in calls) == sorted(fwd * 2) and len(calls) == len(set(calls)) for calls, fwd, _, _ in res)
check("torch_loop_data_called_for_forward_microbatches_only", ok, str(res[1][0][:4]))
check("torch_loop_data_inputs_trains_the_same", close(res[0][2], list(bt.reference(SPEC, build, ex.data, steps=2,
                                                                                   progress=io.StringIO()))))
img_mbs = [{op.mb for op in bigmac.plan(HEADIMG, pp=2).ops[r] if op.kind == bigmac.OP_COMPUTE and op.pass_ == "F"
            and op.module in (0, 2)} for r in range(2)]  # the image's consumers: the encoder and the head
ok = all(("image" in c[2]) == (c[1] in img_mbs[r]) and "text" in c[2]
         for r, (calls, _, _, _) in enumerate(res) for c in calls)
check("torch_loop_data_inputs_per_rank", ok, str(res[0][0][:3]))
line = [l for l in res[0][3].splitlines() if l.startswith("data per step:")]
want = "data per step: " + ", ".join("rank %d loads %d microbatches (image, text)" % (r, len(res[r][1]))
                                      for r in range(2))
check("torch_loop_data_per_rank_printed", line == [want], "%s vs %s" % (line, want))


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return {"x": torch.tensor([float(i)]), "y": torch.tensor(i * i)}


d1, d2 = bt.from_dataset(Squares(), 2, 5, seed=3), bt.from_dataset(Squares(), 2, 5, seed=3)
epoch0 = sorted(int(v) for mb in range(5) for v in d1(0, mb)["x"].view(-1))
check("torch_loop_from_dataset", epoch0 == list(range(10)) and torch.equal(d1(3, 2)["y"], d2(3, 2)["y"])
      and torch.equal(d1(1, 4)["y"], d1(1, 4)["x"].view(-1).long() ** 2) and d1(0, 0)["x"].shape == (2, 1))
check("torch_loop_from_dataset_sampler", [int(v) for v in bt.from_dataset(
    Squares(), 5, 2, sampler=torch.utils.data.SequentialSampler(range(10)))(0, 1)["x"].view(-1)] == [5, 6, 7, 8, 9])

# ---------------------------------------------------------------- (6) accounting off
lg = os.path.join(tmp, "nomem.jsonl")
a = bt.reference(SPEC, build, ex.data, steps=2, track_memory=False, log=lg, progress=io.StringIO())
check("torch_loop_track_memory_off", close(list(a), list(plain)[:2], 1e-6) and
      all(r["peak_act_bytes"]["backbone"] == 0 for r in json.loads(open(lg).readline())["ranks"]))


def run_nomem(rank):
    lg = os.path.join(tmp, "nomem-p2.jsonl")
    r = bt.train(SPEC, build, ex.data, steps=2, track_memory=False, log=lg, progress=io.StringIO())
    return list(r), lg


r, lg = bt.spawn(run_nomem, 2, timeout=200)[0]
check("torch_loop_track_memory_off_pipelined", close(r, list(plain)[:2]) and
      all(x["peak_act_bytes"]["backbone"] == 0 for x in json.loads(open(lg).readline())["ranks"]))
# ---------------------------------------------------------------- the command line: --checkpoint, --resume
import subprocess  # noqa: E402
cli = [sys.executable, "-m", "bigmac.torch", "train", "tests/specs/exec-small.json", "--nproc", "2"]
cdir, la, lb = os.path.join(tmp, "cli-ck"), os.path.join(tmp, "cli-a.jsonl"), os.path.join(tmp, "cli-b.jsonl")


def losses(path):
    return [json.loads(l)["loss"] for l in open(path)]


r1 = subprocess.run(cli + ["--steps", "4", "--log", la], capture_output=True, text=True, timeout=200)
r2 = subprocess.run(cli + ["--steps", "2", "--checkpoint", cdir, "--checkpoint-every", "1"], capture_output=True,
                    text=True, timeout=200)
r3 = subprocess.run(cli + ["--steps", "4", "--resume", cdir, "--log", lb], capture_output=True, text=True, timeout=200)
check("torch_loop_cli_checkpoint_resume", r1.returncode == r2.returncode == r3.returncode == 0 and
      close(losses(lb), losses(la)[2:], 1e-6) and "resumed at step 2" in r3.stdout, r3.stderr[-300:])
r4 = subprocess.run(cli + ["--steps", "4", "--resume", cdir, "--policy", "optimus"], capture_output=True, text=True,
                    timeout=200)
err = [l for l in r4.stderr.splitlines() if l.startswith("bigmac: error:")]
check("torch_loop_cli_resume_other_table_refused", r4.returncode == 1 and len(err) == 1 and "another table" in err[0],
      r4.stderr[-300:])
done()
