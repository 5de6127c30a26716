/* custom_encoder.c — a custom encoder trained pipelined by bigmac's executor.
 *
 * "patchmlp" turns each image into (image/patch)^2 tokens with a two-layer MLP per patch
 * (flattened patch -> hidden -> tanh -> backbone width). It implements the module interface of
 * include/bigmac_module.h with plain loops (nothing but the public headers), registers itself,
 * and trains through bm_train, the library call behind `bigmac train`, with a few of its flags
 * (--reference, --local, --steps N, --log FILE, --policy NAME, --quiet):
 *
 *     make                                  # builds build/examples/custom_encoder
 *     mpirun -np 2 build/examples/custom_encoder examples/custom-encoder.json --steps 5
 *     build/examples/custom_encoder examples/custom-encoder.json --reference --steps 5
 *
 * (bm_train_main(argc, argv) would take every `bigmac train` flag instead.)
 *
 * The spec names it with "impl": "patchmlp"; its "arch" gives image, patch, channels and the
 * MLP width (hidden). Parameters are initialised from the seed create() receives, so every
 * rank builds the same replica. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_module.h"

struct pm {
    int C, P, S, K, H, D, tokens; /* channels, patch, image side, C*P*P, MLP width, out width, patches/image */
    float *params, *grads;        /* W1[H,K] b1[H] W2[D,H] b2[D] */
    size_t n;
};

struct pm_ctx {
    size_t bytes; /* exact bytes of this allocation */
    int N;        /* patches in the microbatch */
    float *x, *a; /* [N,K] flattened patches, [N,H] tanh activations */
};

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static int pm_create(const struct bm_module *m, const struct bm_spec *s, int a, int b, uint64_t seed, void **out,
                     struct bm_err *err)
{
    (void)a, (void)b;
    const struct bm_arch *ar = &m->arch;
    if (ar->image <= 0 || ar->patch <= 0 || ar->image % ar->patch || ar->hidden <= 0)
        return bm_err_set(err, "module \"%s\": patchmlp needs arch image, patch (dividing image), hidden", m->name);
    struct pm *p = calloc(1, sizeof *p);
    if (!p) return bm_err_set(err, "out of memory");
    p->C = ar->channels > 0 ? ar->channels : 3, p->P = ar->patch, p->S = ar->image, p->H = ar->hidden;
    p->K = p->C * p->P * p->P, p->D = s->modules[s->backbone_module].arch.hidden;
    p->tokens = (p->S / p->P) * (p->S / p->P);
    p->n = (size_t)p->H * p->K + p->H + (size_t)p->D * p->H + p->D;
    p->params = calloc(p->n, sizeof(float));
    p->grads = calloc(p->n, sizeof(float));
    if (!p->params || !p->grads) {
        free(p->params), free(p->grads), free(p);
        return bm_err_set(err, "out of memory");
    }
    uint64_t st = seed | 1;
    float *w1 = p->params, *w2 = w1 + (size_t)p->H * p->K + p->H;
    for (size_t i = 0; i < (size_t)p->H * p->K; i++) w1[i] = ((float)(next(&st) >> 40) / (1 << 24) - 0.5f) * 0.2f;
    for (size_t i = 0; i < (size_t)p->D * p->H; i++) w2[i] = ((float)(next(&st) >> 40) / (1 << 24) - 0.5f) * 0.2f;
    *out = p;
    return BM_OK;
}

static size_t pm_in(const void *self, const struct bm_batch *mb) { (void)self, (void)mb; return 0; }
static size_t pm_out(const void *self, const struct bm_batch *mb)
{
    const struct pm *p = self;
    return (size_t)mb->n_images_total * p->tokens * p->D;
}

static int pm_forward(void *self, const struct bm_batch *mb, const float *in, float *out, float *loss, void **ctxp,
                      struct bm_err *err)
{
    (void)in;
    struct pm *p = self;
    int N = mb->n_images_total * p->tokens, side = p->S / p->P;
    size_t bytes = sizeof(struct pm_ctx) + ((size_t)N * p->K + (size_t)N * p->H) * sizeof(float);
    struct pm_ctx *c = malloc(bytes);
    if (!c) return bm_err_set(err, "out of memory");
    c->bytes = bytes, c->N = N, c->x = (float *)(c + 1), c->a = c->x + (size_t)N * p->K;
    for (int img = 0; img < mb->n_images_total; img++)
        for (int t = 0; t < p->tokens; t++) {
            float *x = c->x + ((size_t)img * p->tokens + t) * p->K;
            int py = t / side, px = t % side;
            for (int ch = 0; ch < p->C; ch++)
                for (int dy = 0; dy < p->P; dy++)
                    for (int dx = 0; dx < p->P; dx++)
                        x[(ch * p->P + dy) * p->P + dx] =
                            mb->images[(((size_t)img * p->C + ch) * p->S + py * p->P + dy) * p->S + px * p->P + dx];
        }
    const float *w1 = p->params, *b1 = w1 + (size_t)p->H * p->K, *w2 = b1 + p->H, *b2 = w2 + (size_t)p->D * p->H;
    for (int n = 0; n < N; n++) {
        const float *x = c->x + (size_t)n * p->K;
        float *a = c->a + (size_t)n * p->H, *o = out + (size_t)n * p->D;
        for (int h = 0; h < p->H; h++) {
            float s = b1[h];
            for (int k = 0; k < p->K; k++) s += w1[(size_t)h * p->K + k] * x[k];
            a[h] = tanhf(s);
        }
        for (int d = 0; d < p->D; d++) {
            float s = b2[d];
            for (int h = 0; h < p->H; h++) s += w2[(size_t)d * p->H + h] * a[h];
            o[d] = s;
        }
    }
    *loss = 0;
    *ctxp = c;
    return BM_OK;
}

static int pm_backward(void *self, void *ctx, const struct bm_batch *mb, const float *dout, float loss_scale, float *din,
                       struct bm_err *err)
{
    (void)mb, (void)loss_scale, (void)din, (void)err; /* no loss of its own; no input to differentiate */
    struct pm *p = self;
    struct pm_ctx *c = ctx;
    if (dout) {
        const float *w2 = p->params + (size_t)p->H * p->K + p->H;
        float *g1 = p->grads, *gb1 = g1 + (size_t)p->H * p->K, *g2 = gb1 + p->H, *gb2 = g2 + (size_t)p->D * p->H;
        float *dh = malloc((size_t)p->H * sizeof(float));
        if (!dh) {
            free(c);
            return bm_err_set(err, "out of memory");
        }
        for (int n = 0; n < c->N; n++) {
            const float *x = c->x + (size_t)n * p->K, *a = c->a + (size_t)n * p->H, *g = dout + (size_t)n * p->D;
            memset(dh, 0, (size_t)p->H * sizeof(float));
            for (int d = 0; d < p->D; d++) {
                gb2[d] += g[d];
                for (int h = 0; h < p->H; h++) {
                    g2[(size_t)d * p->H + h] += g[d] * a[h];
                    dh[h] += g[d] * w2[(size_t)d * p->H + h];
                }
            }
            for (int h = 0; h < p->H; h++) {
                float z = dh[h] * (1 - a[h] * a[h]);
                gb1[h] += z;
                for (int k = 0; k < p->K; k++) g1[(size_t)h * p->K + k] += z * x[k];
            }
        }
        free(dh);
    }
    free(c);
    return BM_OK;
}

static float *pm_params(void *self, size_t *n) { struct pm *p = self; *n = p->n; return p->params; }
static float *pm_grads(void *self, size_t *n) { struct pm *p = self; *n = p->n; return p->grads; }
static size_t pm_ctx_bytes(const void *ctx) { return ((const struct pm_ctx *)ctx)->bytes; }
static void pm_ctx_free(void *ctx) { free(ctx); }
static double pm_flops(const void *self, const struct bm_batch *mb)
{
    const struct pm *p = self;
    return 6.0 * mb->n_images_total * p->tokens * ((double)p->K * p->H + (double)p->H * p->D);
}
static void pm_free(void *self)
{
    struct pm *p = self;
    if (p) free(p->params), free(p->grads), free(p);
}

static const struct bm_module_ops patchmlp_ops = {
    .name = "patchmlp", .role = BM_ROLE_ENCODER, .create = pm_create, .in_count = pm_in, .out_count = pm_out,
    .forward = pm_forward, .backward = pm_backward, .params = pm_params, .grads = pm_grads,
    .ctx_bytes = pm_ctx_bytes, .ctx_free = pm_ctx_free, .flops = pm_flops, .free = pm_free,
};

/* bm_train's on_error: printed where and when the library says (before MPI is finalized). */
static void print_error(void *ctx, const char *msg, int setup)
{
    (void)ctx, (void)setup;
    fprintf(stderr, "custom_encoder: %s\n", msg);
}

/* The flags this example takes into *o and *po; 0 on success. */
static int parse_flags(int argc, char **argv, struct bm_train_opts *o, struct bm_plan_opts *po)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--reference")) o->mode = BM_TRAIN_REFERENCE;
        else if (!strcmp(a, "--local")) o->mode = BM_TRAIN_LOCAL;
        else if (!strcmp(a, "--quiet")) o->quiet = 1;
        else if (!strcmp(a, "--steps") && v && (o->steps = atoi(v)) > 0) i++;
        else if (!strcmp(a, "--log") && v) o->log_path = v, i++;
        else if (!strcmp(a, "--policy") && v && bm_policy_parse(v, &po->policy) == BM_OK) i++;
        else {
            fprintf(stderr, "custom_encoder: bad flag '%s'\n", a);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bm_err err;
    if (bm_module_register(&patchmlp_ops, &err)) {
        fprintf(stderr, "custom_encoder: %s\n", err.msg);
        return 1;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: mpirun -np P %s SPEC [--reference|--local] [--steps N] [--log FILE] [--policy NAME]"
                        " [--quiet]\n", argv[0]);
        return 2;
    }
    struct bm_spec *spec;
    if (bm_spec_load(argv[1], &spec, &err)) {
        fprintf(stderr, "custom_encoder: %s\n", err.msg);
        return 1;
    }
    struct bm_train_opts o = {0};
    struct bm_plan_opts po;
    bm_plan_opts_from_spec(&po, spec);
    if (po.unit == po.pp) po.unit = 0; /* a unit tied to the spec's pp follows the pp used */
    po.pp = 0;                         /* one pipeline rank per MPI process (--local: the spec's pp) */
    if (parse_flags(argc, argv, &o, &po)) {
        bm_spec_free(spec);
        return 2;
    }
    if (o.mode == BM_TRAIN_LOCAL) po.pp = spec->pp;
    o.plan = &po;
    o.on_error = print_error;
    int rc = bm_train(spec, NULL, NULL, &o, &argc, &argv, &err);
    bm_spec_free(spec);
    return rc ? 1 : 0;
}
