/* bigmac_cost.h — the cost model of an operator table: what each op costs and holds, apart from
 * the schedule (struct bm_table, bigmac.h) that says which ops run where and in which order.
 *
 * A table says what runs; a struct bm_costs says how long it takes and how much memory it holds:
 * module costs and their spreads, the backbone's chunk weights, the encoders' per-microbatch
 * scales, per-rank time scales, the device, the executor's per-op overheads, and, optionally,
 * the activation bytes an executor measured. The simulator, the planner's own costing, the lower
 * bound, the whole-step model, the renderers of time and memory and `bigmac calibrate` take a cost
 * model beside the table; the verifier and the executors never read one (src/check/ and src/exec/
 * do not include this header).
 *
 * Where a cost model comes from:
 *   bm_plan_build / bm_plan_build_search   the spec's costs of the plan (beside the table)
 *   bm_costs_from_spec                      a spec's costs for any table of its modules
 *   bm_table_load / bm_table_parse          the costs a table file carries (the file format keeps
 *                                           them: docs/table.md)
 *   bm_trace_load / bm_trace_parse          the costs of the table a trace embeds
 *   `bigmac calibrate`                      costs measured from traces (written as a spec)
 *
 * Every array is indexed like the table it goes with: modules (and spread) by table module,
 * chunk_weights by global backbone chunk (pp * vpp), mb_scale by microbatch, rank_time_scale by
 * pipeline rank, the measured bytes by (module * pp*vpp + chunk) * microbatches + mb (chunk 0
 * for modules other than the backbone). A tensor's bytes per microbatch are its producing
 * module's out_mib (bm_costs_tensor_mib). The rules that turn these into op durations and memory
 * are in docs/simulator.md and src/sim/cost.h. */
#ifndef BIGMAC_COST_H
#define BIGMAC_COST_H

#include "bigmac.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bm_costs {
    int n_modules;              /* entries of modules[] and spread[] (the table's n_modules) */
    struct bm_cost *modules;    /* [n_modules] per-microbatch costs of each table module */
    double *spread;             /* [n_modules] sigma of log op time around the cost (JSON
                                 * cost.spread; bm_simulate_expected); 0 = none */
    double *chunk_weights;      /* [pp*vpp] share of backbone cost per global chunk (sums to 1);
                                 * NULL = uniform */
    double *mb_scale;           /* [microbatches] encoder cost multiplier per microbatch; NULL = 1 */
    double *rank_time_scale;    /* [pp] compute-time multiplier per rank; NULL = 1 on every rank */
    /* The device: memory, compute and links. Its ranks_per_host is not read from here: where
     * ranks run is the table's (struct bm_table ranks_per_host), a fact the executor needs too. */
    struct bm_device device;
    /* per-op dispatch time (ms) every op occupies its rank with before it starts (spec
     * device.op_overhead_us; JSON "op_overhead_us"); its standard deviation (op_overhead_sd_us),
     * the time a recv of an arrived message takes (recv_overhead_us) and the time before each
     * rank's first op (step_lead_us). 0 = none (src/sim/cost.h) */
    double op_overhead_ms, op_overhead_sd_ms, recv_overhead_ms, step_lead_ms;
    /* Optional measured bytes (an executor's, bm_exec_op_bytes): each forward's activation
     * (act_bytes), what a recomputed forward keeps (in_bytes: its input) and what a split
     * backward keeps from B to W (act_w_bytes), laid out [(module * pp*vpp + chunk) * M + mb];
     * NULL = the modules' act_mib / modelled input / act_w_mib. Not part of the JSON table. */
    double *act_bytes, *in_bytes, *act_w_bytes;
};

/* A cost model for t: modules[] and spread[] sized to t's modules (zeroed), every other array
 * NULL, the device and overheads 0. NULL on allocation failure. Release with bm_costs_free
 * (declared in bigmac.h), which frees every array it holds. */
BM_API struct bm_costs *bm_costs_new(const struct bm_table *t);
/* A deep copy of c (every array; t gives their lengths). NULL on allocation failure. */
BM_API struct bm_costs *bm_costs_copy(const struct bm_costs *c, const struct bm_table *t);
/* Spec s's costs for table t, as planning s would set them: each table module's cost and spread
 * from s's module of the same name (and role), s's encoder scales, device, rank time scales and
 * per-op overheads, and the backbone's chunk weights from t's chunk_layers (layers per chunk;
 * uniform when t has none). table_path names t in messages (NULL: "table"). BM_ERR when a module
 * is missing or has another role in s, or device.rank_time_scale does not have t->pp entries. */
BM_API int bm_costs_from_spec(const struct bm_spec *s, const struct bm_table *t, const char *table_path,
                              struct bm_costs **out, struct bm_err *err);
/* Bytes (MiB) of one microbatch of tensor i of t: its producing module's out_mib. */
BM_API double bm_costs_tensor_mib(const struct bm_costs *c, const struct bm_table *t, int tensor);

#ifdef __cplusplus
}
#endif
#endif
