/* cost.c — cost and memory model (see cost.h for the rules and units). */
#include "sim/cost.h"
#include "sim/step.h"
#include "util/util.h"

#include <string.h>

double bm_cost_chunk_weight(const struct bm_table *t, int chunk)
{
    int C = t->pp * (t->vpp > 0 ? t->vpp : 1);
    if (chunk < 0 || chunk >= C) return 0;
    if (!t->chunk_weights) return 1.0 / C;
    return t->chunk_weights[chunk];
}

double bm_cost_mb_scale(const struct bm_table *t, int mb)
{
    if (!t->mb_scale || mb < 0 || mb >= t->microbatches) return 1;
    return t->mb_scale[mb];
}

double bm_cost_compute_ms(const struct bm_table *t, const struct bm_op *op, int split)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    const struct bm_table_module *m = &t->modules[op->module];
    double d;
    /* frozen (docs/spec.md "Frozen modules"): no backward at all, or an input-gradient-only B */
    if (op->pass != BM_PASS_F && !bm_table_has_pass(t, op->module, op->pass)) return 0;
    if (op->pass == BM_PASS_F) d = m->cost.fwd_ms;
    else if (m->backward == BM_BACKWARD_INPUT) d = m->cost.bwd_ms - bm_cost_w_ms(&m->cost);
    else if (split) { /* B: the input-gradient part, W: the weight-gradient part */
        double w = bm_cost_w_ms(&m->cost);
        d = op->pass == BM_PASS_W ? w : m->cost.bwd_ms - w;
    } else d = op->pass == BM_PASS_W ? 0 : m->cost.bwd_ms;
    if (m->recompute && op->pass == BM_PASS_B) d += m->cost.fwd_ms; /* the rerun forward */
    if (op->module == t->backbone_module) return d * bm_cost_chunk_weight(t, op->chunk);
    if (m->role == BM_ROLE_ENCODER) return d * bm_cost_mb_scale(t, op->mb);
    return d;
}

double bm_cost_act_w_mib(const struct bm_table *t, const struct bm_op *op)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    if (t->act_w_bytes && op->mb >= 0 && op->mb < t->microbatches) { /* measured: exact */
        int C = t->pp * (t->vpp > 0 ? t->vpp : 1), c = op->chunk >= 0 && op->chunk < C ? op->chunk : 0;
        return t->act_w_bytes[((size_t)op->module * (size_t)C + (size_t)c) * (size_t)t->microbatches +
                              (size_t)op->mb] / 1048576.0;
    }
    return bm_cost_act_mib(t, op) * bm_cost_act_w_frac(&t->modules[op->module].cost);
}

double bm_cost_rank_scale(const struct bm_table *t, int rank)
{
    if (!t->rank_time_scale || rank < 0 || rank >= t->pp) return 1;
    return t->rank_time_scale[rank];
}

double bm_cost_comm_ms(const struct bm_table *t, int tensor)
{
    double ms = t->device.link_latency_us / 1000.0;
    if (tensor >= 0 && tensor < t->n_tensors && t->device.link_gbytes_per_s > 0)
        ms += t->tensors[tensor].mib * 1048576.0 / (t->device.link_gbytes_per_s * 1e9) * 1000.0;
    return ms;
}

double bm_cost_act_mib(const struct bm_table *t, const struct bm_op *op)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    if (t->modules[op->module].backward == BM_BACKWARD_NONE) return 0; /* frozen: nothing kept */
    if (t->act_bytes && op->mb >= 0 && op->mb < t->microbatches) {
        int C = t->pp * (t->vpp > 0 ? t->vpp : 1), c = op->chunk >= 0 && op->chunk < C ? op->chunk : 0;
        return t->act_bytes[((size_t)op->module * (size_t)C + (size_t)c) * (size_t)t->microbatches +
                            (size_t)op->mb] / 1048576.0;
    }
    double a = t->modules[op->module].cost.act_mib;
    if (op->module == t->backbone_module) return a * bm_cost_chunk_weight(t, op->chunk);
    return a;
}

double bm_cost_module_state_mib(const struct bm_table *t, int module)
{
    if (module < 0 || module >= t->n_modules) return 0;
    const struct bm_table_module *m = &t->modules[module];
    return m->frozen ? (m->cost.param_mib > 0 ? m->cost.param_mib : 0) : m->cost.state_mib;
}

void bm_cost_state_mib(const struct bm_table *t, double *out)
{
    if (t->zero && t->pp > 0) { /* ZeRO-1: the optimizer state sharded (sim/step.h) */
        struct bm_step_mem *parts = bm_malloc((size_t)t->pp * sizeof *parts);
        if (parts) {
            bm_step_state(t, parts);
            for (int r = 0; r < t->pp; r++) out[r] = parts[r].weights_mib + parts[r].grads_mib + parts[r].optim_mib;
            bm_free(parts);
            return;
        }
    }
    int P = t->pp, C = P * (t->vpp > 0 ? t->vpp : 1), bb = t->backbone_module;
    for (int r = 0; r < P; r++) {
        out[r] = 0;
        if (bb >= 0 && bb < t->n_modules)
            for (int c = r; c < C; c += P)
                out[r] += bm_cost_module_state_mib(t, bb) * bm_cost_chunk_weight(t, c);
        /* replicas: a module's state counts once on every rank that computes it */
        for (int m = 0; m < t->n_modules; m++) {
            if (m == bb) continue;
            const struct bm_rank_ops *ro = &t->ranks[r];
            for (int i = 0; i < ro->n_ops; i++)
                if (ro->ops[i].kind == BM_OP_COMPUTE && ro->ops[i].module == m) {
                    out[r] += bm_cost_module_state_mib(t, m);
                    break;
                }
        }
    }
}

double bm_cost_memory_cap_mib(const struct bm_table *t)
{
    return t->device.memory_gib > 0 ? t->device.memory_gib * 1024.0 : 0;
}

/* ---------------------------------------------------------------- recomputation */

int bm_cost_recompute(const struct bm_table *t, int module)
{
    return module >= 0 && module < t->n_modules && t->modules[module].recompute &&
           t->modules[module].backward != BM_BACKWARD_NONE; /* nothing to recompute for */
}

/* out_mib of the table module producing tensor 'name'; 0 for data (no producer). */
static double produced_mib(const struct bm_table *t, const char *name)
{
    for (int m = 0; m < t->n_modules; m++)
        for (int k = 0; k < t->modules[m].n_produces; k++)
            if (!strcmp(t->modules[m].produces[k], name)) return t->modules[m].cost.out_mib;
    return 0;
}

double bm_cost_input_mib(const struct bm_table *t, const struct bm_op *op)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    if (t->in_bytes && op->mb >= 0 && op->mb < t->microbatches) {
        int C = t->pp * (t->vpp > 0 ? t->vpp : 1), c = op->chunk >= 0 && op->chunk < C ? op->chunk : 0;
        return t->in_bytes[((size_t)op->module * (size_t)C + (size_t)c) * (size_t)t->microbatches +
                           (size_t)op->mb] / 1048576.0;
    }
    const struct bm_table_module *m = &t->modules[op->module];
    if (op->module == t->backbone_module && op->chunk > 0) return m->cost.out_mib; /* previous chunk's */
    double s = 0;
    for (int k = 0; k < m->n_consumes; k++) s += produced_mib(t, m->consumes[k]);
    return s;
}
