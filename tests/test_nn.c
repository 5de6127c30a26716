/* test_nn.c — kernels: fast vs naive references, and every backward against central finite
 * differences of L = sum(out * R) for a fixed random R (L accumulated in double). */
#include <stdlib.h>

#include "nn/nn.h"
#include "test.h"
#include "util/util.h"

static struct bm_rng rng;

static float *randv(long n, float s)
{
    float *p = bm_malloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) p[i] = (float)(bm_rng_normal(&rng) * s);
    return p;
}
static float *zerov(long n) { return bm_calloc((size_t)n, sizeof(float)); }

static double dotd(const float *a, const float *b, long n)
{
    double s = 0.0;
    for (long i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Central differences of f at up to 'samples' indices of x[n] against analytic g[n]. Returns
 * the number of mismatches (each printed). */
static int fd_check(const char *what, double (*f)(void *), void *ctx, float *x, const float *g,
                    long n, int samples)
{
    const double h = 1e-2;
    int bad = 0;
    long step = n <= samples ? 1 : n / samples;
    for (long i = (n <= samples ? 0 : (long)(bm_rng_uniform(&rng) * step)); i < n; i += step) {
        float x0 = x[i];
        x[i] = (float)(x0 + h);
        double lp = f(ctx);
        x[i] = (float)(x0 - h);
        double lm = f(ctx);
        x[i] = x0;
        double fd = (lp - lm) / (2 * h);
        if (fabs(fd - g[i]) > 5e-3 + 2e-2 * fabs(g[i])) {
            if (bad < 5) fprintf(stderr, "  %s[%ld]: fd %.6g analytic %.6g\n", what, i, fd, g[i]);
            bad++;
        }
    }
    return bad;
}

/* ---------------------------------------------------------------- linear */

TEST(matmul_naive_equals_sgemm)
{
    int N = 7, C = 13, OC = 5;
    float *x = randv(N * C, 1), *w = randv(OC * C, 1), *b = randv(OC, 1);
    float *o1 = zerov(N * OC), *o2 = zerov(N * OC);
    bm_matmul_naive(o1, x, w, b, N, C, OC);
    bm_linear_forward(o2, x, w, b, N, C, OC);
    for (int i = 0; i < N * OC; i++) CHECK_NEAR(o1[i], o2[i], 1e-4);
    bm_matmul_naive(o1, x, w, NULL, N, C, OC);
    bm_linear_forward(o2, x, w, NULL, N, C, OC);
    for (int i = 0; i < N * OC; i++) CHECK_NEAR(o1[i], o2[i], 1e-4);
    bm_free(x), bm_free(w), bm_free(b), bm_free(o1), bm_free(o2);
}

struct lin { float *x, *w, *b, *out, *r; int N, C, OC; };
static double lin_f(void *p)
{
    struct lin *l = p;
    bm_linear_forward(l->out, l->x, l->w, l->b, l->N, l->C, l->OC);
    return dotd(l->out, l->r, (long)l->N * l->OC);
}

TEST(linear_backward)
{
    struct lin l = {0};
    l.N = 6, l.C = 9, l.OC = 4;
    l.x = randv(l.N * l.C, 1), l.w = randv(l.OC * l.C, 1), l.b = randv(l.OC, 1);
    l.out = zerov(l.N * l.OC), l.r = randv(l.N * l.OC, 1);
    float *dx = zerov(l.N * l.C), *dw = zerov(l.OC * l.C), *db = zerov(l.OC);
    lin_f(&l);
    bm_linear_backward_input(dx, l.r, l.w, l.N, l.C, l.OC);
    bm_linear_backward_weight(dw, db, l.r, l.x, l.N, l.C, l.OC);
    CHECK(fd_check("dx", lin_f, &l, l.x, dx, l.N * l.C, 100) == 0);
    CHECK(fd_check("dw", lin_f, &l, l.w, dw, l.OC * l.C, 100) == 0);
    CHECK(fd_check("db", lin_f, &l, l.b, db, l.OC, 100) == 0);
    /* accumulation: a second call doubles */
    float d0 = dw[3];
    bm_linear_backward_weight(dw, db, l.r, l.x, l.N, l.C, l.OC);
    CHECK_NEAR(dw[3], 2 * d0, 1e-4);
    bm_free(l.x), bm_free(l.w), bm_free(l.b), bm_free(l.out), bm_free(l.r);
    bm_free(dx), bm_free(dw), bm_free(db);
}

/* ---------------------------------------------------------------- layernorm, gelu */

struct ln { float *x, *w, *b, *out, *mean, *rstd, *r; int N, C; };
static double ln_f(void *p)
{
    struct ln *l = p;
    bm_layernorm_forward(l->out, l->mean, l->rstd, l->x, l->w, l->b, l->N, l->C);
    return dotd(l->out, l->r, (long)l->N * l->C);
}

TEST(layernorm_backward)
{
    struct ln l = {0};
    l.N = 5, l.C = 8;
    l.x = randv(l.N * l.C, 2), l.w = randv(l.C, 1), l.b = randv(l.C, 1);
    l.out = zerov(l.N * l.C), l.mean = zerov(l.N), l.rstd = zerov(l.N), l.r = randv(l.N * l.C, 1);
    float *dx = zerov(l.N * l.C), *dw = zerov(l.C), *db = zerov(l.C);
    ln_f(&l);
    /* normalized rows: mean 0, variance 1 before the affine part */
    CHECK_NEAR(l.mean[0], dotd(l.x, (float[8]){1, 1, 1, 1, 1, 1, 1, 1}, 8) / 8, 1e-5);
    bm_layernorm_backward(dx, dw, db, l.r, l.x, l.w, l.mean, l.rstd, l.N, l.C);
    CHECK(fd_check("dx", ln_f, &l, l.x, dx, l.N * l.C, 100) == 0);
    CHECK(fd_check("dw", ln_f, &l, l.w, dw, l.C, 100) == 0);
    CHECK(fd_check("db", ln_f, &l, l.b, db, l.C, 100) == 0);
    bm_free(l.x), bm_free(l.w), bm_free(l.b), bm_free(l.out), bm_free(l.mean), bm_free(l.rstd);
    bm_free(l.r), bm_free(dx), bm_free(dw), bm_free(db);
}

struct un { float *x, *out, *r; long n; };
static double gelu_f(void *p)
{
    struct un *u = p;
    bm_gelu_forward(u->out, u->x, u->n);
    return dotd(u->out, u->r, u->n);
}

TEST(gelu_backward)
{
    struct un u = {0};
    u.n = 64;
    u.x = randv(u.n, 2), u.out = zerov(u.n), u.r = randv(u.n, 1);
    float *dx = zerov(u.n);
    gelu_f(&u);
    CHECK_NEAR(u.out[0], 0.5 * u.x[0] * (1 + tanh(0.7978845608 * (u.x[0] + 0.044715 * pow(u.x[0], 3)))), 1e-5);
    bm_gelu_backward(dx, u.x, u.r, u.n);
    CHECK(fd_check("dx", gelu_f, &u, u.x, dx, u.n, 64) == 0);
    bm_free(u.x), bm_free(u.out), bm_free(u.r), bm_free(dx);
}

TEST(residual)
{
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, o[3], da[3] = {0}, db[3] = {1, 1, 1};
    bm_residual_forward(o, a, b, 3);
    CHECK_NEAR(o[2], 9, 0);
    bm_residual_backward(da, db, a, 3);
    CHECK_NEAR(da[1], 2, 0);
    CHECK_NEAR(db[1], 3, 0);
}

/* ---------------------------------------------------------------- attention */

TEST(attention_fast_equals_naive)
{
    int T = 9, C = 12, NH = 3;
    for (int causal = 0; causal < 2; causal++) {
        float *qkv = randv(T * 3 * C, 1), *o1 = zerov(T * C), *o2 = zerov(T * C);
        float *a1 = zerov(NH * T * T), *a2 = zerov(NH * T * T);
        bm_attention_forward(o1, a1, qkv, T, C, NH, causal);
        bm_attention_forward_naive(o2, a2, qkv, T, C, NH, causal);
        for (int i = 0; i < T * C; i++) CHECK_NEAR(o1[i], o2[i], 1e-5);
        for (int i = 0; i < NH * T * T; i++) CHECK_NEAR(a1[i], a2[i], 1e-5);
        if (causal) CHECK(a1[1] == 0.0f); /* token 0 never sees token 1 */
        else CHECK(a1[1] > 0.0f);
        bm_free(qkv), bm_free(o1), bm_free(o2), bm_free(a1), bm_free(a2);
    }
}

struct at { float *qkv, *att, *out, *r; int T, C, NH, causal; };
static double att_f(void *p)
{
    struct at *a = p;
    bm_attention_forward(a->out, a->att, a->qkv, a->T, a->C, a->NH, a->causal);
    return dotd(a->out, a->r, (long)a->T * a->C);
}

TEST(attention_backward)
{
    for (int causal = 0; causal < 2; causal++) {
        struct at a = {0};
        a.T = 7, a.C = 8, a.NH = 2, a.causal = causal;
        a.qkv = randv(a.T * 3 * a.C, 1), a.att = zerov(a.NH * a.T * a.T);
        a.out = zerov(a.T * a.C), a.r = randv(a.T * a.C, 1);
        float *d = zerov(a.T * 3 * a.C), *scratch = zerov(a.T * a.T);
        att_f(&a);
        bm_attention_backward(d, a.r, a.qkv, a.att, a.T, a.C, a.NH, scratch);
        CHECK(fd_check(causal ? "dqkv(causal)" : "dqkv", att_f, &a, a.qkv, d, a.T * 3 * a.C, 168) == 0);
        bm_free(a.qkv), bm_free(a.att), bm_free(a.out), bm_free(a.r), bm_free(d), bm_free(scratch);
    }
}

/* ---------------------------------------------------------------- embeddings */

struct em { float *table, *out, *r; int *ids; int N, C; };
static double emb_f(void *p)
{
    struct em *e = p;
    bm_embedding_forward(e->out, e->ids, e->table, e->N, e->C, 0);
    return dotd(e->out, e->r, (long)e->N * e->C);
}

TEST(embedding_backward)
{
    struct em e = {0};
    int ids[6] = {3, 0, 3, 4, 1, 3};
    e.N = 6, e.C = 4, e.ids = ids;
    e.table = randv(5 * e.C, 1), e.out = zerov(e.N * e.C), e.r = randv(e.N * e.C, 1);
    float *d = zerov(5 * e.C);
    emb_f(&e);
    CHECK(e.out[2 * 4 + 1] == e.table[3 * 4 + 1]);
    bm_embedding_backward(d, e.ids, e.r, e.N, e.C);
    CHECK(fd_check("dtable", emb_f, &e, e.table, d, 5 * e.C, 20) == 0);
    CHECK(d[2 * 4] == 0.0f); /* row 2 unused */
    bm_free(e.table), bm_free(e.out), bm_free(e.r), bm_free(d);
}

TEST(patchify_roundtrip)
{
    int n = 2, ch = 3, H = 8, W = 12, p = 4;
    long sz = (long)n * ch * H * W;
    float *img = randv(sz, 1), *pt = zerov(sz), *back = zerov(sz);
    bm_patchify(pt, img, n, ch, H, W, p);
    /* patch (n=1, py=1, px=2), c=2, dy=3, dx=1 */
    int K = ch * p * p, gx = W / p, gy = H / p;
    CHECK(pt[((1 * gy + 1) * gx + 2) * K + (2 * p + 3) * p + 1] ==
          img[((1 * ch + 2) * H + 1 * p + 3) * W + 2 * p + 1]);
    bm_unpatchify(back, pt, n, ch, H, W, p, 0);
    for (long i = 0; i < sz; i++) CHECK(back[i] == img[i]);
    bm_free(img), bm_free(pt), bm_free(back);
}

struct pe { float *img, *patches, *w, *b, *out, *r; int n, ch, H, W, p, C; };
static double pe_f(void *q)
{
    struct pe *e = q;
    bm_patch_embed_forward(e->out, e->patches, e->img, e->w, e->b, e->n, e->ch, e->H, e->W, e->p, e->C);
    int N = e->n * (e->H / e->p) * (e->W / e->p);
    return dotd(e->out, e->r, (long)N * e->C);
}

TEST(patch_embed_backward)
{
    struct pe e = {0};
    e.n = 2, e.ch = 3, e.H = 4, e.W = 4, e.p = 2, e.C = 5;
    int N = e.n * 4, K = e.ch * 4;
    e.img = randv(e.n * e.ch * 16, 1), e.patches = zerov(N * K), e.w = randv(e.C * K, 1);
    e.b = randv(e.C, 1), e.out = zerov(N * e.C), e.r = randv(N * e.C, 1);
    float *dimg = zerov(e.n * e.ch * 16), *dw = zerov(e.C * K), *db = zerov(e.C), *s = zerov(N * K);
    pe_f(&e);
    bm_patch_embed_backward(dimg, dw, db, e.r, e.patches, e.w, e.n, e.ch, e.H, e.W, e.p, e.C, s);
    CHECK(fd_check("dimg", pe_f, &e, e.img, dimg, e.n * e.ch * 16, 96) == 0);
    CHECK(fd_check("dw", pe_f, &e, e.w, dw, e.C * K, 60) == 0);
    CHECK(fd_check("db", pe_f, &e, e.b, db, e.C, 5) == 0);
    bm_free(e.img), bm_free(e.patches), bm_free(e.w), bm_free(e.b), bm_free(e.out), bm_free(e.r);
    bm_free(dimg), bm_free(dw), bm_free(db), bm_free(s);
}

/* ---------------------------------------------------------------- losses */

struct ce { float *logits, *probs; int *tg; int N, V; };
static double ce_f(void *p)
{
    struct ce *c = p;
    int nv;
    return bm_softmax_ce_forward(c->probs, c->logits, c->tg, c->N, c->V, -1, &nv) / nv;
}

TEST(cross_entropy)
{
    struct ce c = {0};
    int tg[5] = {2, -1, 0, 5, -1};
    c.N = 5, c.V = 6, c.tg = tg;
    c.logits = randv(c.N * c.V, 2), c.probs = zerov(c.N * c.V);
    int nv;
    double s = bm_softmax_ce_forward(c.probs, c.logits, c.tg, c.N, c.V, -1, &nv);
    CHECK(nv == 3);
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(c.logits[i]);
    double l0 = -(c.logits[2] - log(z));
    double z2 = 0, z3 = 0;
    for (int i = 0; i < 6; i++) z2 += exp(c.logits[12 + i]), z3 += exp(c.logits[18 + i]);
    CHECK_NEAR(s, l0 - (c.logits[12] - log(z2)) - (c.logits[23] - log(z3)), 1e-4);
    float *d = zerov(c.N * c.V);
    bm_softmax_ce_backward(d, c.probs, c.tg, c.N, c.V, -1, 1.0f / nv);
    CHECK(fd_check("dlogits", ce_f, &c, c.logits, d, c.N * c.V, 30) == 0);
    for (int i = 6; i < 12; i++) CHECK(d[i] == 0.0f); /* ignored row */
    bm_free(c.logits), bm_free(c.probs), bm_free(d);
}

struct ms { float *pred, *tgt; long n; };
static double mse_f(void *p)
{
    struct ms *m = p;
    return bm_mse_forward(m->pred, m->tgt, m->n);
}

TEST(mse_backward)
{
    struct ms m = {randv(20, 1), randv(20, 1), 20};
    float *d = zerov(20);
    bm_mse_backward(d, m.pred, m.tgt, m.n, 1.0f);
    CHECK(fd_check("dpred", mse_f, &m, m.pred, d, m.n, 20) == 0);
    bm_free(m.pred), bm_free(m.tgt), bm_free(d);
}

/* ---------------------------------------------------------------- AdamW */

TEST(adamw)
{
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, -0.01f}, m[2] = {0}, v[2] = {0};
    /* step 1 with bias correction: update = lr * g/|g| (+ decay) */
    bm_adamw_update(p, g, m, v, 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 1);
    CHECK_NEAR(p[0], 0.9, 1e-5);
    CHECK_NEAR(p[1], -1.9, 1e-4);
    /* step 2 by hand, with weight decay */
    double m0 = 0.05, v0 = 0.00025, gg = 0.5;
    double m1 = 0.9 * m0 + 0.1 * gg, v1 = 0.999 * v0 + 0.001 * gg * gg;
    double mh = m1 / (1 - 0.81), vh = v1 / (1 - 0.999 * 0.999);
    double want = 0.9 - 0.1 * (mh / (sqrt(vh) + 1e-8) + 0.01 * 0.9);
    bm_adamw_update(p, g, m, v, 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 2);
    CHECK_NEAR(p[0], want, 1e-5);
}

int main(void)
{
    bm_rng_seed(&rng, 42);
    RUN(matmul_naive_equals_sgemm);
    RUN(linear_backward);
    RUN(layernorm_backward);
    RUN(gelu_backward);
    RUN(residual);
    RUN(attention_fast_equals_naive);
    RUN(attention_backward);
    RUN(embedding_backward);
    RUN(patchify_roundtrip);
    RUN(patch_embed_backward);
    RUN(cross_entropy);
    RUN(mse_backward);
    RUN(adamw);
    return test_summary();
}
