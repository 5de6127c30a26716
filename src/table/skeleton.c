/* skeleton.c — a table's shell from a spec and options: what the planner starts every plan
 * from and what the CSV loader fills a spec-given CSV into, so both agree on the modules, costs,
 * chunk split, warm-up extension and dataflow of the same spec. */
#include <math.h>
#include <string.h>

#include "bigmac_cost.h"
#include "table/table.h"
#include "util/util.h"

static char **copy_strv(char **v, int n)
{
    char **c = bm_calloc((size_t)(n ? n : 1), sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < n; i++)
        if (!(c[i] = bm_strdup(v[i]))) {
            for (int j = 0; j < i; j++) bm_free(c[j]);
            bm_free(c);
            return NULL;
        }
    return c;
}

static int copy_modules(struct bm_table *t, struct bm_costs *k, const struct bm_spec *s, struct bm_err *err)
{
    int only_backbone = t->policy == BM_POL_NONE;
    t->modules = bm_calloc((size_t)s->n_modules, sizeof *t->modules);
    k->modules = bm_calloc((size_t)s->n_modules, sizeof *k->modules);
    k->spread = bm_calloc((size_t)s->n_modules, sizeof *k->spread);
    if (!t->modules || !k->modules || !k->spread) return bm_err_set(err, "out of memory");
    for (int i = 0; i < s->n_modules; i++) {
        const struct bm_module *m = &s->modules[i];
        if (only_backbone && i != s->backbone_module) continue;
        struct bm_table_module *d = &t->modules[t->n_modules];
        d->role = m->role;
        d->grad_to_backbone = m->grad_to_backbone;
        k->modules[t->n_modules] = m->cost;
        k->spread[t->n_modules] = m->spread;
        d->recompute = m->recompute;
        d->frozen = m->frozen;
        d->name = bm_strdup(m->name);
        d->consumes = copy_strv(m->consumes, m->n_consumes);
        d->produces = copy_strv(m->produces, m->n_produces);
        t->n_modules++;  /* counted before the checks so bm_table_free releases partial copies */
        k->n_modules = t->n_modules;
        d->n_consumes = d->consumes ? m->n_consumes : 0;
        d->n_produces = d->produces ? m->n_produces : 0;
        if (!d->name || !d->consumes || !d->produces) return bm_err_set(err, "out of memory");
        if (i == s->backbone_module) t->backbone_module = t->n_modules - 1;
    }
    if (t->backbone_module < 0) return bm_err_set(err, "the spec has no backbone module");
    return BM_OK;
}

/* Even split of L layers over C chunks (extra layers spread evenly). */
static void even_layers(int L, int C, int *out)
{
    for (int c = 0; c < C; c++) out[c] = (int)((long)(c + 1) * L / C - (long)c * L / C);
}

/* The backbone's chunk split of t's shape under spec s: layers per chunk into layers (when the
 * backbone has layers; set_layers 0: t->chunk_layers as they are) and each chunk's share of the
 * backbone's cost into weights[pp*vpp]. */
static int split_chunks(const struct bm_table *t, int *layers, int set_layers, const double *mb_scale,
                        const struct bm_spec *s, double *weights, struct bm_err *err)
{
    int P = t->pp, V = t->vpp, C = P * V;
    const struct bm_module *bb = &s->modules[s->backbone_module];
    int L = layers ? bb->layers : 0;
    if (L > 0 && L < C)
        return bm_err_set(err, "backbone \"%s\" has %d layers, too few for pp*vpp = %d chunks\nhint: use a smaller --pp/--vpp, or omit \"layers\" for a continuous split",
                          bb->name, L, C);
    if (L > 0 && !set_layers) { /* the table's own split: the weights follow its layers */
        long sum = 0;
        for (int c = 0; c < C; c++) sum += layers[c];
        for (int c = 0; c < C; c++) weights[c] = sum > 0 ? (double)layers[c] / (double)sum : 1.0 / C;
        return BM_OK;
    }
    if (t->policy != BM_POL_UNIFIED_BALANCED) {
        if (L > 0) {
            even_layers(L, C, layers);
            for (int c = 0; c < C; c++) weights[c] = (double)layers[c] / L;
        } else {
            for (int c = 0; c < C; c++) weights[c] = 1.0 / C;
        }
        return BM_OK;
    }
    /* unified-balanced: move backbone work away from the ranks that also carry the encoders
     * (rank 0) and generators (rank P-1) so per-rank cost is as even as the layers allow. */
    double *extra = bm_calloc((size_t)P, sizeof(double));
    double *share = bm_calloc((size_t)P, sizeof(double));
    if (!extra || !share) {
        bm_free(extra);
        bm_free(share);
        return bm_err_set(err, "out of memory");
    }
    double mean_scale = 0;
    for (int m = 0; m < t->microbatches; m++) mean_scale += mb_scale[m];
    mean_scale /= t->microbatches;
    for (int i = 0; i < s->n_modules; i++) {
        const struct bm_module *m = &s->modules[i];
        double c = m->cost.fwd_ms + m->cost.bwd_ms;
        if (m->role == BM_ROLE_ENCODER) extra[bm_table_chunk_rank(t, 0)] += c * mean_scale;
        if (m->role == BM_ROLE_GENERATOR) extra[bm_table_chunk_rank(t, C - 1)] += c;
    }
    double Bk = bb->cost.fwd_ms + bb->cost.bwd_ms;
    if (L > 0) {
        /* greedy: every chunk keeps >= 1 layer; each further layer goes where it raises the
         * busiest rank least */
        int *lr = bm_calloc((size_t)P, sizeof(int));
        if (!lr) {
            bm_free(extra);
            bm_free(share);
            return bm_err_set(err, "out of memory");
        }
        for (int r = 0; r < P; r++) lr[r] = V;
        for (int left = L - C; left > 0; left--) {
            int best = 0;
            for (int r = 1; r < P; r++)
                if (extra[r] + (lr[r] + 1) * Bk / L < extra[best] + (lr[best] + 1) * Bk / L) best = r;
            lr[best]++;
        }
        for (int r = 0; r < P; r++) {
            int tmp[64];
            even_layers(lr[r], V, tmp);
            for (int c = 0, j = 0; c < C; c++) /* the rank's chunks in chunk order */
                if (bm_table_chunk_rank(t, c) == r) layers[c] = tmp[j < V ? j++ : V - 1];
        }
        for (int c = 0; c < C; c++) weights[c] = (double)layers[c] / L;
        bm_free(lr);
    } else {
        /* water-filling: per-rank backbone share = max(0, level - extra), summing to Bk */
        double lo = 0, hi = Bk + extra[bm_table_chunk_rank(t, 0)] + extra[bm_table_chunk_rank(t, C - 1)] + 1;
        for (int it = 0; it < 200; it++) {
            double mid = 0.5 * (lo + hi), sum = 0;
            for (int r = 0; r < P; r++) sum += fmax(0, mid - extra[r]);
            if (sum > Bk) hi = mid;
            else lo = mid;
        }
        double sum = 0;
        for (int r = 0; r < P; r++) sum += share[r] = fmax(0, lo - extra[r]);
        for (int c = 0; c < C; c++)
            weights[c] = sum > 0 ? share[bm_table_chunk_rank(t, c)] / sum / V : 1.0 / C;
    }
    bm_free(extra);
    bm_free(share);
    return BM_OK;
}

static int rank_scale(struct bm_costs *k, const struct bm_table *t, const struct bm_spec *s, struct bm_err *err)
{
    k->op_overhead_ms = s->op_overhead_us / 1000.0; /* the other measured rank properties */
    k->op_overhead_sd_ms = s->op_overhead_sd_us / 1000.0;
    k->recv_overhead_ms = s->recv_overhead_us / 1000.0;
    k->step_lead_ms = s->step_lead_us / 1000.0;
    if (!s->rank_time_scale) return BM_OK;
    if (s->n_rank_time_scale != t->pp)
        return bm_err_set(err, "%s: device.rank_time_scale has %d entries, one per pipeline rank, but pp is %d"
                               "\nhint: recalibrate at this pp, or drop device.rank_time_scale",
                          s->path ? s->path : "spec", s->n_rank_time_scale, t->pp);
    k->rank_time_scale = bm_malloc((size_t)t->pp * sizeof(double));
    if (!k->rank_time_scale) return bm_err_set(err, "out of memory");
    memcpy(k->rank_time_scale, s->rank_time_scale, (size_t)t->pp * sizeof(double));
    return BM_OK;
}

/* 1 when, on the last stage with 'extra' warm-up forwards, every unit's first last-chunk
 * backward comes after the last-chunk forwards of the whole unit. */
static int unit_fits_warmup(const struct bm_table *t, int extra, struct bm_bb_step *steps,
                            int *pos_f, int *pos_b)
{
    int P = t->pp, V = t->vpp, M = t->microbatches, C = P * V, U = t->unit > 0 ? t->unit : P;
    if (bm_backbone_order(t->backbone, P, V, M, P - 1, extra, steps, NULL)) return 1;
    for (int i = 0; i < bm_backbone_n_steps(t->backbone, V, M); i++)
        if (steps[i].chunk == C - 1 && steps[i].pass != BM_PASS_W)
            (steps[i].pass == BM_PASS_F ? pos_f : pos_b)[steps[i].mb] = i;
    for (int u0 = 0; u0 < M; u0 += U) {
        int last_f = 0;
        for (int m = u0; m < M && m < u0 + U; m++)
            if (pos_f[m] > last_f) last_f = pos_f[m];
        if (pos_b[u0] < last_f) return 0;
    }
    return 1;
}

int bm_table_default_warmup(const struct bm_table *t)
{
    /* optimus gets the same extension: without it its last stage idles for the generator round
     * trip after every forward, which would make the baseline a strawman */
    if (t->policy != BM_POL_BIGMAC && t->policy != BM_POL_IDEAL && t->policy != BM_POL_OPTIMUS)
        return 0;
    if (bm_backbone_v_shaped(t->backbone)) return 0; /* their orders take no extension */
    int bb = t->backbone_module, needed = 0;
    for (int g = 0; g < t->n_modules && !needed; g++) {
        if (t->modules[g].role != BM_ROLE_GENERATOR || !t->modules[g].grad_to_backbone) continue;
        for (int k = 0; k < t->modules[g].n_consumes; k++)
            for (int j = 0; j < t->modules[bb].n_produces; j++)
                if (!strcmp(t->modules[g].consumes[k], t->modules[bb].produces[j])) needed = 1;
    }
    if (!needed) return 0;
    /* The smallest extension that lets the last stage hold a whole unit's forwards before its
     * first backward (U-1 for 1F1B; more for interleaved when U > P, since the last chunk's
     * forwards are spread over groups of P), plus one forward that covers the round trip to
     * the generator owners and back. */
    int U = t->unit > 0 ? t->unit : t->pp, VM = t->vpp * t->microbatches;
    struct bm_bb_step *steps = bm_malloc((size_t)bm_backbone_n_steps(t->backbone, t->vpp, t->microbatches) * sizeof *steps);
    int *pos = bm_malloc((size_t)(2 * t->microbatches) * sizeof(int));
    int e = U - 1;
    if (!steps || !pos) {
        bm_free(steps);
        bm_free(pos);
        return -1;
    }
    while (e < VM && !unit_fits_warmup(t, e, steps, pos, pos + t->microbatches)) e++;
    bm_free(steps);
    bm_free(pos);
    return e + 1;
}

/* c (the costs of table t) with s's costs, as planning s would set them (bm_table_skeleton):
 * every table module's cost and spread from the spec module of the same name and role, the
 * encoder scales of s's data, s's device with its rank scale and per-op dispatch. c's chunk
 * weights stay. */
static int use_spec(struct bm_costs *c, const struct bm_table *t, const struct bm_spec *s, const char *table_path,
                    struct bm_err *err)
{
    const char *sp = s->path ? s->path : "spec";
    if (!table_path) table_path = "table";
    for (int m = 0; m < t->n_modules; m++) {
        const struct bm_table_module *d = &t->modules[m];
        int k = 0;
        while (k < s->n_modules && strcmp(s->modules[k].name, d->name)) k++;
        if (k == s->n_modules)
            return bm_err_set(err, "%s: module \"%s\" is not in %s\nhint: simulate a table with the spec it was "
                                   "planned from (or that spec calibrated)", table_path, d->name, sp);
        if (s->modules[k].role != d->role)
            return bm_err_set(err, "%s: module \"%s\" is a %s in the table but a %s in %s", table_path, d->name,
                              bm_role_name(d->role), bm_role_name(s->modules[k].role), sp);
        c->modules[m] = s->modules[k].cost;
        c->spread[m] = s->modules[k].spread;
    }
    int M = t->microbatches > 0 ? t->microbatches : 1;
    double *ms = bm_malloc((size_t)M * sizeof *ms);
    if (!ms) return bm_err_set(err, "out of memory");
    bm_spec_encoder_scales(s, t->microbatches, ms);
    bm_free(c->mb_scale);
    c->mb_scale = ms;
    c->device = s->device;
    bm_free(c->rank_time_scale);
    c->rank_time_scale = NULL;
    return rank_scale(c, t, s, err);
}

int bm_table_use_spec_costs(struct bm_table *t, struct bm_costs *c, const struct bm_spec *s, const char *table_path,
                            struct bm_err *err)
{
    if (s->train.zero) t->zero = 1; /* the table's ZeRO stage unless the spec asks for ZeRO-1 */
    if (s->device.ranks_per_host) t->ranks_per_host = s->device.ranks_per_host; /* else the table's */
    return use_spec(c, t, s, table_path, err);
}

int bm_costs_from_spec(const struct bm_spec *s, const struct bm_table *t, const char *table_path,
                       struct bm_costs **out, struct bm_err *err)
{
    *out = NULL;
    struct bm_costs *c = bm_costs_new(t);
    if (!c) return bm_err_set(err, "out of memory");
    int C = t->pp * (t->vpp > 0 ? t->vpp : 1);
    if (use_spec(c, t, s, table_path, err)) goto fail;
    if (C > 0 && s->backbone_module >= 0) {
        if (!(c->chunk_weights = bm_calloc((size_t)C, sizeof(double)))) {
            bm_err_set(err, "out of memory");
            goto fail;
        }
        if (split_chunks(t, t->chunk_layers, 0, c->mb_scale, s, c->chunk_weights, err)) goto fail;
    }
    *out = c;
    return BM_OK;
fail:
    bm_costs_free(c);
    return BM_ERR;
}

int bm_table_skeleton(const struct bm_spec *s, const struct bm_plan_opts *o, struct bm_table **out,
                      struct bm_costs **costs, struct bm_err *err)
{
    *out = NULL;
    *costs = NULL;
    struct bm_table *t = bm_table_new(o->pp);
    struct bm_costs *k = bm_calloc(1, sizeof *k);
    if (!t || !k) {
        bm_err_set(err, "out of memory");
        goto fail;
    }
    t->vpp = o->vpp;
    t->microbatches = o->microbatches;
    t->unit = o->unit > 0 ? o->unit : o->pp;
    t->dp = s->dp > 1 ? s->dp : 1; /* the spec's parallel.dp (--dp): the replicas this table places */
    t->zero = s->train.zero;        /* train.zero (--zero): ZeRO-1 shards the optimizer state */
    t->backbone = o->backbone;
    t->policy = o->policy;
    t->ranks_per_host = s->device.ranks_per_host; /* where the ranks run (sim/hosts.h) */
    k->device = s->device;
    int M = t->microbatches, C = t->pp * t->vpp;
    k->mb_scale = bm_malloc((size_t)M * sizeof(double));
    k->chunk_weights = bm_calloc((size_t)(C > 0 ? C : 1), sizeof(double));
    if (!k->mb_scale || !k->chunk_weights) {
        bm_err_set(err, "out of memory");
        goto fail;
    }
    bm_spec_encoder_scales(s, M, k->mb_scale);
    if (rank_scale(k, t, s, err) || copy_modules(t, k, s, err)) goto fail;
    int L = s->modules[s->backbone_module].layers;
    if (L > 0 && !(t->chunk_layers = bm_calloc((size_t)(C > 0 ? C : 1), sizeof(int)))) {
        bm_err_set(err, "out of memory");
        goto fail;
    }
    if (split_chunks(t, t->chunk_layers, 1, k->mb_scale, s, k->chunk_weights, err)) goto fail;
    if ((t->warmup_extra = bm_table_default_warmup(t)) < 0) {
        bm_err_set(err, "out of memory");
        goto fail;
    }
    if (bm_table_finish(t, err)) goto fail;
    *out = t;
    *costs = k;
    return BM_OK;
fail:
    bm_table_free(t);
    bm_costs_free(k);
    return BM_ERR;
}
