/* costs.c — the cost model's lifecycle (include/bigmac_cost.h): new, copy, free, and a tensor's
 * bytes. What fills one: bm_table_skeleton and bm_costs_from_spec (skeleton.c), the loaders
 * (json.c, csv.c), and calibration (src/calib/). */
#include <string.h>

#include "bigmac_cost.h"
#include "util/util.h"

struct bm_costs *bm_costs_new(const struct bm_table *t)
{
    struct bm_costs *c = bm_calloc(1, sizeof *c);
    if (!c) return NULL;
    int n = t->n_modules > 0 ? t->n_modules : 0;
    c->modules = bm_calloc((size_t)(n ? n : 1), sizeof *c->modules);
    c->spread = bm_calloc((size_t)(n ? n : 1), sizeof *c->spread);
    if (!c->modules || !c->spread) {
        bm_costs_free(c);
        return NULL;
    }
    c->n_modules = n;
    return c;
}

void bm_costs_free(struct bm_costs *c)
{
    if (!c) return;
    bm_free(c->modules);
    bm_free(c->spread);
    bm_free(c->chunk_weights);
    bm_free(c->mb_scale);
    bm_free(c->rank_time_scale);
    bm_free(c->act_bytes);
    bm_free(c->in_bytes);
    bm_free(c->act_w_bytes);
    bm_free(c);
}

/* A copy of n doubles of src into *dst (NULL stays NULL). BM_ERR when memory runs out. */
static int dup_doubles(double **dst, const double *src, size_t n)
{
    *dst = NULL;
    if (!src) return BM_OK;
    if (!(*dst = bm_malloc((n ? n : 1) * sizeof **dst))) return BM_ERR;
    memcpy(*dst, src, n * sizeof **dst);
    return BM_OK;
}

struct bm_costs *bm_costs_copy(const struct bm_costs *c, const struct bm_table *t)
{
    struct bm_costs *d = bm_calloc(1, sizeof *d);
    if (!d) return NULL;
    *d = *c;
    d->modules = NULL, d->spread = NULL, d->chunk_weights = NULL, d->mb_scale = NULL;
    d->rank_time_scale = NULL, d->act_bytes = d->in_bytes = d->act_w_bytes = NULL;
    size_t nm = (size_t)(c->n_modules > 0 ? c->n_modules : 0), C = (size_t)t->pp * (size_t)(t->vpp > 0 ? t->vpp : 1);
    size_t M = (size_t)(t->microbatches > 0 ? t->microbatches : 0), P = (size_t)(t->pp > 0 ? t->pp : 0);
    d->modules = bm_malloc((nm ? nm : 1) * sizeof *d->modules);
    if (!d->modules || dup_doubles(&d->spread, c->spread, nm) || dup_doubles(&d->chunk_weights, c->chunk_weights, C) ||
        dup_doubles(&d->mb_scale, c->mb_scale, M) || dup_doubles(&d->rank_time_scale, c->rank_time_scale, P) ||
        dup_doubles(&d->act_bytes, c->act_bytes, nm * C * M) || dup_doubles(&d->in_bytes, c->in_bytes, nm * C * M) ||
        dup_doubles(&d->act_w_bytes, c->act_w_bytes, nm * C * M)) {
        bm_costs_free(d);
        return NULL;
    }
    if (nm) memcpy(d->modules, c->modules, nm * sizeof *d->modules);
    return d;
}

double bm_costs_tensor_mib(const struct bm_costs *c, const struct bm_table *t, int tensor)
{
    if (!c || tensor < 0 || tensor >= t->n_tensors) return 0;
    int m = t->tensors[tensor].module; /* a tensor is its producer's out_mib (table/flow.c) */
    return m >= 0 && m < c->n_modules ? c->modules[m].out_mib : 0;
}
