/* cmd_simulate.c — `bigmac simulate SPEC [plan flags] [--compare] [--json] [--jitter X] [--seed S]`:
 * plan the spec and simulate the table (docs/design.md §8); --compare runs every policy and reports the
 * zero-added-bubble bound (docs/design.md §6); --table TABLE simulates a given table (the plan a run
 * executed) with SPEC's costs instead of planning. Also the helpers `bigmac sweep` shares (cli.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "table/table.h"
#include "sim/hosts.h"
#include "sim/expect.h"
#include "spec/recompute.h"
#include "util/util.h"

#define GIB(mib) ((mib) / 1024.0)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac simulate SPEC [--pp N] [--vpp N] [--microbatches N] [--unit N]\n"
            "                       [--backbone gpipe|1f1b|interleaved|zb-h1|zb-interleaved] [--policy NAME]\n"
            "                       [--window N|auto|fit] [--compare] [--json] [--jitter X] [--seed S]\n"
            "                       [--search off|N]\n"
            "       bigmac simulate SPEC --table TABLE.json [--json] [--jitter X] [--seed S]\n"
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
            "  --table TABLE.json  do not plan: simulate this table (e.g. the plan a run executed,\n"
            "               `bigmac plan ... -o`) with SPEC's costs: module costs and spreads,\n"
            "               encoder scales, device (rank_time_scale, op_overhead_us, links).\n"
            "               Planning again with calibrated costs may give another table than the\n"
            "               one that ran; this predicts the one that ran (docs/simulator.md\n"
            "               \"Predicting a run\"). No plan flags with it.\n"
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

int bm_cli_sim_run(const struct bm_spec *s, const struct bm_plan_opts *o,
                   const struct bm_sim_opts *so, struct bm_table **t, struct bm_timeline **tl,
                   struct bm_err *err)
{
    *t = NULL;
    *tl = NULL;
    if (bm_plan_build(s, o, t, err)) return BM_ERR;
    if (bm_simulate(*t, so, tl, err)) {
        bm_table_free(*t);
        *t = NULL;
        return BM_ERR;
    }
    return BM_OK;
}

static json_t *roles_json(const double *mib)
{
    return json_pack("{s:f, s:f, s:f}", "encoder", GIB(mib[BM_ROLE_ENCODER]), "backbone",
                     GIB(mib[BM_ROLE_BACKBONE]), "generator", GIB(mib[BM_ROLE_GENERATOR]));
}

void bm_cli_print_hosts(FILE *f, const struct bm_table *t)
{
    if (t->device.ranks_per_host <= 0) return;
    struct bm_host_traffic h;
    bm_cost_host_traffic(t, &h);
    fprintf(f, "hosts %d (%d ranks per host; between hosts %g GB/s, %g us): %ld of %ld transfers cross hosts, "
               "%.3f MiB, %.3f ms in flight (%.3f ms on the intra-host link)\n",
            h.hosts, t->device.ranks_per_host, t->device.inter_host_gbytes_per_s, t->device.inter_host_latency_us,
            h.cross, h.sends, h.cross_mib, h.cross_ms, h.cross_intra_ms);
}

json_t *bm_cli_hosts_json(const struct bm_table *t)
{
    struct bm_host_traffic h;
    bm_cost_host_traffic(t, &h);
    return json_pack("{s:i, s:i, s:f, s:f, s:I, s:I, s:f, s:f, s:f}", "hosts", h.hosts, "ranks_per_host",
                     t->device.ranks_per_host, "inter_host_gbytes_per_s", t->device.inter_host_gbytes_per_s,
                     "inter_host_latency_us", t->device.inter_host_latency_us, "transfers", (json_int_t)h.sends,
                     "cross_host_transfers", (json_int_t)h.cross, "cross_host_mib", h.cross_mib,
                     "cross_host_ms", h.cross_ms, "cross_host_intra_link_ms", h.cross_intra_ms);
}

json_t *bm_cli_sim_json(const struct bm_table *t, const struct bm_timeline *tl)
{
    json_t *ranks = json_array();
    int split = bm_table_splits(t, -1);
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        double idle = rt->idle_lead_ms + rt->idle_mid_ms + rt->idle_tail_ms;
        json_array_append_new(
            ranks, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:b}", "rank", r, "busy_ms",
                             rt->busy_ms, "idle_ms", idle, "idle_lead_ms", rt->idle_lead_ms,
                             "idle_mid_ms", rt->idle_mid_ms, "idle_tail_ms", rt->idle_tail_ms,
                             "state_gib", GIB(rt->state_mib), "peak_mem_gib", GIB(rt->peak_mib),
                             "peak_act_gib", roles_json(rt->peak_act_mib), "oom", rt->oom));
        if (split) /* the two-step free of a split backward (B, then W) */
            json_object_update_new(json_array_get(ranks, (size_t)r),
                                   json_pack("{s:f, s:f, s:f}", "freed_at_b_gib", GIB(rt->freed_b_mib),
                                             "freed_at_w_gib", GIB(rt->freed_w_mib), "peak_held_for_w_gib",
                                             GIB(rt->peak_held_w_mib)));
    }
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:b, s:o}", "policy",
                     bm_policy_name(t->policy), "backbone", bm_backbone_name(t->backbone), "pp",
                     t->pp, "vpp", t->vpp, "microbatches", t->microbatches, "unit", t->unit,
                     "window", t->window, "makespan_ms", tl->makespan_ms, "bubble_ratio",
                     tl->bubble_ratio, "samples_per_s", tl->samples_per_s, "peak_mem_gib",
                     GIB(tl->peak_mib), "memory_gib", GIB(tl->memory_cap_mib), "oom", tl->oom,
                     "ranks", ranks);
    if (j && t->device.ranks_per_host > 0) json_object_set_new(j, "hosts", bm_cli_hosts_json(t));
    return j;
}

void bm_cli_json_print(json_t *j)
{
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    fputc('\n', stdout);
}

/* Human output of one simulation: a header line, then one aligned row per rank. */
static void print_human(const struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_table *t,
                        const struct bm_timeline *tl)
{
    printf("%s: policy %s, backbone %s, pp %d, vpp %d, microbatches %d, unit %d, window %d",
           s->name ? s->name : "spec", bm_policy_name(t->policy), bm_backbone_name(t->backbone),
           t->pp, t->vpp, t->microbatches, t->unit, t->window);
    if (t->policy == BM_POL_BIGMAC && o->window > t->window) /* a window is a cap */
        printf(" (the fastest under the cap %d)", o->window);
    printf("\n");
    printf("makespan %.3f ms, bubble %.1f%%, %.2f samples/s, peak %.3f GiB of %.3f GiB%s\n",
           tl->makespan_ms, 100 * tl->bubble_ratio, tl->samples_per_s, GIB(tl->peak_mib),
           GIB(tl->memory_cap_mib), tl->oom ? "  ** OOM **" : "");
    bm_cli_print_hosts(stdout, t);
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

/* Largest per-rank encoder+generator compute time of a timeline. */
static double max_nested_ms(const struct bm_timeline *tl)
{
    double m = 0;
    for (int r = 0; r < tl->pp; r++) {
        double v = tl->ranks[r].busy_role_ms[BM_ROLE_ENCODER] + tl->ranks[r].busy_role_ms[BM_ROLE_GENERATOR];
        if (v > m) m = v;
    }
    return m;
}

static const enum bm_policy compare_order[BM_N_POLICIES] = {
    BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL, BM_POL_NONE};

/* One row of the comparison, printed after every policy has been planned (the ratio to the
 * lower bound needs all of them). */
struct cmp_row {
    int ok, oom;
    double ms, bubble, sps, peak;
    char err[160];
};

/* The memory-equal compute-first baseline: optimus with every encoder and generator
 * recomputed ("policy": "optimus+recompute"), one row like the others (JSON: appended to
 * results now; human: returned in *row). */
static void compare_optimus_recompute(struct bm_spec *s, struct bm_plan_opts o, const struct bm_sim_opts *so,
                                      int json, json_t *results, struct cmp_row *row)
{
    static const char *name = "optimus+recompute";
    int *saved = bm_malloc((size_t)s->n_modules * sizeof *saved);
    struct bm_table *t;
    struct bm_timeline *tl;
    struct bm_err err;
    o.policy = BM_POL_OPTIMUS;
    int rc = BM_ERR;
    memset(row, 0, sizeof *row);
    if (!saved) bm_err_set(&err, "out of memory");
    else {
        bm_spec_recompute_roles(s, BM_RECOMPUTE_NESTED, 1, saved);
        rc = bm_cli_sim_run(s, &o, so, &t, &tl, &err);
        bm_spec_recompute_restore(s, saved);
    }
    bm_free(saved);
    if (rc) {
        if (json) json_array_append_new(results, json_pack("{s:s, s:s}", "policy", name, "error", err.msg));
        snprintf(row->err, sizeof row->err, "%s", strtok(err.msg, "\n"));
        return;
    }
    if (json) {
        json_t *j = bm_cli_sim_json(t, tl);
        json_object_set_new(j, "policy", json_string(name));
        json_array_append_new(results, j);
    }
    *row = (struct cmp_row){.ok = 1, .oom = tl->oom, .ms = tl->makespan_ms, .bubble = tl->bubble_ratio,
                            .sps = tl->samples_per_s, .peak = tl->peak_mib};
    bm_timeline_free(tl);
    bm_table_free(t);
}

/* Every policy planned and simulated, then printed: the rows need the lower bound, which is
 * the smallest of the policies' own bounds (each places the work its own way, so only the
 * smallest holds for all of them; none runs less work and is left out). Under jitter the
 * durations are not the nominal ones the bound is computed from: no bound then. The
 * optimus+recompute row (only when optimus is OOM) runs more work on optimus's placement, so the
 * bound holds for it too. */
static int run_compare(struct bm_spec *s, struct bm_plan_opts o, const struct bm_sim_opts *so,
                       int json, int search)
{
    int optimus_oom = 0;
    struct cmp_row recompute_row = {0};
    json_t *results = json_array();
    double none_ms = -1, nested = -1, lower = -1;
    double ms[BM_N_POLICIES], bubble[BM_N_POLICIES], sps[BM_N_POLICIES], peak[BM_N_POLICIES];
    int oom[BM_N_POLICIES], ok[BM_N_POLICIES];
    char errs[BM_N_POLICIES][160];
    int failed = 0;
    for (int i = 0; i < BM_N_POLICIES; i++) {
        o.policy = compare_order[i];
        struct bm_table *t;
        struct bm_timeline *tl;
        struct bm_err err;
        double lb = -1;
        ok[i] = 0;
        if (bm_plan_build_search(s, &o, search, &t, &lb, &err)) {
            failed++;
            if (json)
                json_array_append_new(results, json_pack("{s:s, s:s}", "policy",
                                                         bm_policy_name(o.policy), "error", err.msg));
            snprintf(errs[i], sizeof errs[i], "%s", strtok(err.msg, "\n"));
            continue;
        }
        if (bm_simulate(t, so, &tl, &err)) {
            failed++;
            bm_table_free(t);
            if (json)
                json_array_append_new(results, json_pack("{s:s, s:s}", "policy",
                                                         bm_policy_name(o.policy), "error", err.msg));
            snprintf(errs[i], sizeof errs[i], "%s", strtok(err.msg, "\n"));
            continue;
        }
        ok[i] = 1;
        ms[i] = tl->makespan_ms, bubble[i] = tl->bubble_ratio, sps[i] = tl->samples_per_s;
        peak[i] = tl->peak_mib, oom[i] = tl->oom;
        if (o.policy == BM_POL_NONE) none_ms = tl->makespan_ms;
        else if (lower < 0 || lb < lower) lower = lb;
        if (o.policy == BM_POL_BIGMAC) nested = max_nested_ms(tl);
        if (o.policy == BM_POL_OPTIMUS) optimus_oom = tl->oom;
        if (json) json_array_append_new(results, bm_cli_sim_json(t, tl));
        bm_timeline_free(tl);
        bm_table_free(t);
        if (o.policy == BM_POL_OPTIMUS && optimus_oom) compare_optimus_recompute(s, o, so, json, results, &recompute_row);
    }
    if (so && so->jitter > 0) lower = -1;
    int have_bound = none_ms >= 0 && nested >= 0;
    if (json) {
        json_t *j = json_pack("{s:o, s:o, s:o}", "results", results, "zero_bubble_bound_ms",
                              have_bound ? json_real(none_ms + nested) : json_null(), "lower_bound_ms",
                              lower >= 0 ? json_real(lower) : json_null());
        bm_cli_json_print(j);
        json_decref(j);
    } else {
        json_decref(results);
        printf("%-17s %12s %8s %8s %11s %10s %5s\n", "policy", "makespan ms", "/ lower", "bubble",
               "samples/s", "peak GiB", "oom");
        for (int i = 0; i < BM_N_POLICIES; i++) {
            if (!ok[i]) {
                printf("%-17s %s\n", bm_policy_name(compare_order[i]), errs[i]);
                continue;
            }
            char ratio[16] = "-";
            if (lower > 0 && compare_order[i] != BM_POL_NONE) snprintf(ratio, sizeof ratio, "%.3f", ms[i] / lower);
            printf("%-17s %12.3f %8s %7.1f%% %11.2f %10.3f %5s\n", bm_policy_name(compare_order[i]), ms[i],
                   ratio, 100 * bubble[i], sps[i], GIB(peak[i]), oom[i] ? "OOM" : "no");
            if (compare_order[i] != BM_POL_OPTIMUS || !oom[i]) continue;
            const struct cmp_row *rr = &recompute_row;
            if (!rr->ok) {
                printf("%-17s %s\n", "optimus+recompute", rr->err);
                continue;
            }
            if (lower > 0) snprintf(ratio, sizeof ratio, "%.3f", rr->ms / lower);
            printf("%-17s %12.3f %8s %7.1f%% %11.2f %10.3f %5s\n", "optimus+recompute", rr->ms, ratio,
                   100 * rr->bubble, rr->sps, GIB(rr->peak), rr->oom ? "OOM" : "no");
        }
        if (have_bound)
            printf("\nzero-added-bubble bound: %.3f ms (none %.3f + largest per-rank nested compute "
                   "of bigmac %.3f)\n", none_ms + nested, none_ms, nested);
        if (lower >= 0)
            printf("lower bound: %.3f ms (no order of this work that keeps the backbone order beats it, "
                   "for any policy's placement; docs/simulator.md)\n", lower);
    }
    return failed == BM_N_POLICIES ? 1 : 0;
}

int bm_cmd_simulate(int argc, char **argv)
{
    struct bm_cli_plan_flags f;
    memset(&f, 0, sizeof f);
    const char *path = NULL;
    const char *table_path = NULL;
    int compare = 0, json = 0, search = 0;
    struct bm_sim_opts so = {0, 1, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = bm_cli_plan_flag(argc, argv, &i, &f);
        if (k < 0) return BM_USAGE;
        if (k > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--compare")) {
            compare = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--search")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: --search needs a value (off, or a number of order timings)\n");
                return BM_USAGE;
            }
            const char *v = argv[++i];
            uint64_t n;
            if (!strcmp(v, "off")) {
                search = BM_SEARCH_OFF;
            } else {
                if (parse_u64(a, v, &n)) return BM_USAGE;
                if (n < 1 || n > 100000000) {
                    fprintf(stderr, "bigmac: error: --search: expected off or a count in 1..100000000, got '%s'\n", v);
                    return BM_USAGE;
                }
                search = (int)n;
            }
        } else if (!strcmp(a, "--table")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: --table needs a value (an operator table, `bigmac plan ... -o`)\n");
                return BM_USAGE;
            }
            table_path = argv[++i];
        } else if (!strcmp(a, "--jitter") || !strcmp(a, "--seed")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a value\n", a);
                return BM_USAGE;
            }
            const char *v = argv[++i];
            if (a[2] == 'j' ? bm_cli_double(a, v, &so.jitter) : parse_u64(a, v, &so.seed))
                return BM_USAGE;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bigmac: error: simulate: unknown flag '%s'\n", a);
            usage(stderr);
            return BM_USAGE;
        } else if (path) {
            fprintf(stderr, "bigmac: error: simulate: one SPEC only (got '%s' and '%s')\n", path, a);
            return BM_USAGE;
        } else {
            path = a;
        }
    }
    if (table_path && (compare || f.pp || f.vpp || f.microbatches || f.unit || f.window || f.backbone_set ||
                       f.policy_set || search)) {
        fprintf(stderr, "bigmac: error: simulate: --table simulates the table as it is: no --compare, --search or "
                        "plan flags with it\n");
        return BM_USAGE;
    }
    struct bm_err err;
    struct bm_spec *s;
    struct bm_plan_opts o;
    int lrc = bm_cli_load_spec("simulate", path, &f, usage, &s, &o);
    if (lrc) return lrc;
    so.samples_per_microbatch = s->data.samples_per_microbatch;
    int rc = 0;
    if (compare) {
        rc = run_compare(s, o, &so, json, search);
    } else {
        struct bm_table *t;
        struct bm_timeline *tl;
        int prc;
        if (table_path) {
            prc = bm_table_load(table_path, &t, &err);
            if (!prc && (prc = bm_table_use_spec_costs(t, s, table_path, &err))) bm_table_free(t);
            o.window = 0; /* no cap to report */
        } else {
            prc = bm_plan_build_search(s, &o, search, &t, NULL, &err);
        }
        if (!prc && bm_simulate(t, &so, &tl, &err)) {
            bm_table_free(t);
            prc = BM_ERR;
        }
        if (prc) {
            bm_cli_error(err.msg);
            rc = 1;
        } else {
            double ex = 0, sd = 0;
            int has_spread = bm_table_has_spread(t);
            if (has_spread && bm_simulate_expected(t, &so, BM_EXPECT_SAMPLES, so.seed, &ex, &sd, &err)) {
                bm_cli_error(err.msg);
                rc = 1;
            } else if (json) {
                json_t *j = bm_cli_sim_json(t, tl);
                if (has_spread) {
                    json_object_set_new(j, "expected_makespan_ms", json_real(ex));
                    json_object_set_new(j, "expected_makespan_sd_ms", json_real(sd));
                    json_object_set_new(j, "expected_samples", json_integer(BM_EXPECT_SAMPLES));
                }
                bm_cli_json_print(j);
                json_decref(j);
            } else {
                print_human(s, &o, t, tl);
                if (has_spread)
                    printf("\nexpected makespan under the modules' op-time spread: %.3f ms (sd %.3f over %d samples, "
                           "seed %llu)\n", ex, sd, BM_EXPECT_SAMPLES, (unsigned long long)so.seed);
            }
            bm_timeline_free(tl);
            bm_table_free(t);
        }
    }
    bm_spec_free(s);
    return rc;
}
