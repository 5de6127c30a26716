/* dit.c — DiT-style generator with in-context conditioning.
 *
 * Per sample the transformer sees the sequence [cond, time, patch_1 .. patch_Np]:
 *   cond   = Wc . mean(hidden[caption positions]) + bc   (the backbone's final hidden states
 *            mean-pooled over the sample's non-PAD text positions, projected to the DiT width)
 *   time   = Wt . sinusoidal(1000 t) + bt
 *   patch  = Wx . patchify(x_t) + bx + pos,   x_t = sqrt(abar) x0 + sqrt(1 - abar) eps,
 *            abar = cos^2(pi t / 2)  (cosine schedule, t in [0, 1))
 * -> bidirectional pre-LN layers (each sample its own sequence) -> final LN -> Wo on the patch
 * tokens = predicted noise. Loss: mean squared error against eps over the microbatch.
 * Backward returns d(loss)/d(hidden) (non-zero only at the pooled positions).
 * arch: hidden, layers, heads, ffn (0 = 4*hidden), image (= the encoder's), patch, cond (0 or
 * the backbone width). */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "nn/nn.h"

#define TE 32 /* sinusoidal timestep features */

struct dit {
    struct bm_geom g;
    int C, p, K, Np, Ls, D;   /* width, patch, patch floats, patches, sequence, backbone width */
    struct bm_blocks blk;
    size_t n;
    float *params, *grads;
    size_t o_xw, o_xb, o_pos, o_cw, o_cb, o_tw, o_tb, o_blk, o_lnw, o_lnb, o_ow, o_ob;
};

struct dit_ctx {
    size_t bytes;
    int S;
    float *pooled, *tsin, *xp, *eps, *blk, *bout, *lnf, *mean, *rstd, *pred;
    /* [S,D] [S,TE] [S*Np,K] [S*Np,K] [blocks] [S*Ls,C] [S*Ls,C] [S*Ls] [S*Ls] [S*Np,K] */
    float acts[];
};

static int dit_create(const struct bm_module *m, const struct bm_spec *s, int a, int b,
                      uint64_t seed, void **out, struct bm_err *err)
{
    (void)a, (void)b;
    *out = NULL;
    struct dit *v = bm_calloc(1, sizeof *v);
    if (!v) return bm_err_set(err, "out of memory");
    if (bm_geom_from_spec(s, &v->g, err)) goto fail;
    const struct bm_arch *ar = &m->arch;
    if (ar->hidden <= 0 || ar->layers <= 0 || ar->heads <= 0 || ar->hidden % ar->heads) {
        bm_err_set(err, "module \"%s\": dit arch needs hidden, layers, heads (hidden %% heads == 0)", m->name);
        goto fail;
    }
    int image = ar->image > 0 ? ar->image : v->g.image;
    if (!v->g.image || image != v->g.image || ar->patch <= 0 || image % ar->patch) {
        bm_err_set(err, "module \"%s\": dit needs the encoder's image size (%d) and a patch that "
                        "divides it", m->name, v->g.image);
        goto fail;
    }
    if (ar->cond && ar->cond != v->g.d) {
        bm_err_set(err, "module \"%s\": arch.cond %d must be 0 or the backbone width %d", m->name,
                   ar->cond, v->g.d);
        goto fail;
    }
    v->C = ar->hidden, v->p = ar->patch, v->D = v->g.d;
    v->Np = (image / v->p) * (image / v->p), v->Ls = v->Np + 2, v->K = v->g.channels * v->p * v->p;
    v->blk = (struct bm_blocks){ar->layers, ar->hidden, ar->heads, ar->ffn > 0 ? ar->ffn : 4 * ar->hidden, 0};
    size_t C = v->C, K = v->K, o = 0;
    v->o_xw = o, o += C * K;
    v->o_xb = o, o += C;
    v->o_pos = o, o += (size_t)v->Np * C;
    v->o_cw = o, o += C * v->D;
    v->o_cb = o, o += C;
    v->o_tw = o, o += C * TE;
    v->o_tb = o, o += C;
    v->o_blk = o, o += bm_blocks_params(&v->blk);
    v->o_lnw = o, o += C;
    v->o_lnb = o, o += C;
    v->o_ow = o, o += K * C;
    v->o_ob = o, o += K;
    v->n = o;
    v->params = bm_calloc(o, sizeof(float));
    v->grads = bm_calloc(o, sizeof(float));
    if (!v->params || !v->grads) {
        bm_err_set(err, "out of memory for dit parameters (%zu floats)", o);
        goto fail;
    }
    struct bm_rng r;
    bm_rng_for(&r, seed, 4);
    float *P = v->params;
    bm_init_normal(P + v->o_xw, C * K, 0.02f, &r);
    bm_init_normal(P + v->o_pos, (size_t)v->Np * C, 0.02f, &r);
    bm_init_normal(P + v->o_cw, C * v->D, 0.02f, &r);
    bm_init_normal(P + v->o_tw, C * TE, 0.02f, &r);
    bm_init_normal(P + v->o_ow, K * C, 0.02f, &r);
    for (size_t i = 0; i < C; i++) P[v->o_lnw + i] = 1.0f;
    bm_blocks_init(&v->blk, P + v->o_blk, seed, 0, v->blk.L);
    *out = v;
    return BM_OK;
fail:
    if (v) bm_free(v->params), bm_free(v->grads);
    bm_free(v);
    return BM_ERR;
}

static size_t dit_in_count(const void *self, const struct bm_batch *mb)
{
    const struct dit *v = self;
    return (size_t)bm_layout(mb, v->g.img_tokens, NULL, NULL) * v->D;
}

static size_t dit_out_count(const void *self, const struct bm_batch *mb)
{
    (void)self, (void)mb;
    return 0;
}

/* Token indices pooled for sample i (its non-PAD text positions) are off + ni + j. */
static int pool_count(const struct bm_batch *mb, int i)
{
    int c = 0;
    for (int j = 0; j < mb->seq; j++) c += mb->text[(size_t)i * mb->seq + j] != BM_TOK_PAD;
    return c;
}

static int dit_forward(void *self, const struct bm_batch *mb, const float *in, float *out,
                       float *loss, void **ctxp, struct bm_err *err)
{
    (void)out;
    struct dit *v = self;
    *ctxp = NULL;
    if (loss) *loss = 0.0f;
    int S = mb->n_samples, C = v->C, K = v->K, Np = v->Np, Ls = v->Ls, D = v->D;
    if (S > BM_MAX_SEGS) return bm_err_set(err, "dit: too many samples (%d)", S);
    if (mb->image != v->g.image) return bm_err_set(err, "dit: batch images %d, model %d", mb->image, v->g.image);
    int off[BM_MAX_SEGS], seg[BM_MAX_SEGS];
    bm_layout(mb, v->g.img_tokens, off, NULL);
    for (int i = 0; i < S; i++) seg[i] = Ls;
    int N = S * Ls, NP = S * Np;
    size_t nblk = bm_blocks_acts(&v->blk, N, S, seg);
    size_t nf = (size_t)S * D + (size_t)S * TE + 3 * (size_t)NP * K + nblk + 2 * (size_t)N * C + 2 * (size_t)N;
    size_t bytes = sizeof(struct dit_ctx) + nf * sizeof(float);
    struct dit_ctx *x = bm_malloc(bytes);
    size_t img = (size_t)mb->channels * mb->image * mb->image;
    float *tmp = bm_malloc(((size_t)NP * C + img * S) * sizeof(float));
    if (!x || !tmp) {
        bm_free(x), bm_free(tmp);
        return bm_err_set(err, "out of memory for dit activations (%zu bytes)", bytes);
    }
    x->bytes = bytes, x->S = S;
    x->pooled = x->acts;
    x->tsin = x->pooled + (size_t)S * D;
    x->xp = x->tsin + (size_t)S * TE;
    x->eps = x->xp + (size_t)NP * K;
    x->blk = x->eps + (size_t)NP * K;
    x->bout = x->blk + nblk;
    x->lnf = x->bout + (size_t)N * C;
    x->mean = x->lnf + (size_t)N * C;
    x->rstd = x->mean + N;
    x->pred = x->rstd + N;
    const float *P = v->params;
    float *xt = tmp + (size_t)NP * C; /* [S, ch, H, W] noised images */
    for (int i = 0; i < S; i++) {
        /* conditioning: mean of the hidden states at the caption's positions */
        float *pl = x->pooled + (size_t)i * D;
        memset(pl, 0, (size_t)D * sizeof(float));
        int base = off[i] + mb->n_images[i] * v->g.img_tokens, cnt = pool_count(mb, i);
        for (int j = 0; j < mb->seq; j++)
            if (mb->text[(size_t)i * mb->seq + j] != BM_TOK_PAD)
                bm_residual_forward(pl, pl, in + (size_t)(base + j) * D, D);
        for (int k = 0; k < D && cnt; k++) pl[k] /= (float)cnt;
        /* timestep features */
        float t = mb->timestep[i];
        t = t < 0 ? 0 : t > 0.999f ? 0.999f : t;
        for (int k = 0; k < TE / 2; k++) {
            float f = expf(-logf(10000.0f) * k / (TE / 2));
            x->tsin[(size_t)i * TE + k] = sinf(1000.0f * t * f);
            x->tsin[(size_t)i * TE + TE / 2 + k] = cosf(1000.0f * t * f);
        }
        /* noising */
        float ab = cosf(1.5707963f * t);
        ab *= ab;
        float sa = sqrtf(ab), sb = sqrtf(1.0f - ab);
        for (size_t k = 0; k < img; k++)
            xt[i * img + k] = sa * mb->target[i * img + k] + sb * mb->noise[i * img + k];
    }
    bm_patchify(x->xp, xt, S, mb->channels, mb->image, mb->image, v->p);
    bm_patchify(x->eps, mb->noise, S, mb->channels, mb->image, mb->image, v->p);
    /* token rows: [cond, time, patches] per sample */
    float *X = bm_blocks_input(&v->blk, x->blk);
    bm_linear_forward(tmp, x->xp, P + v->o_xw, P + v->o_xb, NP, K, C);
    for (int i = 0; i < S; i++) {
        float *row = X + (size_t)i * Ls * C;
        bm_linear_forward(row, x->pooled + (size_t)i * D, P + v->o_cw, P + v->o_cb, 1, D, C);
        bm_linear_forward(row + C, x->tsin + (size_t)i * TE, P + v->o_tw, P + v->o_tb, 1, TE, C);
        bm_residual_forward(row + 2 * C, tmp + (size_t)i * Np * C, P + v->o_pos, (long)Np * C);
    }
    bm_blocks_forward(&v->blk, P + v->o_blk, x->blk, x->bout, N, S, seg);
    bm_layernorm_forward(x->lnf, x->mean, x->rstd, x->bout, P + v->o_lnw, P + v->o_lnb, N, C);
    for (int i = 0; i < S; i++)
        bm_linear_forward(x->pred + (size_t)i * Np * K, x->lnf + ((size_t)i * Ls + 2) * C,
                          P + v->o_ow, P + v->o_ob, Np, C, K);
    if (loss) *loss = (float)bm_mse_forward(x->pred, x->eps, (long)NP * K);
    bm_free(tmp);
    *ctxp = x;
    return BM_OK;
}

static int dit_backward(void *self, void *ctx, const struct bm_batch *mb, const float *dout,
                        float loss_scale, float *din, struct bm_err *err)
{
    (void)dout;
    struct dit *v = self;
    struct dit_ctx *x = ctx;
    int S = x->S, C = v->C, K = v->K, Np = v->Np, Ls = v->Ls, D = v->D, N = S * Ls, NP = S * Np;
    int off[BM_MAX_SEGS], seg[BM_MAX_SEGS], rc = BM_OK;
    int T = bm_layout(mb, v->g.img_tokens, off, NULL);
    for (int i = 0; i < S; i++) seg[i] = Ls;
    const float *P = v->params;
    float *G = v->grads;
    /* scratch: dpred [NP,K], d1, d2 [N,C], dpool [D] */
    float *dpred = bm_calloc((size_t)NP * K + 2 * (size_t)N * C + D, sizeof(float));
    if (!dpred) {
        rc = bm_err_set(err, "out of memory in dit backward");
        goto done;
    }
    float *d1 = dpred + (size_t)NP * K, *d2 = d1 + (size_t)N * C, *dpool = d2 + (size_t)N * C;
    bm_mse_backward(dpred, x->pred, x->eps, (long)NP * K, loss_scale);
    for (int i = 0; i < S; i++) {
        size_t r = ((size_t)i * Ls + 2) * C;
        bm_linear_backward_input(d1 + r, dpred + (size_t)i * Np * K, P + v->o_ow, Np, C, K);
        bm_linear_backward_weight(G + v->o_ow, G + v->o_ob, dpred + (size_t)i * Np * K, x->lnf + r, Np, C, K);
    }
    bm_layernorm_backward(d2, G + v->o_lnw, G + v->o_lnb, d1, x->bout, P + v->o_lnw, x->mean,
                          x->rstd, N, C);
    if ((rc = bm_blocks_backward(&v->blk, P + v->o_blk, G + v->o_blk, x->blk, d2, d1, N, S, seg, err)))
        goto done;
    if (din) memset(din, 0, (size_t)T * D * sizeof(float));
    for (int i = 0; i < S; i++) {
        const float *row = d1 + (size_t)i * Ls * C;
        bm_linear_backward_weight(G + v->o_cw, G + v->o_cb, row, x->pooled + (size_t)i * D, 1, D, C);
        bm_linear_backward_weight(G + v->o_tw, G + v->o_tb, row + C, x->tsin + (size_t)i * TE, 1, TE, C);
        bm_residual_backward(G + v->o_pos, NULL, row + 2 * C, (long)Np * C);
        bm_linear_backward_weight(G + v->o_xw, G + v->o_xb, row + 2 * C, x->xp + (size_t)i * Np * K, Np, K, C);
        if (!din) continue;
        memset(dpool, 0, (size_t)D * sizeof(float));
        bm_linear_backward_input(dpool, row, P + v->o_cw, 1, D, C);
        int base = off[i] + mb->n_images[i] * v->g.img_tokens, cnt = pool_count(mb, i);
        if (!cnt) continue;
        for (int k = 0; k < D; k++) dpool[k] /= (float)cnt;
        for (int j = 0; j < mb->seq; j++)
            if (mb->text[(size_t)i * mb->seq + j] != BM_TOK_PAD)
                bm_residual_forward(din + (size_t)(base + j) * D, din + (size_t)(base + j) * D, dpool, D);
    }
done:
    bm_free(dpred);
    bm_free(x);
    return rc;
}

static float *dit_params(void *self, size_t *n)
{
    struct dit *v = self;
    *n = v->n;
    return v->params;
}

static float *dit_grads(void *self, size_t *n)
{
    struct dit *v = self;
    *n = v->n;
    return v->grads;
}

static size_t dit_ctx_bytes(const void *ctx) { return ((const struct dit_ctx *)ctx)->bytes; }
static void dit_ctx_free(void *ctx) { bm_free(ctx); }

static double dit_flops(const void *self, const struct bm_batch *mb)
{
    const struct dit *v = self;
    int S = mb->n_samples, seg[BM_MAX_SEGS];
    if (S > BM_MAX_SEGS) return 0;
    for (int i = 0; i < S; i++) seg[i] = v->Ls;
    double NP = (double)S * v->Np;
    return 4.0 * NP * v->K * v->C                  /* patch embed: fwd + weight grad */
           + 6.0 * S * v->C * (v->D + TE)          /* cond + time rows */
           + 6.0 * NP * v->C * v->K                /* output head */
           + bm_blocks_flops(&v->blk, S * v->Ls, S, seg);
}

static void dit_free(void *self)
{
    struct dit *v = self;
    if (!v) return;
    bm_free(v->params);
    bm_free(v->grads);
    bm_free(v);
}

const struct bm_module_ops bm_dit_ops = {
    .name = "dit", .role = BM_ROLE_GENERATOR,
    .create = dit_create, .in_count = dit_in_count, .out_count = dit_out_count,
    .forward = dit_forward, .backward = dit_backward, .params = dit_params, .grads = dit_grads,
    .ctx_bytes = dit_ctx_bytes, .ctx_free = dit_ctx_free, .flops = dit_flops, .free = dit_free,
};
