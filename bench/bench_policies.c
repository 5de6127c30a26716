/* bench_policies.c — every nesting policy on the paper-shaped example workloads (docs/workloads.md),
 * side by side, from one run: for each workload, backbone schedule (1f1b, interleaved) and
 * M = 4P, 8P, 12P, 16P, plan and simulate bigmac, optimus, unified, unified-balanced, ideal and
 * none; print each policy's makespan as a ratio to bigmac, bigmac against the zero-added-bubble
 * bound (docs/design.md §6), peak encoder/generator activation memory of bigmac vs optimus, OOM flags,
 * bigmac again with `--window fit` (the fastest window whose memory fits the device), the
 * smallest fixed window at which bigmac is no slower than optimus at every M (and the memory it
 * costs), how far M must grow for optimus to run out of memory, then which of the paper's claims hold in this run. Nothing is asserted: the figures are what
 * the planner on this branch produces.
 *
 * Usage: build/bench/bench_policies [SPEC...]   (default: the two examples/ workloads) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"

#define GIB(mib) ((mib) / 1024.0)
#define N_MULT 4

static const enum bm_policy ORDER[BM_N_POLICIES] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED,
                                                    BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL, BM_POL_NONE};
static const char *SHORT[BM_N_POLICIES] = {"bigmac", "optimus", "unified", "unif-bal", "ideal", "none"};
static const int MULT[N_MULT] = {4, 8, 12, 16};

/* One (policy, M) result. ok = 0 when the planner or simulator refused (err holds why). */
struct cell {
    int ok;
    double makespan, nested_max, enc_act, gen_act, peak;
    int oom, window;
    char err[160];
};

/* Largest per-rank encoder+generator busy time of a timeline. */
static double nested_max(const struct bm_timeline *tl)
{
    double m = 0;
    for (int r = 0; r < tl->pp; r++) {
        double v = tl->ranks[r].busy_role_ms[BM_ROLE_ENCODER] + tl->ranks[r].busy_role_ms[BM_ROLE_GENERATOR];
        if (v > m) m = v;
    }
    return m;
}

/* pipeline depth P and unit U: 0 = the spec's */
static void run_cell_pu(const struct bm_spec *s, int P, enum bm_backbone bb, int M, enum bm_policy pol, int W, int U,
                        struct cell *c)
{
    struct bm_plan_opts o;
    struct bm_err err;
    struct bm_table *t = NULL;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *tl = NULL;
    memset(c, 0, sizeof *c);
    bm_plan_opts_from_spec(&o, s);
    if (P) o.pp = P;
    o.backbone = bb;
    o.vpp = bb == BM_BB_INTERLEAVED ? (s->vpp > 1 ? s->vpp : 2) : 1;
    o.microbatches = M;
    o.policy = pol;
    o.window = W;
    if (U) o.unit = U;
    struct bm_sim_opts so = {0, 1, s->data.samples_per_microbatch};
    if (bm_plan_build(s, &o, &t, &t_c, &err) || bm_simulate(t, t_c, &so, &tl, &err)) {
        snprintf(c->err, sizeof c->err, "%s", strtok(err.msg, "\n"));
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        return;
    }
    c->ok = 1;
    c->makespan = tl->makespan_ms;
    c->nested_max = nested_max(tl);
    c->enc_act = GIB(tl->peak_act_mib[BM_ROLE_ENCODER]);
    c->gen_act = GIB(tl->peak_act_mib[BM_ROLE_GENERATOR]);
    c->peak = GIB(tl->peak_mib);
    c->oom = tl->oom;
    c->window = t->window;
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
}

static void run_cell_u(const struct bm_spec *s, enum bm_backbone bb, int M, enum bm_policy pol, int W, int U,
                       struct cell *c)
{
    run_cell_pu(s, 0, bb, M, pol, W, U, c);
}

static void run_cell_w(const struct bm_spec *s, enum bm_backbone bb, int M, enum bm_policy pol, int W,
                       struct cell *c)
{
    run_cell_u(s, bb, M, pol, W, 0, c);
}

/* Every policy at (bb, M) through bm_compare, the comparison `bigmac simulate --compare` and
 * the HTML report print: one cell per policy in ORDER (enum order) and the zero-added-bubble
 * bound (< 0 when bigmac or none failed). */
static double compare_cells(struct bm_spec *s, enum bm_backbone bb, int M, struct cell *c)
{
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    o.backbone = bb;
    o.vpp = bb == BM_BB_INTERLEAVED ? (s->vpp > 1 ? s->vpp : 2) : 1;
    o.microbatches = M;
    o.window = s->window;
    struct bm_sim_opts so = {0, 1, s->data.samples_per_microbatch};
    struct bm_compare_opts co = {.sim = &so};
    struct bm_compare cmp;
    struct bm_err err;
    memset(c, 0, BM_N_POLICIES * sizeof *c);
    if (bm_compare(s, &o, &co, &cmp, &err)) {
        for (int p = 0; p < BM_N_POLICIES; p++) snprintf(c[p].err, sizeof c[p].err, "%s", err.msg);
        return -1;
    }
    for (int p = 0; p < BM_N_POLICIES; p++) {
        const struct bm_compare_row *r = &cmp.rows[ORDER[p]];
        struct cell *x = &c[p];
        if (!r->ok) {
            snprintf(x->err, sizeof x->err, "%s", r->error);
            x->err[strcspn(x->err, "\n")] = 0;
            continue;
        }
        *x = (struct cell){.ok = 1, .makespan = r->makespan_ms, .nested_max = r->nested_max_ms,
                           .enc_act = GIB(r->peak_act_mib[BM_ROLE_ENCODER]),
                           .gen_act = GIB(r->peak_act_mib[BM_ROLE_GENERATOR]), .peak = GIB(r->peak_mib),
                           .oom = r->oom, .window = r->window};
    }
    double bound = cmp.bound_ms;
    bm_compare_free(&cmp);
    return bound;
}

/* Same with the spec's window (auto unless the spec says otherwise). */
static void run_cell(const struct bm_spec *s, enum bm_backbone bb, int M, enum bm_policy pol, struct cell *c)
{
    run_cell_w(s, bb, M, pol, s->window, c);
}

/* bigmac at M = 8P with every window cap from the smallest safe one to M/U (= ideal's): how
 * much of the gap to optimus/ideal is the window. "used" is the window the planner chose under
 * the cap (the fastest; a window is a cap, so a larger one is never slower). */
static void window_sweep(const struct bm_spec *s, enum bm_backbone bb)
{
    int M = 8 * s->pp, U = s->unit > 0 ? s->unit : s->pp, units = (M + U - 1) / U;
    struct cell op, none, w;
    run_cell(s, bb, M, BM_POL_OPTIMUS, &op);
    run_cell(s, bb, M, BM_POL_NONE, &none);
    /* hidden: nested work that ran in the backbone's idle time = none + per-rank nested work
     * (the zero-added-bubble bound) - makespan */
    printf("\nbigmac window sweep, %s, M = %d (optimus %s%.0f ms, hides %.0f ms of nested work in bubbles):\n\n"
           "| W cap | used | bigmac ms | / optimus | hidden ms | enc act GiB | peak GiB |\n|---|---|---|---|---|---|---|\n",
           bm_backbone_name(bb), M, op.ok ? "" : "failed, ", op.ok ? op.makespan : 0.0,
           op.ok && none.ok ? none.makespan + op.nested_max - op.makespan : 0.0);
    for (int W = 1; W <= units; W++) {
        run_cell_w(s, bb, M, BM_POL_BIGMAC, W, &w);
        if (!w.ok) continue;  /* below the smallest deadlock-free window */
        printf("| %d | %d | %.0f | %.3f | %.0f | %.2f | %.1f%s |\n", W, w.window, w.makespan, op.ok ? w.makespan / op.makespan : 0,
               none.ok ? none.makespan + w.nested_max - w.makespan : 0.0, w.enc_act, w.peak, w.oom ? "*" : "");
    }
}

/* The smallest fixed window at which bigmac is no slower than optimus at every M of the table
 * (0 when none up to the largest unit count is). A fixed W keeps bigmac's activation memory
 * the same at every M, so this is the memory bigmac needs to match optimus's speed. */
static int matching_window(const struct bm_spec *s, enum bm_backbone bb, const struct cell *opt,
                           struct cell *out)
{
    int P = s->pp, U = s->unit > 0 ? s->unit : P;
    int max_units = (MULT[N_MULT - 1] * P + U - 1) / U;
    for (int W = 1; W <= max_units; W++) {
        int all = 1;
        for (int i = 0; i < N_MULT && all; i++) {
            run_cell_w(s, bb, MULT[i] * P, BM_POL_BIGMAC, W, &out[i]);
            all = out[i].ok && opt[i].ok && out[i].makespan <= opt[i].makespan * (1 + 1e-9);
        }
        if (all) return W;
    }
    return 0;
}

/* Grow M past the table until optimus runs out of memory: M/P of its first OOM, 0 if none up
 * to 64P. */
static int first_optimus_oom(const struct bm_spec *s, enum bm_backbone bb)
{
    static const int more[] = {20, 24, 32, 48, 64};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
        struct cell c;
        run_cell(s, bb, more[i] * s->pp, BM_POL_OPTIMUS, &c);
        if (c.ok && c.oom) return more[i];
    }
    return 0;
}

/* The same workload with heterogeneous microbatches (encoder cost x U(0.5, 1.5), seeded; e.g.
 * a varying number of images): a column waits for its heaviest rank, so bigmac with U = P
 * (one microbatch per rank per unit) pays for the spread; U = 2P lets the planner balance
 * each unit's shares (LPT). Ratios: optimus / bigmac. */
static void heterogeneous(struct bm_spec *s, enum bm_backbone bb)
{
    struct bm_scale_dist keep = s->data.encoder_cost_scale;
    s->data.encoder_cost_scale = (struct bm_scale_dist){BM_DIST_UNIFORM, 0.5, 1.5, 0, 3};
    int P = s->pp;
    printf("\nheterogeneous encoder costs (x U(0.5, 1.5), seed 3), %s: optimus / bigmac at the smallest window\n\n"
           "| M | optimus ms | U = P | U = 2P | enc act GiB U = P | U = 2P |\n|---|---|---|---|---|---|\n",
           bm_backbone_name(bb));
    for (int i = 1; i < N_MULT; i += 2) {
        int M = MULT[i] * P;
        struct cell op, b1, b2;
        run_cell(s, bb, M, BM_POL_OPTIMUS, &op);
        run_cell_u(s, bb, M, BM_POL_BIGMAC, BM_WINDOW_AUTO, P, &b1);
        run_cell_u(s, bb, M, BM_POL_BIGMAC, BM_WINDOW_AUTO, 2 * P, &b2);
        if (!op.ok || !b1.ok || !b2.ok) {
            printf("| %d | error | | | | |\n", M);
            continue;
        }
        printf("| %d | %.0f | %.3f | %.3f | %.2f | %.2f |\n", M, op.makespan, op.makespan / b1.makespan,
               op.makespan / b2.makespan, b1.enc_act, b2.enc_act);
    }
    s->data.encoder_cost_scale = keep;
}

/* Claim tallies over the M rows of one table. */
struct claims {
    int rows;              /* rows where bigmac, optimus, unified, unified-balanced, none all planned */
    int le_bound, le_optimus, unified_slower, balanced_slower, fit_le_optimus, fit_rows;
    double r_fit_min, r_fit_max;   /* optimus / bigmac(window fit) */
    double r_opt_min, r_opt_max, r_uni_min, r_uni_max, r_bal_min, r_bal_max, r_bound_max;
    int bm_flat, opt_growing, opt_oom_last, bm_oom_any;
    int first_opt_oom_mult;  /* M/P of the first optimus OOM, 0 = none */
    int oom_beyond;          /* when none in the table: M/P of the first one past it, 0 = none */
    int match_w;             /* smallest fixed window matching optimus at every M, 0 = none */
    double match_r_min, match_r_max, match_enc_max;
};

static void minmax(double v, double *lo, double *hi)
{
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
}

static void bench_table(struct bm_spec *s, enum bm_backbone bb, struct claims *cl)
{
    int P = s->pp;
    struct cell c[N_MULT][BM_N_POLICIES];
    memset(cl, 0, sizeof *cl);
    cl->r_opt_min = cl->r_uni_min = cl->r_bal_min = cl->r_fit_min = 1e300;
    struct cell fit[N_MULT];
    printf("\n### %s, %s, P = %d%s\n\n", s->name, bm_backbone_name(bb), P,
           bb == BM_BB_INTERLEAVED ? ", V = 2" : "");
    printf("makespan of each policy / bigmac's (* = OOM: peak > %.0f GiB); bound = none + max per-rank "
           "nested busy of bigmac;\npeak activation GiB per role is the max over ranks.\n\n", s->device.memory_gib);
    printf("| M | M/P | bigmac ms |");
    for (int p = 1; p < BM_N_POLICIES; p++) printf(" %s |", SHORT[p]);
    printf(" bound ms | bigmac/bound | enc act bigmac | enc act optimus | gen act bigmac | gen act optimus "
           "| peak GiB bigmac | peak GiB optimus | bigmac fit | fit W | fit enc act | fit peak GiB |\n|");
    for (int i = 0; i < 3 + BM_N_POLICIES - 1 + 12; i++) printf("---|");
    printf("\n");
    for (int i = 0; i < N_MULT; i++) {
        int M = MULT[i] * P;
        double bound = compare_cells(s, bb, M, c[i]);
        struct cell *b = &c[i][0], *op = &c[i][1];
        printf("| %d | %d |", M, MULT[i]);
        if (b->ok) printf(" %.0f%s |", b->makespan, b->oom ? "*" : ""); else printf(" error |");
        for (int p = 1; p < BM_N_POLICIES; p++) {
            if (!c[i][p].ok) printf(" error |");
            else if (b->ok) printf(" %.3f%s |", c[i][p].makespan / b->makespan, c[i][p].oom ? "*" : "");
            else printf(" %.0f ms%s |", c[i][p].makespan, c[i][p].oom ? "*" : "");
        }
        if (bound > 0) printf(" %.0f | %.3f |", bound, b->makespan / bound); else printf(" - | - |");
        printf(" %.2f | %.2f | %.2f | %.2f | %.1f%s | %.1f%s |", b->enc_act, op->enc_act, b->gen_act,
               op->gen_act, b->peak, b->oom ? "*" : "", op->peak, op->oom ? "*" : "");
        run_cell_w(s, bb, M, BM_POL_BIGMAC, BM_WINDOW_FIT, &fit[i]);
        if (fit[i].ok && b->ok)
            printf(" %.3f%s | %d | %.2f | %.1f |\n", fit[i].makespan / b->makespan, fit[i].oom ? "*" : "",
                   fit[i].window, fit[i].enc_act, fit[i].peak);
        else
            printf(" error | - | - | - |\n");
        if (fit[i].ok && op->ok) {
            cl->fit_rows++;
            cl->fit_le_optimus += fit[i].makespan <= op->makespan * (1 + 1e-9);
            minmax(op->makespan / fit[i].makespan, &cl->r_fit_min, &cl->r_fit_max);
        }
        for (int p = 0; p < BM_N_POLICIES; p++)
            if (!c[i][p].ok) printf("  (%s, M = %d: %s)\n", bm_policy_name(ORDER[p]), M, c[i][p].err);

        if (b->ok && op->ok && c[i][2].ok && c[i][3].ok && bound > 0) {
            cl->rows++;
            double ro = op->makespan / b->makespan, ru = c[i][2].makespan / b->makespan;
            double rb = c[i][3].makespan / b->makespan;
            cl->le_bound += b->makespan <= bound * (1 + 1e-9);
            cl->le_optimus += b->makespan <= op->makespan * (1 + 1e-9);
            cl->unified_slower += ru > 1;
            cl->balanced_slower += rb > 1;
            minmax(ro, &cl->r_opt_min, &cl->r_opt_max);
            minmax(ru, &cl->r_uni_min, &cl->r_uni_max);
            minmax(rb, &cl->r_bal_min, &cl->r_bal_max);
            if (b->makespan / bound > cl->r_bound_max) cl->r_bound_max = b->makespan / bound;
        }
        if (op->ok && op->oom && !cl->first_opt_oom_mult) cl->first_opt_oom_mult = MULT[i];
        if (b->ok && b->oom) cl->bm_oom_any = 1;
    }
    /* Memory claims: bigmac's nested activation peak the same at every M; optimus's encoder
     * activation peak strictly growing with M, and optimus OOM at the largest M. */
    cl->bm_flat = cl->opt_growing = 1;
    for (int i = 0; i < N_MULT; i++) {
        struct cell *b = &c[i][0], *op = &c[i][1];
        if (!b->ok || !op->ok) { cl->bm_flat = cl->opt_growing = 0; continue; }
        double b0 = c[0][0].enc_act + c[0][0].gen_act, bi = b->enc_act + b->gen_act;
        if (fabs(bi - b0) > 1e-6 * (1 + b0)) cl->bm_flat = 0;
        if (i > 0 && !(op->enc_act > c[i - 1][1].enc_act)) cl->opt_growing = 0;
    }
    cl->opt_oom_last = c[N_MULT - 1][1].ok && c[N_MULT - 1][1].oom;
    if (!cl->first_opt_oom_mult) cl->oom_beyond = first_optimus_oom(s, bb);

    struct cell opt[N_MULT], mw[N_MULT];
    for (int i = 0; i < N_MULT; i++) opt[i] = c[i][1];
    cl->match_w = matching_window(s, bb, opt, mw);
    if (cl->match_w) {
        printf("\nbigmac at the smallest fixed window that is no slower than optimus at every M: W = %d\n\n"
               "| M | bigmac W=%d ms | optimus / bigmac W=%d | enc act GiB | gen act GiB | peak GiB | enc act optimus |\n"
               "|---|---|---|---|---|---|---|\n", cl->match_w, cl->match_w, cl->match_w);
        cl->match_r_min = 1e300;
        for (int i = 0; i < N_MULT; i++) {
            printf("| %d | %.0f | %.3f | %.2f | %.2f | %.1f%s | %.2f |\n", MULT[i] * P, mw[i].makespan,
                   opt[i].makespan / mw[i].makespan, mw[i].enc_act, mw[i].gen_act, mw[i].peak,
                   mw[i].oom ? "*" : "", opt[i].enc_act);
            minmax(opt[i].makespan / mw[i].makespan, &cl->match_r_min, &cl->match_r_max);
            if (mw[i].enc_act + mw[i].gen_act > cl->match_enc_max) cl->match_enc_max = mw[i].enc_act + mw[i].gen_act;
        }
    }
}

static const char *yes(int x) { return x ? "holds" : "does not hold"; }

static void print_claims(const struct claims *cl)
{
    printf("\nclaims over %d M values:\n", cl->rows);
    if (!cl->rows) {
        printf("  (no row planned for every policy)\n");
        return;
    }
    printf("  bigmac <= zero-added-bubble bound      %d/%d  (worst bigmac/bound %.3f)\n", cl->le_bound,
           cl->rows, cl->r_bound_max);
    printf("  bigmac <= optimus                      %d/%d  (optimus/bigmac %.3f .. %.3f; paper 1.08-1.1)\n",
           cl->le_optimus, cl->rows, cl->r_opt_min, cl->r_opt_max);
    if (cl->fit_rows)
        printf("  bigmac (window fit) <= optimus         %d/%d  (optimus/bigmac-fit %.3f .. %.3f)\n",
               cl->fit_le_optimus, cl->fit_rows, cl->r_fit_min, cl->r_fit_max);
    printf("  unified slower than bigmac             %d/%d  (unified/bigmac %.3f .. %.3f; paper 1.6-1.9 "
           "understanding, 1.5-1.9 generation)\n", cl->unified_slower, cl->rows, cl->r_uni_min, cl->r_uni_max);
    printf("  unified-balanced slower than bigmac    %d/%d  (unified-balanced/bigmac %.3f .. %.3f)\n",
           cl->balanced_slower, cl->rows, cl->r_bal_min, cl->r_bal_max);
    printf("  bigmac nested activation flat in M     %s%s\n", yes(cl->bm_flat),
           cl->bm_oom_any ? "  (but bigmac OOMs at some M)" : "");
    printf("  optimus encoder activation grows in M  %s\n", yes(cl->opt_growing));
    printf("  optimus OOM at the largest M           %s", yes(cl->opt_oom_last));
    if (cl->first_opt_oom_mult) printf("  (first OOM at M/P = %d; paper: beyond 8)\n", cl->first_opt_oom_mult);
    else if (cl->oom_beyond) printf("  (first OOM past the table, at M/P = %d; paper: beyond 8)\n", cl->oom_beyond);
    else printf("  (no OOM up to M/P = 64; paper: beyond M/P = 8)\n");
    if (cl->match_w)
        printf("  bigmac (fixed W = %d) <= optimus        %d/%d  (optimus/bigmac %.3f .. %.3f; nested activation "
               "at most %.2f GiB at any M)\n", cl->match_w, N_MULT, N_MULT, cl->match_r_min, cl->match_r_max,
               cl->match_enc_max);
    else
        printf("  bigmac (any fixed W) <= optimus        no fixed window matches optimus at every M\n");
}

/* One window cap for every workload and backbone: the largest of their smallest matching
 * windows. Since a window is a cap, each table plans the fastest window up to it; the summary
 * shows that one setting keeps bigmac at least as fast as optimus everywhere, and what memory it
 * costs against optimus's and against the smallest safe window's. */
static void common_cap(struct bm_spec **specs, int n, int cap)
{
    const enum bm_backbone bbs[2] = {BM_BB_1F1B, BM_BB_INTERLEAVED};
    printf("\n## One window cap for every workload: W <= %d\n\n"
           "| workload | backbone | optimus / bigmac | bigmac / bound (max) | windows used | nested act GiB | "
           "optimus nested act GiB | peak GiB (max) | OOM |\n|---|---|---|---|---|---|---|---|---|\n", cap);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 2; j++) {
            double rmin = 1e300, rmax = 0, bmax = 0, amin = 1e300, amax = 0, omin = 1e300, omax = 0, pk = 0;
            int wmin = 1 << 30, wmax = 0, oom = 0, ok = 1;
            for (int k = 0; k < N_MULT && ok; k++) {
                int M = MULT[k] * specs[i]->pp;
                struct cell b, o, none;
                run_cell_w(specs[i], bbs[j], M, BM_POL_BIGMAC, cap, &b);
                run_cell(specs[i], bbs[j], M, BM_POL_OPTIMUS, &o);
                run_cell(specs[i], bbs[j], M, BM_POL_NONE, &none);
                if (!(ok = b.ok && o.ok && none.ok)) break;
                minmax(o.makespan / b.makespan, &rmin, &rmax);
                double r = b.makespan / (none.makespan + b.nested_max);
                if (r > bmax) bmax = r;
                minmax(b.enc_act + b.gen_act, &amin, &amax);
                minmax(o.enc_act + o.gen_act, &omin, &omax);
                if (b.window < wmin) wmin = b.window;
                if (b.window > wmax) wmax = b.window;
                if (b.peak > pk) pk = b.peak;
                oom |= b.oom;
            }
            if (!ok) {
                printf("| %s | %s | (a policy failed to plan) |||||||\n", specs[i]->name, bm_backbone_name(bbs[j]));
                continue;
            }
            printf("| %s | %s | %.3f .. %.3f | %.3f | %d .. %d | %.2f .. %.2f | %.2f .. %.2f | %.1f | %s |\n",
                   specs[i]->name, bm_backbone_name(bbs[j]), rmin, rmax, bmax, wmin, wmax, amin, amax, omin, omax,
                   pk, oom ? "yes" : "no");
        }
}

/* The examples are P = 8; the same workloads at P = 4 and 16 (M = 8P, window auto, the unit
 * following P): where bigmac stands against the bound and the baselines at other depths. */
static void other_depths(struct bm_spec **specs, int n)
{
    const enum bm_backbone bbs[2] = {BM_BB_1F1B, BM_BB_INTERLEAVED};
    printf("\n## Other pipeline depths (M = 8P, window auto)\n\n"
           "| workload | backbone | P | bigmac ms | bigmac / bound | optimus / bigmac | unified / bigmac | "
           "window |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 2; j++)
            for (int P = 4; P <= 16; P *= 4) {
                struct cell b, o, u, none;
                run_cell_pu(specs[i], P, bbs[j], 8 * P, BM_POL_BIGMAC, BM_WINDOW_AUTO, 0, &b);
                run_cell_pu(specs[i], P, bbs[j], 8 * P, BM_POL_OPTIMUS, 0, 0, &o);
                run_cell_pu(specs[i], P, bbs[j], 8 * P, BM_POL_UNIFIED, 0, 0, &u);
                run_cell_pu(specs[i], P, bbs[j], 8 * P, BM_POL_NONE, 0, 0, &none);
                if (!b.ok || !o.ok || !u.ok || !none.ok) {
                    printf("| %s | %s | %d | (a policy failed to plan) |||||\n", specs[i]->name,
                           bm_backbone_name(bbs[j]), P);
                    continue;
                }
                printf("| %s | %s | %d | %.0f | %.3f | %.3f%s | %.3f%s | %d |\n", specs[i]->name,
                       bm_backbone_name(bbs[j]), P, b.makespan, b.makespan / (none.makespan + b.nested_max),
                       o.makespan / b.makespan, o.oom ? "*" : "", u.makespan / b.makespan, u.oom ? "*" : "",
                       b.window);
            }
}

int main(int argc, char **argv)
{
    static const char *dflt[] = {"examples/understanding-qwen3-30b-a3b.json", "examples/generation-mmdit-20b.json"};
    int n = argc > 1 ? argc - 1 : 2;
    const char **paths = argc > 1 ? (const char **)argv + 1 : dflt;
    printf("## Policies on the example workloads (build/bench/bench_policies)\n");
    struct bm_spec *specs[16];
    int cap = 0;
    if (n > 16) n = 16;
    for (int i = 0; i < n; i++) {
        struct bm_err err;
        if (bm_spec_load(paths[i], &specs[i], &err)) {
            fprintf(stderr, "bench_policies: %s\n", err.msg);
            while (i--) bm_spec_free(specs[i]);
            return 1;
        }
        const enum bm_backbone bbs[2] = {BM_BB_1F1B, BM_BB_INTERLEAVED};
        for (int j = 0; j < 2; j++) {
            struct claims cl;
            bench_table(specs[i], bbs[j], &cl);
            print_claims(&cl);
            window_sweep(specs[i], bbs[j]);
            heterogeneous(specs[i], bbs[j]);
            if (cl.match_w > cap) cap = cl.match_w;
        }
    }
    if (cap) common_cap(specs, n, cap);
    other_depths(specs, n);
    for (int i = 0; i < n; i++) bm_spec_free(specs[i]);
    return 0;
}
