/* vs.c — a measured run against the model: the same table simulated with the costs calibrated
 * from the run's own trace (src/sim/calibrate.h: medians, rank and microbatch scales, per-op
 * dispatch), for `bigmac render TRACE --table TABLE`. */
#include <string.h>

#include "sim/calibrate.h"
#include "report/report.h"
#include "util/util.h"

int bm_report_vs_simulate(const struct bm_table *mt, const struct bm_timeline *measured, struct bm_table *table,
                          struct bm_timeline **out, struct bm_err *err)
{
    *out = NULL;
    if (!bm_calibrate_same_table(mt, table))
        return bm_err_set(err, "the table is not the plan the trace ran (ranks, chunks, microbatches, modules or op "
                               "order differ)\nhint: pass the table the run was started with (`bigmac plan ... -o`)");
    int nm = mt->n_modules, P = mt->pp, M = mt->microbatches;
    struct bm_cost *costs = bm_calloc((size_t)nm, sizeof *costs);
    double *rs = bm_malloc((size_t)P * sizeof *rs), *ms = bm_malloc((size_t)(M > 0 ? M : 1) * sizeof *ms);
    int rc = BM_ERR;
    if (!costs || !rs || !ms) {
        bm_err_set(err, "out of memory");
        goto done;
    }
    const struct bm_timeline *runs[1] = {measured};
    if (bm_calibrate_runs(mt, runs, 1, 0, costs, err)) goto done;
    bm_calibrate_scales(mt, runs, 1, costs, rs, ms);
    for (int m = 0; m < nm; m++) table->modules[m].cost = costs[m];
    struct bm_dispatch_fit d;
    if (bm_calibrate_dispatch(mt, runs, 1, &d, err)) goto done;
    table->op_overhead_ms = d.op_ms, table->recv_overhead_ms = d.recv_ms, table->step_lead_ms = d.lead_ms;
    bm_free(table->rank_time_scale);
    table->rank_time_scale = rs;
    rs = NULL;
    bm_free(table->mb_scale);
    table->mb_scale = ms;
    ms = NULL;
    rc = bm_simulate(table, NULL, out, err);
done:
    bm_free(costs), bm_free(rs), bm_free(ms);
    return rc;
}
