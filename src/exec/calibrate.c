/* calibrate.c — spec costs from a measured timeline (see calibrate.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/calibrate.h"
#include "sim/cost.h"
#include "util/util.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median (or mean) of the n durations of one (module, chunk, pass) slot; NAN for an empty slot. */
static double stat(double *v, int n, int mean)
{
    if (n <= 0) return NAN;
    if (mean) {
        double s = 0;
        for (int i = 0; i < n; i++) s += v[i];
        return s / n;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bm_calibrate_same_table(const struct bm_table *a, const struct bm_table *b)
{
    if (a->pp != b->pp || a->vpp != b->vpp || a->microbatches != b->microbatches || a->n_modules != b->n_modules ||
        a->backbone_module != b->backbone_module)
        return 0;
    for (int m = 0; m < a->n_modules; m++)
        if (strcmp(a->modules[m].name, b->modules[m].name)) return 0;
    for (int r = 0; r < a->pp; r++) {
        if (a->ranks[r].n_ops != b->ranks[r].n_ops) return 0;
        for (int k = 0; k < a->ranks[r].n_ops; k++) {
            const struct bm_op *x = &a->ranks[r].ops[k], *y = &b->ranks[r].ops[k];
            if (x->kind != y->kind || x->pass != y->pass || x->module != y->module || x->chunk != y->chunk ||
                x->mb != y->mb || x->peer != y->peer)
                return 0;
        }
    }
    return 1;
}

int bm_calibrate(const struct bm_table *t, const struct bm_timeline *tl, int mean, struct bm_cost *costs,
                 struct bm_err *err)
{
    return bm_calibrate_runs(t, &tl, 1, mean, costs, err);
}

int bm_calibrate_runs(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs, int mean,
                      struct bm_cost *costs, struct bm_err *err)
{
    int nm = t->n_modules, M = t->microbatches > 0 ? t->microbatches : 1;
    int C = t->pp * (t->vpp > 0 ? t->vpp : 1), ns = (nm + C) * 3; /* slots: module or nm + chunk, pass F/B/W */
    if (n_runs < 1) return bm_err_set(err, "no timeline to calibrate from");
    for (int i = 0; i < n_runs; i++)
        if (tls[i]->pp != t->pp) return bm_err_set(err, "timeline has %d ranks, table %d", tls[i]->pp, t->pp);
    long total = bm_table_n_ops(t) * n_runs;
    double *dur = bm_malloc(((size_t)total + 1) * sizeof *dur);
    int *slot_n = bm_calloc((size_t)ns, sizeof *slot_n), *slot_off = bm_calloc((size_t)ns + 1, sizeof *slot_off);
    int *fill = bm_calloc((size_t)ns, sizeof *fill);
    if (!dur || !slot_n || !slot_off || !fill) {
        bm_free(dur), bm_free(slot_n), bm_free(slot_off), bm_free(fill);
        return bm_err_set(err, "out of memory");
    }
#define SLOT(op) ((((op)->module == t->backbone_module && (op)->chunk >= 0 && (op)->chunk < C) ? nm + (op)->chunk \
                                                                                                : (op)->module) * 3 + \
                  ((op)->pass <= BM_PASS_W ? (op)->pass : 1))
    double role_bytes[BM_N_ROLES] = {0};
    for (int r = 0; r < t->pp; r++) /* count per slot, then place */
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= nm) continue;
            slot_n[SLOT(op)] += n_runs;
        }
    for (int i = 0; i < ns; i++) slot_off[i + 1] = slot_off[i] + slot_n[i];
    for (int r = 0; r < t->pp; r++)
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= nm) continue;
            int sl = SLOT(op);
            for (int i = 0; i < n_runs; i++)
                dur[slot_off[sl] + fill[sl]++] = tls[i]->ranks[r].ops[k].end_ms - tls[i]->ranks[r].ops[k].start_ms;
        }
#undef SLOT
    for (int i = 0; i < n_runs; i++)
        for (int r = 0; r < t->pp; r++) {
            const struct bm_rank_timeline *rt = &tls[i]->ranks[r];
            double prev[BM_N_ROLES] = {0};
            for (int j = 0; j < rt->n_mem; j++)
                for (int role = 0; role < BM_N_ROLES; role++) {
                    /* values went through MiB with 9 significant digits: back to whole bytes */
                    double b = round(rt->mem[j].act_mib[role] * 1048576.0);
                    if (b > prev[role]) role_bytes[role] += b - prev[role];
                    prev[role] = b;
                }
        }
    double role_fwd[BM_N_ROLES] = {0};
    double *med = bm_calloc((size_t)nm * 3, sizeof *med);
    if (!med) {
        bm_free(dur), bm_free(slot_n), bm_free(slot_off), bm_free(fill);
        return bm_err_set(err, "out of memory");
    }
    for (int m = 0; m < nm; m++)
        for (int p = 0; p < 3; p++) {
            if (m == t->backbone_module) {
                double sum = 0;
                int any = 0;
                for (int c = 0; c < C; c++) {
                    int sl = (nm + c) * 3 + p;
                    double v = stat(dur + slot_off[sl], slot_n[sl], mean);
                    if (!isnan(v)) sum += v, any = 1;
                }
                med[m * 3 + p] = any ? sum : NAN;
            } else {
                int sl = m * 3 + p;
                med[m * 3 + p] = stat(dur + slot_off[sl], slot_n[sl], mean);
            }
        }
    for (int m = 0; m < nm; m++)
        if (!isnan(med[m * 3])) role_fwd[t->modules[m].role] += med[m * 3];
    for (int m = 0; m < nm; m++) {
        costs[m] = t->modules[m].cost;
        costs[m].w_ms = costs[m].act_w_mib = 0; /* measured below, or the defaults */
        if (isnan(med[m * 3])) continue;
        int role = t->modules[m].role;
        costs[m].fwd_ms = med[m * 3];
        if (!isnan(med[m * 3 + 1])) costs[m].bwd_ms = med[m * 3 + 1];
        if (!isnan(med[m * 3 + 1]) && !isnan(med[m * 3 + 2]) && med[m * 3 + 2] > 0) { /* split: B + W */
            costs[m].bwd_ms = med[m * 3 + 1] + med[m * 3 + 2];
            costs[m].w_ms = med[m * 3 + 2];
        }
        double share = role_fwd[role] > 0 ? med[m * 3] / role_fwd[role] : 1;
        costs[m].act_mib = role_bytes[role] * share / M / n_runs / 1048576.0;
    }
    bm_free(med), bm_free(dur), bm_free(slot_n), bm_free(slot_off), bm_free(fill);
    return BM_OK;
}

void bm_calibrate_rank_scale(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs,
                             const struct bm_cost *costs, double *out)
{
    /* which modules' backward the table splits (out of memory: every module as if whole) */
    char split_stack[256], *split = t->n_modules <= 256 ? split_stack : bm_calloc((size_t)t->n_modules, 1);
    if (split) bm_table_split_flags(t, split);
    for (int r = 0; r < t->pp; r++) {
        double measured = 0, model = 0;
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= t->n_modules) continue;
            const struct bm_cost *c = &costs[op->module];
            double d = op->pass == BM_PASS_F ? c->fwd_ms
                       : !(split && split[op->module]) ? (op->pass == BM_PASS_W ? 0 : c->bwd_ms)
                       : op->pass == BM_PASS_W ? bm_cost_w_ms(c) : c->bwd_ms - bm_cost_w_ms(c);
            if (op->module == t->backbone_module) d *= bm_cost_chunk_weight(t, op->chunk);
            model += d * n_runs;
            for (int i = 0; i < n_runs; i++) measured += tls[i]->ranks[r].ops[k].end_ms - tls[i]->ranks[r].ops[k].start_ms;
        }
        out[r] = model > 0 && measured > 0 ? measured / model : 1;
    }
    if (split != split_stack) bm_free(split);
}
