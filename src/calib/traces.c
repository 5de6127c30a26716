/* traces.c — traces -> calibrated figures and cost model (calib.h): load, check that every trace
 * is a measured run of the first one's plan, then the estimators of fit.c in the
 * order each needs the last: costs (pooled over the runs), the microbatch encoder scales and the
 * rank scale (fitted together when both are wanted), the spread around all of that, the per-op
 * dispatch time; with run_median all of these again per trace and the median over the traces;
 * then the link latency the transfers imply; last the cost model those figures make for the
 * plan. */
#include <string.h>

#include "bigmac_report.h"
#include "calib/calib.h"
#include "report/report.h"
#include "util/util.h"

/* Trace i's table, cost model and the timeline the fits take: of a data-parallel run's trace
 * (bm_render_trace_dp, every replica's ranks) the replica o->replica, or with o->replica < 0
 * the replica whose walk (makespan) was longest: a data-parallel step ends with its slowest
 * replica (every gradient collective waits for it), and the simulator models every replica
 * alike, so the costs that predict the step are the slowest replica's (docs/simulator.md
 * "Predicting a run"). c->replica[i]: the replica taken. */
static int load_trace(const char *path, int i, const struct bm_calibration_opts *o, struct bm_calibration *c,
                      struct bm_err *err)
{
    size_t len;
    char *text = bm_read_file_max(path, (size_t)BM_MAX_TRACE_TEXT, &len, err);
    if (!text) return BM_ERR;
    int rc = strlen(text) != len ? bm_err_set(err, "%s: not a text file", path)
                                 : bm_trace_parse(text, path, &c->t[i], &c->k[i], &c->tl[i], err);
    int D = rc == BM_OK && c->t[i]->dp > 1 ? c->t[i]->dp : 1;
    c->replica[i] = 0;
    if (rc == BM_OK && o->replica >= D)
        rc = bm_err_set(err, "%s: --replica %d: the run had %d data-parallel replica%s (0..%d)", path, o->replica, D,
                        D > 1 ? "s" : "", D - 1);
    for (int d = 1; rc == BM_OK && d < D && o->replica != 0; d++) {
        if (o->replica > 0 && d != o->replica) continue;
        struct bm_table *t;
        struct bm_timeline *tl;
        if ((rc = bm_trace_parse_replica(text, path, d, &t, NULL, &tl, err))) break;
        bm_table_free(t);
        if (!tl) { /* a trace of replica 0 alone */
            if (o->replica > 0) rc = bm_err_set(err, "%s: --replica %d: the trace holds replica 0 only", path, d);
            continue;
        }
        if (o->replica > 0 || tl->makespan_ms > c->tl[i]->makespan_ms) {
            bm_timeline_free(c->tl[i]);
            c->tl[i] = tl;
            c->replica[i] = d;
        } else {
            bm_timeline_free(tl);
        }
    }
    bm_free(text);
    return rc;
}

static int load_traces(const char *const *traces, int n, const struct bm_calibration_opts *o, struct bm_calibration *c,
                       struct bm_err *err)
{
    for (int i = 0; i < n; i++) {
        if (load_trace(traces[i], i, o, c, err)) return BM_ERR;
        if (!c->tl[i]->measured)
            return bm_err_set(err, "%s: a simulated trace; calibrate needs one measured by `bigmac train --trace`",
                              traces[i]);
        if (i == 0) { /* the plan that ran must be a valid one: its fits assume the transfers are there */
            struct bm_err v;
            if (bm_verify(c->t[0], &v))
                return bm_err_set(err, "%s: the trace's table: %s", traces[0], v.msg);
        }
        if (!bm_calibrate_same_table(c->t[0], c->t[i]))
            return bm_err_set(err, "%s: not a run of the same plan as %s (ranks, chunks, microbatches, modules or "
                                   "op order differ); pool only traces of one plan", traces[i], traces[0]);
    }
    return BM_OK;
}

/* --run-median: every number again, per trace, then the median over the traces (the microbatch
 * scales into c->mb_scale when they were measured, the rank scale and spread in place). */
static int median_runs(struct bm_calibration *c, int mean, struct bm_dispatch_fit *dispatch, struct bm_err *err)
{
    const struct bm_table *t = c->t[0];
    double *ms = bm_malloc((size_t)(t->microbatches > 0 ? t->microbatches : 1) * sizeof *ms);
    if (!ms) return bm_err_set(err, "out of memory");
    int rc = bm_calibrate_median_runs(t, c->k[0], (const struct bm_timeline *const *)c->tl, c->n, mean, c->costs, ms,
                                      c->rank_scale, c->spread, dispatch, err);
    if (rc == BM_OK && c->mb_scale) memcpy(c->mb_scale, ms, (size_t)t->microbatches * sizeof *ms);
    bm_free(ms);
    return rc;
}

/* The estimators over the loaded runs. */
static int estimate(struct bm_calibration *c, const struct bm_calibration_opts *o, struct bm_err *err)
{
    const struct bm_table *t = c->t[0];
    const struct bm_costs *k0 = c->k[0];
    const struct bm_timeline *const *tls = (const struct bm_timeline *const *)c->tl;
    int n = c->n, has_enc = 0;
    c->costs = bm_calloc((size_t)t->n_modules, sizeof *c->costs);
    c->names = bm_malloc((size_t)t->n_modules * sizeof *c->names);
    if (!c->costs || !c->names) return bm_err_set(err, "out of memory");
    for (int k = 0; k < t->n_modules; k++) c->names[k] = t->modules[k].name;
    if (bm_calibrate_runs(t, k0, tls, n, o->mean, c->costs, err)) return BM_ERR;
    if (o->rank_scale && !(c->rank_scale = bm_malloc((size_t)t->pp * sizeof *c->rank_scale)))
        return bm_err_set(err, "out of memory");
    for (int k = 0; k < t->n_modules; k++) has_enc |= t->modules[k].role == BM_ROLE_ENCODER;
    if (has_enc) {
        if (!(c->mb_scale = bm_malloc((size_t)t->microbatches * sizeof *c->mb_scale)))
            return bm_err_set(err, "out of memory");
        bm_calibrate_scales(t, k0, tls, n, c->costs, c->rank_scale, c->mb_scale);
    } else if (c->rank_scale) {
        bm_calibrate_rank_scale(t, k0, tls, n, c->costs, c->rank_scale);
    }
    if (o->spread && (c->spread = bm_malloc((size_t)t->n_modules * sizeof *c->spread)))
        bm_calibrate_spread(t, k0, tls, n, c->costs, c->rank_scale, c->mb_scale, c->spread);
    struct bm_dispatch_fit d;
    if (bm_calibrate_dispatch(t, tls, n, &d, err)) return BM_ERR;
    if (o->run_median && median_runs(c, o->mean, &d, err)) return BM_ERR;
    c->cal = (struct bm_spec_calibration){
        .n_modules = t->n_modules, .names = c->names, .costs = c->costs, .spread = c->spread,
        .rank_scale = c->rank_scale, .pp = t->pp, .mb_scale = c->mb_scale, .microbatches = t->microbatches,
        .op_overhead_us = d.op_ms * 1000.0, .op_overhead_sd_us = d.op_sd_ms * 1000.0,
        .recv_overhead_us = d.recv_ms * 1000.0, .step_lead_us = d.lead_ms * 1000.0};
    /* the link latency the transfers imply (device.link_latency_us), when some recv waited */
    double lat_ms = 0;
    c->cal.have_link_latency = (o->run_median ? bm_calibrate_median_link_latency_ms(t, k0, tls, n, &lat_ms)
                                              : bm_calibrate_link_latency_ms(t, k0, tls, n, &lat_ms)) > 0;
    if (c->cal.have_link_latency && lat_ms < 0) {
        c->link_latency_short_us = -lat_ms * 1e3;
        lat_ms = 0;
    }
    c->cal.link_latency_us = lat_ms * 1e3;
    return BM_OK;
}

/* The cost model of the traced plan with the calibrated figures in place (what simulating the
 * calibrated spec's plan of this shape uses): the trace's own cost model (chunk weights, the
 * device) with the measured module costs, spread, microbatch and rank scales, dispatch times
 * and link latency. */
static int make_model(struct bm_calibration *c, struct bm_err *err)
{
    const struct bm_table *t = c->t[0];
    struct bm_costs *m = c->model = bm_costs_copy(c->k[0], t);
    if (!m) return bm_err_set(err, "out of memory");
    const struct bm_spec_calibration *f = &c->cal;
    for (int k = 0; k < t->n_modules && k < m->n_modules; k++) {
        m->modules[k] = f->costs[k];
        m->spread[k] = f->spread ? f->spread[k] : m->spread[k];
    }
    size_t M = (size_t)(t->microbatches > 0 ? t->microbatches : 1), P = (size_t)(t->pp > 0 ? t->pp : 1);
    bm_free(m->mb_scale);
    m->mb_scale = NULL;
    if (f->mb_scale) { /* the encoder scales measured; none: every microbatch at 1 */
        if (!(m->mb_scale = bm_malloc(M * sizeof *m->mb_scale))) return bm_err_set(err, "out of memory");
        memcpy(m->mb_scale, f->mb_scale, (size_t)t->microbatches * sizeof *m->mb_scale);
    }
    if (f->rank_scale) {
        bm_free(m->rank_time_scale);
        if (!(m->rank_time_scale = bm_malloc(P * sizeof *m->rank_time_scale))) return bm_err_set(err, "out of memory");
        memcpy(m->rank_time_scale, f->rank_scale, (size_t)t->pp * sizeof *m->rank_time_scale);
    }
    m->op_overhead_ms = f->op_overhead_us / 1000.0;
    m->op_overhead_sd_ms = f->spread ? f->op_overhead_sd_us / 1000.0 : 0; /* written with spread only */
    m->recv_overhead_ms = f->recv_overhead_us / 1000.0;
    m->step_lead_ms = f->step_lead_us / 1000.0;
    if (f->have_link_latency) m->device.link_latency_us = f->link_latency_us;
    return BM_OK;
}

int bm_calibration_build(const char *const *traces, int n, const struct bm_calibration_opts *o,
                         struct bm_calibration *out, struct bm_err *err)
{
    static const struct bm_calibration_opts defaults = {.replica = -1};
    memset(out, 0, sizeof *out);
    if (n < 1) return bm_err_set(err, "calibrate: no trace");
    out->t = bm_calloc((size_t)n, sizeof *out->t);
    out->k = bm_calloc((size_t)n, sizeof *out->k);
    out->tl = bm_calloc((size_t)n, sizeof *out->tl);
    out->replica = bm_calloc((size_t)n, sizeof *out->replica);
    out->n = n;
    if (!o) o = &defaults;
    int rc = !out->t || !out->k || !out->tl || !out->replica ? bm_err_set(err, "out of memory")
                                                             : load_traces(traces, n, o, out, err);
    if (rc == BM_OK) rc = estimate(out, o, err);
    if (rc == BM_OK) rc = make_model(out, err);
    if (rc) bm_calibration_free(out);
    return rc;
}

void bm_calibration_free(struct bm_calibration *c)
{
    for (int i = 0; i < c->n; i++) {
        if (c->tl) bm_timeline_free(c->tl[i]);
        if (c->t) bm_table_free(c->t[i]);
        if (c->k) bm_costs_free(c->k[i]);
    }
    bm_free(c->tl), bm_free(c->t), bm_free(c->k), bm_free(c->replica);
    bm_costs_free(c->model);
    bm_free(c->costs), bm_free(c->names), bm_free(c->rank_scale), bm_free(c->mb_scale), bm_free(c->spread);
    memset(c, 0, sizeof *c);
}
