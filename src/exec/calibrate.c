/* calibrate.c — spec costs from a measured timeline (see calibrate.h). */
#include <math.h>
#include <string.h>

#include "exec/calibrate.h"
#include "util/util.h"

int bm_calibrate(const struct bm_table *t, const struct bm_timeline *tl, struct bm_cost *costs,
                 struct bm_err *err)
{
    int nm = t->n_modules, M = t->microbatches > 0 ? t->microbatches : 1;
    if (tl->pp != t->pp) return bm_err_set(err, "timeline has %d ranks, table %d", tl->pp, t->pp);
    double *sum = bm_calloc((size_t)nm * 2, sizeof *sum);
    int *cnt = bm_calloc((size_t)nm * 2, sizeof *cnt);
    if (!sum || !cnt) {
        bm_free(sum), bm_free(cnt);
        return bm_err_set(err, "out of memory");
    }
    double role_bytes[BM_N_ROLES] = {0};
    for (int r = 0; r < t->pp; r++) {
        for (int k = 0; k < t->ranks[r].n_ops; k++) {
            const struct bm_op *op = &t->ranks[r].ops[k];
            if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= nm || op->pass == BM_PASS_W) continue;
            const struct bm_op_time *ot = &tl->ranks[r].ops[k];
            int i = op->module * 2 + (op->pass == BM_PASS_F ? 0 : 1);
            sum[i] += ot->end_ms - ot->start_ms;
            cnt[i]++;
        }
        const struct bm_rank_timeline *rt = &tl->ranks[r];
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
    for (int m = 0; m < nm; m++) role_fwd[t->modules[m].role] += sum[m * 2];
    for (int m = 0; m < nm; m++) {
        costs[m] = t->modules[m].cost;
        if (!cnt[m * 2]) continue;
        int bb = m == t->backbone_module, role = t->modules[m].role;
        costs[m].fwd_ms = bb ? sum[m * 2] / M : sum[m * 2] / cnt[m * 2];
        if (cnt[m * 2 + 1]) costs[m].bwd_ms = bb ? sum[m * 2 + 1] / M : sum[m * 2 + 1] / cnt[m * 2 + 1];
        double share = role_fwd[role] > 0 ? sum[m * 2] / role_fwd[role] : 1;
        costs[m].act_mib = role_bytes[role] * share / M / 1048576.0;
    }
    bm_free(sum), bm_free(cnt);
    return BM_OK;
}
