/* vs.c — a measured run against the model: the same table simulated with the costs calibrated
 * from the run's own trace (src/calib/calib.h: medians, rank and microbatch scales, per-op
 * dispatch), for `bigmac render TRACE --table TABLE`. The calibrated figures make a cost model
 * of the table (its own chunk weights and device, the measured rest); the table is not touched. */
#include <string.h>

#include "calib/calib.h"
#include "report/report.h"
#include "util/util.h"

int bm_report_vs_simulate(const struct bm_table *mt, const struct bm_costs *mc, const struct bm_timeline *measured,
                          const struct bm_table *table, const struct bm_costs *tc, struct bm_costs **costs,
                          struct bm_timeline **out, struct bm_err *err)
{
    *out = NULL;
    *costs = NULL;
    if (!bm_calibrate_same_table(mt, table))
        return bm_err_set(err, "the table is not the plan the trace ran (ranks, chunks, microbatches, modules or op "
                               "order differ)\nhint: pass the table the run was started with (`bigmac plan ... -o`)");
    int P = mt->pp, M = mt->microbatches;
    struct bm_costs *k = bm_costs_copy(tc, table);
    double *rs = bm_malloc((size_t)P * sizeof *rs), *ms = bm_malloc((size_t)(M > 0 ? M : 1) * sizeof *ms);
    int rc = BM_ERR;
    if (!k || !rs || !ms) {
        bm_err_set(err, "out of memory");
        goto done;
    }
    const struct bm_timeline *runs[1] = {measured};
    if (bm_calibrate_runs(mt, mc, runs, 1, 0, k->modules, err)) goto done;
    bm_calibrate_scales(mt, mc, runs, 1, k->modules, rs, ms);
    struct bm_dispatch_fit d;
    if (bm_calibrate_dispatch(mt, runs, 1, &d, err)) goto done;
    k->op_overhead_ms = d.op_ms, k->recv_overhead_ms = d.recv_ms, k->step_lead_ms = d.lead_ms;
    bm_free(k->rank_time_scale);
    k->rank_time_scale = rs;
    rs = NULL;
    bm_free(k->mb_scale);
    k->mb_scale = ms;
    ms = NULL;
    rc = bm_simulate(table, k, NULL, out, err);
done:
    bm_free(rs), bm_free(ms);
    if (rc) bm_costs_free(k);
    else *costs = k;
    return rc;
}
