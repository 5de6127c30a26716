/* gpt.c — GPT backbone, splittable into chunks of contiguous layers.
 *
 * Chunk [a, b) of L layers:
 *   a == 0 : x = splice(image embeddings, wte[text]) + wpe[position in sample]
 *            (per sample: its image tokens first, encoder 0's for all its images, then
 *            encoder 1's, ..., then its seq text tokens; samples packed). The input is every
 *            encoder's output one after another in spec module order (see splice_images).
 *   layers a..b-1: pre-LN causal transformer layers (attention stays inside each sample)
 *   b == L : hidden = lnf(x) is the chunk's output (for the generator), logits = hidden @
 *            head^T (untied head, so chunk 0 and the last chunk share no parameter), and the
 *            LM loss = mean cross-entropy of predicting text token j+1 at text position j
 *            (PAD targets and image positions ignored).
 * arch: layers, hidden, heads, ffn (0 = 4*hidden), vocab, seq.
 * The backward splits (zero-bubble backbones): B computes the input gradients, W the parameter
 * gradients from what B kept (gpt_backward_input / gpt_backward_weight). */
#include <string.h>

#include "model/model.h"
#include "nn/nn.h"

struct gpt {
    struct bm_geom g;
    int a, b, L, first, last;
    int C, V;
    struct bm_blocks blk;
    size_t n;                 /* parameter floats of this chunk */
    float *params, *grads;    /* [n] each: */
    size_t o_wte, o_wpe, o_blk, o_lnw, o_lnb, o_head; /* (wte/wpe: first only; ln/head: last) */
};

struct gpt_ctx {
    size_t bytes;             /* the whole allocation */
    int T, n_valid;
    float *blk;               /* layer activations */
    float *bout, *hid, *mean, *rstd, *probs; /* last chunk: [T,C] [T,C] [T] [T] [T,V] */
    float acts[];
};

static int gpt_create(const struct bm_module *m, const struct bm_spec *s, int a, int b,
                      uint64_t seed, void **out, struct bm_err *err)
{
    *out = NULL;
    struct gpt *v = bm_calloc(1, sizeof *v);
    if (!v) return bm_err_set(err, "out of memory");
    if (bm_geom_from_spec(s, &v->g, err)) goto fail;
    const struct bm_arch *ar = &m->arch;
    if (ar->layers <= 0 || ar->heads <= 0 || ar->hidden % ar->heads) {
        bm_err_set(err, "module \"%s\": gpt arch needs layers, heads (hidden %% heads == 0)", m->name);
        goto fail;
    }
    if (m->layers && m->layers != ar->layers) {
        bm_err_set(err, "module \"%s\": \"layers\" %d disagrees with arch.layers %d\n"
                        "hint: give one of them (the chunk split uses \"layers\")", m->name,
                   m->layers, ar->layers);
        goto fail;
    }
    if (a < 0 || b > ar->layers || a >= b) {
        bm_err_set(err, "module \"%s\": chunk layers [%d, %d) outside 0..%d", m->name, a, b, ar->layers);
        goto fail;
    }
    v->a = a, v->b = b, v->L = ar->layers, v->first = a == 0, v->last = b == ar->layers;
    v->C = ar->hidden, v->V = ar->vocab;
    v->blk = (struct bm_blocks){b - a, ar->hidden, ar->heads, ar->ffn > 0 ? ar->ffn : 4 * ar->hidden, 1};
    size_t C = v->C, V = v->V, o = 0;
    if (v->first) {
        v->o_wte = o, o += V * C;
        v->o_wpe = o, o += (size_t)v->g.max_pos * C;
    }
    v->o_blk = o, o += bm_blocks_params(&v->blk);
    if (v->last) {
        v->o_lnw = o, o += C;
        v->o_lnb = o, o += C;
        v->o_head = o, o += V * C;
    }
    v->n = o;
    v->params = bm_calloc(o, sizeof(float));
    v->grads = bm_calloc(o, sizeof(float));
    if (!v->params || !v->grads) {
        bm_err_set(err, "out of memory for gpt parameters (%zu floats)", o);
        goto fail;
    }
    struct bm_rng r;
    if (v->first) {
        bm_rng_for(&r, seed, 2);
        bm_init_normal(v->params + v->o_wte, V * C, 0.02f, &r);
        bm_init_normal(v->params + v->o_wpe, (size_t)v->g.max_pos * C, 0.01f, &r);
    }
    bm_blocks_init(&v->blk, v->params + v->o_blk, seed, a, v->L);
    if (v->last) {
        bm_rng_for(&r, seed, 3);
        for (size_t i = 0; i < C; i++) v->params[v->o_lnw + i] = 1.0f;
        bm_init_normal(v->params + v->o_head, V * C, 0.02f, &r);
    }
    *out = v;
    return BM_OK;
fail:
    if (v) bm_free(v->params), bm_free(v->grads);
    bm_free(v);
    return BM_ERR;
}

static size_t gpt_in_count(const void *self, const struct bm_batch *mb)
{
    const struct gpt *v = self;
    if (v->first) return (size_t)mb->n_images_total * v->g.img_tokens * v->C;
    return (size_t)bm_layout(mb, v->g.img_tokens, NULL, NULL) * v->C;
}

static size_t gpt_out_count(const void *self, const struct bm_batch *mb)
{
    const struct gpt *v = self;
    return (size_t)bm_layout(mb, v->g.img_tokens, NULL, NULL) * v->C;
}

/* Chunk 0's input is encoder e's output [n_images_total * enc_tokens[e], C] (image-major) for
 * e = 0, 1, ... one after another; in the packed sequence sample i's image rows are encoder
 * 0's rows of its images, then encoder 1's, .... to_packed: copy that input 'from' into the
 * image rows of the packed [T, C] 'to'; else copy the image rows of the packed 'from' into the
 * input layout 'to'. off: the samples' offsets from bm_layout. */
static void splice_images(const struct gpt *v, const struct bm_batch *mb, const int *off,
                          const float *from, float *to, int to_packed)
{
    size_t C = v->C, at = 0; /* at: first row of encoder e's block in the input */
    size_t before = 0;       /* image tokens per image of the encoders before e */
    for (int e = 0; e < v->g.n_enc; e++) {
        size_t np = (size_t)v->g.enc_tokens[e], img = 0; /* img: images of samples before i */
        for (int i = 0; i < mb->n_samples; i++) {
            size_t rows = (size_t)mb->n_images[i] * np;
            size_t in_row = at + img * np, packed_row = (size_t)off[i] + (size_t)mb->n_images[i] * before;
            if (rows)
                memcpy(to + (to_packed ? packed_row : in_row) * C, from + (to_packed ? in_row : packed_row) * C,
                       rows * C * sizeof(float));
            img += (size_t)mb->n_images[i];
        }
        at += (size_t)mb->n_images_total * np;
        before += np;
    }
}

/* LM targets [T]: text position j of a sample predicts its token j+1. */
static void gpt_targets(const struct gpt *v, const struct bm_batch *mb, const int *off, int *tg)
{
    int T = bm_layout(mb, v->g.img_tokens, NULL, NULL);
    for (int t = 0; t < T; t++) tg[t] = BM_IGNORE;
    for (int i = 0; i < mb->n_samples; i++) {
        const int *txt = mb->text + (size_t)i * mb->seq;
        int base = off[i] + mb->n_images[i] * v->g.img_tokens;
        for (int j = 0; j + 1 < mb->seq; j++)
            if (txt[j + 1] != BM_TOK_PAD) tg[base + j] = txt[j + 1];
    }
}

static int check_batch(const struct gpt *v, const struct bm_batch *mb, struct bm_err *err)
{
    if (mb->n_samples > BM_MAX_SEGS) return bm_err_set(err, "gpt: too many samples (%d)", mb->n_samples);
    if (mb->seq != v->g.seq) return bm_err_set(err, "gpt: batch seq %d, model seq %d", mb->seq, v->g.seq);
    for (int i = 0; i < mb->n_samples; i++)
        if (mb->n_images[i] > v->g.max_images)
            return bm_err_set(err, "gpt: sample with %d images (max_images %d)", mb->n_images[i],
                              v->g.max_images);
    for (long i = 0; i < (long)mb->n_samples * mb->seq; i++)
        if (mb->text[i] < 0 || mb->text[i] >= v->V)
            return bm_err_set(err, "gpt: token %d outside the vocabulary (%d)", mb->text[i], v->V);
    return BM_OK;
}

static int gpt_forward(void *self, const struct bm_batch *mb, const float *in, float *out,
                       float *loss, void **ctxp, struct bm_err *err)
{
    struct gpt *v = self;
    *ctxp = NULL;
    if (loss) *loss = 0.0f;
    if (check_batch(v, mb, err)) return BM_ERR;
    int off[BM_MAX_SEGS], len[BM_MAX_SEGS];
    int T = bm_layout(mb, v->g.img_tokens, off, len), C = v->C, V = v->V, ns = mb->n_samples;
    size_t nblk = bm_blocks_acts(&v->blk, T, ns, len);
    size_t nf = nblk + (v->last ? 2 * (size_t)T * C + 2 * (size_t)T + (size_t)T * V : 0);
    size_t bytes = sizeof(struct gpt_ctx) + nf * sizeof(float);
    struct gpt_ctx *x = bm_malloc(bytes);
    if (!x) return bm_err_set(err, "out of memory for gpt activations (%zu bytes)", bytes);
    memset(x, 0, sizeof *x);
    x->bytes = bytes, x->T = T;
    x->blk = x->acts;
    const float *P = v->params;
    float *x0 = bm_blocks_input(&v->blk, x->blk); /* [T,C] */
    if (v->first) {
        splice_images(v, mb, off, in, x0, 1);
        for (int i = 0; i < ns; i++) {
            int ni = mb->n_images[i] * v->g.img_tokens;
            float *row = x0 + (size_t)off[i] * C;
            bm_embedding_forward(row + (size_t)ni * C, mb->text + (size_t)i * mb->seq, P + v->o_wte,
                                 mb->seq, C, 0);
            bm_residual_forward(row, row, P + v->o_wpe, (long)len[i] * C);
        }
    } else {
        memcpy(x0, in, (size_t)T * C * sizeof(float));
    }
    if (!v->last) {
        bm_blocks_forward(&v->blk, P + v->o_blk, x->blk, out, T, ns, len);
        *ctxp = x;
        return BM_OK;
    }
    x->bout = x->blk + nblk;
    x->hid = x->bout + (size_t)T * C;
    x->mean = x->hid + (size_t)T * C;
    x->rstd = x->mean + T;
    x->probs = x->rstd + T;
    bm_blocks_forward(&v->blk, P + v->o_blk, x->blk, x->bout, T, ns, len);
    bm_layernorm_forward(x->hid, x->mean, x->rstd, x->bout, P + v->o_lnw, P + v->o_lnb, T, C);
    memcpy(out, x->hid, (size_t)T * C * sizeof(float));
    float *logits = bm_malloc((size_t)T * V * sizeof(float));
    int *tg = bm_malloc((size_t)T * sizeof(int));
    if (!logits || !tg) {
        bm_free(logits), bm_free(tg), bm_free(x);
        return bm_err_set(err, "out of memory for gpt logits");
    }
    bm_linear_forward(logits, x->hid, P + v->o_head, NULL, T, C, V);
    gpt_targets(v, mb, off, tg);
    double sum = bm_softmax_ce_forward(x->probs, logits, tg, T, V, BM_IGNORE, &x->n_valid);
    if (loss) *loss = x->n_valid ? (float)(sum / x->n_valid) : 0.0f;
    bm_free(logits), bm_free(tg);
    *ctxp = x;
    return BM_OK;
}

static int gpt_backward(void *self, void *ctx, const struct bm_batch *mb, const float *dout,
                        float loss_scale, float *din, struct bm_err *err)
{
    struct gpt *v = self;
    struct gpt_ctx *x = ctx;
    int off[BM_MAX_SEGS], len[BM_MAX_SEGS];
    int T = bm_layout(mb, v->g.img_tokens, off, len), C = v->C, V = v->V, ns = mb->n_samples;
    int rc = BM_OK;
    const float *P = v->params;
    float *G = v->grads;
    float *dx = bm_calloc((size_t)T * C * 2, sizeof(float)); /* dx, dy: [T,C] each */
    float *dlogits = NULL;
    int *tg = NULL;
    if (!dx) {
        rc = bm_err_set(err, "out of memory in gpt backward");
        goto done;
    }
    float *dy = dx + (size_t)T * C; /* gradient of the blocks' output */
    if (v->last) {
        float *dh = dx; /* d hidden, [T,C] */
        if (dout) memcpy(dh, dout, (size_t)T * C * sizeof(float));
        dlogits = bm_calloc((size_t)T * V, sizeof(float));
        tg = bm_malloc((size_t)T * sizeof(int));
        if (!dlogits || !tg) {
            rc = bm_err_set(err, "out of memory in gpt backward");
            goto done;
        }
        gpt_targets(v, mb, off, tg);
        if (x->n_valid)
            bm_softmax_ce_backward(dlogits, x->probs, tg, T, V, BM_IGNORE, loss_scale / x->n_valid);
        bm_linear_backward_input(dh, dlogits, P + v->o_head, T, C, V);
        bm_linear_backward_weight(G + v->o_head, NULL, dlogits, x->hid, T, C, V);
        bm_layernorm_backward(dy, G + v->o_lnw, G + v->o_lnb, dh, x->bout, P + v->o_lnw, x->mean,
                              x->rstd, T, C);
    } else if (dout) {
        memcpy(dy, dout, (size_t)T * C * sizeof(float));
    }
    if ((rc = bm_blocks_backward(&v->blk, P + v->o_blk, G + v->o_blk, x->blk, dy, dx, T, ns, len, err)))
        goto done;
    if (v->first) {
        for (int i = 0; i < ns; i++) {
            int ni = mb->n_images[i] * v->g.img_tokens;
            const float *row = dx + (size_t)off[i] * C;
            bm_residual_backward(G + v->o_wpe, NULL, row, (long)len[i] * C);
            bm_embedding_backward(G + v->o_wte, mb->text + (size_t)i * mb->seq, row + (size_t)ni * C,
                                  mb->seq, C);
        }
        if (din) splice_images(v, mb, off, dx, din, 0);
    } else if (din) {
        memcpy(din, dx, (size_t)T * C * sizeof(float));
    }
done:
    bm_free(dx), bm_free(dlogits), bm_free(tg);
    bm_free(x);
    return rc;
}

/* ---------------------------------------------------------------- split backward
 * B (gpt_backward_input): every input gradient, no parameter gradient; W
 * (gpt_backward_weight): every parameter gradient, from what B kept: the blocks' keep
 * (bm_blocks_backward_input), for the last chunk the LM head's input (hidden) and output
 * gradient (dlogits) and the final layernorm's input, mean, rstd and output gradient, for the
 * first chunk the gradient at the embeddings' output (the wte and wpe gradients). */
struct gpt_wctx {
    size_t bytes;             /* the whole allocation */
    int T;
    float *keep;              /* bm_blocks_keep_floats */
    float *hid, *dlogits, *dh, *bout, *mean, *rstd; /* last chunk: [T,C] [T,V] [T,C] [T,C] [T] [T] */
    float *dx;                /* first chunk: [T,C] */
    float data[];
};

static int gpt_backward_input(void *self, void *ctx, const struct bm_batch *mb, const float *dout,
                              float loss_scale, float *din, void **wctxp, struct bm_err *err)
{
    struct gpt *v = self;
    struct gpt_ctx *x = ctx;
    *wctxp = NULL;
    int off[BM_MAX_SEGS], len[BM_MAX_SEGS];
    int T = bm_layout(mb, v->g.img_tokens, off, len), C = v->C, V = v->V, ns = mb->n_samples;
    size_t TC = (size_t)T * C, nk = bm_blocks_keep_floats(&v->blk, T);
    size_t nf = nk + (v->last ? 3 * TC + (size_t)T * V + 2 * (size_t)T : 0) + (v->first ? TC : 0);
    size_t bytes = sizeof(struct gpt_wctx) + nf * sizeof(float);
    int rc = BM_OK;
    const float *P = v->params;
    struct gpt_wctx *w = bm_malloc(bytes);
    float *dx = bm_calloc(TC * 2, sizeof(float)); /* dx, dy: [T,C] each */
    int *tg = NULL;
    if (!w || !dx) {
        rc = bm_err_set(err, "out of memory in gpt backward (%zu bytes kept for W)", bytes);
        goto done;
    }
    memset(w, 0, sizeof *w);
    w->bytes = bytes, w->T = T;
    w->keep = w->data;
    float *q = w->keep + nk;
    float *dy = dx + TC; /* gradient of the blocks' output */
    if (v->last) {
        w->hid = q, q += TC;
        w->dlogits = q, q += (size_t)T * V;
        w->dh = q, q += TC;
        w->bout = q, q += TC;
        w->mean = q, q += T;
        w->rstd = q, q += T;
        memset(w->dlogits, 0, (size_t)T * V * sizeof(float));
        memset(w->dh, 0, TC * sizeof(float));
        if (dout) memcpy(w->dh, dout, TC * sizeof(float));
        if (!(tg = bm_malloc((size_t)T * sizeof(int)))) {
            rc = bm_err_set(err, "out of memory in gpt backward");
            goto done;
        }
        gpt_targets(v, mb, off, tg);
        if (x->n_valid)
            bm_softmax_ce_backward(w->dlogits, x->probs, tg, T, V, BM_IGNORE, loss_scale / x->n_valid);
        bm_linear_backward_input(w->dh, w->dlogits, P + v->o_head, T, C, V);
        memcpy(w->hid, x->hid, TC * sizeof(float));
        memcpy(w->bout, x->bout, TC * sizeof(float));
        memcpy(w->mean, x->mean, (size_t)T * sizeof(float));
        memcpy(w->rstd, x->rstd, (size_t)T * sizeof(float));
        bm_layernorm_backward_input(dy, w->dh, x->bout, P + v->o_lnw, x->mean, x->rstd, T, C);
    } else if (dout) {
        memcpy(dy, dout, TC * sizeof(float));
    }
    if ((rc = bm_blocks_backward_input(&v->blk, P + v->o_blk, x->blk, dy, dx, w->keep, T, ns, len, err)))
        goto done;
    if (v->first) {
        w->dx = q;
        memcpy(w->dx, dx, TC * sizeof(float));
        if (din) splice_images(v, mb, off, dx, din, 0);
    } else if (din) {
        memcpy(din, dx, TC * sizeof(float));
    }
done:
    bm_free(dx), bm_free(tg);
    bm_free(x);
    if (rc) bm_free(w);
    else *wctxp = w;
    return rc;
}

static int gpt_backward_weight(void *self, void *wctx, const struct bm_batch *mb, struct bm_err *err)
{
    struct gpt *v = self;
    struct gpt_wctx *w = wctx;
    int off[BM_MAX_SEGS], len[BM_MAX_SEGS];
    int T = bm_layout(mb, v->g.img_tokens, off, len), C = v->C, V = v->V, ns = mb->n_samples;
    float *G = v->grads;
    if (T != w->T) {
        bm_free(w);
        return bm_err_set(err, "gpt: weight-gradient context of %d tokens for a microbatch of %d", w->T, T);
    }
    if (v->last) { /* gpt_backward's order */
        bm_linear_backward_weight(G + v->o_head, NULL, w->dlogits, w->hid, T, C, V);
        bm_layernorm_backward_weight(G + v->o_lnw, G + v->o_lnb, w->dh, w->bout, w->mean, w->rstd, T, C);
    }
    bm_blocks_backward_weight(&v->blk, G + v->o_blk, w->keep, T);
    if (v->first)
        for (int i = 0; i < ns; i++) {
            int ni = mb->n_images[i] * v->g.img_tokens;
            const float *row = w->dx + (size_t)off[i] * C;
            bm_residual_backward(G + v->o_wpe, NULL, row, (long)len[i] * C);
            bm_embedding_backward(G + v->o_wte, mb->text + (size_t)i * mb->seq, row + (size_t)ni * C, mb->seq, C);
        }
    bm_free(w);
    return BM_OK;
}

static size_t gpt_wctx_bytes(const void *wctx) { return ((const struct gpt_wctx *)wctx)->bytes; }
static void gpt_wctx_free(void *wctx) { bm_free(wctx); }

static float *gpt_params(void *self, size_t *n)
{
    struct gpt *v = self;
    *n = v->n;
    return v->params;
}

static float *gpt_grads(void *self, size_t *n)
{
    struct gpt *v = self;
    *n = v->n;
    return v->grads;
}

static size_t gpt_ctx_bytes(const void *ctx) { return ((const struct gpt_ctx *)ctx)->bytes; }
static void gpt_ctx_free(void *ctx) { bm_free(ctx); }

static double gpt_flops(const void *self, const struct bm_batch *mb)
{
    const struct gpt *v = self;
    int len[BM_MAX_SEGS];
    if (mb->n_samples > BM_MAX_SEGS) return 0;
    int T = bm_layout(mb, v->g.img_tokens, NULL, len);
    double f = bm_blocks_flops(&v->blk, T, mb->n_samples, len);
    if (v->last) f += 6.0 * T * v->C * v->V; /* LM head */
    return f;
}

static void gpt_free(void *self)
{
    struct gpt *v = self;
    if (!v) return;
    bm_free(v->params);
    bm_free(v->grads);
    bm_free(v);
}

const struct bm_module_ops bm_gpt_ops = {
    .name = "gpt", .role = BM_ROLE_BACKBONE,
    .create = gpt_create, .in_count = gpt_in_count, .out_count = gpt_out_count,
    .forward = gpt_forward, .backward = gpt_backward, .params = gpt_params, .grads = gpt_grads,
    .ctx_bytes = gpt_ctx_bytes, .ctx_free = gpt_ctx_free, .flops = gpt_flops, .free = gpt_free,
    .backward_input = gpt_backward_input, .backward_weight = gpt_backward_weight,
    .wctx_bytes = gpt_wctx_bytes, .wctx_free = gpt_wctx_free,
};
