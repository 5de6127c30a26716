/* hosts.c — placement of pipeline ranks over hosts and the inter-host link (see hosts.h). */
#include "sim/cost.h"
#include "sim/hosts.h"

int bm_cost_dp(const struct bm_table *t)
{
    return t->dp > 1 ? t->dp : 1;
}

/* Host of global rank g (0 on one host). */
static int global_host(const struct bm_table *t, long g)
{
    int h = t->ranks_per_host;
    return h > 0 && g > 0 ? (int)(g / h) : 0;
}

int bm_cost_host(const struct bm_table *t, int rank)
{
    return rank > 0 ? global_host(t, (long)rank * bm_cost_dp(t)) : 0;
}

int bm_cost_n_hosts(const struct bm_table *t)
{
    return t->pp > 0 ? global_host(t, (long)t->pp * bm_cost_dp(t) - 1) + 1 : 1;
}

int bm_cost_crosses_hosts(const struct bm_table *t, int a, int b)
{
    int H = t->ranks_per_host, D = bm_cost_dp(t);
    if (H <= 0 || a < 0 || b < 0) return 0;
    /* Pipeline ranks a and b of replica d are global ranks a*D + d and b*D + d. When H is a
     * multiple of D or D of H, every replica places them alike: replica 0 says it. Otherwise
     * the replicas may differ, and the link is the slowest any replica uses (every replica walks
     * this table, and the step's gradient sum waits for the last one). */
    int n = H % D == 0 || D % H == 0 ? 1 : D;
    for (int d = 0; d < n; d++)
        if (global_host(t, (long)a * D + d) != global_host(t, (long)b * D + d)) return 1;
    return 0;
}

double bm_cost_inter_host_ms(const struct bm_table *t, const struct bm_costs *c, int tensor)
{
    double ms = c->device.inter_host_latency_us / 1000.0;
    if (tensor >= 0 && tensor < t->n_tensors && c->device.inter_host_gbytes_per_s > 0)
        ms += bm_costs_tensor_mib(c, t, tensor) * 1048576.0 / (c->device.inter_host_gbytes_per_s * 1e9) * 1000.0;
    return ms;
}

double bm_cost_transfer_ms(const struct bm_table *t, const struct bm_costs *c, int tensor, int from, int to)
{
    return bm_cost_crosses_hosts(t, from, to) ? bm_cost_inter_host_ms(t, c, tensor) : bm_cost_comm_ms(t, c, tensor);
}

void bm_cost_host_traffic(const struct bm_table *t, const struct bm_costs *c, struct bm_host_traffic *out)
{
    *out = (struct bm_host_traffic){.hosts = bm_cost_n_hosts(t)};
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind != BM_OP_SEND) continue;
            out->sends++;
            if (!bm_cost_crosses_hosts(t, r, op->peer)) continue;
            out->cross++;
            if (op->tensor >= 0 && op->tensor < t->n_tensors) out->cross_mib += bm_costs_tensor_mib(c, t, op->tensor);
            out->cross_ms += bm_cost_inter_host_ms(t, c, op->tensor);
            out->cross_intra_ms += bm_cost_comm_ms(t, c, op->tensor);
        }
}
