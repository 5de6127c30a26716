/* blocks.c — a stack of pre-LN transformer layers over packed sequences, the common trunk of
 * vit, gpt and dit; plus geometry, layout, init and the module registry. */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "nn/nn.h"

/* ================================================================ parameters */

size_t bm_blocks_layer_params(const struct bm_blocks *b)
{
    size_t C = b->C, F = b->F;
    return 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
}

size_t bm_blocks_params(const struct bm_blocks *b) { return (size_t)b->L * bm_blocks_layer_params(b); }

struct bm_layer bm_blocks_layer(const struct bm_blocks *b, float *base, int l)
{
    size_t C = b->C, F = b->F;
    float *p = base + (size_t)l * bm_blocks_layer_params(b);
    struct bm_layer y;
    y.ln1w = p, p += C;
    y.ln1b = p, p += C;
    y.qkvw = p, p += 3 * C * C;
    y.qkvb = p, p += 3 * C;
    y.attprojw = p, p += C * C;
    y.attprojb = p, p += C;
    y.ln2w = p, p += C;
    y.ln2b = p, p += C;
    y.fcw = p, p += F * C;
    y.fcb = p, p += F;
    y.fcprojw = p, p += C * F;
    y.fcprojb = p;
    return y;
}

void bm_rng_for(struct bm_rng *r, uint64_t seed, uint64_t tag)
{
    bm_rng_seed(r, seed * 0x9E3779B97F4A7C15ULL ^ (tag + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL);
}

void bm_init_normal(float *p, size_t n, float std, struct bm_rng *r)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)(bm_rng_normal(r) * std);
}

void bm_blocks_init(const struct bm_blocks *b, float *params, uint64_t seed, int first_layer,
                    int L_total)
{
    size_t C = b->C, F = b->F;
    float rstd = 0.02f / sqrtf(2.0f * (float)(L_total > 0 ? L_total : 1));
    memset(params, 0, bm_blocks_params(b) * sizeof(float));
    for (int l = 0; l < b->L; l++) {
        struct bm_rng r;
        bm_rng_for(&r, seed, 1000 + (uint64_t)(first_layer + l));
        struct bm_layer y = bm_blocks_layer(b, params, l);
        for (size_t i = 0; i < C; i++) y.ln1w[i] = y.ln2w[i] = 1.0f;
        bm_init_normal(y.qkvw, 3 * C * C, 0.02f, &r);
        bm_init_normal(y.attprojw, C * C, rstd, &r);
        bm_init_normal(y.fcw, F * C, 0.02f, &r);
        bm_init_normal(y.fcprojw, C * F, rstd, &r);
    }
}

/* ================================================================ activations */

static size_t att_floats(const struct bm_blocks *b, int nseg, const int *seg_len)
{
    size_t a = 0;
    for (int s = 0; s < nseg; s++) a += (size_t)seg_len[s] * seg_len[s];
    return a * b->NH;
}

static size_t layer_acts(const struct bm_blocks *b, int T, size_t A)
{
    return (size_t)T * (8 * (size_t)b->C + 2 * (size_t)b->F + 4) + A;
}

size_t bm_blocks_acts(const struct bm_blocks *b, int T, int nseg, const int *seg_len)
{
    return (size_t)b->L * layer_acts(b, T, att_floats(b, nseg, seg_len));
}

float *bm_blocks_input(const struct bm_blocks *b, float *acts)
{
    (void)b;
    return acts; /* layer 0's x is the first field */
}

/* Saved activations of one layer. */
struct lacts {
    float *x, *ln1, *ln1m, *ln1r, *qkv, *atty, *att, *res2, *ln2, *ln2m, *ln2r, *fch, *fchg;
};

static struct lacts layer_acts_at(const struct bm_blocks *b, float *acts, int l, int T, size_t A)
{
    size_t C = b->C, F = b->F;
    float *p = acts + (size_t)l * layer_acts(b, T, A);
    struct lacts a;
    a.x = p, p += T * C;
    a.ln1 = p, p += T * C;
    a.ln1m = p, p += T;
    a.ln1r = p, p += T;
    a.qkv = p, p += 3 * T * C;
    a.atty = p, p += T * C;
    a.att = p, p += A;
    a.res2 = p, p += T * C;
    a.ln2 = p, p += T * C;
    a.ln2m = p, p += T;
    a.ln2r = p, p += T;
    a.fch = p, p += T * F;
    a.fchg = p;
    return a;
}

/* ================================================================ forward / backward */

void bm_blocks_forward(const struct bm_blocks *b, const float *params, float *acts, float *out,
                       int T, int nseg, const int *seg_len)
{
    int C = b->C, F = b->F, NH = b->NH;
    size_t A = att_floats(b, nseg, seg_len);
    for (int l = 0; l < b->L; l++) {
        struct bm_layer w = bm_blocks_layer(b, (float *)params, l);
        struct lacts a = layer_acts_at(b, acts, l, T, A);
        float *y = l + 1 < b->L ? layer_acts_at(b, acts, l + 1, T, A).x : out; /* [T,C] */
        bm_layernorm_forward(a.ln1, a.ln1m, a.ln1r, a.x, w.ln1w, w.ln1b, T, C);
        bm_linear_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, T, C, 3 * C);
        size_t tok = 0, att = 0;
        for (int s = 0; s < nseg; s++) {
            int Ts = seg_len[s];
            bm_attention_forward(a.atty + tok * C, a.att + att, a.qkv + tok * 3 * C, Ts, C, NH,
                                 b->causal);
            tok += Ts;
            att += (size_t)NH * Ts * Ts;
        }
        bm_linear_forward(a.res2, a.atty, w.attprojw, w.attprojb, T, C, C);
        for (size_t i = 0; i < (size_t)T * C; i++) a.res2[i] += a.x[i];
        bm_layernorm_forward(a.ln2, a.ln2m, a.ln2r, a.res2, w.ln2w, w.ln2b, T, C);
        bm_linear_forward(a.fch, a.ln2, w.fcw, w.fcb, T, C, F);
        bm_gelu_forward(a.fchg, a.fch, (long)T * F);
        bm_linear_forward(y, a.fchg, w.fcprojw, w.fcprojb, T, F, C);
        for (size_t i = 0; i < (size_t)T * C; i++) y[i] += a.res2[i];
    }
}

int bm_blocks_backward(const struct bm_blocks *b, const float *params, float *grads,
                       const float *acts, const float *dout, float *dinp, int T, int nseg,
                       const int *seg_len, struct bm_err *err)
{
    size_t C = b->C, F = b->F;
    int NH = b->NH;
    size_t A = att_floats(b, nseg, seg_len);
    int maxT = 0;
    for (int s = 0; s < nseg; s++) maxT = BM_MAX(maxT, seg_len[s]);
    /* scratch: dfchg, dfch [T,F]; dln, datty [T,C]; dqkv [T,3C]; datt [maxT,maxT] */
    size_t n = 2 * T * F + 5 * T * C + (size_t)maxT * maxT;
    float *s = bm_malloc(n * sizeof(float));
    if (!s) return bm_err_set(err, "out of memory in transformer backward (%zu floats)", n);
    float *dfchg = s, *dfch = dfchg + T * F, *dln = dfch + T * F, *datty = dln + T * C;
    float *dqkv = datty + T * C, *datt = dqkv + 3 * T * C;
    float *dres = dinp; /* running gradient of the residual stream, [T,C] */
    memcpy(dres, dout, (size_t)T * C * sizeof(float));
    for (int l = b->L - 1; l >= 0; l--) {
        struct bm_layer w = bm_blocks_layer(b, (float *)params, l);
        struct bm_layer g = bm_blocks_layer(b, grads, l);
        struct lacts a = layer_acts_at(b, (float *)acts, l, T, A);
        /* MLP: y = res2 + fcproj(gelu(fc(ln2(res2)))) */
        memset(dfchg, 0, T * F * sizeof(float));
        bm_linear_backward_input(dfchg, dres, w.fcprojw, T, F, C);
        bm_linear_backward_weight(g.fcprojw, g.fcprojb, dres, a.fchg, T, F, C);
        memset(dfch, 0, T * F * sizeof(float));
        bm_gelu_backward(dfch, a.fch, dfchg, (long)T * F);
        memset(dln, 0, T * C * sizeof(float));
        bm_linear_backward_input(dln, dfch, w.fcw, T, C, F);
        bm_linear_backward_weight(g.fcw, g.fcb, dfch, a.ln2, T, C, F);
        bm_layernorm_backward(dres, g.ln2w, g.ln2b, dln, a.res2, w.ln2w, a.ln2m, a.ln2r, T, C);
        /* attention: res2 = x + attproj(attn(qkv(ln1(x)))) */
        memset(datty, 0, T * C * sizeof(float));
        bm_linear_backward_input(datty, dres, w.attprojw, T, C, C);
        bm_linear_backward_weight(g.attprojw, g.attprojb, dres, a.atty, T, C, C);
        memset(dqkv, 0, 3 * T * C * sizeof(float));
        size_t tok = 0, att = 0;
        for (int q = 0; q < nseg; q++) {
            int Ts = seg_len[q];
            bm_attention_backward(dqkv + tok * 3 * C, datty + tok * C, a.qkv + tok * 3 * C,
                                  a.att + att, Ts, C, NH, datt);
            tok += Ts;
            att += (size_t)NH * Ts * Ts;
        }
        memset(dln, 0, T * C * sizeof(float));
        bm_linear_backward_input(dln, dqkv, w.qkvw, T, C, 3 * C);
        bm_linear_backward_weight(g.qkvw, g.qkvb, dqkv, a.ln1, T, C, 3 * C);
        bm_layernorm_backward(dres, g.ln1w, g.ln1b, dln, a.x, w.ln1w, a.ln1m, a.ln1r, T, C);
    }
    bm_free(s);
    return BM_OK;
}

/* What one layer's W needs, inside keep (see bm_blocks_keep_floats). */
struct lkeep {
    float *fchg, *dy, *ln2, *dfch, *res2, *m2, *r2, *dln2, *atty, *dres2, *ln1, *dqkv, *x, *m1, *r1, *dln1;
};

static size_t layer_keep(const struct bm_blocks *b, int T)
{
    return (size_t)T * (12 * (size_t)b->C + 2 * (size_t)b->F + 4);
}

size_t bm_blocks_keep_floats(const struct bm_blocks *b, int T) { return (size_t)b->L * layer_keep(b, T); }

static struct lkeep layer_keep_at(const struct bm_blocks *b, const float *keep, int l, int T)
{
    size_t C = b->C, F = b->F;
    float *p = (float *)keep + (size_t)l * layer_keep(b, T);
    struct lkeep k;
    k.fchg = p, p += T * F;
    k.dy = p, p += T * C;
    k.ln2 = p, p += T * C;
    k.dfch = p, p += T * F;
    k.res2 = p, p += T * C;
    k.m2 = p, p += T;
    k.r2 = p, p += T;
    k.dln2 = p, p += T * C;
    k.atty = p, p += T * C;
    k.dres2 = p, p += T * C;
    k.ln1 = p, p += T * C;
    k.dqkv = p, p += 3 * T * C;
    k.x = p, p += T * C;
    k.m1 = p, p += T;
    k.r1 = p, p += T;
    k.dln1 = p;
    return k;
}

int bm_blocks_backward_input(const struct bm_blocks *b, const float *params, const float *acts,
                             const float *dout, float *dinp, float *keep, int T, int nseg,
                             const int *seg_len, struct bm_err *err)
{
    size_t C = b->C, F = b->F, TC = (size_t)T * C, TF = (size_t)T * F;
    int NH = b->NH;
    size_t A = att_floats(b, nseg, seg_len);
    int maxT = 0;
    for (int s = 0; s < nseg; s++) maxT = BM_MAX(maxT, seg_len[s]);
    /* scratch: dfchg [T,F]; datty [T,C]; datt [maxT,maxT] (the rest lives in keep) */
    size_t n = TF + TC + (size_t)maxT * maxT;
    float *s = bm_malloc(n * sizeof(float));
    if (!s) return bm_err_set(err, "out of memory in transformer backward (%zu floats)", n);
    float *dfchg = s, *datty = dfchg + TF, *datt = datty + TC;
    float *dres = dinp; /* running gradient of the residual stream, [T,C] */
    memcpy(dres, dout, TC * sizeof(float));
    for (int l = b->L - 1; l >= 0; l--) {
        struct bm_layer w = bm_blocks_layer(b, (float *)params, l);
        struct lacts a = layer_acts_at(b, (float *)acts, l, T, A);
        struct lkeep k = layer_keep_at(b, keep, l, T);
        /* MLP: y = res2 + fcproj(gelu(fc(ln2(res2)))) */
        memcpy(k.fchg, a.fchg, TF * sizeof(float));
        memcpy(k.dy, dres, TC * sizeof(float));
        memset(dfchg, 0, TF * sizeof(float));
        bm_linear_backward_input(dfchg, dres, w.fcprojw, T, F, C);
        memset(k.dfch, 0, TF * sizeof(float));
        bm_gelu_backward(k.dfch, a.fch, dfchg, (long)T * F);
        memcpy(k.ln2, a.ln2, TC * sizeof(float));
        memset(k.dln2, 0, TC * sizeof(float));
        bm_linear_backward_input(k.dln2, k.dfch, w.fcw, T, C, F);
        memcpy(k.res2, a.res2, TC * sizeof(float));
        memcpy(k.m2, a.ln2m, (size_t)T * sizeof(float));
        memcpy(k.r2, a.ln2r, (size_t)T * sizeof(float));
        bm_layernorm_backward_input(dres, k.dln2, a.res2, w.ln2w, a.ln2m, a.ln2r, T, C);
        /* attention: res2 = x + attproj(attn(qkv(ln1(x)))) */
        memcpy(k.atty, a.atty, TC * sizeof(float));
        memcpy(k.dres2, dres, TC * sizeof(float));
        memset(datty, 0, TC * sizeof(float));
        bm_linear_backward_input(datty, dres, w.attprojw, T, C, C);
        memset(k.dqkv, 0, 3 * TC * sizeof(float));
        size_t tok = 0, att = 0;
        for (int q = 0; q < nseg; q++) {
            int Ts = seg_len[q];
            bm_attention_backward(k.dqkv + tok * 3 * C, datty + tok * C, a.qkv + tok * 3 * C,
                                  a.att + att, Ts, C, NH, datt);
            tok += Ts;
            att += (size_t)NH * Ts * Ts;
        }
        memcpy(k.ln1, a.ln1, TC * sizeof(float));
        memset(k.dln1, 0, TC * sizeof(float));
        bm_linear_backward_input(k.dln1, k.dqkv, w.qkvw, T, C, 3 * C);
        memcpy(k.x, a.x, TC * sizeof(float));
        memcpy(k.m1, a.ln1m, (size_t)T * sizeof(float));
        memcpy(k.r1, a.ln1r, (size_t)T * sizeof(float));
        bm_layernorm_backward_input(dres, k.dln1, a.x, w.ln1w, a.ln1m, a.ln1r, T, C);
    }
    bm_free(s);
    return BM_OK;
}

void bm_blocks_backward_weight(const struct bm_blocks *b, float *grads, const float *keep, int T)
{
    size_t C = b->C, F = b->F;
    for (int l = b->L - 1; l >= 0; l--) { /* bm_blocks_backward's order */
        struct bm_layer g = bm_blocks_layer(b, grads, l);
        struct lkeep k = layer_keep_at(b, keep, l, T);
        bm_linear_backward_weight(g.fcprojw, g.fcprojb, k.dy, k.fchg, T, F, C);
        bm_linear_backward_weight(g.fcw, g.fcb, k.dfch, k.ln2, T, C, F);
        bm_layernorm_backward_weight(g.ln2w, g.ln2b, k.dln2, k.res2, k.m2, k.r2, T, C);
        bm_linear_backward_weight(g.attprojw, g.attprojb, k.dres2, k.atty, T, C, C);
        bm_linear_backward_weight(g.qkvw, g.qkvb, k.dqkv, k.ln1, T, C, 3 * C);
        bm_layernorm_backward_weight(g.ln1w, g.ln1b, k.dln1, k.x, k.m1, k.r1, T, C);
    }
}

double bm_blocks_flops(const struct bm_blocks *b, int T, int nseg, const int *seg_len)
{
    double C = b->C, F = b->F, tt = 0;
    for (int s = 0; s < nseg; s++) tt += (double)seg_len[s] * seg_len[s];
    double fwd = 2.0 * T * (3 * C * C + C * C + 2 * C * F) + 4.0 * tt * C;
    return 3.0 * fwd * b->L;
}

/* ================================================================ geometry */

/* The module producing 'name', or NULL (a spec input). */
static const struct bm_module *producer(const struct bm_spec *s, const char *name)
{
    for (int i = 0; i < s->n_modules; i++)
        for (int k = 0; k < s->modules[i].n_produces; k++)
            if (!strcmp(s->modules[i].produces[k], name)) return &s->modules[i];
    return NULL;
}

/* Add encoder module i to g: its image geometry must agree with the encoders before it. */
static int geom_add_encoder(const struct bm_spec *s, int i, struct bm_geom *g, struct bm_err *err)
{
    const struct bm_module *m = &s->modules[i];
    const struct bm_arch *a = &m->arch;
    for (int k = 0; k < m->n_consumes; k++) {
        const struct bm_module *p = producer(s, m->consumes[k]);
        if (p)
            return bm_err_set(err, "module \"%s\": consumes \"%s\" from module \"%s\"; the trained "
                                   "models take encoders that read spec inputs only (e.g. \"image\")",
                              m->name, m->consumes[k], p->name);
    }
    if (a->image <= 0 || a->patch <= 0 || a->image % a->patch)
        return bm_err_set(err, "module \"%s\": arch needs image and patch with image %% patch "
                               "== 0 (got image %d, patch %d)", m->name, a->image, a->patch);
    if (g->n_enc == BM_MAX_ENCODERS)
        return bm_err_set(err, "module \"%s\": the trained models take at most %d encoders", m->name,
                          BM_MAX_ENCODERS);
    int channels = a->channels > 0 ? a->channels : 3;
    if (g->n_enc) {
        const char *first = s->modules[g->enc_module[0]].name;
        if (a->image != g->image)
            return bm_err_set(err, "module \"%s\": arch.image %d disagrees with encoder \"%s\" (image %d)\n"
                                   "hint: every encoder reads the same images; give them one image size "
                                   "(the patch may differ)", m->name, a->image, first, g->image);
        if (channels != g->channels)
            return bm_err_set(err, "module \"%s\": arch.channels %d disagrees with encoder \"%s\" "
                                   "(channels %d)\nhint: every encoder reads the same images",
                              m->name, channels, first, g->channels);
    }
    g->image = a->image;
    g->channels = channels;
    g->enc_module[g->n_enc] = i;
    g->enc_tokens[g->n_enc++] = (a->image / a->patch) * (a->image / a->patch);
    g->img_tokens += (a->image / a->patch) * (a->image / a->patch);
    return BM_OK;
}

int bm_geom_from_spec(const struct bm_spec *s, struct bm_geom *g, struct bm_err *err)
{
    memset(g, 0, sizeof *g);
    if (s->backbone_module < 0 || s->backbone_module >= s->n_modules)
        return bm_err_set(err, "%s: no backbone module", s->path ? s->path : "spec");
    const struct bm_module *bb = &s->modules[s->backbone_module];
    g->d = bb->arch.hidden;
    g->seq = bb->arch.seq;
    g->vocab = bb->arch.vocab;
    if (g->d <= 0 || g->seq <= 0 || g->vocab <= 0)
        return bm_err_set(err, "module \"%s\": arch needs hidden, seq and vocab\n"
                               "hint: e.g. \"arch\": {\"layers\": 8, \"hidden\": 64, \"heads\": 4, "
                               "\"vocab\": 32, \"seq\": 24}", bb->name);
    g->max_images = s->data.max_images > 0 ? s->data.max_images : 1;
    for (int i = 0; i < s->n_modules; i++)
        if (s->modules[i].role == BM_ROLE_ENCODER && geom_add_encoder(s, i, g, err)) return BM_ERR;
    g->max_pos = g->max_images * g->img_tokens + g->seq;
    return BM_OK;
}

int bm_layout(const struct bm_batch *mb, int img_tokens, int *off, int *len)
{
    int T = 0;
    for (int i = 0; i < mb->n_samples; i++) {
        int n = mb->n_images[i] * img_tokens + mb->seq;
        if (off) off[i] = T;
        if (len) len[i] = n;
        T += n;
    }
    return T;
}

/* ================================================================ registry */

#define MAX_MODULES 64
static const struct bm_module_ops *registry[MAX_MODULES];
static int n_registry;

static void register_builtins(void)
{
    if (n_registry) return;
    registry[n_registry++] = &bm_vit_ops;
    registry[n_registry++] = &bm_gpt_ops;
    registry[n_registry++] = &bm_dit_ops;
}

int bm_module_register(const struct bm_module_ops *ops, struct bm_err *err)
{
    register_builtins();
    if (!ops || !ops->name) return bm_err_set(err, "bm_module_register: ops without a name");
    if (bm_module_find(ops->name))
        return bm_err_set(err, "module implementation \"%s\" is already registered", ops->name);
    if (n_registry == MAX_MODULES)
        return bm_err_set(err, "module registry full (%d implementations)", MAX_MODULES);
    registry[n_registry++] = ops;
    return BM_OK;
}

const struct bm_module_ops *bm_module_find(const char *name)
{
    register_builtins();
    for (int i = 0; name && i < n_registry; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}
