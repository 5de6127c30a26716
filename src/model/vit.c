/* vit.c — ViT encoder: patchify image(s) -> linear patch embedding + learned positions ->
 * pre-LN bidirectional transformer layers (each image its own sequence) -> final LN ->
 * linear projection to the backbone width.
 *   out: image embeddings [n_images_total * (image/patch)^2, d_backbone] (image-major)
 * A spec may hold several vit towers (e.g. different patch sizes); each is its own module.
 * arch: hidden (width), layers, heads, ffn (0 = 4*hidden), image, patch, channels (0 = 3). */
#include <string.h>

#include "model/model.h"
#include "nn/nn.h"

struct vit {
    struct bm_geom g;
    int C, p, K, Np, D;       /* width, patch side, patch floats, tokens/image, backbone width */
    struct bm_blocks blk;
    size_t n;                 /* parameter floats */
    float *params, *grads;    /* [n] each, same layout: */
    size_t o_pw, o_pb, o_pos, o_blk, o_lnw, o_lnb, o_prw, o_prb; /* offsets of the tensors */
};

/* Saved activations of one microbatch: one allocation, struct + floats. */
struct vit_ctx {
    size_t bytes;  /* the whole allocation */
    int N, nseg;   /* tokens (images * Np), images */
    float *patches, *blk, *bout, *lnf, *mean, *rstd; /* [N,K] [blocks] [N,C] [N,C] [N] [N] */
    float acts[];
};

static int vit_create(const struct bm_module *m, const struct bm_spec *s, int a, int b,
                      uint64_t seed, void **out, struct bm_err *err)
{
    (void)a, (void)b;
    *out = NULL;
    struct vit *v = bm_calloc(1, sizeof *v);
    if (!v) return bm_err_set(err, "out of memory");
    if (bm_geom_from_spec(s, &v->g, err)) goto fail;
    const struct bm_arch *ar = &m->arch;
    if (ar->hidden <= 0 || ar->layers <= 0 || ar->heads <= 0 || ar->hidden % ar->heads) {
        bm_err_set(err, "module \"%s\": vit arch needs hidden, layers, heads (hidden %% heads == 0)",
                   m->name);
        goto fail;
    }
    if (ar->image != v->g.image || ar->patch <= 0 || ar->image % ar->patch) {
        bm_err_set(err, "module \"%s\": vit image/patch disagree with the encoder geometry", m->name);
        goto fail;
    }
    v->C = ar->hidden, v->p = ar->patch, v->D = v->g.d;
    v->Np = (ar->image / ar->patch) * (ar->image / ar->patch); /* this tower's tokens per image */
    v->K = v->g.channels * v->p * v->p;
    v->blk = (struct bm_blocks){ar->layers, ar->hidden, ar->heads,
                                ar->ffn > 0 ? ar->ffn : 4 * ar->hidden, 0};
    size_t C = v->C, o = 0;
    v->o_pw = o, o += C * v->K;
    v->o_pb = o, o += C;
    v->o_pos = o, o += (size_t)v->Np * C;
    v->o_blk = o, o += bm_blocks_params(&v->blk);
    v->o_lnw = o, o += C;
    v->o_lnb = o, o += C;
    v->o_prw = o, o += (size_t)v->D * C;
    v->o_prb = o, o += v->D;
    v->n = o;
    v->params = bm_calloc(o, sizeof(float));
    v->grads = bm_calloc(o, sizeof(float));
    if (!v->params || !v->grads) {
        bm_err_set(err, "out of memory for vit parameters (%zu floats)", o);
        goto fail;
    }
    struct bm_rng r;
    bm_rng_for(&r, seed, 1);
    bm_init_normal(v->params + v->o_pw, C * v->K, 0.02f, &r);
    bm_init_normal(v->params + v->o_pos, (size_t)v->Np * C, 0.02f, &r);
    bm_init_normal(v->params + v->o_prw, (size_t)v->D * C, 0.02f, &r);
    for (size_t i = 0; i < C; i++) v->params[v->o_lnw + i] = 1.0f;
    bm_blocks_init(&v->blk, v->params + v->o_blk, seed, 0, v->blk.L);
    *out = v;
    return BM_OK;
fail:
    if (v) bm_free(v->params), bm_free(v->grads);
    bm_free(v);
    return BM_ERR;
}

static size_t vit_in_count(const void *self, const struct bm_batch *mb)
{
    (void)self, (void)mb;
    return 0;
}

static size_t vit_out_count(const void *self, const struct bm_batch *mb)
{
    const struct vit *v = self;
    return (size_t)mb->n_images_total * v->Np * v->D;
}

static void seg_fill(int *seg, int nseg, int len)
{
    for (int i = 0; i < nseg; i++) seg[i] = len;
}

static int vit_forward(void *self, const struct bm_batch *mb, const float *in, float *out,
                       float *loss, void **ctxp, struct bm_err *err)
{
    (void)in;
    struct vit *v = self;
    *ctxp = NULL;
    if (loss) *loss = 0.0f;
    int nimg = mb->n_images_total, N = nimg * v->Np, C = v->C;
    if (nimg > BM_MAX_SEGS) return bm_err_set(err, "vit: %d images in a microbatch (max %d)", nimg, BM_MAX_SEGS);
    if (mb->image != v->g.image || mb->channels != v->g.channels)
        return bm_err_set(err, "vit: batch images are %dx%dx%d, the model expects %dx%dx%d",
                          mb->channels, mb->image, mb->image, v->g.channels, v->g.image, v->g.image);
    int seg[BM_MAX_SEGS];
    seg_fill(seg, nimg, v->Np);
    size_t nblk = bm_blocks_acts(&v->blk, N, nimg, seg);
    size_t nf = (size_t)N * v->K + nblk + 2 * (size_t)N * C + 2 * (size_t)N;
    size_t bytes = sizeof(struct vit_ctx) + nf * sizeof(float);
    struct vit_ctx *x = bm_malloc(bytes);
    if (!x) return bm_err_set(err, "out of memory for vit activations (%zu bytes)", bytes);
    x->bytes = bytes, x->N = N, x->nseg = nimg;
    x->patches = x->acts;
    x->blk = x->patches + (size_t)N * v->K;
    x->bout = x->blk + nblk;
    x->lnf = x->bout + (size_t)N * C;
    x->mean = x->lnf + (size_t)N * C;
    x->rstd = x->mean + N;
    const float *P = v->params;
    float *x0 = bm_blocks_input(&v->blk, x->blk); /* [N,C] */
    bm_patch_embed_forward(x0, x->patches, mb->images, P + v->o_pw, P + v->o_pb, nimg,
                           v->g.channels, v->g.image, v->g.image, v->p, C);
    for (int i = 0; i < nimg; i++)
        bm_residual_forward(x0 + (size_t)i * v->Np * C, x0 + (size_t)i * v->Np * C, P + v->o_pos,
                            (long)v->Np * C);
    bm_blocks_forward(&v->blk, P + v->o_blk, x->blk, x->bout, N, nimg, seg);
    bm_layernorm_forward(x->lnf, x->mean, x->rstd, x->bout, P + v->o_lnw, P + v->o_lnb, N, C);
    bm_linear_forward(out, x->lnf, P + v->o_prw, P + v->o_prb, N, C, v->D);
    *ctxp = x;
    return BM_OK;
}

static int vit_backward(void *self, void *ctx, const struct bm_batch *mb, const float *dout,
                        float loss_scale, float *din, struct bm_err *err)
{
    (void)loss_scale, (void)din;
    struct vit *v = self;
    struct vit_ctx *x = ctx;
    int N = x->N, C = v->C, nimg = x->nseg, rc = BM_OK;
    const float *P = v->params;
    float *G = v->grads;
    int seg[BM_MAX_SEGS];
    seg_fill(seg, nimg, v->Np);
    if (!dout) goto done; /* no gradient reaches the encoder */
    float *d1 = bm_calloc((size_t)N * C * 2, sizeof(float));
    if (!d1) {
        rc = bm_err_set(err, "out of memory in vit backward");
        goto done;
    }
    float *d2 = d1 + (size_t)N * C;
    bm_linear_backward_input(d1, dout, P + v->o_prw, N, C, v->D);      /* d lnf */
    bm_linear_backward_weight(G + v->o_prw, G + v->o_prb, dout, x->lnf, N, C, v->D);
    bm_layernorm_backward(d2, G + v->o_lnw, G + v->o_lnb, d1, x->bout, P + v->o_lnw, x->mean,
                          x->rstd, N, C);                               /* d bout */
    if ((rc = bm_blocks_backward(&v->blk, P + v->o_blk, G + v->o_blk, x->blk, d2, d1, N, nimg, seg,
                                 err)))
        goto done1;                                                     /* d1 = d x0 */
    for (int i = 0; i < nimg; i++)
        bm_residual_backward(G + v->o_pos, NULL, d1 + (size_t)i * v->Np * C, (long)v->Np * C);
    bm_patch_embed_backward(NULL, G + v->o_pw, G + v->o_pb, d1, x->patches, P + v->o_pw, nimg,
                            v->g.channels, v->g.image, v->g.image, v->p, C, NULL);
done1:
    bm_free(d1);
done:
    (void)mb;
    bm_free(x);
    return rc;
}

static float *vit_params(void *self, size_t *n)
{
    struct vit *v = self;
    *n = v->n;
    return v->params;
}

static float *vit_grads(void *self, size_t *n)
{
    struct vit *v = self;
    *n = v->n;
    return v->grads;
}

static size_t vit_ctx_bytes(const void *ctx) { return ((const struct vit_ctx *)ctx)->bytes; }
static void vit_ctx_free(void *ctx) { bm_free(ctx); }

static double vit_flops(const void *self, const struct bm_batch *mb)
{
    const struct vit *v = self;
    int nimg = mb->n_images_total, N = nimg * v->Np;
    int seg[BM_MAX_SEGS];
    if (nimg > BM_MAX_SEGS) return 0;
    seg_fill(seg, nimg, v->Np);
    /* patch embed: forward + weight grad (no image grad); projection: forward + both grads */
    return 4.0 * N * v->K * v->C + 6.0 * N * v->C * v->D + bm_blocks_flops(&v->blk, N, nimg, seg);
}

static void vit_free(void *self)
{
    struct vit *v = self;
    if (!v) return;
    bm_free(v->params);
    bm_free(v->grads);
    bm_free(v);
}

const struct bm_module_ops bm_vit_ops = {
    .name = "vit", .role = BM_ROLE_ENCODER,
    .create = vit_create, .in_count = vit_in_count, .out_count = vit_out_count,
    .forward = vit_forward, .backward = vit_backward, .params = vit_params, .grads = vit_grads,
    .ctx_bytes = vit_ctx_bytes, .ctx_free = vit_ctx_free, .flops = vit_flops, .free = vit_free,
};
