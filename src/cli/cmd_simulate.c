/* cmd_simulate.c — `bigmac simulate SPEC [plan flags] [--compare] [--json] [--jitter X] [--seed S]`:
 * plan the spec and simulate the table (docs/design.md §8); --compare runs every policy and reports the
 * zero-added-bubble bound (docs/design.md §6) through bm_compare (src/study/); --table TABLE simulates
 * a given table (the plan a run executed) with SPEC's costs instead of planning. Flag parsing and
 * printing only; also the printing helpers `bigmac sweep` shares (cli.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "table/table.h"
#include "sim/hosts.h"
#include "sim/expect.h"
#include "sim/step.h"
#include "study/study.h"
#include "util/util.h"

#define GIB(mib) ((mib) / 1024.0)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac simulate SPEC [--pp N] [--vpp N] [--microbatches N] [--unit N]\n"
            "                       [--backbone gpipe|1f1b|interleaved|zb-h1|zb-interleaved|zb-v|dualpipe-v] [--policy NAME]\n"
            "                       [--window N|auto|fit] [--compare] [--json] [--jitter X] [--seed S]\n"
            "                       [--search off|N]\n"
            "       bigmac simulate SPEC --table TABLE.json [--json] [--jitter X] [--seed S] [--no-verify]\n"
            "\n"
            "Plan SPEC and simulate the operator table: makespan, per-rank busy/idle, bubble ratio,\n"
            "peak memory per rank and role, OOM against the device memory, samples/s.\n"
            "  --compare    every policy (bigmac, optimus, unified, unified-balanced, ideal, none),\n"
            "               the zero-added-bubble bound (none's makespan + the largest per-rank\n"
            "               encoder+generator compute of the bigmac table) and a makespan lower\n"
            "               bound (each policy's makespan / it: how far from optimal); when optimus\n"
            "               runs out of memory also optimus+recompute (encoders and generators\n"
            "               recomputed)\n"
            "  --json       one JSON object on stdout\n"
            "  --search N   placement search budget (bigmac, ideal): off, or order timings per\n"
            "               descent (default: on, docs/planner.md \"Placement search\")\n"
            "  --jitter X   encoder/generator op durations x (1 + X*u), u uniform in [-1,1] (default 0)\n"
            "  --seed S     jitter seed (default 1)\n"
            "  --ranks-per-host N  rank r runs on host r / N; transfers between hosts take the\n"
            "               inter-host link (device.inter_host_*; a \"hosts\" line says what crosses)\n"
            "  --dp D       D data-parallel replicas of the pipeline: pipeline rank p of replica d\n"
            "               is global rank p*D + d, placed by --ranks-per-host (the table and the\n"
            "               walk stay one replica's; the step adds the gradient synchronisation\n"
            "               and the optimizer, and samples/s counts every replica)\n"
            "  --zero 0|1   train.zero: 1 = ZeRO-1, the optimizer state sharded over each\n"
            "               module's copies (reduce-scatter + all-gather; docs/simulator.md \"The step\")\n"
            "  --table TABLE.json  do not plan: simulate this table (e.g. the plan a run executed,\n"
            "               `bigmac plan ... -o`) with SPEC's costs: module costs and spreads,\n"
            "               encoder scales, device (rank_time_scale, op_overhead_us and the\n"
            "               other dispatch numbers, links).\n"
            "               Planning again with calibrated costs may give another table than the\n"
            "               one that ran; this predicts the one that ran (docs/simulator.md\n"
            "               \"Predicting a run\"). No plan flags with it. The table must pass\n"
            "               `bigmac verify` (--no-verify: simulate it anyway, with a warning).\n"
            "Cost and memory model: docs/simulator.md; placement over hosts: docs/multihost.md.\n");
}

int bm_cli_double(const char *flag, const char *val, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || *end || end == val || !(v >= 0) || v > 1e300) {
        fprintf(stderr, "bigmac: error: %s: expected a non-negative number, got '%s'\n", flag, val);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_u64(const char *flag, const char *val, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || *end || end == val || val[0] == '-') {
        fprintf(stderr, "bigmac: error: %s: expected a non-negative integer, got '%s'\n", flag, val);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

void bm_cli_print_hosts(FILE *f, const struct bm_table *t, const struct bm_costs *c)
{
    if (t->ranks_per_host <= 0) return;
    struct bm_host_traffic h;
    bm_cost_host_traffic(t, c, &h);
    fprintf(f, "hosts %d (%d ranks per host; between hosts %g GB/s, %g us): %ld of %ld transfers cross hosts, "
               "%.3f MiB, %.3f ms in flight (%.3f ms on the intra-host link)%s\n",
            h.hosts, t->ranks_per_host, c->device.inter_host_gbytes_per_s, c->device.inter_host_latency_us,
            h.cross, h.sends, h.cross_mib, h.cross_ms, h.cross_intra_ms,
            t->dp > 1 ? ", in each replica's pipeline" : "");
}

void bm_cli_print_step(FILE *f, const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl)
{
    if (tl->step_ms <= tl->makespan_ms && t->dp <= 1 && !t->zero) return; /* the step is the walk */
    fprintf(f, "step %.3f ms = walk %.3f + exposed sync %.3f + optimizer %.3f (sync %.3f ms in all on the busiest "
               "rank; %s)\n", tl->step_ms, tl->makespan_ms, tl->sync_exposed_ms, tl->optimizer_ms, tl->sync_total_ms,
            t->zero ? "ZeRO-1: gradients reduce-scattered, weights all-gathered" : "gradients all-reduced");
    struct bm_step_mem *parts = bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *parts);
    if (!parts) return;
    bm_step_state(t, c, parts);
    fprintf(f, "state per rank (GiB; weights / gradients / optimizer state%s):", t->zero ? ", sharded" : "");
    for (int r = 0; r < t->pp; r++)
        fprintf(f, "%s %.3f/%.3f/%.3f", r ? "," : "", GIB(parts[r].weights_mib), GIB(parts[r].grads_mib),
                GIB(parts[r].optim_mib));
    fprintf(f, "\n");
    bm_free(parts);
}

void bm_cli_json_print(json_t *j)
{
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    fputc('\n', stdout);
}

/* Human output of one simulation: a header line, then one aligned row per rank. */
static void print_human(const struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_table *t,
                        const struct bm_costs *c,
                        const struct bm_timeline *tl)
{
    printf("%s: policy %s, backbone %s, pp %d, vpp %d, microbatches %d, unit %d, window %d",
           s->name ? s->name : "spec", bm_policy_name(t->policy), bm_backbone_name(t->backbone),
           t->pp, t->vpp, t->microbatches, t->unit, t->window);
    if (t->dp > 1) /* one replica's table; the hosts line places all pp * dp ranks */
        printf(", dp %d (every replica walks this table; rank = p*%d + d)", t->dp, t->dp);
    if (t->policy == BM_POL_BIGMAC && o->window > t->window) /* a window is a cap */
        printf(" (under the cap %d, none faster by more than %g%%)", o->window, BM_WINDOW_GAIN * 100);
    printf("\n");
    printf("makespan %.3f ms, bubble %.1f%%, %.2f samples/s, peak %.3f GiB of %.3f GiB%s\n",
           tl->makespan_ms, 100 * tl->bubble_ratio, tl->samples_per_s, GIB(tl->peak_mib),
           GIB(tl->memory_cap_mib), tl->oom ? "  ** OOM **" : "");
    bm_cli_print_hosts(stdout, t, c);
    bm_cli_print_step(stdout, t, c, tl);
    printf("\n");
    printf("%4s %10s %10s %9s %9s %9s %9s %9s %9s %9s %9s\n", "rank", "busy ms", "idle ms", "lead",
           "middle", "tail", "state GiB", "enc GiB", "bb GiB", "gen GiB", "peak GiB");
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        printf("%4d %10.3f %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f%s\n", r,
               rt->busy_ms, rt->idle_lead_ms + rt->idle_mid_ms + rt->idle_tail_ms, rt->idle_lead_ms,
               rt->idle_mid_ms, rt->idle_tail_ms, GIB(rt->state_mib),
               GIB(rt->peak_act_mib[BM_ROLE_ENCODER]), GIB(rt->peak_act_mib[BM_ROLE_BACKBONE]),
               GIB(rt->peak_act_mib[BM_ROLE_GENERATOR]), GIB(rt->peak_mib), rt->oom ? "  OOM" : "");
    }
    if (!bm_table_splits(t, -1)) return;
    printf("\nsplit backward: activation freed at B / at W, and the most held between a B and its W\n");
    printf("%4s %12s %12s %14s\n", "rank", "at B GiB", "at W GiB", "held B..W GiB");
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        printf("%4d %12.3f %12.3f %14.3f\n", r, GIB(rt->freed_b_mib), GIB(rt->freed_w_mib),
               GIB(rt->peak_held_w_mib));
    }
}

/* One row of the comparison table: "-" for the ratio to the lower bound when there is none
 * (and for none, which runs less work). */
static void print_row(const struct bm_compare_row *row, double lower, int step)
{
    if (!row->ok) {
        char first[160];
        snprintf(first, sizeof first, "%s", row->error);
        first[strcspn(first, "\n")] = 0;
        printf("%-17s %s\n", bm_compare_row_name(row), first);
        return;
    }
    char ratio[16] = "-";
    if (lower > 0 && (row->recompute || row->policy != BM_POL_NONE))
        snprintf(ratio, sizeof ratio, "%.3f", row->makespan_ms / lower);
    printf("%-17s %12.3f %8s %7.1f%% %11.2f %10.3f %5s", bm_compare_row_name(row), row->makespan_ms, ratio,
           100 * row->bubble_ratio, row->samples_per_s, GIB(row->peak_mib), row->oom ? "OOM" : "no");
    if (step) printf(" %10.3f %10.3f %10.3f", row->step_ms, row->sync_exposed_ms, row->optimizer_ms);
    printf("\n");
}

/* `simulate --compare`: every policy (bm_compare), printed as a table with the recompute row
 * under optimus, then the two bounds; --json: bm_compare_write_json's object. Exit 1 when
 * no policy planned. */
static int run_compare(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_sim_opts *so, int json,
                       int search)
{
    struct bm_compare_opts co = {.sim = so, .search = search};
    struct bm_err err;
    if (json) {
        int n_failed = 0;
        if (bm_compare_write_json(s, o, &co, stdout, &n_failed, &err)) {
            bm_cli_error(err.msg);
            return 1;
        }
        return n_failed == BM_N_POLICIES ? 1 : 0;
    }
    struct bm_compare c;
    if (bm_compare(s, o, &co, &c, &err)) {
        bm_cli_error(err.msg);
        return 1;
    }
    int step = 0; /* the step's columns when some row's step is more than its walk */
    for (int p = 0; p < c.n_rows; p++) step |= c.rows[p].ok && c.rows[p].step_ms > c.rows[p].makespan_ms;
    printf("%-17s %12s %8s %8s %11s %10s %5s", "policy", "makespan ms", "/ lower", "bubble", "samples/s",
           "peak GiB", "oom");
    if (step) printf(" %10s %10s %10s", "step ms", "sync ms", "optim ms");
    printf("\n");
    for (int p = 0; p < BM_N_POLICIES; p++) {
        print_row(&c.rows[p], c.lower_ms, step);
        if (p == BM_POL_OPTIMUS && c.n_rows > BM_N_POLICIES) print_row(&c.rows[BM_N_POLICIES], c.lower_ms, step);
    }
    if (c.bound_ms >= 0)
        printf("\nzero-added-bubble bound: %.3f ms (none %.3f + largest per-rank nested compute "
               "of bigmac %.3f)\n", c.bound_ms, c.rows[BM_POL_NONE].makespan_ms, c.rows[BM_POL_BIGMAC].nested_max_ms);
    if (c.lower_ms >= 0)
        printf("lower bound: %.3f ms (no order of this work that keeps the backbone order beats it, "
               "for any policy's placement; docs/simulator.md)\n", c.lower_ms);
    int rc = c.n_failed == BM_N_POLICIES ? 1 : 0;
    bm_compare_free(&c);
    return rc;
}

/* What the command line says. */
struct args {
    struct bm_plan_opts f;  /* the plan flags (BM_UNSET: not given) */
    const char *path, *table_path;
    int compare, json, search, no_verify;
    struct bm_sim_opts so;
};

/* --search off|N into *search; prints the error and returns -1 on a bad value. */
static int parse_search(const char *a, const char *v, int *search)
{
    uint64_t n;
    if (!strcmp(v, "off")) {
        *search = BM_SEARCH_OFF;
        return 0;
    }
    if (parse_u64(a, v, &n)) return -1;
    if (n < 1 || n > 100000000) {
        fprintf(stderr, "bigmac: error: --search: expected off or a count in 1..100000000, got '%s'\n", v);
        return -1;
    }
    *search = (int)n;
    return 0;
}

/* The command line into *g. Returns -1 to go on, else the exit status (--help: 0; a usage
 * error: BM_USAGE, printed). */
static int parse_args(int argc, char **argv, struct args *g)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = bm_cli_plan_flag(argc, argv, &i, &g->f);
        if (k < 0) return BM_USAGE;
        if (k > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--compare")) {
            g->compare = 1;
        } else if (!strcmp(a, "--json")) {
            g->json = 1;
        } else if (!strcmp(a, "--search")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: --search needs a value (off, or a number of order timings)\n");
                return BM_USAGE;
            }
            if (parse_search(a, argv[++i], &g->search)) return BM_USAGE;
        } else if (!strcmp(a, "--no-verify")) {
            g->no_verify = 1;
        } else if (!strcmp(a, "--table")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: --table needs a value (an operator table, `bigmac plan ... -o`)\n");
                return BM_USAGE;
            }
            g->table_path = argv[++i];
        } else if (!strcmp(a, "--jitter") || !strcmp(a, "--seed")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a value\n", a);
                return BM_USAGE;
            }
            const char *v = argv[++i];
            if (a[2] == 'j' ? bm_cli_double(a, v, &g->so.jitter) : parse_u64(a, v, &g->so.seed))
                return BM_USAGE;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bigmac: error: simulate: unknown flag '%s'\n", a);
            usage(stderr);
            return BM_USAGE;
        } else if (g->path) {
            fprintf(stderr, "bigmac: error: simulate: one SPEC only (got '%s' and '%s')\n", g->path, a);
            return BM_USAGE;
        } else {
            g->path = a;
        }
    }
    const struct bm_plan_opts *f = &g->f;
    if (g->table_path && (g->compare || f->pp != BM_UNSET || f->vpp != BM_UNSET || f->microbatches != BM_UNSET ||
                          f->unit != BM_UNSET || f->window != BM_UNSET || (int)f->backbone != BM_UNSET ||
                          (int)f->policy != BM_UNSET || g->search)) {
        fprintf(stderr, "bigmac: error: simulate: --table simulates the table as it is: no --compare, --search or "
                        "plan flags with it\n");
        return BM_USAGE;
    }
    if (g->no_verify && !g->table_path) {
        fprintf(stderr, "bigmac: error: simulate: --no-verify is for --table (a planned table is valid)\n");
        return BM_USAGE;
    }
    return -1;
}

/* One policy: plan (or load table_path and give it s's costs), simulate, and with an op-time
 * spread in the spec also the expected makespan; printed human or --json. */
static int run_one(const struct bm_spec *s, const struct bm_plan_opts *po, const char *table_path,
                   const struct bm_sim_opts *so, int json, int search, int no_verify)
{
    struct bm_err err;
    struct bm_table *t;
    struct bm_costs *c;
    struct bm_timeline *tl;
    struct bm_plan_opts plan = *po, *o = &plan;
    int prc;
    if (table_path) { /* the table's schedule with the spec's costs (its chunk weights kept) */
        prc = bm_table_load(table_path, &t, &c, &err);
        if (!prc && ((prc = bm_table_use_spec_costs(t, c, s, table_path, &err)) ||
                     (prc = bm_cli_verify_table(t, table_path, no_verify, &err))))
            bm_table_free(t), bm_costs_free(c);
        plan.window = 0; /* no cap to report */
    } else {
        prc = bm_plan_build_search(s, o, search, &t, &c, NULL, &err);
    }
    if (prc) {
        bm_cli_error(err.msg);
        return 1;
    }
    if (bm_simulate_summary(t, c, so, &tl, &err)) { /* only figures are printed */
        bm_table_free(t), bm_costs_free(c);
        bm_cli_error(err.msg);
        return 1;
    }
    double ex = 0, sd = 0;
    int has_spread = bm_costs_have_spread(c), rc = 0;
    if (has_spread && bm_simulate_expected(t, c, so, BM_EXPECT_SAMPLES, so->seed, &ex, &sd, &err)) {
        bm_cli_error(err.msg);
        rc = 1;
    } else if (json) {
        json_t *j = bm_study_sim_json(t, c, tl);
        if (has_spread) {
            json_object_set_new(j, "expected_makespan_ms", json_real(ex));
            json_object_set_new(j, "expected_makespan_sd_ms", json_real(sd));
            json_object_set_new(j, "expected_samples", json_integer(BM_EXPECT_SAMPLES));
        }
        bm_cli_json_print(j);
        json_decref(j);
    } else {
        print_human(s, o, t, c, tl);
        if (has_spread)
            printf("\nexpected makespan under the modules' op-time spread%s: %.3f ms (sd %.3f over %d samples, "
                   "seed %llu)\n", c->op_overhead_sd_ms > 0 ? " and the dispatch spread" : "", ex, sd,
                   BM_EXPECT_SAMPLES, (unsigned long long)so->seed);
    }
    bm_timeline_free(tl);
    bm_table_free(t);
    bm_costs_free(c);
    return rc;
}

int bm_cmd_simulate(int argc, char **argv)
{
    struct args g = {.so = {0, 1, 0}};
    bm_plan_opts_unset(&g.f);
    int prc = parse_args(argc, argv, &g);
    if (prc >= 0) return prc;
    struct bm_spec *s;
    struct bm_plan_opts o;
    int lrc = bm_cli_load_spec("simulate", g.path, &g.f, usage, &s, &o);
    if (lrc) return lrc;
    g.so.samples_per_microbatch = s->data.samples_per_microbatch;
    int rc = g.compare ? run_compare(s, &o, &g.so, g.json, g.search) : run_one(s, &o, g.table_path, &g.so, g.json, g.search, g.no_verify);
    bm_spec_free(s);
    return rc;
}
