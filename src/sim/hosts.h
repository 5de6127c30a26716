/* hosts.h — placement of pipeline ranks over hosts and the second link class of the cost model
 * (docs/multihost.md). Placement is the table's (t->ranks_per_host, t->dp); the links are the
 * cost model's (c->device), like cost.h.
 *
 * With ranks_per_host = H > 0 (the table's, from the spec's device.ranks_per_host), global rank g runs on host g / H (what
 * `mpirun --map-by slot` does with a hostfile of H slots per host). With D = table->dp
 * data-parallel replicas, pipeline rank p of replica d is global rank p * D + d (docs/design.md
 * §2), so pipeline rank p runs on host (p * D + d) / H; without dp, global rank = pipeline rank. A transfer between two ranks
 * on the same host costs bm_cost_comm_ms (device.link_*); one between hosts arrives
 *   inter_host_latency_us / 1000 + mib * 2^20 / (inter_host_gbytes_per_s * 1e9) * 1000  ms
 * after the send is issued (contention-free, as the intra-host link). H = 0: one host, every
 * transfer on the intra-host link, exactly as without this file. */
#ifndef BM_SIM_HOSTS_H
#define BM_SIM_HOSTS_H

#include "bigmac.h"
#include "bigmac_cost.h"

/* Data-parallel replicas of the table (t->dp, 1 when it records none). */
int bm_cost_dp(const struct bm_table *t);
/* Host of pipeline rank r in replica 0, global rank r * dp (0 when the table places every rank
 * on one host or r < 0). */
int bm_cost_host(const struct bm_table *t, int rank);
/* Hosts the job's pp * dp ranks span (1 without ranks_per_host). */
int bm_cost_n_hosts(const struct bm_table *t);
/* 1 when pipeline ranks a and b (both >= 0) run on different hosts in some replica (in every
 * replica alike when ranks_per_host is a multiple of dp or dp of ranks_per_host). */
int bm_cost_crosses_hosts(const struct bm_table *t, int a, int b);
/* Transfer time (ms) of one microbatch of tensor i between hosts (the inter-host link). */
double bm_cost_inter_host_ms(const struct bm_table *t, const struct bm_costs *c, int tensor);
/* Transfer time (ms) of one microbatch of tensor i sent by rank 'from' to rank 'to':
 * bm_cost_inter_host_ms when they are on different hosts, else bm_cost_comm_ms. */
double bm_cost_transfer_ms(const struct bm_table *t, const struct bm_costs *c, int tensor, int from, int to);

/* The table's sends, per link class: what a report says about a pipeline spanning hosts. */
struct bm_host_traffic {
    int hosts;                /* bm_cost_n_hosts */
    long sends, cross;        /* sends in the table; those between hosts */
    double cross_mib;         /* MiB sent between hosts per step */
    double cross_ms;          /* their transfer times summed (inter-host link) */
    double cross_intra_ms;    /* the same transfers on the intra-host link, summed */
};
void bm_cost_host_traffic(const struct bm_table *t, const struct bm_costs *c, struct bm_host_traffic *out);

#endif
