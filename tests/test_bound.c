/* test_bound.c — the makespan lower bound (src/plan/bound.c, docs/simulator.md "Lower bound")
 * and the placement search (src/plan/search.c):
 *   - on tiny problems the bound is never above the exhaustive optimum: every order of every
 *     rank's nested ops around its fixed backbone order is timed;
 *   - on a property grid over P, V, M, W (search on) no policy's makespan is below the bound,
 *     neither its own placement's bound nor the smallest over policies that --compare reports;
 *   - the search keeps the verifier's invariants and never makes a plan slower. */
#include "test.h"
#include "plan/plan.h"
#include "util/util.h"

/* Encoder work comparable to a backbone stage, so the placement matters; a real link. */
static struct bm_spec *tiny_spec(int generator, double enc_f, double enc_b)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"tiny\",\n"
             " \"device\": {\"memory_gib\": 80, \"link_gbytes_per_s\": 1, \"link_latency_us\": 300},\n"
             " \"inputs\": [\"image\", \"text\"],\n"
             " \"modules\": [\n"
             "  {\"name\": \"vit\", \"role\": \"encoder\", \"consumes\": [\"image\"], \"produces\": [\"vis\"],\n"
             "   \"cost\": {\"fwd_ms\": %g, \"bwd_ms\": %g, \"act_mib\": 100, \"state_mib\": 10, \"out_mib\": 1}},\n"
             "  {\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"text\", \"vis\"], \"produces\": [\"hidden\"],\n"
             "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"act_mib\": 800, \"state_mib\": 1000, \"out_mib\": 2}}\n"
             "  %s"
             " ],\n"
             " \"data\": {\"encoder_cost_scale\": {\"dist\": \"uniform\", \"min\": 0.5, \"max\": 1.5, \"seed\": 3}}}\n",
             enc_f, enc_b,
             generator ? ",{\"name\": \"dit\", \"consumes\": [\"hidden\"], \"produces\": [\"loss\"],\n"
                         "   \"cost\": {\"fwd_ms\": 3, \"bwd_ms\": 5, \"act_mib\": 100, \"state_mib\": 10, \"out_mib\": 1}}\n"
                       : "");
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_parse(text, "tiny.json", &s, &err)) {
        fprintf(stderr, "spec: %s\n", err.msg);
        return NULL;
    }
    return s;
}

/* ---------------------------------------------------------------- exhaustive search */

#define MAX_SEQS 6000
#define MAX_LEN 24

struct rank_seqs {
    int n, len;
    int (*v)[MAX_LEN];
};

struct enum_ctx {
    const struct bm_graph *g;
    int r;
    int *bb, nbb;       /* the rank's backbone order */
    int *nest, nn;      /* its nested tasks */
    char *used;
    int cur[MAX_LEN], len;
    struct rank_seqs *out;
    int overflow;
};

/* 1 when every same-rank predecessor of task x is already in cur. */
static int preds_placed(const struct enum_ctx *c, int x)
{
    const struct bm_task *tx = &c->g->task[x];
    for (int e = 0; e < tx->npred; e++) {
        int p = c->g->pred[tx->pred0 + e].task, found = 0;
        if (c->g->task[p].rank != c->r) continue;
        for (int i = 0; i < c->len; i++) found |= c->cur[i] == p;
        if (!found) return 0;
    }
    return 1;
}

/* Every interleaving of the nested tasks with the backbone order (same-rank dependencies kept). */
static void enum_rank(struct enum_ctx *c, int bi)
{
    if (c->overflow) return;
    if (c->len == c->nbb + c->nn) {
        if (c->out->n >= MAX_SEQS) {
            c->overflow = 1;
            return;
        }
        memcpy(c->out->v[c->out->n++], c->cur, sizeof c->cur);
        return;
    }
    if (bi < c->nbb && preds_placed(c, c->bb[bi])) {
        c->cur[c->len++] = c->bb[bi];
        enum_rank(c, bi + 1);
        c->len--;
    }
    for (int k = 0; k < c->nn; k++) {
        if (c->used[k] || !preds_placed(c, c->nest[k])) continue;
        c->used[k] = 1;
        c->cur[c->len++] = c->nest[k];
        enum_rank(c, bi);
        c->len--;
        c->used[k] = 0;
    }
}

struct product {
    const struct bm_graph *g;
    struct rank_seqs *rs;
    struct bm_order *o;
    double *start, *finish;
    double best;
    long timed;
};

static void enum_product(struct product *p, int r)
{
    if (r == p->o->pp) {
        double ms;
        struct bm_err err;
        p->timed++;
        if (bm_order_times(p->g, p->o, p->start, p->finish, &ms, &err) == BM_OK && ms < p->best) p->best = ms;
        return;
    }
    for (int i = 0; i < p->rs[r].n; i++) {
        p->o->seq[r] = p->rs[r].v[i];
        enum_product(p, r + 1);
    }
}

/* The smallest makespan over every order of g's work that keeps each rank's backbone order;
 * -1 when the enumeration would be too large. */
static double exhaustive_optimum(const struct bm_graph *g, long *timed)
{
    const struct bm_table *t = g->t;
    int P = t->pp, len = 2 * t->vpp * t->microbatches;
    struct rank_seqs *rs = bm_calloc((size_t)P, sizeof *rs);
    struct bm_bb_step *steps = bm_malloc((size_t)len * sizeof *steps);
    int *seqp[64], n[64];
    struct bm_order o = {P, seqp, n};
    double result = -1;
    double *start = bm_malloc((size_t)g->n_tasks * sizeof(double));
    double *finish = bm_malloc((size_t)g->n_tasks * sizeof(double));
    int ok = rs && steps && start && finish && P <= 64;
    for (int r = 0; ok && r < P; r++) {
        struct enum_ctx c;
        memset(&c, 0, sizeof c);
        int bb[MAX_LEN], nest[MAX_LEN];
        char used[MAX_LEN] = {0};
        c.g = g, c.r = r, c.bb = bb, c.nest = nest, c.used = used;
        if (bm_backbone_order(t->backbone, P, t->vpp, t->microbatches, r, t->warmup_extra, steps, NULL)) ok = 0;
        for (int i = 0; ok && i < len; i++) {
            if (c.nbb >= MAX_LEN) ok = 0;
            else bb[c.nbb++] = bm_task_bb(g, steps[i].chunk, steps[i].pass, steps[i].mb);
        }
        for (int i = 0; ok && i < g->n_tasks; i++)
            if (g->task[i].chunk < 0 && g->task[i].rank == r) {
                if (c.nn >= MAX_LEN || c.nbb + c.nn >= MAX_LEN) ok = 0;
                else nest[c.nn++] = i;
            }
        if (!ok) break;
        rs[r].len = c.nbb + c.nn;
        rs[r].v = bm_malloc(MAX_SEQS * sizeof *rs[r].v);
        if (!rs[r].v) {
            ok = 0;
            break;
        }
        c.out = &rs[r];
        enum_rank(&c, 0);
        if (c.overflow) ok = 0;
        n[r] = rs[r].len;
    }
    long combos = 1;
    for (int r = 0; ok && r < P; r++) {
        combos *= rs[r].n;
        if (combos > 400000) ok = 0;
    }
    if (ok) {
        struct product p = {g, rs, &o, start, finish, BM_T_INF, 0};
        enum_product(&p, 0);
        result = p.best;
        *timed = p.timed;
    }
    for (int r = 0; rs && r < P; r++) bm_free(rs[r].v);
    bm_free(rs);
    bm_free(steps);
    bm_free(start);
    bm_free(finish);
    return result;
}

TEST(bound_never_above_exhaustive_optimum)
{
    struct cfg {
        int gen, P, V, M;
        enum bm_backbone bb;
        enum bm_policy pol;
        double ef, eb;
    } cfgs[] = {
        {0, 2, 1, 2, BM_BB_1F1B, BM_POL_BIGMAC, 6, 12},
        {0, 2, 1, 3, BM_BB_1F1B, BM_POL_BIGMAC, 6, 12},
        {0, 2, 1, 4, BM_BB_1F1B, BM_POL_BIGMAC, 2, 5},
        {0, 2, 1, 3, BM_BB_GPIPE, BM_POL_OPTIMUS, 6, 12},
        {0, 2, 1, 2, BM_BB_1F1B, BM_POL_UNIFIED, 6, 12},
        {0, 2, 2, 2, BM_BB_INTERLEAVED, BM_POL_BIGMAC, 6, 12},
        {0, 3, 1, 2, BM_BB_1F1B, BM_POL_BIGMAC, 6, 12},
        {0, 3, 1, 3, BM_BB_1F1B, BM_POL_OPTIMUS, 3, 7},
        {1, 2, 1, 2, BM_BB_1F1B, BM_POL_BIGMAC, 6, 12},
        {1, 2, 1, 2, BM_BB_1F1B, BM_POL_UNIFIED, 2, 4},
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        struct cfg *c = &cfgs[i];
        struct bm_spec *s = tiny_spec(c->gen, c->ef, c->eb);
        CHECK(s != NULL);
        if (!s) continue;
        struct bm_plan_opts o = {.pp = c->P, .vpp = c->V, .microbatches = c->M, .backbone = c->bb, .policy = c->pol};
        struct bm_table *t;
        struct bm_costs *t_c = NULL;
        struct bm_graph *g;
        struct bm_err err;
        if (bm_plan_graph(s, &o, &t, &t_c, &g, &err)) {
            CHECKF(0, "config %zu: %s", i, err.msg);
            bm_spec_free(s);
            continue;
        }
        double lb = -1;
        CHECK(bm_graph_lower_bound(g, &lb, &err) == BM_OK);
        long timed = 0;
        double opt = exhaustive_optimum(g, &timed);
        CHECKF(opt > 0, "config %zu: enumeration too large", i);
        if (opt > 0) {
            checked++;
            CHECKF(lb <= opt * (1 + 1e-9), "config %zu (P=%d V=%d M=%d %s gen=%d): bound %.4f above the optimum %.4f",
                   i, c->P, c->V, c->M, bm_policy_name(c->pol), c->gen, lb, opt);
            printf("  P=%d V=%d M=%d %-11s %-7s gen=%d: bound %.3f, optimum %.3f (%ld orders), bound/optimum %.3f\n",
                   c->P, c->V, c->M, bm_backbone_name(c->bb), bm_policy_name(c->pol), c->gen, lb, opt, timed,
                   lb / opt);
            /* the planner's own plan is one of the orders enumerated: never faster than the optimum */
            struct bm_table *pt;
            struct bm_costs *pt_c = NULL;
            struct bm_plan_opts po = o;
            po.window = c->pol == BM_POL_BIGMAC ? c->M : 0;
            if (bm_plan_build(s, &po, &pt, &pt_c, &err) == BM_OK) {
                struct bm_timeline *tl;
                if (bm_simulate(pt, pt_c, NULL, &tl, &err) == BM_OK) {
                    CHECKF(tl->makespan_ms >= opt * (1 - 1e-9), "config %zu: plan %.4f below the optimum %.4f", i,
                           tl->makespan_ms, opt);
                    bm_timeline_free(tl);
                }
                bm_table_free(pt), bm_costs_free(pt_c), pt_c = NULL;
            }
        }
        bm_graph_free(g);
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        bm_spec_free(s);
    }
    CHECK(checked >= 8);
}

/* ---------------------------------------------------------------- property grid */

#define GRID_SEARCH 64

TEST(bound_never_above_any_policy_on_grid)
{
    static const enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED,
                                          BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL};
    long checked = 0;
    for (int gen = 0; gen <= 1; gen++) {
        struct bm_spec *s = tiny_spec(gen, 2, 4);
        CHECK(s != NULL);
        if (!s) continue;
        for (int zb = 0; zb <= 1; zb++) /* and the zero-bubble backbones (W tasks in the graph) */
        for (int P = 1; P <= 6; P++)
            for (int V = 1; V <= 3; V++)
                for (int mi = 0; mi < 2; mi++) {
                    int M = (int[]){P, 4 * P}[mi];
                    enum bm_backbone bb = zb ? (V > 1 ? BM_BB_ZB_INTERLEAVED : BM_BB_ZB_H1)
                                         : V > 1 ? BM_BB_INTERLEAVED : P % 2 ? BM_BB_1F1B : BM_BB_GPIPE;
                    double lower = BM_T_INF, ms[16];
                    int n = 0;
                    for (size_t pi = 0; pi < sizeof pols / sizeof pols[0]; pi++)
                        for (int W = 2; W <= (pols[pi] == BM_POL_BIGMAC ? 3 : 2); W++) {
                            struct bm_plan_opts o = {.pp = P, .vpp = V, .microbatches = M, .window = pols[pi] == BM_POL_BIGMAC ? W : 0, .backbone = bb, .policy = pols[pi]};
                            struct bm_table *t;
                            struct bm_costs *t_c = NULL;
                            struct bm_timeline *tl;
                            struct bm_err err;
                            double lb = -1;
                            if (bm_plan_build_search(s, &o, GRID_SEARCH, &t, &t_c, &lb, &err)) continue; /* window too small */
                            if (bm_simulate(t, t_c, NULL, &tl, &err)) {
                                CHECKF(0, "%s", err.msg);
                                bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
                                continue;
                            }
                            CHECKF(lb > 0 && lb <= tl->makespan_ms * (1 + 1e-9),
                                   "P=%d V=%d M=%d %s %s W=%d gen=%d: own bound %.4f, makespan %.4f", P, V, M,
                                   bm_backbone_name(bb), bm_policy_name(pols[pi]), W, gen, lb, tl->makespan_ms);
                            if (lb < lower) lower = lb;
                            ms[n++] = tl->makespan_ms;
                            checked++;
                            bm_timeline_free(tl);
                            bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
                        }
                    for (int i = 0; i < n; i++)
                        CHECKF(lower <= ms[i] * (1 + 1e-9), "P=%d V=%d M=%d gen=%d: bound %.4f above %.4f", P, V, M,
                               gen, lower, ms[i]);
                }
        bm_spec_free(s);
    }
    CHECK(checked > 600);
}

/* The search on (default budget) against off: never slower, verifies, keeps the window's bound,
 * the backbone order (verifier) and the same window cap semantics. */
TEST(search_never_slower_and_verifies)
{
    long checked = 0, faster = 0;
    for (int gen = 0; gen <= 1; gen++) {
        struct bm_spec *s = tiny_spec(gen, 3, 6);
        for (int P = 2; P <= 4; P++)
            for (int V = 1; V <= 2; V++)
                for (int W = 1; W <= 3; W++) {
                    int M = 4 * P;
                    struct bm_plan_opts o = {.pp = P, .vpp = V, .microbatches = M, .window = W, .backbone = V > 1 ? BM_BB_INTERLEAVED : BM_BB_1F1B, .policy = BM_POL_BIGMAC};
                    struct bm_table *a, *b;
                    struct bm_costs *a_c = NULL, *b_c = NULL;
                    struct bm_err err;
                    if (bm_plan_build_search(s, &o, BM_SEARCH_OFF, &a, &a_c, NULL, &err)) continue;
                    CHECK(bm_plan_build_search(s, &o, 0, &b, &b_c, NULL, &err) == BM_OK);
                    struct bm_timeline *ta, *tb;
                    CHECK(bm_simulate(a, a_c, NULL, &ta, &err) == BM_OK);
                    CHECK(bm_simulate(b, b_c, NULL, &tb, &err) == BM_OK);
                    CHECKF(bm_verify(b, &err) == BM_OK, "P=%d V=%d W=%d: %s", P, V, W, err.msg);
                    CHECKF(tb->makespan_ms <= ta->makespan_ms * (1 + 1e-9), "P=%d V=%d W=%d gen=%d: %.4f > %.4f", P, V,
                           W, gen, tb->makespan_ms, ta->makespan_ms);
                    CHECK(b->window <= W);
                    faster += tb->makespan_ms < ta->makespan_ms * (1 - 1e-9);
                    checked++;
                    bm_timeline_free(ta);
                    bm_timeline_free(tb);
                    bm_table_free(a), bm_costs_free(a_c), a_c = NULL;
                    bm_table_free(b), bm_costs_free(b_c), b_c = NULL;
                }
        bm_spec_free(s);
    }
    printf("  %ld plans, the search made %ld faster\n", checked, faster);
    CHECK(checked >= 12);
    CHECK(faster > 0);
}

/* Same inputs, same table: the search is bounded by a count, not the clock. */
TEST(search_is_deterministic)
{
    struct bm_spec *s = tiny_spec(1, 3, 6);
    struct bm_plan_opts o = {.pp = 4, .vpp = 2, .microbatches = 16, .window = 3, .backbone = BM_BB_INTERLEAVED, .policy = BM_POL_BIGMAC};
    struct bm_table *a, *b;
    struct bm_costs *a_c = NULL, *b_c = NULL;
    struct bm_err err;
    CHECK(bm_plan_build(s, &o, &a, &a_c, &err) == BM_OK);
    CHECK(bm_plan_build(s, &o, &b, &b_c, &err) == BM_OK);
    CHECK(a->window == b->window);
    for (int r = 0; r < a->pp; r++) {
        CHECK(a->ranks[r].n_ops == b->ranks[r].n_ops);
        if (a->ranks[r].n_ops == b->ranks[r].n_ops)
            CHECK(!memcmp(a->ranks[r].ops, b->ranks[r].ops, (size_t)a->ranks[r].n_ops * sizeof(struct bm_op)));
    }
    bm_table_free(a), bm_costs_free(a_c), a_c = NULL;
    bm_table_free(b), bm_costs_free(b_c), b_c = NULL;
    bm_spec_free(s);
}

/* Issue 15's target on the understanding example (P = 8, window cap 3): bigmac at or under
 * optimus (which keeps every microbatch's activations) at every M, both at or above the bound. */
TEST(understanding_window3_at_or_under_optimus)
{
    struct bm_spec *s;
    struct bm_err err;
    CHECK(bm_spec_load("examples/understanding-qwen3-30b-a3b.json", &s, &err) == BM_OK);
    if (!s) return;
    for (int V = 1; V <= 2; V++)
        for (int M = 16; M <= 128; M *= 2) {
            double ms[2], lb[2];
            for (int k = 0; k < 2; k++) {
                struct bm_plan_opts o = {.pp = 8, .vpp = V, .microbatches = M, .window = k ? 0 : 3, .backbone = V > 1 ? BM_BB_INTERLEAVED : BM_BB_1F1B,
                                         .policy = k ? BM_POL_OPTIMUS : BM_POL_BIGMAC};
                struct bm_table *t;
                struct bm_costs *t_c = NULL;
                struct bm_timeline *tl;
                ms[k] = lb[k] = -1;
                if (bm_plan_build_search(s, &o, 0, &t, &t_c, &lb[k], &err) == BM_OK) {
                    if (bm_simulate(t, t_c, NULL, &tl, &err) == BM_OK) {
                        ms[k] = tl->makespan_ms;
                        bm_timeline_free(tl);
                    }
                    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
                }
            }
            CHECKF(ms[0] > 0 && ms[0] <= ms[1], "V=%d M=%d: bigmac %.2f, optimus %.2f", V, M, ms[0], ms[1]);
            CHECK(lb[0] <= ms[0] && lb[1] <= ms[1]);
        }
    bm_spec_free(s);
}

/* Re-pairing a task graph in place (the window search's cheap path) gives exactly the graph a
 * fresh build for that window gives. */
TEST(graph_repair_equals_rebuild)
{
    struct bm_spec *s = tiny_spec(1, 3, 6);
    CHECK(s != NULL);
    if (!s) return;
    for (int zb = 0; zb <= 1; zb++) { /* zb-h1: W tasks shift the nested tasks' ids */
    struct bm_plan_opts o = {.pp = 4, .vpp = 1, .microbatches = 32, .window = 3, .backbone = zb ? BM_BB_ZB_H1 : BM_BB_1F1B, .policy = BM_POL_BIGMAC};
    struct bm_table *t;
    struct bm_costs *t_c = NULL;
    struct bm_graph *g, *h;
    struct bm_err err;
    CHECK(bm_plan_graph(s, &o, &t, &t_c, &g, &err) == BM_OK);
    CHECK(bm_graph_pairs_by_window(t, t_c));
    for (int W = 1; W <= 4; W++) {
        CHECK(bm_graph_repair(g, W, &err) == BM_OK);
        CHECK(bm_graph_build(t, t_c, W, &h, &err) == BM_OK);
        int same = g->n_tasks == h->n_tasks && g->pair_window == h->pair_window, owners_moved = 0;
        for (int i = 0; same && i < g->n_tasks; i++) {
            const struct bm_task *a = &g->task[i], *b = &h->task[i];
            same = a->rank == b->rank && a->dur == b->dur && a->npred == b->npred && a->nsucc == b->nsucc &&
                   a->pred0 == b->pred0 && a->succ0 == b->succ0;
            for (int e = 0; same && e < a->npred; e++)
                same = g->pred[a->pred0 + e].task == h->pred[b->pred0 + e].task &&
                       g->pred[a->pred0 + e].comm_ms == h->pred[b->pred0 + e].comm_ms;
            for (int e = 0; same && e < a->nsucc; e++)
                same = g->succ[a->succ0 + e].task == h->succ[b->succ0 + e].task &&
                       g->succ[a->succ0 + e].comm_ms == h->succ[b->succ0 + e].comm_ms;
            owners_moved += a->chunk < 0 && a->rank != a->mb % t->pp;
        }
        CHECKF(same, "%s W=%d", bm_backbone_name(o.backbone), W);
        if (W >= 2) CHECK(owners_moved > 0); /* the pairing did change owners */
        bm_graph_free(h);
    }
    bm_graph_free(g);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    }
    bm_spec_free(s);
}

/* The window search skips a window bm_nest_window_stalls calls a sure stall (issue 28): on a grid
 * over P, V, M, U, every backbone and both policies with a window, every window it calls one
 * does stall when scheduled, and it catches some (the cycle through rank 0's chunk-0 order). */
TEST(sure_stall_windows_do_stall)
{
    int called = 0, stalled = 0, checked = 0;
    for (int gen = 0; gen <= 1; gen++) {
        struct bm_spec *s = tiny_spec(gen, 3, 6);
        CHECK(s != NULL);
        if (!s) return;
        static const enum bm_backbone bbs[] = {BM_BB_1F1B, BM_BB_INTERLEAVED, BM_BB_ZB_H1};
        for (size_t b = 0; b < sizeof bbs / sizeof bbs[0]; b++)
            for (int P = 1; P <= 6; P++)
                for (int V = bbs[b] == BM_BB_INTERLEAVED ? 2 : 1; V <= (bbs[b] == BM_BB_INTERLEAVED ? 3 : 1); V++)
                    for (int M = P; M <= 4 * P; M += P)
                        for (int U = 1; U <= 2 * P; U += P > 1 ? P - 1 : 1)
                            for (int pol = 0; pol < 2; pol++) {
                                struct bm_plan_opts o = {.pp = P, .vpp = V, .microbatches = M, .unit = U, .window = 1, .backbone = bbs[b], .policy = pol ? BM_POL_IDEAL : BM_POL_BIGMAC};
                                struct bm_table *t;
                                struct bm_costs *t_c = NULL;
                                struct bm_graph *g;
                                struct bm_err err;
                                if (bm_plan_graph(s, &o, &t, &t_c, &g, &err)) continue;
                                for (int W = 1; W <= 5; W++) {
                                    struct bm_order *ord;
                                    int sure = bm_nest_window_stalls(g, W, &err);
                                    int rc = bm_nest(g, W, &ord, &err);
                                    if (rc == BM_OK) bm_order_free(ord);
                                    checked++;
                                    called += sure;
                                    stalled += rc == BM_PLAN_STALL;
                                    CHECKF(!sure || rc == BM_PLAN_STALL, "%s P=%d V=%d M=%d U=%d W=%d gen=%d: called a sure stall, planned rc %d",
                                           bm_backbone_name(bbs[b]), P, V, M, U, W, gen, rc);
                                }
                                bm_graph_free(g);
                                bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
                            }
        bm_spec_free(s);
    }
    printf("  %d windows: %d stall, %d of them called sure stalls beforehand\n", checked, stalled, called);
    CHECK(called > 0);
}

int main(void)
{
    RUN(bound_never_above_exhaustive_optimum);
    RUN(bound_never_above_any_policy_on_grid);
    RUN(search_never_slower_and_verifies);
    RUN(search_is_deterministic);
    RUN(understanding_window3_at_or_under_optimus);
    RUN(graph_repair_equals_rebuild);
    RUN(sure_stall_windows_do_stall);
    return test_summary();
}
