/* test_model.c — the built-in models through the public module interface:
 * finite differences of every model's parameters (sampled indices) on the total loss
 * (LM + generator), also with two encoders, and of gpt's input with two encoders' parts;
 * GPT as 2 chunks == GPT as 1, several microbatches in flight at once,
 * the registry. */
#include "bigmac_module.h"
#include "data/data.h"
#include "model/model.h"
#include "nn/nn.h"
#include "train/train.h"
#include "test.h"
#include "util/util.h"

static struct bm_module mods[3], mods2[4];
static struct bm_spec spec, spec2; /* vit + gpt + dit; two vit towers + gpt + dit */

static void make_spec(void)
{
    memset(mods, 0, sizeof mods);
    memset(&spec, 0, sizeof spec);
    mods[0] = (struct bm_module){.name = (char *)"vit", .role = BM_ROLE_ENCODER, .impl = (char *)"vit",
                                 .arch = {.layers = 2, .hidden = 16, .heads = 2, .ffn = 32, .image = 8,
                                          .patch = 4, .channels = 3}};
    mods[1] = (struct bm_module){.name = (char *)"gpt", .role = BM_ROLE_BACKBONE, .impl = (char *)"gpt",
                                 .layers = 4,
                                 .arch = {.layers = 4, .hidden = 16, .heads = 2, .vocab = BM_DATA_VOCAB,
                                          .seq = 20}};
    mods[2] = (struct bm_module){.name = (char *)"dit", .role = BM_ROLE_GENERATOR, .impl = (char *)"dit",
                                 .grad_to_backbone = 1,
                                 .arch = {.layers = 2, .hidden = 16, .heads = 2, .image = 8, .patch = 4}};
    spec.modules = mods, spec.n_modules = 3, spec.backbone_module = 1;
    spec.data.seed = 3, spec.data.samples_per_microbatch = 2, spec.data.max_images = 2;
    spec.microbatches = 2;
    /* a second tower reading the same images at patch 2 (16 tokens per image), listed first */
    mods2[0] = (struct bm_module){.name = (char *)"vit_fine", .role = BM_ROLE_ENCODER, .impl = (char *)"vit",
                                  .arch = {.layers = 1, .hidden = 8, .heads = 2, .ffn = 16, .image = 8,
                                           .patch = 2, .channels = 3}};
    memcpy(mods2 + 1, mods, sizeof mods);
    spec2 = spec;
    spec2.modules = mods2, spec2.n_modules = 4, spec2.backbone_module = 2;
}

static struct bm_data_batch *draw(int step, int mb)
{
    struct bm_data_cfg c = {.seed = 3, .samples = 2, .max_images = 2, .image = 8, .channels = 3, .seq = 20};
    struct bm_data_batch *d = NULL;
    struct bm_err err;
    if (bm_data_batch(&c, step, mb, &d, &err)) fprintf(stderr, "%s\n", err.msg);
    return d;
}

/* The whole model: encoders (the spec's first modules), backbone chunks, generator. */
struct net {
    const struct bm_module_ops *eops[2], *ops[3]; /* encoder e; ops[1] backbone, ops[2] generator */
    void *enc[2], *bb[4], *gen;
    int n_enc, n_chunks;
};

static int net_new_of(struct net *n, const struct bm_spec *sp, int n_chunks)
{
    struct bm_err err;
    memset(n, 0, sizeof *n);
    n->n_chunks = n_chunks;
    n->n_enc = sp->backbone_module;
    const struct bm_module *bm = &sp->modules[n->n_enc], *gm = bm + 1;
    n->ops[1] = bm_module_find(bm->impl), n->ops[2] = bm_module_find(gm->impl);
    int L = bm->arch.layers, rc = 0;
    for (int e = 0; e < n->n_enc; e++) {
        n->eops[e] = bm_module_find(sp->modules[e].impl);
        rc |= n->eops[e]->create(&sp->modules[e], sp, 0, 0, 11 + 100 * e, &n->enc[e], &err);
    }
    n->ops[0] = n->eops[0];
    for (int c = 0; c < n_chunks; c++)
        rc |= n->ops[1]->create(bm, sp, c * L / n_chunks, (c + 1) * L / n_chunks, 12, &n->bb[c], &err);
    rc |= n->ops[2]->create(gm, sp, 0, 0, 13, &n->gen, &err);
    if (rc) fprintf(stderr, "create: %s\n", err.msg);
    return rc;
}

static int net_new(struct net *n, int n_chunks) { return net_new_of(n, &spec, n_chunks); }

static void net_free(struct net *n)
{
    for (int e = 0; e < n->n_enc; e++) n->eops[e]->free(n->enc[e]);
    for (int c = 0; c < n->n_chunks; c++) n->ops[1]->free(n->bb[c]);
    n->ops[2]->free(n->gen);
}

static void net_zero_grad(struct net *n)
{
    size_t k;
    float *g;
    for (int e = 0; e < n->n_enc; e++) {
        g = n->eops[e]->grads(n->enc[e], &k);
        memset(g, 0, k * sizeof(float));
    }
    for (int c = 0; c < n->n_chunks; c++) {
        g = n->ops[1]->grads(n->bb[c], &k);
        memset(g, 0, k * sizeof(float));
    }
    g = n->ops[2]->grads(n->gen, &k);
    memset(g, 0, k * sizeof(float));
}

/* Forward of one microbatch; keeps contexts and tensors in *st. Returns total loss. */
struct mbstate {
    void *cenc[2], *cbb[4], *cgen;
    float *t[6]; /* t[0] = the encoders' outputs one after another, t[1+c] = chunk c output */
    double lm, gen;
};

static double net_forward(struct net *n, const struct bm_batch *b, struct mbstate *s)
{
    struct bm_err err;
    float loss;
    memset(s, 0, sizeof *s);
    s->t[0] = bm_malloc(n->ops[1]->in_count(n->bb[0], b) * sizeof(float));
    for (size_t e = 0, at = 0; e < (size_t)n->n_enc; at += n->eops[e]->out_count(n->enc[e], b), e++)
        if (n->eops[e]->forward(n->enc[e], b, NULL, s->t[0] + at, &loss, &s->cenc[e], &err))
            fprintf(stderr, "%s\n", err.msg);
    for (int c = 0; c < n->n_chunks; c++) {
        s->t[1 + c] = bm_malloc(n->ops[1]->out_count(n->bb[c], b) * sizeof(float));
        if (n->ops[1]->forward(n->bb[c], b, s->t[c], s->t[1 + c], &loss, &s->cbb[c], &err))
            fprintf(stderr, "%s\n", err.msg);
    }
    s->lm = loss;
    if (n->ops[2]->forward(n->gen, b, s->t[n->n_chunks], NULL, &loss, &s->cgen, &err))
        fprintf(stderr, "%s\n", err.msg);
    s->gen = loss;
    return s->lm + s->gen;
}

static void net_backward(struct net *n, const struct bm_batch *b, struct mbstate *s, float scale)
{
    struct bm_err err;
    int C = n->n_chunks;
    float *dh = bm_malloc(n->ops[2]->in_count(n->gen, b) * sizeof(float));
    n->ops[2]->backward(n->gen, s->cgen, b, NULL, scale, dh, &err);
    float *d = dh;
    for (int c = C - 1; c >= 0; c--) {
        float *din = bm_malloc(n->ops[1]->in_count(n->bb[c], b) * sizeof(float));
        n->ops[1]->backward(n->bb[c], s->cbb[c], b, d, scale, din, &err);
        bm_free(d);
        d = din;
    }
    for (size_t e = 0, at = 0; e < (size_t)n->n_enc; at += n->eops[e]->out_count(n->enc[e], b), e++)
        n->eops[e]->backward(n->enc[e], s->cenc[e], b, d + at, scale, NULL, &err);
    bm_free(d);
    for (int i = 0; i <= C; i++) bm_free(s->t[i]);
}

static void net_drop(struct net *n, struct mbstate *s)
{
    for (int e = 0; e < n->n_enc; e++) n->eops[e]->ctx_free(s->cenc[e]);
    for (int c = 0; c < n->n_chunks; c++) n->ops[1]->ctx_free(s->cbb[c]);
    n->ops[2]->ctx_free(s->cgen);
    for (int i = 0; i <= n->n_chunks; i++) bm_free(s->t[i]);
}

static double net_loss(struct net *n, const struct bm_batch *b)
{
    struct mbstate s;
    double l = net_forward(n, b, &s);
    net_drop(n, &s);
    return l;
}


/* ---------------------------------------------------------------- transformer layers */

/* Every parameter tensor of the layer stack, sampled per tensor, on L = sum(out * R). */
struct blkfd {
    struct bm_blocks b;
    float *params, *acts, *out, *r;
    int T, nseg, seg[3];
};

static double blk_loss(struct blkfd *f)
{
    bm_blocks_forward(&f->b, f->params, f->acts, f->out, f->T, f->nseg, f->seg);
    double s = 0;
    for (int i = 0; i < f->T * f->b.C; i++) s += (double)f->out[i] * f->r[i];
    return s;
}

TEST(blocks_finite_differences_every_tensor)
{
    for (int causal = 0; causal < 2; causal++) {
        struct blkfd f = {.b = {2, 8, 2, 12, causal}, .T = 9, .nseg = 3, .seg = {2, 4, 3}};
        size_t np = bm_blocks_params(&f.b), na = bm_blocks_acts(&f.b, f.T, f.nseg, f.seg);
        struct bm_rng r;
        bm_rng_seed(&r, 9);
        f.params = bm_malloc(np * sizeof(float));
        float *g = bm_calloc(np, sizeof(float)), *x0 = bm_malloc(f.T * 8 * sizeof(float));
        float *dx = bm_malloc(f.T * 8 * sizeof(float));
        f.acts = bm_malloc(na * sizeof(float));
        f.out = bm_malloc(f.T * 8 * sizeof(float));
        f.r = bm_malloc(f.T * 8 * sizeof(float));
        for (size_t i = 0; i < np; i++) f.params[i] = (float)(0.3 * bm_rng_normal(&r));
        for (int i = 0; i < f.T * 8; i++) x0[i] = (float)bm_rng_normal(&r), f.r[i] = (float)bm_rng_normal(&r);
        memcpy(bm_blocks_input(&f.b, f.acts), x0, f.T * 8 * sizeof(float));
        blk_loss(&f);
        struct bm_err err;
        CHECK(bm_blocks_backward(&f.b, f.params, g, f.acts, f.r, dx, f.T, f.nseg, f.seg, &err) == BM_OK);
        /* tensors of each layer in order, with their sizes */
        size_t C = 8, F = 12, sizes[12] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, F * C, F, C * F, C};
        int bad = 0;
        const double h = 1e-3;
        size_t at = 0;
        for (int l = 0; l < 2; l++)
            for (int t = 0; t < 12; t++) {
                for (int k = 0; k < 6; k++) {
                    size_t i = at + (size_t)(bm_rng_uniform(&r) * sizes[t]);
                    float p0 = f.params[i];
                    f.params[i] = (float)(p0 + h);
                    memcpy(bm_blocks_input(&f.b, f.acts), x0, f.T * 8 * sizeof(float));
                    double lp = blk_loss(&f);
                    f.params[i] = (float)(p0 - h);
                    memcpy(bm_blocks_input(&f.b, f.acts), x0, f.T * 8 * sizeof(float));
                    double lm = blk_loss(&f);
                    f.params[i] = p0;
                    double fd = (lp - lm) / (2 * h);
                    if (fabs(fd - g[i]) > 2e-3 + 2e-2 * fabs(g[i])) {
                        if (bad < 5) fprintf(stderr, "  layer %d tensor %d [%zu]: fd %.6g analytic %.6g\n", l, t, i - at, fd, g[i]);
                        bad++;
                    }
                }
                at += sizes[t];
            }
        CHECK(at == np);
        /* input gradient */
        for (int k = 0; k < 12; k++) {
            int i = (int)(bm_rng_uniform(&r) * f.T * 8);
            float v0 = x0[i];
            x0[i] = (float)(v0 + h);
            memcpy(bm_blocks_input(&f.b, f.acts), x0, f.T * 8 * sizeof(float));
            double lp = blk_loss(&f);
            x0[i] = (float)(v0 - h);
            memcpy(bm_blocks_input(&f.b, f.acts), x0, f.T * 8 * sizeof(float));
            double lm = blk_loss(&f);
            x0[i] = v0;
            double fd = (lp - lm) / (2 * h);
            if (fabs(fd - dx[i]) > 2e-3 + 2e-2 * fabs(dx[i])) {
                if (bad < 5) fprintf(stderr, "  dx[%d]: fd %.6g analytic %.6g\n", i, fd, dx[i]);
                bad++;
            }
        }
        CHECKF(bad == 0, "causal=%d: %d mismatches", causal, bad);
        bm_free(f.params), bm_free(g), bm_free(x0), bm_free(dx), bm_free(f.acts), bm_free(f.out), bm_free(f.r);
    }
}

/* ---------------------------------------------------------------- finite differences */

static int fd_params(struct net *n, const struct bm_batch *b, const struct bm_module_ops *ops,
                     void *self, const char *what, struct bm_rng *r)
{
    size_t np;
    float *p = ops->params(self, &np), *g = ops->grads(self, &np);
    const double h = 1e-3;
    int bad = 0, strong = 0;
    /* NR random indices + the 10 largest gradients */
    enum { NR = 250 };
    size_t idx[NR + 10];
    for (int i = 0; i < NR; i++) idx[i] = (size_t)(bm_rng_uniform(r) * np);
    for (int k = 0; k < 10; k++) {
        size_t best = 0;
        float bv = -1;
        for (size_t i = 0; i < np; i++) {
            int taken = 0;
            for (int j = NR; j < NR + k; j++) taken |= idx[j] == i;
            if (!taken && fabsf(g[i]) > bv) bv = fabsf(g[i]), best = i;
        }
        idx[NR + k] = best;
    }
    for (int k = 0; k < NR + 10; k++) {
        size_t i = idx[k];
        float x0 = p[i];
        p[i] = (float)(x0 + h);
        double lp = net_loss(n, b);
        p[i] = (float)(x0 - h);
        double lm = net_loss(n, b);
        p[i] = x0;
        double fd = (lp - lm) / (2 * h);
        if (fabs(g[i]) > 1e-3) strong++;
        if (fabs(fd - g[i]) > 3e-4 + 5e-2 * fabs(g[i])) {
            if (bad < 5) fprintf(stderr, "  %s[%zu]: fd %.6g analytic %.6g\n", what, i, fd, g[i]);
            bad++;
        }
    }
    if (strong < 10) fprintf(stderr, "  %s: only %d gradients above 1e-3\n", what, strong), bad++;
    return bad;
}

/* Finite differences on the total loss: every encoder and gpt chunk 0 (which splices the
 * encoders' outputs into the sequence), and with 'rest' chunk 1 and dit too. */
static void fd_whole_model(const struct bm_spec *sp, int rest)
{
    struct net n;
    CHECK(net_new_of(&n, sp, 2) == 0);
    struct bm_data_batch *d = draw(0, 0);
    struct bm_rng r;
    bm_rng_seed(&r, 5);
    net_zero_grad(&n);
    struct mbstate s;
    double l = net_forward(&n, &d->b, &s);
    CHECK(l > 1.0 && l < 10.0);
    CHECK_NEAR(s.lm, log(BM_DATA_VOCAB), 0.5); /* near-uniform predictions at init */
    net_backward(&n, &d->b, &s, 1.0f);
    for (int e = 0; e < n.n_enc; e++) /* each encoder's parameters see its own part of chunk 0's din */
        CHECKF(fd_params(&n, &d->b, n.eops[e], n.enc[e], sp->modules[e].name, &r) == 0, "%s", sp->modules[e].name);
    CHECK(fd_params(&n, &d->b, n.ops[1], n.bb[0], "gpt.c0", &r) == 0);
    if (rest) {
        CHECK(fd_params(&n, &d->b, n.ops[1], n.bb[1], "gpt.c1", &r) == 0);
        CHECK(fd_params(&n, &d->b, n.ops[2], n.gen, "dit", &r) == 0);
    }
    bm_data_batch_free(d);
    net_free(&n);
}

TEST(finite_differences_whole_model) { fd_whole_model(&spec, 1); }

/* Two encoders: chunk 0 takes both towers' outputs one after another (spec module order) and
 * splits its input gradient back the same way (chunk 1 and dit run the one-encoder code). */
TEST(finite_differences_whole_model_two_encoders) { fd_whole_model(&spec2, 0); }

/* gpt (one chunk) with two encoders: d(LM loss + sum(hidden * R))/d(input) by central
 * differences at entries of both encoders' parts, against backward's din (the splice into the
 * packed sequence and back). */
static double gpt_probe(const struct bm_module_ops *g, void *m, const struct bm_batch *b, const float *x, float *out,
                        const float *R, size_t nout)
{
    struct bm_err err;
    void *ctx = NULL;
    float lm = 0;
    if (g->forward(m, b, x, out, &lm, &ctx, &err)) fprintf(stderr, "%s\n", err.msg);
    g->ctx_free(ctx);
    double l = lm;
    for (size_t i = 0; i < nout; i++) l += (double)out[i] * R[i];
    return l;
}

TEST(gpt_input_gradient_two_encoders)
{
    struct bm_err err;
    const struct bm_module_ops *g = bm_module_find("gpt");
    void *m = NULL;
    CHECK(g->create(&mods2[2], &spec2, 0, mods2[2].arch.layers, 12, &m, &err) == BM_OK);
    if (!m) return;
    struct bm_data_batch *d = draw(0, 1);
    const struct bm_batch *b = &d->b;
    struct bm_geom geo;
    CHECK(bm_geom_from_spec(&spec2, &geo, &err) == BM_OK);
    CHECK(geo.n_enc == 2 && geo.enc_tokens[0] == 16 && geo.enc_tokens[1] == 4 && geo.img_tokens == 20);
    size_t nin = g->in_count(m, b), nout = g->out_count(m, b), C = (size_t)geo.d;
    CHECK(nin == (size_t)b->n_images_total * 20 * C);
    CHECK(nout == (size_t)(b->n_samples * b->seq + b->n_images_total * 20) * C);
    float *x = bm_malloc(nin * sizeof(float)), *din = bm_malloc(nin * sizeof(float));
    float *out = bm_malloc(nout * sizeof(float)), *R = bm_malloc(nout * sizeof(float)), loss;
    struct bm_rng r;
    bm_rng_seed(&r, 8);
    for (size_t i = 0; i < nin; i++) x[i] = (float)bm_rng_normal(&r);
    for (size_t i = 0; i < nout; i++) R[i] = (float)bm_rng_normal(&r);
    void *ctx = NULL;
    CHECK(g->forward(m, b, x, out, &loss, &ctx, &err) == BM_OK);
    CHECK(g->backward(m, ctx, b, R, 1.0f, din, &err) == BM_OK);
    size_t split = (size_t)b->n_images_total * 16 * C; /* encoder 1's part starts here */
    const double h = 1e-2;
    int bad = 0, strong = 0;
    for (int k = 0; k < 40; k++) {
        size_t i = k < 20 ? (size_t)(bm_rng_uniform(&r) * split) : split + (size_t)(bm_rng_uniform(&r) * (nin - split));
        float x0 = x[i];
        x[i] = (float)(x0 + h);
        double lp = gpt_probe(g, m, b, x, out, R, nout);
        x[i] = (float)(x0 - h);
        double lm = gpt_probe(g, m, b, x, out, R, nout);
        x[i] = x0;
        double fd = (lp - lm) / (2 * h);
        strong += fabs(din[i]) > 1e-2;
        if (fabs(fd - din[i]) > 2e-4 + 5e-2 * fabs(din[i])) {
            if (bad < 5)
                fprintf(stderr, "  din[%zu] (encoder %d's part): fd %.6g analytic %.6g\n", i, i >= split, fd, din[i]);
            bad++;
        }
    }
    CHECKF(bad == 0, "%d of 40 input-gradient entries differ", bad);
    CHECKF(strong >= 20, "only %d input-gradient entries above 1e-2", strong);
    bm_free(x), bm_free(din), bm_free(out), bm_free(R);
    bm_data_batch_free(d);
    g->free(m);
}

/* ---------------------------------------------------------------- chunking */

TEST(gpt_two_chunks_equal_one)
{
    struct net one, two;
    CHECK(net_new(&one, 1) == 0);
    CHECK(net_new(&two, 2) == 0);
    struct bm_data_batch *d = draw(1, 0);
    const struct bm_batch *b = &d->b;
    size_t n1, na, nb;
    float *p1 = one.ops[1]->params(one.bb[0], &n1);
    float *pa = two.ops[1]->params(two.bb[0], &na), *pb = two.ops[1]->params(two.bb[1], &nb);
    CHECK(n1 == na + nb); /* chunk 0 || chunk 1 is the whole model's layout */
    CHECK(!memcmp(p1, pa, na * sizeof(float)) && !memcmp(p1 + na, pb, nb * sizeof(float)));
    net_zero_grad(&one), net_zero_grad(&two);
    struct mbstate s1, s2;
    double l1 = net_forward(&one, b, &s1), l2 = net_forward(&two, b, &s2);
    CHECK_NEAR(l1, l2, 1e-6);
    size_t T = one.ops[1]->out_count(one.bb[0], b);
    CHECK(T == two.ops[1]->out_count(two.bb[1], b));
    CHECK(two.ops[1]->in_count(two.bb[1], b) == T);
    for (size_t i = 0; i < T; i++) CHECK_NEAR(s1.t[1][i], s2.t[2][i], 1e-5);
    net_backward(&one, b, &s1, 1.0f), net_backward(&two, b, &s2, 1.0f);
    float *g1 = one.ops[1]->grads(one.bb[0], &n1);
    float *ga = two.ops[1]->grads(two.bb[0], &na), *gb = two.ops[1]->grads(two.bb[1], &nb);
    int bad = 0;
    for (size_t i = 0; i < n1; i++) {
        float g2 = i < na ? ga[i] : gb[i - na];
        bad += fabsf(g1[i] - g2) > 1e-5f + 1e-4f * fabsf(g1[i]);
    }
    CHECKF(bad == 0, "%d gradient entries differ", bad);
    /* the encoder receives the same gradient */
    float *e1 = one.ops[0]->grads(one.enc[0], &n1), *e2 = two.ops[0]->grads(two.enc[0], &na);
    bad = 0;
    for (size_t i = 0; i < n1; i++) bad += fabsf(e1[i] - e2[i]) > 1e-5f + 1e-4f * fabsf(e1[i]);
    CHECKF(bad == 0, "%d encoder gradient entries differ", bad);
    bm_data_batch_free(d);
    net_free(&one), net_free(&two);
}

/* The split backward (B: input gradients, keeping what W needs; W: every parameter gradient)
 * gives bit for bit the whole backward's gradients and input gradient, chunk by chunk (first
 * chunk with the embeddings, last with the LM head), and reports the bytes it keeps. */
TEST(gpt_split_backward_equals_whole)
{
    struct net one, two;
    CHECK(net_new(&one, 2) == 0);
    CHECK(net_new(&two, 2) == 0);
    const struct bm_module_ops *g = two.ops[1];
    CHECK(g->backward_input && g->backward_weight && g->wctx_bytes && g->wctx_free);
    CHECK(!one.ops[0]->backward_input && !one.ops[2]->backward_input); /* vit, dit: whole */
    struct bm_data_batch *d = draw(2, 1);
    const struct bm_batch *b = &d->b;
    net_zero_grad(&one), net_zero_grad(&two);
    struct mbstate s1, s2;
    net_forward(&one, b, &s1), net_forward(&two, b, &s2);
    net_backward(&one, b, &s1, 0.5f);
    /* two: the same walk with each backbone chunk split, all W's after the encoders' backward */
    struct bm_err err;
    float *dh = bm_malloc(two.ops[2]->in_count(two.gen, b) * sizeof(float));
    CHECK(two.ops[2]->backward(two.gen, s2.cgen, b, NULL, 0.5f, dh, &err) == BM_OK);
    float *dd = dh;
    void *w[2] = {NULL, NULL};
    for (int c = 1; c >= 0; c--) {
        float *din = bm_malloc(g->in_count(two.bb[c], b) * sizeof(float));
        size_t before;
        float *gr = g->grads(two.bb[c], &before);
        float sum = 0;
        CHECK(g->backward_input(two.bb[c], s2.cbb[c], b, dd, 0.5f, din, &w[c], &err) == BM_OK);
        for (size_t i = 0; i < before; i++) sum += fabsf(gr[i]);
        CHECK(sum == 0); /* B accumulates no parameter gradient */
        CHECK(w[c] && g->wctx_bytes(w[c]) > 0);
        bm_free(dd);
        dd = din;
    }
    for (size_t e = 0, at = 0; e < (size_t)two.n_enc; at += two.eops[e]->out_count(two.enc[e], b), e++)
        CHECK(two.eops[e]->backward(two.enc[e], s2.cenc[e], b, dd + at, 0.5f, NULL, &err) == BM_OK);
    bm_free(dd);
    for (int c = 0; c < 2; c++) CHECK(g->backward_weight(two.bb[c], w[c], b, &err) == BM_OK);
    for (int i = 0; i <= 2; i++) bm_free(s2.t[i]);
    for (int c = 0; c < 2; c++) {
        size_t n1, n2;
        float *g1 = one.ops[1]->grads(one.bb[c], &n1), *g2 = g->grads(two.bb[c], &n2);
        CHECK(n1 == n2 && !memcmp(g1, g2, n1 * sizeof(float)));
    }
    size_t n1, n2;
    float *e1 = one.ops[0]->grads(one.enc[0], &n1), *e2 = two.ops[0]->grads(two.enc[0], &n2);
    CHECK(n1 == n2 && !memcmp(e1, e2, n1 * sizeof(float))); /* the same input gradient reached it */
    /* a context dropped between B and W is freed without a leak (ASan) */
    net_zero_grad(&two);
    net_forward(&two, b, &s2);
    two.ops[2]->ctx_free(s2.cgen);
    size_t nout = g->out_count(two.bb[1], b);
    float *zero = bm_calloc(nout, sizeof(float)), *din = bm_malloc(g->in_count(two.bb[1], b) * sizeof(float));
    CHECK(g->backward_input(two.bb[1], s2.cbb[1], b, zero, 1.0f, din, &w[1], &err) == BM_OK);
    g->wctx_free(w[1]);
    g->ctx_free(s2.cbb[0]);
    for (int e = 0; e < two.n_enc; e++) two.eops[e]->ctx_free(s2.cenc[e]);
    for (int i = 0; i <= 2; i++) bm_free(s2.t[i]);
    bm_free(zero), bm_free(din);
    bm_data_batch_free(d);
    net_free(&one), net_free(&two);
}

/* ---------------------------------------------------------------- pipelining */

TEST(microbatches_in_flight_are_independent)
{
    /* F0 F1 B1 B0 (two contexts alive) gives the gradients of F0 B0 F1 B1 */
    struct net a, b;
    CHECK(net_new(&a, 2) == 0);
    CHECK(net_new(&b, 2) == 0);
    struct bm_data_batch *d0 = draw(2, 0), *d1 = draw(2, 1);
    net_zero_grad(&a), net_zero_grad(&b);
    struct mbstate s0, s1;
    net_forward(&a, &d0->b, &s0);
    net_backward(&a, &d0->b, &s0, 0.5f);
    net_forward(&a, &d1->b, &s1);
    net_backward(&a, &d1->b, &s1, 0.5f);
    net_forward(&b, &d0->b, &s0);
    size_t bytes0 = b.ops[1]->ctx_bytes(s0.cbb[0]);
    net_forward(&b, &d1->b, &s1);
    CHECK(bytes0 > 0 && b.ops[0]->ctx_bytes(s1.cenc[0]) > 0 && b.ops[2]->ctx_bytes(s1.cgen) > 0);
    net_backward(&b, &d1->b, &s1, 0.5f);
    net_backward(&b, &d0->b, &s0, 0.5f);
    const struct bm_module_ops *ops[4] = {a.ops[0], a.ops[1], a.ops[1], a.ops[2]};
    void *ma[4] = {a.enc[0], a.bb[0], a.bb[1], a.gen}, *mb[4] = {b.enc[0], b.bb[0], b.bb[1], b.gen};
    for (int m = 0; m < 4; m++) {
        size_t n;
        float *ga = ops[m]->grads(ma[m], &n), *gb = ops[m]->grads(mb[m], &n);
        int bad = 0;
        for (size_t i = 0; i < n; i++) bad += fabsf(ga[i] - gb[i]) > 1e-6f + 1e-5f * fabsf(ga[i]);
        CHECKF(bad == 0, "module %d: %d entries differ", m, bad);
    }
    bm_data_batch_free(d0), bm_data_batch_free(d1);
    net_free(&a), net_free(&b);
}

TEST(context_bytes_track_the_microbatch)
{
    /* more images -> more encoder activation bytes; bytes are what the context holds */
    struct net n;
    CHECK(net_new(&n, 1) == 0);
    size_t lo = (size_t)-1, hi = 0;
    int lo_img = 0, hi_img = 0;
    for (int mb = 0; mb < 6; mb++) {
        struct bm_data_batch *d = draw(3, mb);
        struct mbstate s;
        net_forward(&n, &d->b, &s);
        size_t e = n.ops[0]->ctx_bytes(s.cenc[0]);
        if (e < lo) lo = e, lo_img = d->b.n_images_total;
        if (e > hi) hi = e, hi_img = d->b.n_images_total;
        net_drop(&n, &s);
        bm_data_batch_free(d);
    }
    CHECK(lo_img < hi_img && lo < hi);
    net_free(&n);
}

/* ---------------------------------------------------------------- registry */

static void noop_free(void *self) { (void)self; }
static const struct bm_module_ops custom = {.name = "custom-enc", .role = BM_ROLE_ENCODER, .free = noop_free};

TEST(registry)
{
    struct bm_err err;
    CHECK(bm_module_find("vit") == &bm_module_find("vit")[0]);
    CHECK(bm_module_find("vit")->role == BM_ROLE_ENCODER);
    CHECK(bm_module_find("gpt")->role == BM_ROLE_BACKBONE);
    CHECK(bm_module_find("dit")->role == BM_ROLE_GENERATOR);
    CHECK(bm_module_find("nope") == NULL);
    CHECK(bm_module_register(&custom, &err) == BM_OK);
    CHECK(bm_module_find("custom-enc") == &custom);
    CHECK(bm_module_register(&custom, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "already registered");
}

TEST(bad_arch_is_an_error)
{
    struct bm_err err;
    void *m = NULL;
    struct bm_module g = mods[1];
    g.arch.hidden = 15; /* not divisible by heads */
    CHECK(bm_module_find("gpt")->create(&g, &spec, 0, 4, 1, &m, &err) == BM_ERR);
    CHECK(m == NULL);
    CHECK(bm_module_find("gpt")->create(&mods[1], &spec, 2, 6, 1, &m, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "chunk layers");
    g = mods[1];
    g.layers = 6;
    CHECK(bm_module_find("gpt")->create(&g, &spec, 0, 4, 1, &m, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "disagrees with arch.layers");
}

/* ---------------------------------------------------------------- reference trainer */

TEST(reference_step_is_order_independent)
{
    /* bm_ref_step (microbatches 0, 1 in order, one chunk) == the same modules seeded the same,
     * run as 2 backbone chunks with the microbatches in reverse order and several contexts in
     * flight, each scaled by 1/M, then AdamW: the contract the pipelined executor must meet */
    spec.train = (struct bm_train){1, 1e-2, 0.1, 0.9, 0.999, 1e-8, 5, 0};
    struct bm_err err;
    struct bm_ref *ref;
    struct bm_step_stats st;
    CHECK(bm_ref_new(&spec, &ref, &err) == BM_OK);
    CHECK(bm_ref_step(ref, 4, &st, &err) == BM_OK);
    CHECK(st.peak_act[BM_ROLE_ENCODER] > 0 && st.peak_act[BM_ROLE_BACKBONE] > 0 &&
          st.peak_act[BM_ROLE_GENERATOR] > 0);

    struct net n;
    memset(&n, 0, sizeof n);
    n.n_chunks = 2, n.n_enc = 1;
    for (int i = 0; i < 3; i++) n.ops[i] = bm_module_find(mods[i].impl);
    n.eops[0] = n.ops[0];
    CHECK(n.ops[0]->create(&mods[0], &spec, 0, 0, bm_train_module_seed(&spec, 0), &n.enc[0], &err) == 0);
    CHECK(n.ops[1]->create(&mods[1], &spec, 0, 1, bm_train_module_seed(&spec, 1), &n.bb[0], &err) == 0);
    CHECK(n.ops[1]->create(&mods[1], &spec, 1, 4, bm_train_module_seed(&spec, 1), &n.bb[1], &err) == 0);
    CHECK(n.ops[2]->create(&mods[2], &spec, 0, 0, bm_train_module_seed(&spec, 2), &n.gen, &err) == 0);
    net_zero_grad(&n);
    struct bm_data_cfg dc;
    CHECK(bm_train_data_cfg(&spec, &dc, &err) == BM_OK);
    struct bm_data_batch *d[2];
    struct mbstate s[2];
    double loss = 0;
    for (int m = 1; m >= 0; m--) {
        CHECK(bm_data_batch(&dc, 4, m, &d[m], &err) == BM_OK);
        loss += net_forward(&n, &d[m]->b, &s[m]) / 2;
    }
    for (int m = 1; m >= 0; m--) net_backward(&n, &d[m]->b, &s[m], 0.5f);
    CHECK_NEAR(loss, st.loss, 1e-5);
    /* AdamW by hand on each module, then compare with the reference's parameters */
    const struct bm_module_ops *ops[4] = {n.ops[0], n.ops[1], n.ops[1], n.ops[2]};
    void *self[4] = {n.enc[0], n.bb[0], n.bb[1], n.gen};
    int refmod[4] = {0, 1, 1, 2};
    size_t at = 0;
    for (int k = 0; k < 4; k++) {
        size_t np, nr;
        float *p = ops[k]->params(self[k], &np), *g = ops[k]->grads(self[k], &np);
        float *mv = bm_calloc(2 * np, sizeof(float));
        bm_adamw_update(p, g, mv, mv + np, np, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 5);
        if (k != 2) at = 0;
        float *rp = bm_ref_params(ref, refmod[k], &nr) + at;
        float *rg = bm_ref_grads(ref, refmod[k], &nr) + at;
        int bad = 0;
        for (size_t i = 0; i < np; i++) bad += fabsf(p[i] - rp[i]) > 1e-5f;
        for (size_t i = 0; i < np; i++) bad += fabsf(g[i] - rg[i]) > 1e-6f + 1e-4f * fabsf(g[i]);
        CHECKF(bad == 0, "module part %d: %d of %zu parameters differ", k, bad, np);
        at += np;
        bm_free(mv);
    }
    bm_data_batch_free(d[0]), bm_data_batch_free(d[1]);
    net_free(&n);
    bm_ref_free(ref);
}

/* ---------------------------------------------------------------- allocation failures */

/* Build the reference trainer of sp and run one step, failing the n-th allocation, for every n
 * until nothing fails: each failure is reported, nothing crashes (ASan: nothing leaks). */
static void check_every_allocation_failure(struct bm_spec *sp)
{
    sp->train = (struct bm_train){1, 1e-3, 0, 0.9, 0.999, 1e-8, 1, 0};
    int n, ok = 0;
    for (n = 1; n < 100000; n++) {
        struct bm_ref *r = NULL;
        struct bm_step_stats st;
        struct bm_err err;
        err.msg[0] = 0;
        bm_alloc_fail_at(n);
        int rc = bm_ref_new(sp, &r, &err);
        if (rc == BM_OK) rc = bm_ref_step(r, 0, &st, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        bm_ref_free(r);
        if (!fired) {
            CHECK(rc == BM_OK);
            ok = 1;
            break;
        }
        CHECKF(rc == BM_ERR, "n=%d: an injected failure went unreported", n);
        CHECKF(strstr(err.msg, "out of memory") != NULL, "n=%d: %s", n, err.msg);
    }
    CHECK(ok);
    CHECKF(n > 30, "only %d allocations?", n);
}

TEST(every_allocation_failure_is_clean)
{
    check_every_allocation_failure(&spec);
    check_every_allocation_failure(&spec2); /* every encoder's context and slice */
}

int main(void)
{
    make_spec();
    RUN(blocks_finite_differences_every_tensor);
    RUN(finite_differences_whole_model);
    RUN(finite_differences_whole_model_two_encoders);
    RUN(gpt_input_gradient_two_encoders);
    RUN(gpt_two_chunks_equal_one);
    RUN(gpt_split_backward_equals_whole);
    RUN(microbatches_in_flight_are_independent);
    RUN(context_bytes_track_the_microbatch);
    RUN(registry);
    RUN(bad_arch_is_an_error);
    RUN(reference_step_is_order_independent);
    RUN(every_allocation_failure_is_clean);
    return test_summary();
}
