"""Caption sklearn's handwritten digits with a pipelined torch model, end to end.

The model is plain torch (nn.TransformerEncoderLayer blocks, nothing of bigmac's): a patch
transformer encoder ("vit"), a 4-layer causal decoder ("llm") that captions the image as
[BOS, digit, EOS] and a denoiser ("denoiser") that restores the image from the decoder's
states; examples/torch-digits.json declares their roles. The data is sklearn's digits
(`sklearn.datasets.load_digits`, shipped with python3-sklearn: offline), 1437 training and 360
held-out images, fed through bigmac.torch.from_dataset.

The demo (the default) shows a whole run: train half the steps on 2 pipeline ranks with a
checkpoint every few steps, stop (as a crash or a preempted job would), resume from the last
complete checkpoint to the end, get the trained modules back (train(gather=True)), save them
with torch.save, load them into the plain single-process model with load_state_dict(strict=True)
and evaluate the held-out caption accuracy:

    PYTHONPATH=python /usr/bin/python3 examples/torch_digits.py --steps 40 --dir out/digits
    PYTHONPATH=python /usr/bin/python3 examples/torch_digits.py --steps 300 --dir out/digits  # 88 %
"""
import argparse
import io
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import bigmac.torch as bt

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "torch-digits.json")
D, HEADS, LAYERS, PATCH = 32, 4, 4, 4
PATCHES = (8 // PATCH) ** 2
BOS, EOS, VOCAB = 10, 11, 12
T = PATCHES + 3  # image tokens, then BOS, the digit, EOS
MB_SIZE, M = 8, 4  # samples per microbatch, microbatches per step (the spec's)


def seeded(name):
    """Every rank builds every module (and every layer, whatever the split) the same."""
    torch.manual_seed(sum(ord(c) * 131 ** i for i, c in enumerate(name)) % (2 ** 31))


def block():
    return nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=True, norm_first=True)


class ViT(nn.Module):
    """[S, 8, 8] images -> [S * 4, D] patch tokens."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(PATCH * PATCH, D)
        self.pos = nn.Parameter(torch.randn(PATCHES, D) * 0.02)
        self.block = block()

    def forward(self, x, batch):
        img = batch["image"]
        S = img.shape[0]
        p = img.unfold(1, PATCH, PATCH).unfold(2, PATCH, PATCH).reshape(S, PATCHES, PATCH * PATCH)
        return self.block(self.proj(p) + self.pos).reshape(S * PATCHES, D)


class LLM(nn.Module):
    """Layers [first, last) of the causal decoder; the first chunk embeds the caption, the last
    predicts it (cross-entropy of the digit and EOS) and returns its states."""

    def __init__(self, first, last):
        super().__init__()
        self.first, self.last = first == 0, last == LAYERS
        if self.first:
            seeded("embed")
            self.tok = nn.Embedding(VOCAB, D)
            self.pos = nn.Parameter(torch.randn(T, D) * 0.02)
        self.layers = nn.ModuleList()
        for i in range(first, last):
            seeded("layer%d" % i)
            self.layers.append(block())
        if self.last:
            seeded("head")
            self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, VOCAB)
        self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1), persistent=True)

    def forward(self, x, batch):
        cap = batch["caption"]
        S = cap.shape[0]
        x = torch.cat([x.reshape(S, PATCHES, D), self.tok(cap)], 1) + self.pos if self.first else x.reshape(S, T, D)
        for layer in self.layers:
            x = layer(x, src_mask=self.mask)
        if not self.last:
            return x.reshape(S * T, D)
        h = self.norm(x)
        logits = self.head(h[:, PATCHES:-1])  # BOS predicts the digit, the digit predicts EOS
        return h.reshape(S * T, D), F.cross_entropy(logits.reshape(-1, VOCAB), cap[:, 1:].reshape(-1))

    def logits(self, x, batch):  # for evaluation: the digit's logits
        h, _ = self.forward(x, batch)
        return self.head(h.reshape(-1, T, D)[:, PATCHES])


class Denoiser(nn.Module):
    """Restores the image from the decoder's image-token states and a noisy copy."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D + 64, 64), nn.GELU(), nn.Linear(64, 64))

    def forward(self, x, batch):
        img = batch["image"].reshape(-1, 64)
        S = img.shape[0]
        h = x.reshape(S, T, D)[:, :PATCHES].mean(1)
        noisy = img + 0.3 * batch["noise"]
        return None, F.mse_loss(self.net(torch.cat([h, noisy], 1)), img)


def build(name, layer_begin, layer_end):
    seeded(name)
    if name == "vit":
        return ViT()
    if name == "llm":
        return LLM(layer_begin, layer_end)
    if name == "denoiser":
        return Denoiser()
    raise KeyError(name)


class Digits(torch.utils.data.Dataset):
    """sklearn's digits: the first 1437 (train) or the last 360 (test), 0..1 pixels."""

    def __init__(self, split):
        from sklearn.datasets import load_digits
        d = load_digits()
        x = torch.tensor(d.images, dtype=torch.float32) / 16.0
        y = torch.tensor(d.target, dtype=torch.int64)
        self.x, self.y = (x[:1437], y[:1437]) if split == "train" else (x[1437:], y[1437:])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(int(i))  # the same noise for a sample on every rank
        return {"image": self.x[i], "caption": torch.tensor([BOS, int(self.y[i]), EOS]),
                "noise": torch.randn(64, generator=g)}


def evaluate(sds):
    """Load the state dicts into the plain single-process model (strict) and caption the 360
    held-out digits: (accuracy, caption loss)."""
    vit, llm, den = build("vit", 0, 0), build("llm", 0, LAYERS), build("denoiser", 0, 0)
    for m, n in ((vit, "vit"), (llm, "llm"), (den, "denoiser")):
        if sds is not None:
            m.load_state_dict(sds[n], strict=True)
        m.eval()
    test = Digits("test")
    b = {"image": test.x, "caption": torch.stack([test[i]["caption"] for i in range(len(test))])}
    with torch.no_grad():
        logits = llm.logits(vit(None, b), b)
        _, loss = llm(vit(None, b), b)
    return float((logits[:, :10].argmax(1) == test.y).float().mean()), float(loss)


def _rank(rank, a, steps, resume):
    data = bt.from_dataset(Digits("train"), MB_SIZE, M, seed=0)
    r = bt.train(SPEC, build, data, steps=steps, checkpoint=a.dir, checkpoint_every=a.checkpoint_every,
                 resume=resume, gather=True, pp=a.nproc, progress=sys.stdout if rank == 0 else io.StringIO())
    return list(r), r.state_dicts


def main(argv):
    ap = argparse.ArgumentParser(description="caption sklearn's digits with a pipelined torch model")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--dir", default="out/digits", help="checkpoints and the trained model")
    ap.add_argument("--checkpoint-every", type=int, default=5)
    a = ap.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    half = a.steps // 2
    print("== train steps 1..%d on %d pipeline ranks, a checkpoint every %d steps, then stop" % (half, a.nproc,
                                                                                              a.checkpoint_every))
    bt.spawn(_rank, a.nproc, (a, half, None), timeout=120)
    print("== resume from %s (its last complete checkpoint) to step %d" % (a.dir, a.steps))
    losses, sds = bt.spawn(_rank, a.nproc, (a, a.steps, a.dir), timeout=120)[0]
    path = os.path.join(a.dir, "model.pt")
    torch.save(sds, path)
    acc0, loss0 = evaluate(None)
    acc, loss = evaluate(torch.load(path))
    print("== the trained modules (%s) loaded into the plain model with load_state_dict(strict=True)" % path)
    print("held-out caption accuracy: untrained %.1f %%, trained %.1f %% (360 digits, chance 10 %%)" % (
        100 * acc0, 100 * acc))
    print("held-out caption loss: untrained %.4f, trained %.4f" % (loss0, loss))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
