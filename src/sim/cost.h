/* cost.h — the cost and memory model over an operator table (docs/design.md §8), shared by the
 * simulator and the planner's nominal timeline. Pure functions of the table t (the schedule) and
 * its cost model c (struct bm_costs, include/bigmac_cost.h; "c->" below): no state, no
 * allocation except bm_cost_state_mib's caller-provided output.
 *
 * Units: milliseconds, MiB (2^20 bytes), link bandwidth in GB/s (10^9 bytes per second,
 * converted exactly), latency in microseconds.
 *
 * Compute durations (per op, before the simulator's optional jitter):
 *   backbone F/B   module fwd_ms / bwd_ms x chunk_weights[chunk]
 *   encoder  F/B   fwd_ms / bwd_ms x mb_scale[mb]
 *   generator F/B  fwd_ms / bwd_ms
 *   W (split backward)  when a module's backward is split in the table (B and W ops both
 *                  present), its W takes w_ms (bm_cost_w_ms) and its B bwd_ms - w_ms (times the
 *                  same factors); an unsplit backward takes bwd_ms.
 *   every op on rank r  x rank_time_scale[r] (bm_cost_rank_scale; measured ranks that run
 *                  slower or faster than the module costs say, e.g. from `bigmac calibrate`)
 * A NULL chunk_weights means uniform 1/(P*V); a NULL mb_scale or rank_time_scale means 1.
 *
 * Dispatch: every op (compute, send, recv) of a rank occupies it c->op_overhead_ms before it
 *   starts (the executor's per-op bookkeeping; spec device.op_overhead_us; 0 = none). The
 *   expected makespan (sim/expect.h) draws each op's dispatch from a gamma distribution of that
 *   mean and standard deviation c->op_overhead_sd_ms instead (device.op_overhead_sd_us).
 * Step lead: each rank's first op is dispatched c->step_lead_ms after the step's start (the
 *   executor's start broadcast and step setup; device.step_lead_us; 0 = none).
 * Recv: a recv ends when its data has arrived, and no earlier than c->recv_overhead_ms after
 *   it starts (completing an arrived message; device.recv_overhead_us; 0 = none).
 * Comm: a send takes no rank time; the data arrives
 *   link_latency_us / 1000 + mib * 2^20 / (link_gbytes_per_s * 1e9) * 1000  ms
 * after the send is issued. link_gbytes_per_s <= 0 means unlimited bandwidth. Links are
 * contention-free (each transfer gets the whole link).
 *
 * Memory:
 *   resident state per rank: backbone state_mib x (sum of chunk_weights of the rank's chunks,
 *     global chunk c lives on rank c % P) + the full state_mib of every other module with at
 *     least one compute op on that rank (a replica);
 *   activations: a forward allocates the op's act_mib when it starts (conservative: the peak
 *     is reached during F) and its B frees it when B ends. A split backward frees it in two
 *     steps: B's end frees all but act_w_mib (bm_cost_act_w_mib: the linear layers' inputs and
 *     output gradients that W still needs), W's end frees the rest.
 *     Backbone act_mib x chunk weight per chunk; encoder/generator act_mib per microbatch
 *     (not scaled by mb_scale: memory is sized for the nominal microbatch).
 *     When the cost model carries measured act_bytes (the executor's ctx_bytes per module, chunk and
 *     microbatch), those bytes are used instead, exactly; likewise act_w_bytes (the executor's
 *     wctx_bytes) for what a split B keeps until W (more than the forward's bytes is allowed:
 *     B then adds memory).
 *
 * Frozen modules ("trainable": false; docs/spec.md "Frozen modules"):
 *   state:  weights only: param_mib (cost.param_mib, default state_mib / 4: the weights part of
 *           the step's state parts, sim/step.h; no gradient, no optimizer state),
 *           bm_cost_module_state_mib;
 *   backward NONE (nothing upstream trains): no B, no W; its F keeps no activation (act 0,
 *           no recomputation input either);
 *   backward INPUT (a trainable module upstream): one B of bwd_ms - w_ms (the input gradient,
 *           with the documented w_ms defaults; + fwd_ms when recomputed), no W, whatever the
 *           schedule; its F keeps act_mib as any F, freed when that B ends.
 *
 * Recomputation (module "recompute": "full", Megatron's full activation recomputation): the
 *   forward keeps only the module's input, the backward first reruns the forward.
 *   time:   B costs bwd_ms + fwd_ms (split backward: B = bwd_ms - w_ms + fwd_ms, W = w_ms),
 *           times the same chunk weight / mb_scale / rank scale; F is unchanged.
 *   memory: F holds act_mib while it runs (start .. end), then only the input I from F's end to
 *           B's start; B holds act_mib again (the rebuilt activations) from its start to its end
 *           (split backward: from B's end act_w_mib until W's end, as without recomputation).
 *           I = bm_cost_input_mib: backbone chunk c > 0 the
 *           backbone's out_mib (the previous chunk's output, not scaled by the chunk weight);
 *           chunk 0 and every other module the sum of the out_mib of the modules producing what
 *           it consumes (spec inputs are data: 0); measured in_bytes when the cost model has them. */
#ifndef BM_SIM_COST_H
#define BM_SIM_COST_H

#include "bigmac.h"
#include "bigmac_cost.h"
#include "spec/split.h" /* bm_cost_w_ms, bm_cost_act_w_frac */

/* Share of the backbone in global chunk c (uniform when c->chunk_weights is NULL). */
double bm_cost_chunk_weight(const struct bm_table *t, const struct bm_costs *c, int chunk);
/* Encoder cost multiplier of microbatch mb (1 when c->mb_scale is NULL or mb out of range). */
double bm_cost_mb_scale(const struct bm_table *t, const struct bm_costs *c, int mb);
/* Compute-time multiplier of rank r (1 when c->rank_time_scale is NULL). */
double bm_cost_rank_scale(const struct bm_table *t, const struct bm_costs *c, int rank);
/* Duration (ms) of compute op 'op' on a rank with scale 1 (multiply by bm_cost_rank_scale), without jitter. split = 1 when op's module has its
 * backward split into B and W in this table (see above); the planner passes 0. */
/* state_mib of module on a rank hosting it: the whole of it, or a frozen module's weights
 * (param_mib, the step's weights part: sim/step.h). */
double bm_cost_module_state_mib(const struct bm_table *t, const struct bm_costs *c, int module);
double bm_cost_compute_ms(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op, int split);
/* Activation MiB that compute op 'op' (its F) keeps alive from its B until its W. */
double bm_cost_act_w_mib(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op);
/* Transfer time (ms) of one microbatch of tensor i from issue to arrival. */
double bm_cost_comm_ms(const struct bm_table *t, const struct bm_costs *c, int tensor);
/* Activation MiB that compute op 'op' (its F) keeps alive until its B (or W). */
double bm_cost_act_mib(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op);
/* 1 when 'module' is recomputed in t (table module "recompute": "full"). */
int bm_cost_recompute(const struct bm_table *t, int module);
/* MiB a recomputed forward keeps between its F and its B: its input (see above). */
double bm_cost_input_mib(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op);
/* Resident state per rank into out[0 .. pp-1]. */
void bm_cost_state_mib(const struct bm_table *t, const struct bm_costs *c, double *out);
/* Memory cap (MiB) of one device: memory_gib * 1024; 0 = none. */
double bm_cost_memory_cap_mib(const struct bm_costs *c);

#endif
