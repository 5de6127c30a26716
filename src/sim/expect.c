/* expect.c — the expected makespan under op-time spread (see expect.h). */
#include <math.h>

#include "sim/expect.h"
#include "util/util.h"

int bm_table_has_spread(const struct bm_table *t)
{
    for (int m = 0; m < t->n_modules; m++)
        if (t->modules[m].spread > 0) return 1;
    return 0;
}

int bm_simulate_expected(const struct bm_table *t, const struct bm_sim_opts *o, int samples, uint64_t seed,
                         double *mean_ms, double *sd_ms, struct bm_err *err)
{
    struct bm_timeline *tl = NULL;
    if (!bm_table_has_spread(t) || samples < 1) {
        if (bm_simulate(t, o, &tl, err)) return BM_ERR;
        *mean_ms = tl->makespan_ms;
        if (sd_ms) *sd_ms = 0;
        bm_timeline_free(tl);
        return BM_OK;
    }
    long n = bm_table_n_ops(t);
    double *f = bm_malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    if (!f) return bm_err_set(err, "simulate: out of memory (%ld ops)", n);
    struct bm_rng rng;
    bm_rng_seed(&rng, seed);
    double sum = 0, sq = 0;
    for (int k = 0; k < samples; k++) {
        long g = 0;
        for (int r = 0; r < t->pp; r++)
            for (int i = 0; i < t->ranks[r].n_ops; i++, g++) {
                const struct bm_op *op = &t->ranks[r].ops[i];
                double sg = op->kind == BM_OP_COMPUTE && op->module >= 0 && op->module < t->n_modules
                                ? t->modules[op->module].spread : 0;
                f[g] = sg > 0 ? exp(sg * bm_rng_normal(&rng) - 0.5 * sg * sg) : 1;
            }
        if (bm_simulate_op_scaled(t, o, f, &tl, err)) {
            bm_free(f);
            return BM_ERR;
        }
        sum += tl->makespan_ms;
        sq += tl->makespan_ms * tl->makespan_ms;
        bm_timeline_free(tl);
        tl = NULL;
    }
    bm_free(f);
    *mean_ms = sum / samples;
    if (sd_ms) {
        double v = sq / samples - *mean_ms * *mean_ms;
        *sd_ms = v > 0 ? sqrt(v) : 0;
    }
    return BM_OK;
}
