"""Torch twins of the built-in C models (src/model/vit.c, gpt.c, dit.c): the same architecture,
parameters laid out as the C module's flat buffer and initialised from it (the C
implementation's seeded init, bigmac.module_init), the same packed-sequence layout and the same
losses. Written independently of the C kernels: autograd computes every backward, so training a
spec with the twins checks the C forward and hand-written backward kernels.

A twin is called as every module the torch executor runs (bigmac/torch/executor.py):
    module(x, batch) -> output tensor, or (output or None, loss)
x is None for encoders; the backbone's first chunk gets the encoders' outputs concatenated
(rows, spec module order); the generator gets the backbone's final hidden states.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

import bigmac

TE = 32  # dit's sinusoidal timestep features
PAD = 0
IGNORE = -1


# ---------------------------------------------------------------- geometry and data

class Geometry:
    """What the modules of a spec agree on (src/model/model.h struct bm_geom)."""

    def __init__(self, spec):
        bb = spec.modules[spec.backbone_module]
        self.d, self.seq, self.vocab = bb.arch["hidden"], bb.arch["seq"], bb.arch["vocab"]
        enc = [m for m in spec.modules if m.role == "encoder"]
        self.enc_tokens = [(m.arch["image"] // m.arch["patch"]) ** 2 for m in enc]
        self.img_tokens = sum(self.enc_tokens)
        self.image = enc[0].arch["image"] if enc else 0
        self.channels = (enc[0].arch["channels"] or 3) if enc else 3
        self.max_images = spec.max_images
        self.max_pos = self.max_images * self.img_tokens + self.seq


class TorchBatch:
    """A microbatch as torch tensors on a device (see bigmac.Batch), with the packed layout:
    off[i], len[i] of sample i (image tokens of all encoders, then its seq text tokens)."""

    def __init__(self, b, geom, device):
        self.step, self.mb, self.n_samples = b.step, b.mb, b.n_samples
        self.n_images = [int(v) for v in b.n_images]
        self.n_images_total = sum(self.n_images)
        self.seq, self.image, self.channels = b.seq, b.image, b.channels
        self.text_list = b.text.tolist()
        dev = torch.device(device)
        self.images = torch.from_numpy(b.images).to(dev)
        self.text = torch.from_numpy(b.text.astype("int64")).to(dev)
        self.target = torch.from_numpy(b.target).to(dev)
        self.noise = torch.from_numpy(b.noise).to(dev)
        self.timestep = torch.from_numpy(b.timestep).to(dev)
        self.off, self.len = [], []
        T = 0
        for i in range(self.n_samples):
            n = self.n_images[i] * geom.img_tokens + self.seq
            self.off.append(T)
            self.len.append(n)
            T += n
        self.T = T


def dataset(spec, device="cpu"):
    """data(step, mb) -> TorchBatch: the C library's dataset for spec (src/data/data.h)."""
    spec = bigmac.load_spec(spec)
    geom = Geometry(spec)

    def data(step, mb):
        return TorchBatch(bigmac.data_batch(spec, step, mb), geom, device)
    return data


# ---------------------------------------------------------------- pieces

def patchify(img, p):
    """[n, ch, H, W] -> [n * (H/p) * (W/p), ch*p*p]: raster patch order, (c, dy, dx) inside."""
    n, ch, H, W = img.shape
    gy, gx = H // p, W // p
    return img.reshape(n, ch, gy, p, gx, p).permute(0, 2, 4, 1, 3, 5).reshape(n * gy * gx, ch * p * p)


def segment_mask(lengths, causal, device):
    """[T, T] bool: token t may attend to j (same packed sequence; j <= t when causal)."""
    seg = torch.cat([torch.full((n,), i, dtype=torch.int64) for i, n in enumerate(lengths)]).to(device)
    m = seg[:, None] == seg[None, :]
    if causal:
        T = seg.numel()
        m = m & torch.ones(T, T, dtype=torch.bool, device=device).tril()
    return m


class Blocks(nn.Module):
    """L pre-LN transformer layers (src/model/blocks.c): x + proj(attn(qkv(ln1 x))), then
    + fcproj(gelu_tanh(fc(ln2 .))); attention inside each packed sequence."""

    def __init__(self, L, C, NH, Fw, causal):
        super().__init__()
        self.L, self.C, self.NH, self.F, self.causal = L, C, NH, Fw, causal
        z = lambda *s: nn.Parameter(torch.zeros(*s))
        self.layers = nn.ModuleList()
        for _ in range(L):
            y = nn.Module()
            y.ln1w, y.ln1b = z(C), z(C)
            y.qkvw, y.qkvb = z(3 * C, C), z(3 * C)
            y.attprojw, y.attprojb = z(C, C), z(C)
            y.ln2w, y.ln2b = z(C), z(C)
            y.fcw, y.fcb = z(Fw, C), z(Fw)
            y.fcprojw, y.fcprojb = z(C, Fw), z(C)
            self.layers.append(y)

    def flat_order(self):
        out = []
        for y in self.layers:
            out += [y.ln1w, y.ln1b, y.qkvw, y.qkvb, y.attprojw, y.attprojb, y.ln2w, y.ln2b, y.fcw, y.fcb,
                    y.fcprojw, y.fcprojb]
        return out

    def forward(self, x, mask):
        C, NH = self.C, self.NH
        hs = C // NH
        T = x.shape[0]
        for y in self.layers:
            h = F.layer_norm(x, (C,), y.ln1w, y.ln1b, 1e-5)
            qkv = F.linear(h, y.qkvw, y.qkvb)
            q, k, v = qkv.split(C, dim=1)
            q = q.reshape(T, NH, hs).transpose(0, 1)
            k = k.reshape(T, NH, hs).transpose(0, 1)
            v = v.reshape(T, NH, hs).transpose(0, 1)
            att = (q @ k.transpose(1, 2)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            a = (att @ v).transpose(0, 1).reshape(T, C)
            x = x + F.linear(a, y.attprojw, y.attprojb)
            h = F.layer_norm(x, (C,), y.ln2w, y.ln2b, 1e-5)
            h = F.gelu(F.linear(h, y.fcw, y.fcb), approximate="tanh")
            x = x + F.linear(h, y.fcprojw, y.fcprojb)
        return x


class Twin(nn.Module):
    """Base: flat_order() lists the parameters in the C module's flat layout."""

    def flat_order(self):
        raise NotImplementedError

    def load_flat(self, vec):
        vec = torch.as_tensor(vec, dtype=torch.float32)
        n = sum(p.numel() for p in self.flat_order())
        if n != vec.numel():
            raise bigmac.Error("%s: the C module has %d parameters, the torch twin %d" % (self.name, vec.numel(), n))
        at = 0
        with torch.no_grad():
            for p in self.flat_order():
                p.copy_(vec[at:at + p.numel()].reshape(p.shape))
                at += p.numel()

    def flat(self):
        return torch.cat([p.detach().reshape(-1).cpu() for p in self.flat_order()])


def _ffn(a):
    return a["ffn"] if a["ffn"] > 0 else 4 * a["hidden"]


class ViT(Twin):
    def __init__(self, spec, m, geom):
        super().__init__()
        a = m.arch
        self.name, self.geom = m.name, geom
        self.C, self.p = a["hidden"], a["patch"]
        self.Np = (a["image"] // a["patch"]) ** 2
        self.K = geom.channels * self.p * self.p
        C, D = self.C, geom.d
        self.pw, self.pb = nn.Parameter(torch.zeros(C, self.K)), nn.Parameter(torch.zeros(C))
        self.pos = nn.Parameter(torch.zeros(self.Np, C))
        self.blocks = Blocks(a["layers"], C, a["heads"], _ffn(a), False)
        self.lnw, self.lnb = nn.Parameter(torch.zeros(C)), nn.Parameter(torch.zeros(C))
        self.prw, self.prb = nn.Parameter(torch.zeros(D, C)), nn.Parameter(torch.zeros(D))

    def flat_order(self):
        return [self.pw, self.pb, self.pos] + self.blocks.flat_order() + [self.lnw, self.lnb, self.prw, self.prb]

    def out_shape(self, b):
        return (b.n_images_total * self.Np, self.geom.d)

    def forward(self, x, b):
        n = b.n_images_total
        h = F.linear(patchify(b.images, self.p), self.pw, self.pb)
        h = (h.reshape(n, self.Np, self.C) + self.pos).reshape(n * self.Np, self.C)
        h = self.blocks(h, segment_mask([self.Np] * n, False, h.device))
        h = F.layer_norm(h, (self.C,), self.lnw, self.lnb, 1e-5)
        return F.linear(h, self.prw, self.prb)


class GPT(Twin):
    """Backbone chunk of layers [a, b)."""

    def __init__(self, spec, m, geom, a, b):
        super().__init__()
        ar = m.arch
        self.name, self.geom = m.name, geom
        self.first, self.last = a == 0, b == ar["layers"]
        C, V = ar["hidden"], ar["vocab"]
        self.C, self.V = C, V
        if self.first:
            self.wte = nn.Parameter(torch.zeros(V, C))
            self.wpe = nn.Parameter(torch.zeros(geom.max_pos, C))
        self.blocks = Blocks(b - a, C, ar["heads"], _ffn(ar), True)
        if self.last:
            self.lnw, self.lnb = nn.Parameter(torch.zeros(C)), nn.Parameter(torch.zeros(C))
            self.head = nn.Parameter(torch.zeros(V, C))

    def flat_order(self):
        out = [self.wte, self.wpe] if self.first else []
        out += self.blocks.flat_order()
        if self.last:
            out += [self.lnw, self.lnb, self.head]
        return out

    def in_shape(self, b):
        if self.first:
            return (b.n_images_total * self.geom.img_tokens, self.C)
        return (b.T, self.C)

    def out_shape(self, b):
        return (b.T, self.C)

    def _splice(self, x, b):
        """Packed [T, C] from the encoders' outputs (rows: encoder 0's images, encoder 1's, ...)
        and the text embeddings, plus positions."""
        g = self.geom
        starts, at = [], 0
        for k in g.enc_tokens:
            starts.append(at)
            at += b.n_images_total * k
        rows, img = [], 0
        for i in range(b.n_samples):
            ni = b.n_images[i]
            parts = [x[starts[e] + img * k: starts[e] + (img + ni) * k] for e, k in enumerate(g.enc_tokens)]
            parts.append(self.wte[b.text[i]])
            s = torch.cat(parts, 0)
            rows.append(s + self.wpe[:s.shape[0]])
            img += ni
        return torch.cat(rows, 0)

    def forward(self, x, b):
        if self.first:
            x = self._splice(x, b)
        h = self.blocks(x, segment_mask(b.len, True, x.device))
        if not self.last:
            return h
        hid = F.layer_norm(h, (self.C,), self.lnw, self.lnb, 1e-5)
        logits = F.linear(hid, self.head)
        tg = torch.full((b.T,), IGNORE, dtype=torch.int64)
        for i in range(b.n_samples):
            txt = b.text_list[i]
            base = b.off[i] + b.n_images[i] * self.geom.img_tokens
            for j in range(b.seq - 1):
                if txt[j + 1] != PAD:
                    tg[base + j] = txt[j + 1]
        tg = tg.to(logits.device)
        if int((tg != IGNORE).sum()) == 0:
            return hid, logits.sum() * 0.0
        return hid, F.cross_entropy(logits, tg, ignore_index=IGNORE)


class DiT(Twin):
    def __init__(self, spec, m, geom):
        super().__init__()
        a = m.arch
        self.name, self.geom = m.name, geom
        self.C, self.p = a["hidden"], a["patch"]
        image = a["image"] or geom.image
        self.Np = (image // self.p) ** 2
        self.Ls = self.Np + 2
        self.K = geom.channels * self.p * self.p
        C, K, D = self.C, self.K, geom.d
        z = lambda *s: nn.Parameter(torch.zeros(*s))
        self.xw, self.xb, self.pos = z(C, K), z(C), z(self.Np, C)
        self.cw, self.cb, self.tw, self.tb = z(C, D), z(C), z(C, TE), z(C)
        self.blocks = Blocks(a["layers"], C, a["heads"], _ffn(a), False)
        self.lnw, self.lnb, self.ow, self.ob = z(C), z(C), z(K, C), z(K)

    def flat_order(self):
        return ([self.xw, self.xb, self.pos, self.cw, self.cb, self.tw, self.tb] + self.blocks.flat_order() +
                [self.lnw, self.lnb, self.ow, self.ob])

    def in_shape(self, b):
        return (b.T, self.geom.d)

    def forward(self, x, b):
        S, dev = b.n_samples, x.device
        C = self.C
        k = torch.arange(TE // 2, dtype=torch.float32, device=dev)
        freq = torch.exp(torch.tensor(-math.log(10000.0), dtype=torch.float32) * k / (TE // 2))
        t = b.timestep.clamp(0.0, 0.999)
        ab = torch.cos(1.5707963 * t) ** 2
        ab4 = ab.reshape(S, 1, 1, 1)
        xt = ab4.sqrt() * b.target + (1 - ab4).sqrt() * b.noise
        xp = patchify(xt, self.p)
        eps = patchify(b.noise, self.p)
        px = F.linear(xp, self.xw, self.xb).reshape(S, self.Np, C) + self.pos
        seqs = []
        for i in range(S):
            base = b.off[i] + b.n_images[i] * self.geom.img_tokens
            keep = [base + j for j in range(b.seq) if b.text_list[i][j] != PAD]
            pooled = x[keep].mean(0) if keep else x.new_zeros(x.shape[1])
            arg = (1000.0 * t[i]) * freq
            tsin = torch.cat([torch.sin(arg), torch.cos(arg)])
            seqs.append(torch.cat([F.linear(pooled, self.cw, self.cb)[None], F.linear(tsin, self.tw, self.tb)[None],
                                   px[i]], 0))
        h = self.blocks(torch.cat(seqs, 0), segment_mask([self.Ls] * S, False, dev))
        h = F.layer_norm(h, (C,), self.lnw, self.lnb, 1e-5).reshape(S, self.Ls, C)[:, 2:]
        pred = F.linear(h.reshape(S * self.Np, C), self.ow, self.ob)
        return None, ((pred - eps) ** 2).mean()


_TWINS = {"vit": "encoder", "gpt": "backbone", "dit": "generator"}


def factory(spec, device="cpu", init=True):
    """build(name, layer_begin, layer_end) -> the twin of spec's module name (backbone: the chunk
    of those layers), initialised as the C implementation initialises it."""
    spec = bigmac.load_spec(spec)
    geom = Geometry(spec)

    def build(name, a=0, b=0):
        m = spec.module(name)
        if m.impl not in _TWINS:
            raise bigmac.Error("module \"%s\": impl %r has no torch twin (built-in: vit, gpt, dit)" % (name, m.impl))
        if m.impl == "vit":
            t = ViT(spec, m, geom)
        elif m.impl == "dit":
            t = DiT(spec, m, geom)
        else:
            if b == 0:
                b = m.layers
            t = GPT(spec, m, geom, a, b)
        if init:
            t.load_flat(bigmac.module_init(spec, m.index, a if m.role == "backbone" else 0,
                                           b if m.role == "backbone" else 0))
        return t.to(device)
    return build
