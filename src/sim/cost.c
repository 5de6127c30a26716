/* cost.c — cost and memory model (see cost.h for the rules and units). */
#include "sim/cost.h"
#include "sim/step.h"
#include "util/util.h"

#include <string.h>

double bm_cost_chunk_weight(const struct bm_table *t, const struct bm_costs *c, int chunk)
{
    int C = t->pp * (t->vpp > 0 ? t->vpp : 1);
    if (chunk < 0 || chunk >= C) return 0;
    if (!c->chunk_weights) return 1.0 / C;
    return c->chunk_weights[chunk];
}

double bm_cost_mb_scale(const struct bm_table *t, const struct bm_costs *c, int mb)
{
    if (!c->mb_scale || mb < 0 || mb >= t->microbatches) return 1;
    return c->mb_scale[mb];
}

double bm_cost_compute_ms(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op, int split)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    const struct bm_table_module *m = &t->modules[op->module];
    const struct bm_cost *k = &c->modules[op->module];
    double d;
    /* frozen (docs/spec.md "Frozen modules"): no backward at all, or an input-gradient-only B */
    if (op->pass != BM_PASS_F && !bm_table_has_pass(t, op->module, op->pass)) return 0;
    if (op->pass == BM_PASS_F) d = k->fwd_ms;
    else if (m->backward == BM_BACKWARD_INPUT) d = k->bwd_ms - bm_cost_w_ms(k);
    else if (split) { /* B: the input-gradient part, W: the weight-gradient part */
        double w = bm_cost_w_ms(k);
        d = op->pass == BM_PASS_W ? w : k->bwd_ms - w;
    } else d = op->pass == BM_PASS_W ? 0 : k->bwd_ms;
    if (m->recompute && op->pass == BM_PASS_B) d += k->fwd_ms; /* the rerun forward */
    if (op->module == t->backbone_module) return d * bm_cost_chunk_weight(t, c, op->chunk);
    if (m->role == BM_ROLE_ENCODER) return d * bm_cost_mb_scale(t, c, op->mb);
    return d;
}

double bm_cost_act_w_mib(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    if (c->act_w_bytes && op->mb >= 0 && op->mb < t->microbatches) { /* measured: exact */
        int C = t->pp * (t->vpp > 0 ? t->vpp : 1), ch = op->chunk >= 0 && op->chunk < C ? op->chunk : 0;
        return c->act_w_bytes[((size_t)op->module * (size_t)C + (size_t)ch) * (size_t)t->microbatches +
                              (size_t)op->mb] / 1048576.0;
    }
    return bm_cost_act_mib(t, c, op) * bm_cost_act_w_frac(&c->modules[op->module]);
}

double bm_cost_rank_scale(const struct bm_table *t, const struct bm_costs *c, int rank)
{
    if (!c->rank_time_scale || rank < 0 || rank >= t->pp) return 1;
    return c->rank_time_scale[rank];
}

double bm_cost_comm_ms(const struct bm_table *t, const struct bm_costs *c, int tensor)
{
    double ms = c->device.link_latency_us / 1000.0;
    if (tensor >= 0 && tensor < t->n_tensors && c->device.link_gbytes_per_s > 0)
        ms += bm_costs_tensor_mib(c, t, tensor) * 1048576.0 / (c->device.link_gbytes_per_s * 1e9) * 1000.0;
    return ms;
}

double bm_cost_act_mib(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    if (t->modules[op->module].backward == BM_BACKWARD_NONE) return 0; /* frozen: nothing kept */
    if (c->act_bytes && op->mb >= 0 && op->mb < t->microbatches) {
        int C = t->pp * (t->vpp > 0 ? t->vpp : 1), ch = op->chunk >= 0 && op->chunk < C ? op->chunk : 0;
        return c->act_bytes[((size_t)op->module * (size_t)C + (size_t)ch) * (size_t)t->microbatches +
                            (size_t)op->mb] / 1048576.0;
    }
    double a = c->modules[op->module].act_mib;
    if (op->module == t->backbone_module) return a * bm_cost_chunk_weight(t, c, op->chunk);
    return a;
}

double bm_cost_module_state_mib(const struct bm_table *t, const struct bm_costs *c, int module)
{
    if (module < 0 || module >= t->n_modules) return 0;
    const struct bm_cost *k = &c->modules[module];
    return t->modules[module].frozen ? (k->param_mib > 0 ? k->param_mib : 0) : k->state_mib;
}

void bm_cost_state_mib(const struct bm_table *t, const struct bm_costs *c, double *out)
{
    if (t->zero && t->pp > 0) { /* ZeRO-1: the optimizer state sharded (sim/step.h) */
        struct bm_step_mem *parts = bm_malloc((size_t)t->pp * sizeof *parts);
        if (parts) {
            bm_step_state(t, c, parts);
            for (int r = 0; r < t->pp; r++) out[r] = parts[r].weights_mib + parts[r].grads_mib + parts[r].optim_mib;
            bm_free(parts);
            return;
        }
    }
    int P = t->pp, C = P * (t->vpp > 0 ? t->vpp : 1), bb = t->backbone_module;
    for (int r = 0; r < P; r++) {
        out[r] = 0;
        if (bb >= 0 && bb < t->n_modules)
            for (int ch = r; ch < C; ch += P)
                out[r] += bm_cost_module_state_mib(t, c, bb) * bm_cost_chunk_weight(t, c, ch);
        /* replicas: a module's state counts once on every rank that computes it */
        for (int m = 0; m < t->n_modules; m++) {
            if (m == bb) continue;
            const struct bm_rank_ops *ro = &t->ranks[r];
            for (int i = 0; i < ro->n_ops; i++)
                if (ro->ops[i].kind == BM_OP_COMPUTE && ro->ops[i].module == m) {
                    out[r] += bm_cost_module_state_mib(t, c, m);
                    break;
                }
        }
    }
}

double bm_cost_memory_cap_mib(const struct bm_costs *c)
{
    return c->device.memory_gib > 0 ? c->device.memory_gib * 1024.0 : 0;
}

/* ---------------------------------------------------------------- recomputation */

int bm_cost_recompute(const struct bm_table *t, int module)
{
    return module >= 0 && module < t->n_modules && t->modules[module].recompute &&
           t->modules[module].backward != BM_BACKWARD_NONE; /* nothing to recompute for */
}

/* out_mib of the table module producing tensor 'name'; 0 for data (no producer). */
static double produced_mib(const struct bm_table *t, const struct bm_costs *c, const char *name)
{
    for (int m = 0; m < t->n_modules; m++)
        for (int k = 0; k < t->modules[m].n_produces; k++)
            if (!strcmp(t->modules[m].produces[k], name)) return c->modules[m].out_mib;
    return 0;
}

double bm_cost_input_mib(const struct bm_table *t, const struct bm_costs *c, const struct bm_op *op)
{
    if (op->module < 0 || op->module >= t->n_modules) return 0;
    if (c->in_bytes && op->mb >= 0 && op->mb < t->microbatches) {
        int C = t->pp * (t->vpp > 0 ? t->vpp : 1), ch = op->chunk >= 0 && op->chunk < C ? op->chunk : 0;
        return c->in_bytes[((size_t)op->module * (size_t)C + (size_t)ch) * (size_t)t->microbatches +
                           (size_t)op->mb] / 1048576.0;
    }
    const struct bm_table_module *m = &t->modules[op->module];
    if (op->module == t->backbone_module && op->chunk > 0) return c->modules[op->module].out_mib; /* previous chunk's */
    double s = 0;
    for (int k = 0; k < m->n_consumes; k++) s += produced_mib(t, c, m->consumes[k]);
    return s;
}
