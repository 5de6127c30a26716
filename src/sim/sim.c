/* sim.c — discrete-event simulation of an operator table (docs/design.md §8).
 *
 * Every op's times are a function of its rank's previous op and, for a recv, of the matching
 * send: the table is a DAG (program order + send->recv edges) and the simulation is a longest
 * path over it. No event queue is needed: each rank runs forward until it reaches a recv whose
 * send has not been issued yet, then parks; issuing a send wakes the rank parked on it.
 * Every op is visited once, so the whole run is O(ops) (plus O(ops) hashing to match sends
 * to recvs up front). When no rank can move and some have ops left, the table deadlocks and
 * the error names each blocked rank's op and what it waits for.
 *
 * Every figure of the summary (makespan, busy and idle per rank, activation peaks, the step's
 * inputs) is gathered while the ranks run, in the order bm_timeline_summarize would compute it
 * from the finished timeline, so the two agree bit for bit. bm_simulate_summary keeps nothing
 * per op (no op times, no memory trace; a send's issue time only until its recv has run, in
 * one double per op): at P = 64, V = 4, M = 1024 (1.57 M ops) the timeline it does not keep is
 * 63 MB of op times and 17 MB of memory points.
 *
 * Cost and memory rules live in sim/cost.h. */
#include <stdio.h>
#include <string.h>

#include "sim/cost.h"
#include "sim/hosts.h"
#include "sim/expect.h"
#include "sim/step.h"
#include "table/table.h"
#include "util/util.h"

/* ---------------------------------------------------------------- timeline objects */

void bm_timeline_free(struct bm_timeline *tl)
{
    if (!tl) return;
    if (tl->ranks)
        for (int r = 0; r < tl->pp; r++) {
            bm_free(tl->ranks[r].ops);
            bm_free(tl->ranks[r].mem);
        }
    bm_free(tl->ranks);
    bm_free(tl);
}

/* The timeline's objects for t; with 'init' 1 every op time is zeroed (wait -1/-1), with 0 the
 * caller writes every one (the simulator, which hands the timeline out only when every op ran:
 * one pass over 40 B per op fewer), with -1 there are none (bm_simulate_summary: ops NULL,
 * n_ops 0). */
static struct bm_timeline *timeline_alloc(const struct bm_table *t, const struct bm_costs *c, int init)
{
    struct bm_timeline *tl = bm_calloc(1, sizeof *tl);
    if (!tl) return NULL;
    tl->pp = t->pp;
    tl->microbatches = t->microbatches;
    tl->samples_per_microbatch = 1;
    tl->memory_cap_mib = c ? bm_cost_memory_cap_mib(c) : 0;
    tl->ranks = bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *tl->ranks);
    double *state = bm_malloc((size_t)(t->pp > 0 ? t->pp : 1) * sizeof *state);
    if (!tl->ranks || !state) goto fail;
    if (c) bm_cost_state_mib(t, c, state);
    else
        for (int r = 0; r < t->pp; r++) state[r] = 0;
    for (int r = 0; r < t->pp; r++) {
        struct bm_rank_timeline *rt = &tl->ranks[r];
        int n = t->ranks[r].n_ops;
        rt->state_mib = state[r];
        if (init < 0) continue;
        rt->n_ops = n;
        rt->ops = bm_malloc((size_t)(n > 0 ? n : 1) * sizeof *rt->ops);
        if (!rt->ops) goto fail;
        for (int i = 0; init && i < n; i++)
            rt->ops[i] = (struct bm_op_time){0, 0, 0, -1, -1, 0};
    }
    bm_free(state);
    return tl;
fail:
    bm_free(state);
    bm_timeline_free(tl);
    return NULL;
}

struct bm_timeline *bm_timeline_new(const struct bm_table *t, const struct bm_costs *c)
{
    return timeline_alloc(t, c, 1);
}

int bm_timeline_mem_push(struct bm_timeline *tl, int r, double t_ms, const double act[BM_N_ROLES])
{
    struct bm_rank_timeline *rt = &tl->ranks[r];
    const double *last = rt->n_mem ? rt->mem[rt->n_mem - 1].act_mib : NULL;
    static const double zero[BM_N_ROLES];
    if (!last) last = zero;
    if (!memcmp(last, act, sizeof zero)) return BM_OK;
    if (bm_grow(&rt->mem, &rt->cap_mem, rt->n_mem + 1, sizeof *rt->mem)) return BM_ERR;
    struct bm_mem_point *p = &rt->mem[rt->n_mem++];
    p->t_ms = t_ms;
    memcpy(p->act_mib, act, sizeof p->act_mib);
    return BM_OK;
}

static void samples_rate(struct bm_timeline *tl, const struct bm_table *t);

/* A rank's peak (its state plus its largest activation total) and OOM, folded into the
 * timeline's (the full timeline's summary and the summary-only run share it). */
static void rank_peak(struct bm_timeline *tl, struct bm_rank_timeline *rt, double peak_total)
{
    rt->peak_mib = rt->state_mib + peak_total;
    rt->oom = tl->memory_cap_mib > 0 && rt->peak_mib > tl->memory_cap_mib;
    if (rt->peak_mib > tl->peak_mib) tl->peak_mib = rt->peak_mib;
    for (int k = 0; k < BM_N_ROLES; k++)
        if (rt->peak_act_mib[k] > tl->peak_act_mib[k]) tl->peak_act_mib[k] = rt->peak_act_mib[k];
    tl->oom |= rt->oom;
}

void bm_timeline_summarize(struct bm_timeline *tl, const struct bm_table *t)
{
    /* bm_simulate_summary's timeline has no op times to summarize: its figures stay (recomputing
     * them from nothing would set the makespan and the peaks to 0) */
    if (tl->pp == t->pp)
        for (int r = 0; r < tl->pp; r++)
            if (t->ranks[r].n_ops > 0 && !tl->ranks[r].ops) return;
    double makespan = 0;
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        for (int i = 0; i < rt->n_ops; i++)
            if (rt->ops[i].end_ms > makespan) makespan = rt->ops[i].end_ms;
    }
    tl->makespan_ms = makespan;
    tl->peak_mib = 0;
    tl->oom = 0;
    for (int k = 0; k < BM_N_ROLES; k++) tl->peak_act_mib[k] = 0;
    double idle = 0;
    for (int r = 0; r < tl->pp; r++) {
        struct bm_rank_timeline *rt = &tl->ranks[r];
        const struct bm_op *ops = t->ranks[r].ops;
        double busy = 0, first = -1, last = 0;
        for (int k = 0; k < BM_N_ROLES; k++) rt->busy_role_ms[k] = 0;
        for (int i = 0; i < rt->n_ops; i++) {
            if (ops[i].kind != BM_OP_COMPUTE) continue;
            const struct bm_op_time *ot = &rt->ops[i];
            busy += ot->end_ms - ot->start_ms;
            int mod = ops[i].module;
            int role = mod >= 0 && mod < t->n_modules ? (int)t->modules[mod].role : -1;
            if (role >= 0 && role < BM_N_ROLES) rt->busy_role_ms[role] += ot->end_ms - ot->start_ms;
            if (first < 0) first = ot->start_ms;
            if (ot->end_ms > last) last = ot->end_ms;
        }
        rt->busy_ms = busy;
        if (first < 0) {
            rt->idle_lead_ms = makespan;
            rt->idle_mid_ms = rt->idle_tail_ms = 0;
        } else {
            rt->idle_lead_ms = first;
            rt->idle_tail_ms = makespan - last;
            rt->idle_mid_ms = last - first - busy;
            if (rt->idle_mid_ms < 0) rt->idle_mid_ms = 0; /* overlapping measured ops */
        }
        idle += rt->idle_lead_ms + rt->idle_mid_ms + rt->idle_tail_ms;
        double peak_total = 0;
        for (int k = 0; k < BM_N_ROLES; k++) rt->peak_act_mib[k] = 0;
        for (int j = 0; j < rt->n_mem; j++) {
            const double *a = rt->mem[j].act_mib;
            double s = 0;
            for (int k = 0; k < BM_N_ROLES; k++) {
                s += a[k];
                if (a[k] > rt->peak_act_mib[k]) rt->peak_act_mib[k] = a[k];
            }
            if (s > peak_total) peak_total = s;
        }
        rank_peak(tl, rt, peak_total);
    }
    tl->bubble_ratio = makespan > 0 && tl->pp > 0 ? idle / (tl->pp * makespan) : 0;
    samples_rate(tl, t);
}

/* samples/s from the step (or the walk) already in tl */
static void samples_rate(struct bm_timeline *tl, const struct bm_table *t)
{
    double makespan = tl->makespan_ms;
    int spm = tl->samples_per_microbatch > 0 ? tl->samples_per_microbatch : 1;
    /* a simulated timeline counts the whole step of every replica (sim/step.h); a measured one
     * the walk of one pipeline */
    double per = tl->step_ms > 0 ? tl->step_ms : makespan;
    int D = tl->step_ms > 0 && t->dp > 1 ? t->dp : 1;
    tl->samples_per_s = per > 0 ? (double)D * tl->microbatches * spm / (per / 1000.0) : 0;
}

/* ---------------------------------------------------------------- simulation state */

struct sim {
    const struct bm_table *t;
    const struct bm_costs *c;
    struct bm_timeline *tl;
    int P, M, C;
    struct bm_match mt; /* which send each recv receives (src/table/match.c) */
    const long *base;  /* [P+1] global op id of rank r's op 0 (mt.base) */
    const int32_t *match; /* [ops] send: matching recv's index on the peer (-1 none); recv: send's */
    double *jit;       /* [n_modules*2*M] duration factor of (module, F|B, mb) */
    uint8_t *split;    /* [n_modules] backward split into B and W somewhere in the table */
    double *comm;      /* [n_tensors] transfer ms */
    double *comm_x;    /* [n_tensors] transfer ms between hosts (sim/hosts.h) */
    /* per (rank, mb): last compute op of the mb and pending recv arrivals since */
    double *last_end;  /* -1 = none */
    int32_t *last_op;
    double *pend;      /* -1 = none */
    int32_t *pend_rank, *pend_op;
    int *pc;           /* next op per rank */
    double *tfree;     /* end of the rank's last op */
    double *act;       /* [P*3] live activations per role */
    uint8_t *parked;   /* rank waits at pc for a send */
    uint8_t *parked_oh; /* the parked op's dispatch overhead is already in tfree */
    /* the summary, gathered as ops run (see the file's comment) */
    double makespan;
    double *first, *last;   /* [P] first compute start (-1: none yet), last compute end */
    double *peak_total;     /* [P] the most live activation MiB at once (all roles) */
    struct bm_step_ends ends; /* what the step model needs (sim/step.h) */
    double *issue;          /* summary only: [ops] a send's issue time (global id) */
    const double *op_scale; /* [ops] duration factor per compute op (global id), or NULL */
    const double *dispatch; /* [ops] dispatch ms per op (global id), or NULL = c->op_overhead_ms */
    int *stack, sp;
};

static void sim_free(struct sim *s)
{
    bm_match_free(&s->mt);
    bm_free(s->jit);
    bm_free(s->split);
    bm_free(s->comm);
    bm_free(s->comm_x);
    bm_free(s->last_end);
    bm_free(s->last_op);
    bm_free(s->pend);
    bm_free(s->pend_rank);
    bm_free(s->pend_op);
    bm_free(s->pc);
    bm_free(s->tfree);
    bm_free(s->act);
    bm_free(s->parked);
    bm_free(s->parked_oh);
    bm_free(s->stack);
    bm_free(s->first);
    bm_free(s->last);
    bm_free(s->peak_total);
    bm_step_ends_free(&s->ends);
    bm_free(s->issue);
}

static int sim_init(struct sim *s, const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                    int summary, struct bm_err *err)
{
    int P = t->pp, M = t->microbatches, NM = t->n_modules;
    s->t = t;
    s->c = c;
    s->P = P;
    s->M = M;
    s->C = P * (t->vpp > 0 ? t->vpp : 1);
    long n = bm_table_n_ops(t);
    size_t pm = (size_t)P * (size_t)M;
    s->jit = bm_malloc((size_t)(NM > 0 ? NM : 1) * 2 * (size_t)M * sizeof *s->jit);
    s->split = bm_calloc((size_t)(NM > 0 ? NM : 1), 1);
    s->comm = bm_malloc((size_t)(t->n_tensors > 0 ? t->n_tensors : 1) * sizeof *s->comm);
    s->comm_x = bm_malloc((size_t)(t->n_tensors > 0 ? t->n_tensors : 1) * sizeof *s->comm_x);
    s->last_end = bm_malloc(pm * sizeof *s->last_end);
    s->last_op = bm_malloc(pm * sizeof *s->last_op);
    s->pend = bm_malloc(pm * sizeof *s->pend);
    s->pend_rank = bm_malloc(pm * sizeof *s->pend_rank);
    s->pend_op = bm_malloc(pm * sizeof *s->pend_op);
    s->pc = bm_calloc((size_t)P, sizeof *s->pc);
    s->tfree = bm_calloc((size_t)P, sizeof *s->tfree);
    s->act = bm_calloc((size_t)P * BM_N_ROLES, sizeof *s->act);
    s->parked = bm_calloc((size_t)P, 1);
    s->parked_oh = bm_calloc((size_t)P, 1);
    s->stack = bm_malloc((size_t)P * sizeof *s->stack);
    s->first = bm_malloc((size_t)(P > 0 ? P : 1) * sizeof *s->first);
    s->last = bm_calloc((size_t)(P > 0 ? P : 1), sizeof *s->last);
    s->peak_total = bm_calloc((size_t)(P > 0 ? P : 1), sizeof *s->peak_total);
    if (summary) s->issue = bm_malloc((size_t)(n > 0 ? n : 1) * sizeof *s->issue);
    if (!s->jit || !s->split || !s->comm || !s->comm_x || !s->last_end ||
        !s->last_op || !s->pend || !s->pend_rank || !s->pend_op || !s->pc || !s->tfree ||
        !s->act || !s->parked || !s->parked_oh || !s->stack || !s->first || !s->last || !s->peak_total ||
        (summary && !s->issue) || bm_step_ends_alloc(t, &s->ends))
        return bm_err_set(err, "simulate: out of memory (%ld ops)", n);
    for (int r = 0; r < P; r++) s->first[r] = -1;

    for (size_t i = 0; i < pm; i++) {
        s->last_end[i] = -1;
        s->last_op[i] = -1;
        s->pend[i] = -1;
        s->pend_rank[i] = s->pend_op[i] = -1;
    }
    for (int i = 0; i < t->n_tensors; i++) s->comm[i] = bm_cost_comm_ms(t, c, i), s->comm_x[i] = bm_cost_inter_host_ms(t, c, i);
    for (int r = 0; r < P; r++) s->tfree[r] = c->step_lead_ms; /* the step's setup (cost.h) */

    /* Jitter: one draw per (module, F|B, mb) in a fixed order, independent of placement. */
    double j = o ? o->jitter : 0;
    struct bm_rng rng;
    bm_rng_seed(&rng, o ? o->seed : 0);
    for (int m = 0; m < NM; m++)
        for (int p = 0; p < 2; p++)
            for (int mb = 0; mb < M; mb++) {
                double f = 1;
                if (j != 0 && m != t->backbone_module) {
                    f = 1 + j * (2 * bm_rng_uniform(&rng) - 1);
                    if (f < 0) f = 0;
                }
                s->jit[((size_t)m * 2 + (size_t)p) * (size_t)M + (size_t)mb] = f;
            }

    /* Backward split per module; send matching (FIFO per key, src/table/match.c). */
    for (int r = 0; r < P; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_W) s->split[op->module] = 1;
        }
    /* only each op's peer is needed: no per-message records (at P = 64, V = 4, M = 1024 they
     * were 27 of the 160 MB peak) */
    if (bm_match_peers(t, &s->mt, err)) return BM_ERR;
    s->base = s->mt.base;
    s->match = s->mt.peer_op;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind != BM_OP_RECV || s->match[s->base[r] + i] >= 0) continue;
            char buf[BM_MAX_NAME + 64];
            bm_op_format(t, op, buf, sizeof buf);
            return bm_err_set(err,
                              "simulate: rank %d op %d %s has no matching send on rank %d "
                              "(it would wait forever)\nhint: run `bigmac verify` on the table",
                              r, i, buf, op->peer);
        }
    return BM_OK;
}

/* A change of rank r's live activations: its peaks (each role's and the total's, summed in
 * role order as bm_timeline_summarize sums a memory point), and with a timeline kept the point. */
static int mem_change(struct sim *s, int r, double t_ms, int role, double delta)
{
    if (delta == 0) return BM_OK;
    double *a = &s->act[r * BM_N_ROLES];
    a[role] += delta;
    if (a[role] < 1e-9 && a[role] > -1e-9) a[role] = 0; /* float noise of +x-x */
    struct bm_rank_timeline *rt = &s->tl->ranks[r];
    double sum = 0;
    for (int k = 0; k < BM_N_ROLES; k++) {
        sum += a[k];
        if (a[k] > rt->peak_act_mib[k]) rt->peak_act_mib[k] = a[k];
    }
    if (sum > s->peak_total[r]) s->peak_total[r] = sum;
    return s->issue ? BM_OK : bm_timeline_mem_push(s->tl, r, t_ms, a);
}

/* An op of rank r ended at e: the rank's walk and the makespan. */
static inline void op_ended(struct sim *s, int r, double e)
{
    if (e > s->ends.walk_end[r]) s->ends.walk_end[r] = e;
    if (e > s->makespan) s->makespan = e;
}

/* Compute op i of rank r ran st..e: busy time (by role, bm_timeline_summarize's rule), the
 * first start and last end, and the step's ends. */
static inline void compute_ran(struct sim *s, int r, const struct bm_op *op, double st, double e)
{
    const struct bm_table *t = s->t;
    struct bm_rank_timeline *rt = &s->tl->ranks[r];
    op_ended(s, r, e);
    rt->busy_ms += e - st;
    int mod = op->module;
    int role = mod >= 0 && mod < t->n_modules ? (int)t->modules[mod].role : -1;
    if (role >= 0 && role < BM_N_ROLES) rt->busy_role_ms[role] += e - st;
    if (s->first[r] < 0) s->first[r] = st;
    if (e > s->last[r]) s->last[r] = e;
    if (mod < 0 || mod >= t->n_modules) return;
    s->ends.hosted[(size_t)r * t->n_modules + mod] = 1;
    if (mod == t->backbone_module) {
        if (op->chunk >= 0 && op->chunk < s->C && e > s->ends.last_chunk[op->chunk]) s->ends.last_chunk[op->chunk] = e;
    } else if (e > s->ends.last_mod[mod]) {
        s->ends.last_mod[mod] = e;
    }
}

/* Memory events of a recomputed module's op running tf .. tf+d (cost.h): F holds a while it
 * runs, then only the input; B rebuilds a at its start and frees it at its end (split: all but
 * what W needs, act_w, which W frees at its end; the executor's byte model). */
static int recompute_mem(struct sim *s, int r, const struct bm_op *op, double tf, double d, int role,
                         double a, int split)
{
    double in = bm_cost_input_mib(s->t, s->c, op);
    if (op->pass == BM_PASS_F)
        return mem_change(s, r, tf, role, a) || mem_change(s, r, tf + d, role, -a) ||
               mem_change(s, r, tf + d, role, in);
    int rc = BM_OK;
    if (op->pass == BM_PASS_B) rc = mem_change(s, r, tf, role, -in) || mem_change(s, r, tf, role, a);
    if (rc) return rc;
    if (!split) return op->pass == BM_PASS_B ? mem_change(s, r, tf + d, role, -a) : BM_OK;
    /* split: the rebuilt activation goes at B's end but for what W needs, which goes at W's end */
    double aw = bm_cost_act_w_mib(s->t, s->c, op);
    return mem_change(s, r, tf + d, role, op->pass == BM_PASS_B ? -(a - aw) : -aw);
}

/* Each rank's memory trace sized once for its most points (run_rank: a compute op changes its
 * role's activation once, a recomputed one at most three times), so recording never
 * reallocates. */
static int reserve_mem(struct bm_timeline *tl, const struct bm_table *t)
{
    uint8_t *rec = bm_malloc((size_t)(t->n_modules > 0 ? t->n_modules : 1));
    if (!rec) return BM_ERR;
    for (int m = 0; m < t->n_modules; m++) rec[m] = (uint8_t)bm_cost_recompute(t, m);
    int rc = BM_OK;
    for (int r = 0; r < t->pp && !rc; r++) {
        long n = 0;
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE) n += rec[op->module] ? 3 : 1;
        }
        if (n < 1 || n > 0x7fffffffL) continue; /* bm_timeline_mem_push grows it */
        struct bm_rank_timeline *rt = &tl->ranks[r];
        bm_free(rt->mem);
        rt->n_mem = rt->cap_mem = 0;
        if (!(rt->mem = bm_malloc((size_t)n * sizeof *rt->mem))) rc = BM_ERR;
        else rt->cap_mem = (int)n;
    }
    bm_free(rec);
    return rc;
}

/* Run rank r until it ends or parks at a recv whose send is not issued yet. */
static int run_rank(struct sim *s, int r, struct bm_err *err)
{
    const struct bm_table *t = s->t;
    const struct bm_costs *c = s->c;
    const struct bm_op *ops = t->ranks[r].ops;
    struct bm_op_time *times = s->tl->ranks[r].ops; /* NULL: summary only */
    int n = t->ranks[r].n_ops;
    double tf = s->tfree[r];
    for (int i = s->pc[r]; i < n; i++) {
        const struct bm_op *op = &ops[i];
        if (i == s->pc[r] && s->parked_oh[r]) s->parked_oh[r] = 0; /* dispatched before it parked */
        else tf += s->dispatch ? s->dispatch[s->base[r] + i] : c->op_overhead_ms; /* (cost.h) */
        size_t mi = (size_t)r * (size_t)s->M + (size_t)op->mb;
        if (op->kind == BM_OP_COMPUTE) {
            double ready = s->last_end[mi] >= 0 ? s->last_end[mi] : 0;
            int wr = s->last_op[mi] >= 0 ? r : -1, wo = s->last_op[mi];
            if (s->pend[mi] >= 0 && s->pend[mi] >= ready) {
                ready = s->pend[mi];
                wr = s->pend_rank[mi];
                wo = s->pend_op[mi];
            }
            int split = s->split[op->module];
            double d = bm_cost_compute_ms(t, c, op, split) * bm_cost_rank_scale(t, c, r);
            if (op->module != t->backbone_module)
                d *= s->jit[((size_t)op->module * 2 + (op->pass == BM_PASS_F ? 0 : 1)) * (size_t)s->M +
                            (size_t)op->mb];
            if (s->op_scale) d *= s->op_scale[s->base[r] + i];
            double e = tf + d;
            if (times) times[i] = (struct bm_op_time){tf, e, ready, wr, wo, 0};
            compute_ran(s, r, op, tf, e);
            int role = t->modules[op->module].role;
            if ((unsigned)role >= BM_N_ROLES) role = BM_ROLE_BACKBONE;
            double a = bm_cost_act_mib(t, c, op);
            if (bm_cost_recompute(t, op->module)) {
                if (recompute_mem(s, r, op, tf, d, role, a, split)) goto oom;
            } else if (op->pass == BM_PASS_F) {
                if (mem_change(s, r, tf, role, a)) goto oom;
            } else if (!split) {
                if (op->pass == BM_PASS_B && mem_change(s, r, tf + d, role, -a)) goto oom;
            } else { /* split: B frees all but what W needs, W the rest */
                double aw = bm_cost_act_w_mib(t, c, op);
                double *held = &s->tl->ranks[r].held_w_mib;
                if (op->pass == BM_PASS_B) {
                    if (mem_change(s, r, tf + d, role, -(a - aw))) goto oom;
                    s->tl->ranks[r].freed_b_mib += a - aw;
                    *held += aw;
                    if (*held > s->tl->ranks[r].peak_held_w_mib) s->tl->ranks[r].peak_held_w_mib = *held;
                } else {
                    if (mem_change(s, r, tf + d, role, -aw)) goto oom;
                    s->tl->ranks[r].freed_w_mib += aw;
                    *held -= aw;
                    if (*held < 1e-9) *held = 0;
                }
            }
            tf = e;
            s->last_end[mi] = tf;
            s->last_op[mi] = i;
            s->pend[mi] = -1;
            s->pend_rank[mi] = s->pend_op[mi] = -1;
            s->pc[r] = i + 1;
        } else if (op->kind == BM_OP_SEND) {
            int has = s->last_op[mi] >= 0;
            if (times)
                times[i] = (struct bm_op_time){tf, tf, has ? s->last_end[mi] : tf, has ? r : -1,
                                               has ? s->last_op[mi] : -1, 0};
            else
                s->issue[s->base[r] + i] = tf;
            op_ended(s, r, tf);
            s->pc[r] = i + 1;
            int q = op->peer;
            int32_t ri = s->match[s->base[r] + i];
            if (q != r && s->parked[q] && ri >= 0 && s->pc[q] == ri) {
                s->parked[q] = 0;
                s->stack[s->sp++] = q;
            }
        } else { /* recv */
            int p = op->peer;
            int32_t si = s->match[s->base[r] + i];
            if (s->pc[p] <= si) { /* not issued yet: park */
                s->pc[r] = i;
                s->tfree[r] = tf;
                s->parked[r] = 1;
                s->parked_oh[r] = 1;
                return BM_OK;
            }
            double issued = times ? s->tl->ranks[p].ops[si].start_ms : s->issue[s->base[p] + si];
            double arrive = issued + (bm_cost_crosses_hosts(t, p, r) ? s->comm_x : s->comm)[op->tensor];
            double done = tf + c->recv_overhead_ms, end = arrive > done ? arrive : done;
            if (times) times[i] = (struct bm_op_time){tf, end, arrive, p, si, 0};
            op_ended(s, r, end);
            if (arrive > s->pend[mi]) {
                s->pend[mi] = arrive;
                s->pend_rank[mi] = p;
                s->pend_op[mi] = si;
            }
            tf = end;
            s->pc[r] = i + 1;
        }
    }
    s->tfree[r] = tf;
    return BM_OK;
oom:
    return bm_err_set(err, "simulate: out of memory recording rank %d's memory trace", r);
}

/* Explain a deadlock with the verifier's words (bm_match_deadlock_report): each blocked rank's
 * op, what it waits for, and the cycle. */
struct report {
    char msg[sizeof ((struct bm_err *)0)->msg - 64];
    size_t len;
    int dropped;
};

static void report_line(void *ctx, const char *text)
{
    struct report *rp = ctx;
    size_t n = strlen(text);
    if (rp->dropped || rp->len + n + 2 >= sizeof rp->msg) {
        rp->dropped++;
        return;
    }
    if (rp->len) rp->msg[rp->len++] = '\n';
    memcpy(rp->msg + rp->len, text, n + 1);
    rp->len += n;
}

static int deadlock_error(struct sim *s, struct bm_err *err)
{
    struct report rp = {.len = 0};
    bm_match_deadlock_report(s->t, &s->mt, s->pc, report_line, &rp);
    return bm_err_set(err, "simulate: deadlock: %s%s\nhint: run `bigmac verify` on the table", rp.msg,
                      rp.dropped ? "\n  ... (more ranks blocked)" : "");
}

int bm_timeline_per_op(const struct bm_table *t, const struct bm_timeline *tl)
{
    if (!tl || tl->pp != t->pp || !tl->ranks) return 0;
    for (int r = 0; r < t->pp; r++)
        if (tl->ranks[r].n_ops != t->ranks[r].n_ops || (t->ranks[r].n_ops > 0 && !tl->ranks[r].ops)) return 0;
    return 1;
}

/* The summary from what the run gathered (bm_timeline_summarize's arithmetic, in its order),
 * then the step after the walk (sim/step.h). */
static int finish_summary(struct sim *s, struct bm_err *err)
{
    struct bm_timeline *tl = s->tl;
    const struct bm_table *t = s->t;
    double makespan = s->makespan, idle = 0;
    tl->makespan_ms = makespan;
    for (int r = 0; r < tl->pp; r++) {
        struct bm_rank_timeline *rt = &tl->ranks[r];
        if (s->first[r] < 0) {
            rt->idle_lead_ms = makespan;
            rt->idle_mid_ms = rt->idle_tail_ms = 0;
        } else {
            rt->idle_lead_ms = s->first[r];
            rt->idle_tail_ms = makespan - s->last[r];
            rt->idle_mid_ms = s->last[r] - s->first[r] - rt->busy_ms;
            if (rt->idle_mid_ms < 0) rt->idle_mid_ms = 0;
        }
        idle += rt->idle_lead_ms + rt->idle_mid_ms + rt->idle_tail_ms;
        rank_peak(tl, rt, s->peak_total[r]);
    }
    tl->bubble_ratio = makespan > 0 && tl->pp > 0 ? idle / (tl->pp * makespan) : 0;
    struct bm_step st;
    if (bm_step_model_ends(t, s->c, makespan, &s->ends, &st, NULL, err)) return BM_ERR;
    tl->step_ms = st.step_ms;
    tl->sync_exposed_ms = st.sync_exposed_ms;
    tl->sync_total_ms = st.sync_total_ms;
    tl->optimizer_ms = st.optimizer_ms;
    samples_rate(tl, t);
    return BM_OK;
}

int bm_simulate(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                struct bm_timeline **out, struct bm_err *err)
{
    return bm_simulate_run(t, c, o, NULL, NULL, 0, out, err);
}

int bm_simulate_summary(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                        struct bm_timeline **out, struct bm_err *err)
{
    return bm_simulate_run(t, c, o, NULL, NULL, 1, out, err);
}

int bm_simulate_op_scaled(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                          const double *op_scale, struct bm_timeline **out, struct bm_err *err)
{
    return bm_simulate_run(t, c, o, op_scale, NULL, 0, out, err);
}

int bm_simulate_drawn(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                      const double *op_scale, const double *dispatch_ms, struct bm_timeline **out,
                      struct bm_err *err)
{
    return bm_simulate_run(t, c, o, op_scale, dispatch_ms, 0, out, err);
}

int bm_simulate_run(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                    const double *op_scale, const double *dispatch_ms, int summary, struct bm_timeline **out,
                    struct bm_err *err)
{
    *out = NULL;
    if (bm_table_check_ops(t, "simulate", err)) return BM_ERR;
    if (!c || c->n_modules != t->n_modules)
        return bm_err_set(err, "simulate: the cost model has %d modules but the table %d\nhint: pass the cost "
                               "model that came with the table (bm_plan_build, bm_table_load, bm_costs_from_spec)",
                          c ? c->n_modules : 0, t->n_modules);
    struct sim s;
    memset(&s, 0, sizeof s);
    s.op_scale = op_scale;
    s.dispatch = dispatch_ms;
    int rc = BM_ERR;
    if (sim_init(&s, t, c, o, summary, err)) goto done; /* first: its matcher's scratch is gone before the timeline */
    /* run_rank writes every op's time; *out only when all ran */
    s.tl = timeline_alloc(t, c, summary ? -1 : 0);
    if (!s.tl || (!summary && reserve_mem(s.tl, t))) {
        bm_err_set(err, "simulate: out of memory allocating the timeline");
        goto done;
    }
    if (o && o->samples_per_microbatch > 0) s.tl->samples_per_microbatch = o->samples_per_microbatch;
    for (int r = s.P - 1; r >= 0; r--) s.stack[s.sp++] = r;
    while (s.sp > 0) {
        int r = s.stack[--s.sp];
        if (run_rank(&s, r, err)) goto done;
    }
    for (int r = 0; r < s.P; r++)
        if (s.pc[r] < t->ranks[r].n_ops) {
            deadlock_error(&s, err);
            goto done;
        }
    if (finish_summary(&s, err)) goto done;
    *out = s.tl;
    s.tl = NULL;
    rc = BM_OK;
done:
    bm_timeline_free(s.tl);
    sim_free(&s);
    return rc;
}
