/* cmd_simulate.c — `bigmac simulate SPEC [plan flags] [--compare] [--json] [--jitter X] [--seed S]`:
 * plan the spec and simulate the table (DESIGN §8); --compare runs every policy and reports the
 * zero-added-bubble bound (DESIGN §6). Also the helpers `bigmac sweep` shares (cli.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define GIB(mib) ((mib) / 1024.0)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac simulate SPEC [--pp N] [--vpp N] [--microbatches N] [--unit N]\n"
            "                       [--backbone gpipe|1f1b|interleaved|zb-h1|zb-interleaved] [--policy NAME]\n"
            "                       [--window N|auto|fit] [--compare] [--json] [--jitter X] [--seed S]\n"
            "\n"
            "Plan SPEC and simulate the operator table: makespan, per-rank busy/idle, bubble ratio,\n"
            "peak memory per rank and role, OOM against the device memory, samples/s.\n"
            "  --compare    every policy (bigmac, optimus, unified, unified-balanced, ideal, none)\n"
            "               and the zero-added-bubble bound (none's makespan + the largest per-rank\n"
            "               encoder+generator compute of the bigmac table)\n"
            "  --json       one JSON object on stdout\n"
            "  --jitter X   encoder/generator op durations x (1 + X*u), u uniform in [-1,1] (default 0)\n"
            "  --seed S     jitter seed (default 1)\n"
            "Cost and memory model: docs/simulator.md.\n");
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
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:b, s:o}", "policy",
                     bm_policy_name(t->policy), "backbone", bm_backbone_name(t->backbone), "pp",
                     t->pp, "vpp", t->vpp, "microbatches", t->microbatches, "unit", t->unit,
                     "window", t->window, "makespan_ms", tl->makespan_ms, "bubble_ratio",
                     tl->bubble_ratio, "samples_per_s", tl->samples_per_s, "peak_mem_gib",
                     GIB(tl->peak_mib), "memory_gib", GIB(tl->memory_cap_mib), "oom", tl->oom,
                     "ranks", ranks);
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
    printf("makespan %.3f ms, bubble %.1f%%, %.2f samples/s, peak %.3f GiB of %.3f GiB%s\n\n",
           tl->makespan_ms, 100 * tl->bubble_ratio, tl->samples_per_s, GIB(tl->peak_mib),
           GIB(tl->memory_cap_mib), tl->oom ? "  ** OOM **" : "");
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

static int run_compare(const struct bm_spec *s, struct bm_plan_opts o, const struct bm_sim_opts *so,
                       int json)
{
    json_t *results = json_array();
    double none_ms = -1, nested = -1;
    int failed = 0;
    if (!json)
        printf("%-17s %12s %8s %11s %10s %5s\n", "policy", "makespan ms", "bubble", "samples/s",
               "peak GiB", "oom");
    for (int i = 0; i < BM_N_POLICIES; i++) {
        o.policy = compare_order[i];
        struct bm_table *t;
        struct bm_timeline *tl;
        struct bm_err err;
        if (bm_cli_sim_run(s, &o, so, &t, &tl, &err)) {
            failed++;
            if (json)
                json_array_append_new(results, json_pack("{s:s, s:s}", "policy",
                                                         bm_policy_name(o.policy), "error", err.msg));
            else
                printf("%-17s %s\n", bm_policy_name(o.policy), strtok(err.msg, "\n"));
            continue;
        }
        if (o.policy == BM_POL_NONE) none_ms = tl->makespan_ms;
        if (o.policy == BM_POL_BIGMAC) nested = max_nested_ms(tl);
        if (json)
            json_array_append_new(results, bm_cli_sim_json(t, tl));
        else
            printf("%-17s %12.3f %7.1f%% %11.2f %10.3f %5s\n", bm_policy_name(o.policy),
                   tl->makespan_ms, 100 * tl->bubble_ratio, tl->samples_per_s, GIB(tl->peak_mib),
                   tl->oom ? "OOM" : "no");
        bm_timeline_free(tl);
        bm_table_free(t);
    }
    int have_bound = none_ms >= 0 && nested >= 0;
    if (json) {
        json_t *j = json_pack("{s:o, s:o}", "results", results, "zero_bubble_bound_ms",
                              have_bound ? json_real(none_ms + nested) : json_null());
        bm_cli_json_print(j);
        json_decref(j);
    } else {
        json_decref(results);
        if (have_bound)
            printf("\nzero-added-bubble bound: %.3f ms (none %.3f + largest per-rank nested compute "
                   "of bigmac %.3f)\n", none_ms + nested, none_ms, nested);
    }
    return failed == BM_N_POLICIES ? 1 : 0;
}

int bm_cmd_simulate(int argc, char **argv)
{
    struct bm_cli_plan_flags f;
    memset(&f, 0, sizeof f);
    const char *path = NULL;
    int compare = 0, json = 0;
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
    struct bm_err err;
    struct bm_spec *s;
    struct bm_plan_opts o;
    int lrc = bm_cli_load_spec("simulate", path, &f, usage, &s, &o);
    if (lrc) return lrc;
    so.samples_per_microbatch = s->data.samples_per_microbatch;
    int rc = 0;
    if (compare) {
        rc = run_compare(s, o, &so, json);
    } else {
        struct bm_table *t;
        struct bm_timeline *tl;
        if (bm_cli_sim_run(s, &o, &so, &t, &tl, &err)) {
            bm_cli_error(err.msg);
            rc = 1;
        } else {
            if (json) {
                json_t *j = bm_cli_sim_json(t, tl);
                bm_cli_json_print(j);
                json_decref(j);
            } else {
                print_human(s, &o, t, tl);
            }
            bm_timeline_free(tl);
            bm_table_free(t);
        }
    }
    bm_spec_free(s);
    return rc;
}
