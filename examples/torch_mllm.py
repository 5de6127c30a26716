"""A user's multimodal model in plain PyTorch, trained pipelined with a bigmac plan.

The modules are ordinary nn.Modules (not bigmac's built-in models); the spec
(examples/torch-mllm.json) declares only what each consumes and produces. Each module is
called module(x, batch) and returns its output, or (output or None, loss).

    # two pipeline ranks, one process each (gloo on CPU, nccl with GPUs):
    PYTHONPATH=python python3 -m torch.distributed.run --nproc_per_node 2 examples/torch_mllm.py
    # the same training in one process, no pipeline (the losses agree):
    PYTHONPATH=python python3 examples/torch_mllm.py --reference
    # flags: --steps N  --log FILE  --trace FILE  --policy bigmac|optimus|...  --profile
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import bigmac
import bigmac.torch as bt

D, VOCAB, SEQ, IMG, PATCH, HEADS = 32, 16, 12, 8, 4, 4
PATCHES = (IMG // PATCH) ** 2
HERE = os.path.dirname(os.path.abspath(__file__))


def seeded(name):
    """Initialise every replica the same way on every rank (and a layer whatever the split)."""
    torch.manual_seed(sum(ord(c) * 131 ** i for i, c in enumerate(name)) % (2 ** 31))


class Encoder(nn.Module):
    """Image [S, 3, 8, 8] -> 4 patch tokens per image, D wide: [S * 4, D]."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3 * PATCH * PATCH, D)
        self.mix = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, D), nn.GELU())

    def forward(self, x, batch):
        img = batch["image"]
        S = img.shape[0]
        p = img.unfold(2, PATCH, PATCH).unfold(3, PATCH, PATCH)          # S, 3, 2, 2, P, P
        p = p.permute(0, 2, 3, 1, 4, 5).reshape(S * PATCHES, -1)
        h = self.proj(p)
        return h + self.mix(h)


class Decoder(nn.Module):
    """Layers [first, last) of a causal decoder over [image tokens, text] per sample. The first
    chunk embeds the text, the last one predicts the next token (its loss) and returns the
    hidden states for the head."""

    def __init__(self, first, last, total=4):
        super().__init__()
        self.first, self.last = first == 0, last == total
        if self.first:
            seeded("embed")
            self.tok = nn.Embedding(VOCAB, D)
            self.pos = nn.Parameter(torch.randn(PATCHES + SEQ, D) * 0.02)
        self.layers = nn.ModuleList()
        for layer in range(first, last):
            seeded("layer%d" % layer)
            self.layers.append(nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=True,
                                                          norm_first=True))
        if self.last:
            seeded("lm_head")
            self.norm, self.lm = nn.LayerNorm(D), nn.Linear(D, VOCAB)

    def forward(self, x, batch):
        text = batch["text"]
        S, L = text.shape[0], PATCHES + SEQ
        if self.first:
            x = torch.cat([x.reshape(S, PATCHES, D), self.tok(text)], 1) + self.pos
        else:
            x = x.reshape(S, L, D)
        mask = torch.triu(torch.full((L, L), float("-inf")), 1)
        for layer in self.layers:
            x = layer(x, src_mask=mask)
        if not self.last:
            return x.reshape(S * L, D)
        h = self.norm(x)
        logits = self.lm(h[:, PATCHES:-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), text[:, 1:].reshape(-1))
        return h.reshape(S * L, D), loss

    def in_shape(self, batch):  # lets the receiving rank check what arrives
        S = batch["text"].shape[0]
        return (S * PATCHES, D) if self.first else (S * (PATCHES + SEQ), D)


class Head(nn.Module):
    """A second task on the decoder's states: regress each image's mean colour."""

    def __init__(self):
        super().__init__()
        self.out = nn.Linear(D, 3)

    def forward(self, x, batch):
        S = batch["image"].shape[0]
        h = x.reshape(S, PATCHES + SEQ, D)[:, :PATCHES].mean(1)
        return None, F.mse_loss(self.out(h), batch["image"].mean((2, 3)))


def build(name, layer_begin, layer_end):
    seeded(name)
    if name == "encoder":
        return Encoder()
    if name == "decoder":
        return Decoder(layer_begin, layer_end)
    if name == "head":
        return Head()
    raise KeyError(name)


def data(step, mb, samples=4):
    """The same microbatch on every rank: random colour images and a caption of their colours."""
    g = torch.Generator().manual_seed(1000003 * step + mb)
    colour = torch.randint(0, 8, (samples, 3), generator=g)
    image = (colour[:, :, None, None] / 7.0 * 2 - 1).float().expand(samples, 3, IMG, IMG).contiguous()
    image = image + 0.1 * torch.randn(samples, 3, IMG, IMG, generator=g)
    text = torch.cat([colour, colour.flip(1), colour, colour[:, :1].expand(samples, SEQ - 9) + 8], 1)
    return {"image": image, "text": text}


def main(argv):
    ap = argparse.ArgumentParser(description="train a small torch MLLM with a bigmac plan")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--log")
    ap.add_argument("--trace")
    ap.add_argument("--policy", default="bigmac")
    ap.add_argument("--reference", action="store_true", help="one process, no pipeline")
    ap.add_argument("--profile", action="store_true", help="measure the modules, print the simulated step")
    a = ap.parse_args(argv)
    spec = bigmac.load_spec(os.path.join(HERE, "torch-mllm.json"))
    if a.profile:
        prof = bt.profile(spec, build, data)
        for m in prof.modules:
            print("%-8s %s" % (m.name, m.cost))
        sim = bigmac.simulate(prof, pp=2, policy=a.policy)
        print("simulated step at pp 2: %.2f ms (bubble %.2f)" % (sim["makespan_ms"], sim["bubble_ratio"]))
        return 0
    if a.reference:
        bt.reference(spec, build, data, steps=a.steps, log=a.log, progress=sys.stdout)
        return 0
    rank, world = bt.init_from_env()
    bt.train(spec, build, data, steps=a.steps, log=a.log, trace=a.trace, policy=a.policy,
             progress=sys.stdout if rank == 0 else None)
    bt.finish()  # the group's threads must end before the interpreter does
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
