/* calibrate.c — spec costs from a measured timeline (see calibrate.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "sim/cost.h"
#include "sim/hosts.h"
#include "table/table.h"
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

/* Module m's out_mib from the measured messages: the mean bytes of the sends of the tensors it
 * produces (not their gradients, which have the same size), over the runs, in MiB; 0 when the
 * timelines carry no message sizes for them. */
static double measured_out_mib(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs, int m)
{
    double sum = 0;
    long n = 0;
    for (int r = 0; r < t->pp; r++)
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            if (op->kind != BM_OP_SEND || op->tensor < 0 || op->tensor >= t->n_tensors) continue;
            const struct bm_tensor *x = &t->tensors[op->tensor];
            if (x->module != m || x->grad) continue;
            for (int i = 0; i < n_runs; i++) {
                double b = tls[i]->ranks[r].ops[k].msg_bytes;
                if (b > 0) sum += b, n++;
            }
        }
    return n ? sum / n / 1048576.0 : 0;
}

int bm_calibrate(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *tl, int mean, struct bm_cost *costs,
                 struct bm_err *err)
{
    return bm_calibrate_runs(t, km, &tl, 1, mean, costs, err);
}

int bm_calibrate_runs(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs, int mean,
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
        costs[m] = km->modules[m];
        costs[m].w_ms = costs[m].act_w_mib = 0; /* measured below, or the defaults */
        if (isnan(med[m * 3])) continue;
        int role = t->modules[m].role;
        costs[m].fwd_ms = med[m * 3];
        if (!isnan(med[m * 3 + 1])) costs[m].bwd_ms = med[m * 3 + 1];
        if (!isnan(med[m * 3 + 1]) && !isnan(med[m * 3 + 2]) && med[m * 3 + 2] > 0) { /* split: B + W */
            costs[m].bwd_ms = med[m * 3 + 1] + med[m * 3 + 2];
            costs[m].w_ms = med[m * 3 + 2];
        }
        /* a recomputed backward (B) reran the forward first: the backward proper is the rest */
        if (t->modules[m].recompute && !isnan(med[m * 3 + 1]) && med[m * 3 + 1] > med[m * 3])
            costs[m].bwd_ms -= med[m * 3];
        /* a frozen module's B was the input gradient only (bwd_ms - w_ms): scale it back up to a
         * whole backward with the table's weight-gradient share, which it keeps */
        if (t->modules[m].backward == BM_BACKWARD_INPUT && !isnan(med[m * 3 + 1])) {
            const struct bm_cost *c0 = &km->modules[m];
            double wf = c0->bwd_ms > 0 ? bm_cost_w_ms(c0) / c0->bwd_ms : 0.5;
            if (wf > 0 && wf < 1) {
                costs[m].bwd_ms /= 1 - wf;
                costs[m].w_ms = costs[m].bwd_ms * wf;
            }
        }
        double share = role_fwd[role] > 0 ? med[m * 3] / role_fwd[role] : 1;
        costs[m].act_mib = role_bytes[role] * share / M / n_runs / 1048576.0;
    }
    for (int m = 0; m < nm; m++) {
        double mib = measured_out_mib(t, tls, n_runs, m);
        if (mib > 0) costs[m].out_mib = mib;
    }
    bm_free(med), bm_free(dur), bm_free(slot_n), bm_free(slot_off), bm_free(fill);
    return BM_OK;
}

/* The model's time of compute op op with costs c (before the chunk weight and the scales): a
 * split backward (split[module]) as B = bwd - w and W = w, a recomputed backward plus the rerun
 * forward (src/sim/cost.h). split may be NULL (no module split). */
static double model_ms(const struct bm_table *t, const struct bm_cost *c, const struct bm_op *op, const char *split)
{
    int sp = split && split[op->module];
    if (op->pass != BM_PASS_F && t->modules[op->module].backward == BM_BACKWARD_INPUT) /* frozen */
        return (op->pass == BM_PASS_B ? c->bwd_ms - bm_cost_w_ms(c) : 0) +
               (op->pass == BM_PASS_B && t->modules[op->module].recompute ? c->fwd_ms : 0);
    double d = op->pass == BM_PASS_F ? c->fwd_ms
               : !sp ? (op->pass == BM_PASS_W ? 0 : c->bwd_ms)
               : op->pass == BM_PASS_W ? bm_cost_w_ms(c) : c->bwd_ms - bm_cost_w_ms(c);
    if (op->pass == BM_PASS_B && t->modules[op->module].recompute) d += c->fwd_ms; /* the rerun forward */
    return d;
}

static void rank_scale_with(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                            const struct bm_cost *costs, const double *mb_scale, double *out);

void bm_calibrate_rank_scale(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                             const struct bm_cost *costs, double *out)
{
    rank_scale_with(t, km, tls, n_runs, costs, NULL, out);
}

/* The rank scale with encoder ops' model times multiplied by mb_scale (NULL = 1). */
static void rank_scale_with(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                            const struct bm_cost *costs, const double *mb_scale, double *out)
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
            double d = model_ms(t, c, op, split);
            if (op->module == t->backbone_module) d *= bm_cost_chunk_weight(t, km, op->chunk);
            if (mb_scale && t->modules[op->module].role == BM_ROLE_ENCODER && op->mb >= 0 && op->mb < t->microbatches)
                d *= mb_scale[op->mb];
            model += d * n_runs;
            for (int i = 0; i < n_runs; i++) measured += tls[i]->ranks[r].ops[k].end_ms - tls[i]->ranks[r].ops[k].start_ms;
        }
        out[r] = model > 0 && measured > 0 ? measured / model : 1;
    }
    if (split != split_stack) bm_free(split);
}

void bm_calibrate_mb_scale(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs,
                           const struct bm_cost *costs, const double *rank_scale, double *out)
{
    int M = t->microbatches;
    double *meas = bm_calloc((size_t)(M > 0 ? M : 1), sizeof *meas), *model = bm_calloc((size_t)(M > 0 ? M : 1), sizeof *model);
    for (int m = 0; m < M; m++) out[m] = 1;
    if (!meas || !model) {
        bm_free(meas), bm_free(model);
        return;
    }
    for (int r = 0; r < t->pp; r++)
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= t->n_modules || op->mb < 0 || op->mb >= M ||
                t->modules[op->module].role != BM_ROLE_ENCODER || op->pass == BM_PASS_W)
                continue;
            const struct bm_cost *c = &costs[op->module];
            double d = model_ms(t, c, op, NULL); /* encoders keep their backward whole */
            model[op->mb] += d * (rank_scale ? rank_scale[r] : 1) * n_runs;
            for (int i = 0; i < n_runs; i++) meas[op->mb] += tls[i]->ranks[r].ops[k].end_ms - tls[i]->ranks[r].ops[k].start_ms;
        }
    for (int m = 0; m < M; m++)
        if (model[m] > 0 && meas[m] > 0) out[m] = meas[m] / model[m];
    bm_free(meas), bm_free(model);
}

void bm_calibrate_scales(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                         const struct bm_cost *costs, double *rank_scale, double *mb_scale)
{
    if (!rank_scale) {
        bm_calibrate_mb_scale(t, tls, n_runs, costs, NULL, mb_scale);
        return;
    }
    int P = t->pp;
    double *prev = bm_malloc((size_t)(P > 0 ? P : 1) * sizeof *prev);
    rank_scale_with(t, km, tls, n_runs, costs, NULL, rank_scale);
    bm_calibrate_mb_scale(t, tls, n_runs, costs, rank_scale, mb_scale);
    for (int it = 0; prev && it < 200; it++) {
        memcpy(prev, rank_scale, (size_t)P * sizeof *prev);
        rank_scale_with(t, km, tls, n_runs, costs, mb_scale, rank_scale);
        bm_calibrate_mb_scale(t, tls, n_runs, costs, rank_scale, mb_scale);
        double ch = 0;
        for (int r = 0; r < P; r++) ch = fmax(ch, fabs(rank_scale[r] - prev[r]));
        if (ch < 1e-12) break;
    }
    bm_free(prev);
}

/* Sum, sum of squared deviations from 'centre' and count of the gaps between an op's start and
 * the end of the rank's previous op (every op but each rank's first; negative gaps,
 * overlapping ops, count 0). */
static long gap_moments(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs, double centre,
                        double *sum, double *sq)
{
    long n = 0;
    *sum = *sq = 0;
    for (int i = 0; i < n_runs; i++)
        for (int r = 0; r < t->pp && r < tls[i]->pp; r++) {
            const struct bm_rank_timeline *rt = &tls[i]->ranks[r];
            for (int k = 1; k < rt->n_ops && k < t->ranks[r].n_ops; k++) {
                double g = rt->ops[k].start_ms - rt->ops[k - 1].end_ms;
                if (g < 0) g = 0;
                *sum += g, *sq += (g - centre) * (g - centre), n++;
            }
        }
    return n;
}

double bm_calibrate_op_overhead_ms(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs)
{
    double sum, sq;
    long n = gap_moments(t, tls, n_runs, 0, &sum, &sq);
    return n ? sum / n : 0;
}

/* One run's mean transfer time: send issue to the end of each recv that was reached no later
 * than its send was issued (it waited for the whole transfer); 0 without one. */
static double mean_transfer_ms(const struct bm_table *t, const struct bm_match *mt, const struct bm_timeline *tl)
{
    double sum = 0;
    long n = 0;
    for (int r = 0; r < t->pp && r < tl->pp; r++)
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            int32_t si = bm_match_peer(mt, r, k);
            if (op->kind != BM_OP_RECV || si < 0 || op->peer >= tl->pp) continue;
            const struct bm_op_time *rt = &tl->ranks[r].ops[k], *st = &tl->ranks[op->peer].ops[si];
            if (rt->start_ms > st->start_ms) continue;
            sum += rt->end_ms - st->start_ms, n++;
        }
    return n ? sum / n : 0;
}

int bm_calibrate_dispatch(const struct bm_table *t, const struct bm_timeline *const *tls, int n_runs,
                          struct bm_dispatch_fit *out, struct bm_err *err)
{
    *out = (struct bm_dispatch_fit){0, 0, 0, 0};
    struct bm_match mt;
    memset(&mt, 0, sizeof mt);
    if (bm_match_build(t, &mt, err)) return BM_ERR;
    double gs, gq, rs = 0, ls = 0;
    long gn = gap_moments(t, tls, n_runs, 0, &gs, &gq), rn = 0, ln = 0;
    if (gn) gap_moments(t, tls, n_runs, gs / gn, &gs, &gq); /* two passes: no cancellation */
    for (int i = 0; i < n_runs; i++) {
        const struct bm_timeline *tl = tls[i];
        double xfer = mean_transfer_ms(t, &mt, tl);
        for (int r = 0; r < t->pp && r < tl->pp; r++) {
            const struct bm_rank_timeline *rt = &tl->ranks[r];
            int n = rt->n_ops < t->ranks[r].n_ops ? rt->n_ops : t->ranks[r].n_ops;
            if (n > 0) ls += rt->ops[0].start_ms, ln++;
            for (int k = 0; k < n; k++) {
                const struct bm_op *op = &t->ranks[r].ops[k];
                int32_t si = bm_match_peer(&mt, r, k);
                if (op->kind != BM_OP_RECV || si < 0 || op->peer >= tl->pp) continue;
                if (tl->ranks[op->peer].ops[si].start_ms + xfer > rt->ops[k].start_ms) continue; /* in flight */
                rs += rt->ops[k].end_ms - rt->ops[k].start_ms, rn++;
            }
        }
    }
    bm_match_free(&mt);
    if (gn) {
        out->op_ms = gs / gn;
        out->op_sd_ms = sqrt(gq / gn);
    }
    if (rn) out->recv_ms = rs / rn;
    if (ln && ls / ln > out->op_ms) out->lead_ms = ls / ln - out->op_ms;
    return BM_OK;
}

void bm_calibrate_spread(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                         const struct bm_cost *costs, const double *rank_scale, const double *mb_scale, double *out)
{
    int nm = t->n_modules, P = t->pp, C = P * (t->vpp > 0 ? t->vpp : 1), M = t->microbatches;
    size_t ns = (size_t)(nm + C) * 2 * (size_t)P * (size_t)(n_runs > 0 ? n_runs : 1);
    double *sum = bm_calloc(ns, sizeof *sum), *sq = bm_calloc(ns, sizeof *sq);
    int *cnt = bm_calloc(ns, sizeof *cnt);
    double *msq = bm_calloc((size_t)(nm > 0 ? nm : 1), sizeof *msq);
    long *mn = bm_calloc((size_t)(nm > 0 ? nm : 1), sizeof *mn);
    char *split = bm_calloc((size_t)(nm > 0 ? nm : 1), 1); /* which modules' backward the table splits */
    for (int m = 0; m < nm; m++) out[m] = 0;
    if (!sum || !sq || !cnt || !msq || !mn || !split) goto done;
    bm_table_split_flags(t, split);
    for (int r = 0; r < P; r++)
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= nm || op->pass == BM_PASS_W) continue;
            const struct bm_cost *c = &costs[op->module];
            double d = model_ms(t, c, op, split);
            int bb = op->module == t->backbone_module && op->chunk >= 0 && op->chunk < C;
            if (bb) d *= bm_cost_chunk_weight(t, km, op->chunk);
            if (mb_scale && t->modules[op->module].role == BM_ROLE_ENCODER && op->mb >= 0 && op->mb < M)
                d *= mb_scale[op->mb];
            if (rank_scale) d *= rank_scale[r];
            if (!(d > 0)) continue;
            size_t sl0 = (((size_t)(bb ? nm + op->chunk : op->module) * 2 + (op->pass == BM_PASS_F ? 0 : 1)) * (size_t)P +
                          (size_t)r) * (size_t)n_runs;
            for (int i = 0; i < n_runs; i++) {
                double x = tls[i]->ranks[r].ops[k].end_ms - tls[i]->ranks[r].ops[k].start_ms;
                if (!(x > 0)) continue;
                double l = log(x / d);
                size_t sl = sl0 + (size_t)i;
                sum[sl] += l, sq[sl] += l * l, cnt[sl]++;
            }
        }
    /* pooled within-slot variance per module: each slot centred on its own mean */
    for (size_t sl = 0; sl < ns; sl++) {
        if (cnt[sl] < 2) continue;
        int idx = (int)(sl / ((size_t)2 * (size_t)P * (size_t)n_runs));
        int m = idx < nm ? idx : t->backbone_module;
        double mean = sum[sl] / cnt[sl];
        msq[m] += sq[sl] - cnt[sl] * mean * mean;
        mn[m] += cnt[sl];
    }
    for (int m = 0; m < nm; m++)
        if (mn[m] > 1 && msq[m] > 0) out[m] = sqrt(msq[m] / mn[m]);
done:
    bm_free(sum), bm_free(sq), bm_free(cnt), bm_free(msq), bm_free(mn), bm_free(split);
}

/* ---------------------------------------------------------------- the median over runs */

/* Median of v[0..n-1] (reordered). */
static double median_of(double *v, int n)
{
    return stat(v, n, 0);
}

int bm_calibrate_median_runs(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs, int mean,
                             struct bm_cost *costs, double *mb_scale, double *rank_scale, double *spread,
                             struct bm_dispatch_fit *dispatch, struct bm_err *err)
{
    if (n_runs < 1) return bm_err_set(err, "no timeline to calibrate from");
    int nm = t->n_modules, M = t->microbatches > 0 ? t->microbatches : 1, P = t->pp;
    /* per run: 5 cost fields per module, M microbatch scales, P rank scales, nm spreads, 4 dispatch */
    int per = 5 * nm + M + P + nm + 4;
    double *v = bm_malloc((size_t)per * (size_t)n_runs * sizeof *v), *col = bm_malloc((size_t)n_runs * sizeof *col);
    struct bm_cost *c = bm_calloc((size_t)(nm > 0 ? nm : 1), sizeof *c);
    double *rs = bm_malloc((size_t)P * sizeof *rs), *ms = bm_malloc((size_t)M * sizeof *ms);
    double *sp = bm_malloc((size_t)(nm > 0 ? nm : 1) * sizeof *sp);
    int rc = BM_OK;
    if (!v || !col || !c || !rs || !ms || !sp) {
        rc = bm_err_set(err, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_runs; i++) {
        const struct bm_timeline *one[1] = {tls[i]};
        if ((rc = bm_calibrate_runs(t, km, one, 1, mean, c, err))) goto done;
        bm_calibrate_scales(t, km, one, 1, c, rank_scale ? rs : NULL, ms);
        if (!rank_scale)
            for (int r = 0; r < P; r++) rs[r] = 1;
        if (spread) bm_calibrate_spread(t, km, one, 1, c, rank_scale ? rs : NULL, ms, sp);
        double *q = v + (size_t)i * (size_t)per;
        for (int m = 0; m < nm; m++) {
            q[5 * m] = c[m].fwd_ms, q[5 * m + 1] = c[m].bwd_ms, q[5 * m + 2] = c[m].w_ms, q[5 * m + 3] = c[m].act_mib;
            q[5 * m + 4] = c[m].out_mib;
            q[5 * nm + M + P + m] = spread ? sp[m] : 0;
        }
        for (int m = 0; m < M; m++) q[5 * nm + m] = ms[m];
        for (int r = 0; r < P; r++) q[5 * nm + M + r] = rs[r];
        struct bm_dispatch_fit d;
        if ((rc = bm_calibrate_dispatch(t, one, 1, &d, err))) goto done;
        q[per - 4] = d.op_ms, q[per - 3] = d.op_sd_ms, q[per - 2] = d.recv_ms, q[per - 1] = d.lead_ms;
    }
    double *med = bm_malloc((size_t)per * sizeof *med);
    if (!med) {
        rc = bm_err_set(err, "out of memory");
        goto done;
    }
    for (int j = 0; j < per; j++) {
        for (int i = 0; i < n_runs; i++) col[i] = v[(size_t)i * (size_t)per + (size_t)j];
        med[j] = median_of(col, n_runs);
    }
    for (int m = 0; m < nm; m++) {
        costs[m] = c[m]; /* state_mib: the table's, as in every run */
        costs[m].fwd_ms = med[5 * m], costs[m].bwd_ms = med[5 * m + 1];
        costs[m].w_ms = med[5 * m + 2], costs[m].act_mib = med[5 * m + 3], costs[m].out_mib = med[5 * m + 4];
        if (spread) spread[m] = med[5 * nm + M + P + m];
    }
    for (int m = 0; m < t->microbatches; m++) mb_scale[m] = med[5 * nm + m];
    if (rank_scale)
        for (int r = 0; r < P; r++) rank_scale[r] = med[5 * nm + M + r];
    *dispatch = (struct bm_dispatch_fit){med[per - 4], med[per - 3], med[per - 2], med[per - 1]};
    bm_free(med);
done:
    bm_free(v), bm_free(col), bm_free(c), bm_free(rs), bm_free(ms), bm_free(sp);
    return rc;
}

/* ---------------------------------------------------------------- link latency */

long bm_calibrate_link_latency_ms(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                                  double *latency_ms)
{
    int P = t->pp;
    struct bm_match mt;
    memset(&mt, 0, sizeof mt);
    double *sum = bm_calloc((size_t)P * (size_t)P, sizeof *sum);
    long *cnt = bm_calloc((size_t)P * (size_t)P, sizeof *cnt), used = 0;
    if (!sum || !cnt || bm_match_build(t, &mt, NULL)) goto done;
    for (int to = 0; to < P; to++)
        for (int k = 0; k < t->ranks[to].n_ops; k++) {
            const struct bm_op *op = &t->ranks[to].ops[k];
            int32_t si = bm_match_peer(&mt, to, k);
            int from = op->peer;
            if (op->kind != BM_OP_RECV || si < 0 || bm_cost_crosses_hosts(t, from, to)) continue;
            for (int u = 0; u < n_runs; u++) {
                const struct bm_op_time *s_t = &tls[u]->ranks[from].ops[si];
                const struct bm_op_time *r_t = &tls[u]->ranks[to].ops[k];
                if (r_t->start_ms > s_t->start_ms) continue; /* the data may have been there already */
                /* the message's measured size when the trace has it, else the tensor's */
                double bytes = r_t->msg_bytes > 0 ? r_t->msg_bytes : bm_costs_tensor_mib(km, t, op->tensor) * 1048576.0, bytes_ms = 0;
                if (km->device.link_gbytes_per_s > 0) bytes_ms = bytes / (km->device.link_gbytes_per_s * 1e9) * 1000.0;
                sum[from * P + to] += r_t->end_ms - s_t->start_ms - bytes_ms;
                cnt[from * P + to]++;
                used++;
            }
        }
    if (!used) goto done;
    double total = 0;
    int pairs = 0;
    for (int a = 0; a < P; a++)
        for (int b = a + 1; b < P; b++) {
            long na = cnt[a * P + b], nb = cnt[b * P + a];
            if (!na && !nb) continue;
            double ma = na ? sum[a * P + b] / na : 0, mb = nb ? sum[b * P + a] / nb : 0;
            total += na && nb ? 0.5 * (ma + mb) : na ? ma : mb;
            pairs++;
        }
    *latency_ms = total / pairs;
done:
    bm_match_free(&mt);
    bm_free(sum), bm_free(cnt);
    return used;
}

int bm_calibrate_median_link_latency_ms(const struct bm_table *t, const struct bm_costs *km, const struct bm_timeline *const *tls, int n_runs,
                                        double *latency_ms)
{
    double *v = bm_malloc((size_t)(n_runs > 0 ? n_runs : 1) * sizeof *v);
    int n = 0;
    if (!v) return 0;
    for (int i = 0; i < n_runs; i++) {
        const struct bm_timeline *one[1] = {tls[i]};
        if (bm_calibrate_link_latency_ms(t, km, one, 1, &v[n])) n++;
    }
    if (n) *latency_ms = median_of(v, n);
    bm_free(v);
    return n;
}
