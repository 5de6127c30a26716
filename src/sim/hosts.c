/* hosts.c — placement of pipeline ranks over hosts and the inter-host link (see hosts.h). */
#include "sim/cost.h"
#include "sim/hosts.h"

int bm_cost_host(const struct bm_table *t, int rank)
{
    int h = t->device.ranks_per_host;
    return h > 0 && rank > 0 ? rank / h : 0;
}

int bm_cost_n_hosts(const struct bm_table *t)
{
    return t->pp > 0 ? bm_cost_host(t, t->pp - 1) + 1 : 1;
}

int bm_cost_crosses_hosts(const struct bm_table *t, int a, int b)
{
    return t->device.ranks_per_host > 0 && a >= 0 && b >= 0 && bm_cost_host(t, a) != bm_cost_host(t, b);
}

double bm_cost_inter_host_ms(const struct bm_table *t, int tensor)
{
    double ms = t->device.inter_host_latency_us / 1000.0;
    if (tensor >= 0 && tensor < t->n_tensors && t->device.inter_host_gbytes_per_s > 0)
        ms += t->tensors[tensor].mib * 1048576.0 / (t->device.inter_host_gbytes_per_s * 1e9) * 1000.0;
    return ms;
}

double bm_cost_transfer_ms(const struct bm_table *t, int tensor, int from, int to)
{
    return bm_cost_crosses_hosts(t, from, to) ? bm_cost_inter_host_ms(t, tensor) : bm_cost_comm_ms(t, tensor);
}

void bm_cost_host_traffic(const struct bm_table *t, struct bm_host_traffic *out)
{
    *out = (struct bm_host_traffic){.hosts = bm_cost_n_hosts(t)};
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind != BM_OP_SEND) continue;
            out->sends++;
            if (!bm_cost_crosses_hosts(t, r, op->peer)) continue;
            out->cross++;
            if (op->tensor >= 0 && op->tensor < t->n_tensors) out->cross_mib += t->tensors[op->tensor].mib;
            out->cross_ms += bm_cost_inter_host_ms(t, op->tensor);
            out->cross_intra_ms += bm_cost_comm_ms(t, op->tensor);
        }
}
