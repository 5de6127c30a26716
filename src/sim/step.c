/* step.c — the step after the walk: gradient collectives, optimizer, state parts (see step.h). */
#include <stdlib.h>
#include <string.h>

#include "sim/cost.h"
#include "sim/hosts.h"
#include "sim/step.h"
#include "util/util.h"

double bm_step_param_mib(const struct bm_cost *m)
{
    return m->param_mib > 0 ? m->param_mib : 0;
}

double bm_step_optim_mib(const struct bm_cost *m)
{
    double o = m->state_mib - 2 * bm_step_param_mib(m);
    return o > 0 ? o : 0;
}

double bm_step_ring_ms(int n, double mib, double gbps, double lat_us, int allreduce)
{
    if (n <= 1 || !(mib > 0)) return 0;
    double f = allreduce ? 2.0 : 1.0;
    double ms = f * (n - 1) * lat_us / 1000.0;
    if (gbps > 0) ms += f * (double)(n - 1) / n * mib * 1048576.0 / (gbps * 1e9) * 1000.0;
    return ms;
}

/* hosted[r * n_modules + m] = 1 when pipeline rank r has a compute op of module m. */
static char *hosting(const struct bm_table *t)
{
    int P = t->pp, NM = t->n_modules;
    char *h = bm_calloc((size_t)(P > 0 ? P : 1) * (size_t)(NM > 0 ? NM : 1), 1);
    if (!h) return NULL;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE && op->module >= 0 && op->module < NM) h[(size_t)r * NM + op->module] = 1;
        }
    return h;
}

/* Pipeline ranks hosting module m. */
static int n_hosts_of(const struct bm_table *t, const char *h, int m)
{
    int k = 0;
    for (int r = 0; r < t->pp; r++) k += h[(size_t)r * t->n_modules + m];
    return k;
}

static void state_parts(const struct bm_table *t, const struct bm_costs *k, const char *h, struct bm_step_mem *out)
{
    int P = t->pp, C = P * (t->vpp > 0 ? t->vpp : 1), bb = t->backbone_module, D = bm_cost_dp(t);
    for (int r = 0; r < P; r++) {
        struct bm_step_mem *o = &out[r];
        *o = (struct bm_step_mem){0, 0, 0};
        if (bb >= 0 && bb < t->n_modules) {
            const struct bm_cost *m = &k->modules[bb];
            for (int c = 0; c < C; c++) { /* a frozen module: its weights only */
                if (bm_table_chunk_rank(t, c) != r) continue; /* V shapes: not c mod P */
                double w = bm_cost_chunk_weight(t, k, c);
                o->weights_mib += bm_step_param_mib(m) * w;
                if (t->modules[bb].frozen) continue;
                o->grads_mib += bm_step_param_mib(m) * w;
                o->optim_mib += bm_step_optim_mib(m) * w / (t->zero ? D : 1);
            }
        }
        for (int m = 0; m < t->n_modules; m++) {
            if (m == bb || !h[(size_t)r * t->n_modules + m]) continue;
            const struct bm_cost *mo = &k->modules[m];
            int n = t->zero ? n_hosts_of(t, h, m) * D : 1;
            o->weights_mib += bm_step_param_mib(mo);
            if (t->modules[m].frozen) continue;
            o->grads_mib += bm_step_param_mib(mo);
            o->optim_mib += bm_step_optim_mib(mo) / (n > 0 ? n : 1);
        }
    }
}

void bm_step_state(const struct bm_table *t, const struct bm_costs *c, struct bm_step_mem *out)
{
    char *h = hosting(t);
    if (!h) { /* out of memory: the parts without replicas' sharding are still well defined */
        for (int r = 0; r < t->pp; r++) out[r] = (struct bm_step_mem){0, 0, 0};
        return;
    }
    state_parts(t, c, h, out);
    bm_free(h);
}

/* ---------------------------------------------------------------- collectives */

/* The ring's link: device.coll_* (inter_host_coll_* when the group spans hosts), each 0 falling
 * back to the point-to-point link's figure. */
static void coll_link(const struct bm_device *dv, int inter, double *gbps, double *lat_us)
{
    double g = inter ? dv->inter_host_coll_gbytes_per_s : dv->coll_gbytes_per_s;
    double l = inter ? dv->inter_host_coll_latency_us : dv->coll_latency_us;
    *gbps = g > 0 ? g : inter ? dv->inter_host_gbytes_per_s : dv->link_gbytes_per_s;
    *lat_us = l > 0 ? l : inter ? dv->inter_host_latency_us : dv->link_latency_us;
}

struct coll {
    double ready;     /* when it may start */
    int order;        /* tie-break: backbone chunks first (by chunk), then modules */
    int rank;         /* backbone chunk: its pipeline rank; module: -1 (members in hosted[]) */
    int module;
    double ms;        /* duration of one collective (all-reduce, or one half under ZeRO-1) */
};

static int cmp_coll(const void *a, const void *b)
{
    const struct coll *x = a, *y = b;
    if (x->ready != y->ready) return x->ready < y->ready ? -1 : 1;
    return x->order - y->order;
}

/* 1 when the global ranks p*D + d of the pipeline ranks in 'member' (or the one rank) span hosts. */
static int spans_hosts(const struct bm_table *t, const char *member, int one)
{
    int H = t->ranks_per_host, D = bm_cost_dp(t);
    if (H <= 0) return 0;
    long first = -1;
    for (int r = 0; r < t->pp; r++) {
        if (one >= 0 ? r != one : !member[(size_t)r * t->n_modules]) continue;
        for (int d = 0; d < D; d++) {
            long host = ((long)r * D + d) / H;
            if (first < 0) first = host;
            else if (host != first) return 1;
        }
    }
    return 0;
}

/* Run the collectives cs[0..n) in the order of their ready times over the ranks' streams
 * (free[r]), adding their time to busy[r]. */
static void run_colls(const struct bm_table *t, const char *h, struct coll *cs, int n, double *free_at,
                      double *busy, double *first)
{
    qsort(cs, (size_t)n, sizeof *cs, cmp_coll);
    for (int i = 0; i < n; i++) {
        struct coll *c = &cs[i];
        double start = c->ready;
        for (int r = 0; r < t->pp; r++)
            if (c->rank >= 0 ? r == c->rank : h[(size_t)r * t->n_modules + c->module])
                if (free_at[r] > start) start = free_at[r];
        for (int r = 0; r < t->pp; r++)
            if (c->rank >= 0 ? r == c->rank : h[(size_t)r * t->n_modules + c->module]) {
                free_at[r] = start + c->ms;
                busy[r] += c->ms;
                if (first && first[r] < 0) first[r] = start;
            }
    }
}

int bm_step_model(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                  struct bm_step *out, struct bm_err *err)
{
    return bm_step_model_ranks(t, c, tl, out, NULL, err);
}

int bm_step_ends_alloc(const struct bm_table *t, struct bm_step_ends *e)
{
    int P = t->pp, NM = t->n_modules, C = P * (t->vpp > 0 ? t->vpp : 1);
    e->walk_end = bm_calloc((size_t)(P > 0 ? P : 1), sizeof *e->walk_end);
    e->last_chunk = bm_calloc((size_t)(C > 0 ? C : 1), sizeof *e->last_chunk);
    e->last_mod = bm_calloc((size_t)(NM > 0 ? NM : 1), sizeof *e->last_mod);
    e->hosted = bm_calloc((size_t)(P > 0 ? P : 1) * (size_t)(NM > 0 ? NM : 1), 1);
    if (e->walk_end && e->last_chunk && e->last_mod && e->hosted) return BM_OK;
    bm_step_ends_free(e);
    return BM_ERR;
}

void bm_step_ends_free(struct bm_step_ends *e)
{
    bm_free(e->walk_end);
    bm_free(e->last_chunk);
    bm_free(e->last_mod);
    bm_free(e->hosted);
    memset(e, 0, sizeof *e);
}

int bm_step_model_ranks(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *tl,
                        struct bm_step *out, struct bm_step_rank *ranks, struct bm_err *err)
{
    int P = t->pp, NM = t->n_modules, C = P * (t->vpp > 0 ? t->vpp : 1), bb = t->backbone_module;
    struct bm_step_ends e;
    if (bm_step_ends_alloc(t, &e)) {
        memset(out, 0, sizeof *out);
        return bm_err_set(err, "step: out of memory");
    }
    /* when each chunk's and module's last backward ends, and each rank's walk */
    for (int r = 0; r < P; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            double end = tl->ranks[r].ops[i].end_ms;
            if (end > e.walk_end[r]) e.walk_end[r] = end;
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= NM) continue;
            e.hosted[(size_t)r * NM + op->module] = 1;
            if (op->module == bb) {
                if (op->chunk >= 0 && op->chunk < C && end > e.last_chunk[op->chunk]) e.last_chunk[op->chunk] = end;
            } else if (end > e.last_mod[op->module]) {
                e.last_mod[op->module] = end;
            }
        }
    int rc = bm_step_model_ends(t, km, tl->makespan_ms, &e, out, ranks, err);
    bm_step_ends_free(&e);
    return rc;
}

int bm_step_model_ends(const struct bm_table *t, const struct bm_costs *km, double walk_ms,
                       const struct bm_step_ends *e, struct bm_step *out, struct bm_step_rank *ranks,
                       struct bm_err *err)
{
    int P = t->pp, NM = t->n_modules, C = P * (t->vpp > 0 ? t->vpp : 1), bb = t->backbone_module;
    int D = bm_cost_dp(t);
    memset(out, 0, sizeof *out);
    out->walk_ms = walk_ms;
    out->step_ms = walk_ms;
    size_t np = (size_t)(P > 0 ? P : 1), nm = (size_t)(NM > 0 ? NM : 1);
    const char *h = e->hosted;
    const double *last_chunk = e->last_chunk, *last_mod = e->last_mod, *walk_end = e->walk_end;
    double *free_at = bm_calloc(np, sizeof *free_at);
    double *busy = bm_calloc(np, sizeof *busy), *opt_start = bm_calloc(np, sizeof *opt_start);
    double *opt_end = bm_calloc(np, sizeof *opt_end), *first = bm_calloc(np, sizeof *first);
    struct bm_step_mem *mem = bm_calloc(np, sizeof *mem);
    struct coll *cs = bm_calloc((size_t)C + nm, sizeof *cs);
    int rc = BM_ERR;
    if (!free_at || !busy || !opt_start || !opt_end || !first || !mem || !cs) {
        bm_err_set(err, "step: out of memory");
        goto done;
    }
    state_parts(t, km, h, mem);
    int n = 0;
    const struct bm_device *dv = &km->device;
    /* frozen modules have no gradient to synchronise (and no optimizer state: state_parts) */
    if (bb >= 0 && bb < NM && D > 1 && !t->modules[bb].frozen)
        for (int c = 0; c < C; c++) {
            double mib = bm_step_param_mib(&km->modules[bb]) * bm_cost_chunk_weight(t, km, c);
            int cr = bm_table_chunk_rank(t, c); /* the chunk's rank (V shapes: not c mod P) */
            int x = spans_hosts(t, NULL, cr);
            double gbps, lat;
            coll_link(dv, x, &gbps, &lat);
            double ms = bm_step_ring_ms(D, mib, gbps, lat, !t->zero);
            if (ms > 0) cs[n++] = (struct coll){last_chunk[c], c, cr, bb, ms};
        }
    /* the replicated modules' collectives start in one fixed order, the executors' (every rank
     * must issue a group's collectives alike): the generators' first, then the others', each in
     * spec order; one may start once its own and every earlier one's last backwards are done */
    double before = 0;
    for (int j = 0; j < 2 * NM; j++) {
        int m = j % NM;
        if (m == bb || t->modules[m].frozen || (t->modules[m].role == BM_ROLE_GENERATOR) != (j < NM)) continue;
        int k = n_hosts_of(t, h, m) * D, x = spans_hosts(t, h + m, -1);
        double gbps, lat;
        coll_link(dv, x, &gbps, &lat);
        double ms = bm_step_ring_ms(k, bm_step_param_mib(&km->modules[m]), gbps, lat, !t->zero);
        if (!(ms > 0)) continue;
        if (last_mod[m] > before) before = last_mod[m];
        cs[n++] = (struct coll){before, C + m, -1, m, ms};
    }
    out->n_collectives = n;
    for (int r = 0; r < P; r++) first[r] = -1;
    run_colls(t, h, cs, n, free_at, busy, first);
    if (ranks)
        for (int r = 0; r < P; r++)
            ranks[r] = (struct bm_step_rank){first[r], first[r] >= 0 ? free_at[r] : -1, busy[r], 0, 0, 0};
    for (int r = 0; r < P; r++) {
        opt_start[r] = walk_end[r] > free_at[r] ? walk_end[r] : free_at[r];
        opt_end[r] = opt_start[r] + dv->optimizer_ms_per_gib * mem[r].optim_mib / 1024.0 * bm_cost_rank_scale(t, km, r);
    }
    double *done_at = opt_end;
    if (t->zero && n > 0) { /* the updated weights' all-gathers, after every member's optimizer */
        for (int i = 0; i < n; i++) {
            struct coll *c = &cs[i];
            c->ready = 0;
            for (int r = 0; r < P; r++)
                if ((c->rank >= 0 ? r == c->rank : h[(size_t)r * NM + c->module]) && opt_end[r] > c->ready)
                    c->ready = opt_end[r];
        }
        run_colls(t, h, cs, n, free_at, busy, NULL);
        for (int r = 0; r < P; r++)
            if (free_at[r] < opt_end[r]) free_at[r] = opt_end[r];
        done_at = free_at;
    }
    if (ranks)
        for (int r = 0; r < P; r++) {
            ranks[r].optimizer_start_ms = opt_start[r];
            ranks[r].optimizer_end_ms = opt_end[r];
            ranks[r].gather_end_ms = done_at[r];
        }
    int crit = 0;
    for (int r = 0; r < P; r++) {
        if (done_at[r] > done_at[crit]) crit = r;
        if (busy[r] > out->sync_total_ms) out->sync_total_ms = busy[r];
    }
    out->critical_rank = crit;
    if (P > 0 && done_at[crit] > out->step_ms) out->step_ms = done_at[crit];
    /* the critical rank's optimizer time after the walk; the rest of the tail is exposed sync */
    double a = opt_start[P > 0 ? crit : 0], b = opt_end[P > 0 ? crit : 0];
    if (a < out->walk_ms) a = out->walk_ms;
    if (b > out->step_ms) b = out->step_ms;
    out->optimizer_ms = b > a ? b - a : 0;
    out->sync_exposed_ms = out->step_ms - out->walk_ms - out->optimizer_ms;
    if (out->sync_exposed_ms < 0) out->sync_exposed_ms = 0;
    rc = BM_OK;
done:
    bm_free(free_at);
    bm_free(busy);
    bm_free(opt_start);
    bm_free(opt_end);
    bm_free(first);
    bm_free(mem);
    bm_free(cs);
    return rc;
}
