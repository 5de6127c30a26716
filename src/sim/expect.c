/* expect.c — the expected makespan under op-time spread (see expect.h). */
#include <math.h>

#include "sim/expect.h"
#include "util/util.h"

int bm_costs_have_spread(const struct bm_costs *c)
{
    for (int m = 0; m < c->n_modules; m++)
        if (c->spread && c->spread[m] > 0) return 1;
    return c->op_overhead_sd_ms > 0 && c->op_overhead_ms > 0;
}

/* Marsaglia and Tsang's method (ACM TOMS 26(3), 2000) for shape k >= 1; for k < 1 a draw of
 * shape k + 1 times U^(1/k). Scale theta = sd^2 / mean, shape k = mean^2 / sd^2. */
static double gamma_shape(struct bm_rng *rng, double k)
{
    if (k < 1) {
        double u = bm_rng_uniform(rng);
        return gamma_shape(rng, k + 1) * pow(u > 0 ? u : 1e-300, 1 / k);
    }
    double d = k - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double z = bm_rng_normal(rng), v = 1 + c * z;
        if (v <= 0) continue;
        v = v * v * v;
        double u = bm_rng_uniform(rng);
        if (u < 1 - 0.0331 * z * z * z * z || log(u > 0 ? u : 1e-300) < 0.5 * z * z + d * (1 - v + log(v)))
            return d * v;
    }
}

double bm_rng_gamma_mean_sd(struct bm_rng *rng, double mean, double sd)
{
    if (!(sd > 0) || !(mean > 0)) return mean > 0 ? mean : 0;
    double k = mean * mean / (sd * sd);
    return gamma_shape(rng, k) * (sd * sd / mean);
}

int bm_simulate_expected(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                         int samples, uint64_t seed,
                         double *mean_ms, double *sd_ms, struct bm_err *err)
{
    struct bm_timeline *tl = NULL;
    if (!c || !bm_costs_have_spread(c) || samples < 1) {
        if (bm_simulate_summary(t, c, o, &tl, err)) return BM_ERR;
        *mean_ms = tl->makespan_ms;
        if (sd_ms) *sd_ms = 0;
        bm_timeline_free(tl);
        return BM_OK;
    }
    long n = bm_table_n_ops(t);
    int draw_dispatch = c->op_overhead_sd_ms > 0 && c->op_overhead_ms > 0;
    double *f = bm_malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    double *disp = draw_dispatch ? bm_malloc((size_t)(n > 0 ? n : 1) * sizeof *disp) : NULL;
    if (!f || (draw_dispatch && !disp)) {
        bm_free(f), bm_free(disp);
        return bm_err_set(err, "simulate: out of memory (%ld ops)", n);
    }
    struct bm_rng rng;
    bm_rng_seed(&rng, seed);
    double sum = 0, sq = 0;
    for (int k = 0; k < samples; k++) {
        long g = 0;
        for (int r = 0; r < t->pp; r++)
            for (int i = 0; i < t->ranks[r].n_ops; i++, g++) {
                const struct bm_op *op = &t->ranks[r].ops[i];
                double sg = op->kind == BM_OP_COMPUTE && op->module >= 0 && op->module < t->n_modules
                                && c->spread ? c->spread[op->module] : 0;
                f[g] = sg > 0 ? exp(sg * bm_rng_normal(&rng) - 0.5 * sg * sg) : 1;
                if (disp) disp[g] = bm_rng_gamma_mean_sd(&rng, c->op_overhead_ms, c->op_overhead_sd_ms);
            }
        if (bm_simulate_run(t, c, o, f, disp, 1, &tl, err)) {
            bm_free(f), bm_free(disp);
            return BM_ERR;
        }
        sum += tl->makespan_ms;
        sq += tl->makespan_ms * tl->makespan_ms;
        bm_timeline_free(tl);
        tl = NULL;
    }
    bm_free(f), bm_free(disp);
    *mean_ms = sum / samples;
    if (sd_ms) {
        double v = sq / samples - *mean_ms * *mean_ms;
        *sd_ms = v > 0 ? sqrt(v) : 0;
    }
    return BM_OK;
}
