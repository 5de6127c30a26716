/* cmd_sweep.c — `bigmac sweep SPEC --pp 2,4,8 --vpp 1,2 --microbatches 8,16,32 [--policy all|LIST]
 * [--window LIST] [--mem-cap-gib G] [--json]`: plan and simulate every combination, skip invalid
 * ones with a note, rank the feasible ones by throughput, mark OOM ones, name the best; and
 * `--frontier`. Flag parsing and printing only: the work is bm_sweep and bm_frontier_build
 * (src/study/). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "study/frontier.h"
#include "study/study.h"
#include "util/util.h"

#define MAXV BM_SWEEP_MAX_VALUES
#define GIB(mib) ((mib) / 1024.0)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac sweep SPEC [--pp LIST] [--vpp LIST] [--microbatches LIST]\n"
            "                    [--policy all|LIST] [--backbone B] [--unit N] [--window LIST]\n"
            "                    [--mem-cap-gib G] [--jitter X] [--seed S] [--json]\n"
            "\n"
            "Plan and simulate every combination of the comma-separated lists (each defaults to\n"
            "the spec's value), skip invalid ones with a note, and rank the rest by samples/s.\n"
            "--window takes numbers, auto and fit (e.g. 2,4,6,fit); it applies to bigmac, the\n"
            "only policy with a window, so the window/memory trade-off can be read off one run.\n"
            "A configuration is OOM when its peak exceeds min(device memory, --mem-cap-gib); OOM\n"
            "ones are listed after the feasible ones. vpp > 1 uses the interleaved backbone (zb-interleaved\n"
            "when the schedule is a zero-bubble one); vpp 1 uses --backbone when given, else the spec's\n"
            "schedule (1f1b when that is interleaved, zb-h1 when zb-interleaved).\n"
            "With device.ranks_per_host (or --ranks-per-host N) rank r runs on host r / N and\n"
            "transfers between hosts take the inter-host link (docs/multihost.md); with --dp D\n"
            "(parallel.dp) pipeline rank p of replica d is global rank p*D + d.\n"
            "Progress goes to stderr.\n"
            "\n"
            "usage: bigmac sweep SPEC --frontier [--pp N] [--vpp N] [--microbatches N] [--unit N]\n"
            "                    [--backbone B] [--mem-cap-gib G] [--json]\n"
            "\n"
            "The compute/memory frontier at one parallel setting: every policy (not none) x window\n"
            "(bigmac: from the smallest safe one while a larger one is faster) x recompute (none,\n"
            "nested = encoders and generators, all), each as peak memory per rank, makespan and\n"
            "samples/s; '*' marks the Pareto-optimal points (no other point is no worse on both\n"
            "memory and makespan and better on one). --json: {\"points\": [{\"policy\", \"window\",\n"
            "\"recompute\", \"peak_mem_gib\", \"makespan_ms\", \"samples_per_s\", \"oom\", \"pareto\"}],\n"
            "\"memory_gib\": min(device memory, G)}.\n");
}

static int cmp_points(const void *a, const void *b)
{
    const struct bm_frontier_point *x = a, *y = b;
    if (x->peak_mib != y->peak_mib) return x->peak_mib < y->peak_mib ? -1 : 1;
    return x->makespan_ms < y->makespan_ms ? -1 : x->makespan_ms > y->makespan_ms;
}

/* `sweep --frontier`: build, then print (human: sorted by memory, the device memory as a rule
 * line between the points that fit and those that do not). */
static int run_frontier(struct bm_spec *s, const struct bm_plan_opts *o, double cap_mib, int json)
{
    struct bm_frontier fr;
    struct bm_err err;
    int n_failed = 0;
    if (bm_frontier_build(s, o, cap_mib, 0, &fr, &n_failed, &err)) {
        bm_cli_error(err.msg);
        return 1;
    }
    if (json) {
        json_t *pts = json_array();
        for (int i = 0; i < fr.n; i++) {
            const struct bm_frontier_point *p = &fr.pts[i];
            json_array_append_new(pts, json_pack("{s:s, s:i, s:s, s:f, s:f, s:f, s:b, s:b}", "policy",
                                                 bm_policy_name(p->policy), "window", p->window, "recompute",
                                                 bm_frontier_rc_name(p->recompute), "peak_mem_gib",
                                                 GIB(p->peak_mib), "makespan_ms", p->makespan_ms, "samples_per_s",
                                                 p->samples_per_s, "oom", p->oom, "pareto", p->pareto));
        }
        json_t *j = json_pack("{s:o, s:f}", "points", pts, "memory_gib", GIB(fr.cap_mib));
        bm_cli_json_print(j);
        json_decref(j);
    } else {
        qsort(fr.pts, (size_t)fr.n, sizeof *fr.pts, cmp_points);
        printf("%s: frontier at pp %d, vpp %d, microbatches %d: %d points, device memory %.3f GiB\n"
               "(* = Pareto-optimal: no other point is no worse on memory and makespan and better on one)\n\n",
               s->name ? s->name : "spec", o->pp, o->vpp, o->microbatches, fr.n, GIB(fr.cap_mib));
        printf("%1s %-17s %6s %-9s %10s %12s %11s %5s\n", "", "policy", "window", "recompute", "peak GiB",
               "makespan ms", "samples/s", "oom");
        int ruled = fr.cap_mib <= 0;
        for (int i = 0; i < fr.n; i++) {
            const struct bm_frontier_point *p = &fr.pts[i];
            if (!ruled && p->peak_mib > fr.cap_mib) {
                printf("---------------------- device memory %.3f GiB ----------------------\n", GIB(fr.cap_mib));
                ruled = 1;
            }
            printf("%1s %-17s %6d %-9s %10.3f %12.3f %11.2f %5s\n", p->pareto ? "*" : "",
                   bm_policy_name(p->policy), p->window, bm_frontier_rc_name(p->recompute), GIB(p->peak_mib),
                   p->makespan_ms, p->samples_per_s, p->oom ? "OOM" : "no");
        }
        if (!ruled) printf("---------------------- device memory %.3f GiB ----------------------\n", GIB(fr.cap_mib));
        if (n_failed) printf("\n%d combination%s did not plan (left out)\n", n_failed, n_failed > 1 ? "s" : "");
    }
    bm_frontier_free(&fr);
    return 0;
}

/* "2,4,8" -> ints; prints an error and returns -1 on a bad list. */
static int parse_list(const char *flag, const char *v, int *out, int *n)
{
    *n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= MAXV) {
            fprintf(stderr, "bigmac: error: %s: at most %d values\n", flag, MAXV);
            return -1;
        }
        if (bm_cli_int(flag, tok, &out[*n])) return -1;
        (*n)++;
    }
    if (!*n) {
        fprintf(stderr, "bigmac: error: %s: expected a comma-separated list, got '%s'\n", flag, v);
        return -1;
    }
    return 0;
}

/* "2,4,auto,fit" -> windows (BM_WINDOW_AUTO / BM_WINDOW_FIT for the words). */
static int parse_windows(const char *v, int *out, int *n)
{
    *n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= MAXV) {
            fprintf(stderr, "bigmac: error: --window: at most %d values\n", MAXV);
            return -1;
        }
        if (!strcmp(tok, "auto")) out[*n] = BM_WINDOW_AUTO;
        else if (!strcmp(tok, "fit")) out[*n] = BM_WINDOW_FIT;
        else if (bm_cli_int("--window", tok, &out[*n])) return -1;
        else if (out[*n] < 1) {
            fprintf(stderr, "bigmac: error: --window: expected a window >= 1, auto or fit, got '%s'\n", tok);
            return -1;
        }
        (*n)++;
    }
    if (!*n) {
        fprintf(stderr, "bigmac: error: --window: expected a comma-separated list, got '%s'\n", v);
        return -1;
    }
    return 0;
}

static int parse_policies(const char *v, enum bm_policy *out, int *n)
{
    *n = 0;
    if (!strcmp(v, "all")) {
        for (int i = 0; i < BM_N_POLICIES; i++) out[(*n)++] = (enum bm_policy)i;
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= BM_N_POLICIES || bm_policy_parse(tok, &out[*n])) {
            fprintf(stderr,
                    "bigmac: error: --policy: unknown policy '%s' (all, or a list of bigmac, "
                    "optimus, unified, unified-balanced, ideal, none)\n", tok);
            return -1;
        }
        (*n)++;
    }
    return *n ? 0 : -1;
}

static json_t *row_json(const struct bm_sweep_row *r, int rank)
{
    json_t *j = json_pack("{s:i, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:b}", "rank", rank,
                     "policy", bm_policy_name(r->policy), "backbone", bm_backbone_name(r->backbone), "pp",
                     r->pp, "vpp", r->vpp, "microbatches", r->microbatches, "unit", r->unit, "window",
                     r->window, "makespan_ms", r->makespan_ms, "bubble_ratio", r->bubble_ratio,
                     "samples_per_s", r->samples_per_s, "peak_mem_gib", GIB(r->peak_mib), "oom", r->oom);
    if (j) /* the whole step (src/sim/step.h): samples_per_s counts it */
        json_object_update_new(j, json_pack("{s:f, s:f, s:f}", "step_ms", r->step_ms, "sync_exposed_ms",
                                            r->sync_exposed_ms, "optimizer_ms", r->optimizer_ms));
    return j;
}

/* `sweep --json`: {"spec", "mem_cap_gib", "configs", "results" (ranked), "skipped", "best",
 * "placement" when placed over hosts}. */
static void print_json(const struct bm_spec *s, const char *path, const struct bm_sweep *sw)
{
    json_t *res = json_array(), *skipped = json_array();
    for (int i = 0; i < sw->n_rows; i++) json_array_append_new(res, row_json(&sw->rows[i], i + 1));
    for (int i = 0; i < sw->n_skipped; i++) {
        const struct bm_sweep_skip *k = &sw->skipped[i];
        char wname[16];
        bm_study_window_name(k->window, wname, sizeof wname);
        json_array_append_new(skipped, json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:s}", "policy",
                                                 bm_policy_name(k->policy), "backbone", bm_backbone_name(k->backbone),
                                                 "pp", k->pp, "vpp", k->vpp, "microbatches", k->microbatches,
                                                 "window", wname, "reason", k->reason));
    }
    json_t *j = json_pack("{s:s, s:f, s:i, s:o, s:o, s:o}", "spec", s->name ? s->name : path, "mem_cap_gib",
                          GIB(sw->cap_mib), "configs", sw->configs, "results", res, "skipped", skipped, "best",
                          sw->best >= 0 ? row_json(&sw->rows[sw->best], 1) : json_null());
    if (j && s->dp > 1) /* data-parallel replicas: each row is one replica's pipeline */
        json_object_set_new(j, "dp", json_integer(s->dp));
    if (j && s->device.ranks_per_host > 0) /* placed over hosts: every row's transfers priced so */
        json_object_set_new(j, "placement",
                            json_pack("{s:i, s:f, s:f}", "ranks_per_host", s->device.ranks_per_host,
                                      "inter_host_gbytes_per_s", s->device.inter_host_gbytes_per_s,
                                      "inter_host_latency_us", s->device.inter_host_latency_us));
    bm_cli_json_print(j);
    json_decref(j);
}

/* The human table: a header, the ranked rows, the skipped ones' notes, the best. */
static void print_human(const struct bm_spec *s, const char *path, const struct bm_sweep *sw)
{
    printf("%s: %d configurations, memory cap %.3f GiB\n", s->name ? s->name : path, sw->configs, GIB(sw->cap_mib));
    if (s->device.ranks_per_host > 0 && s->dp > 1) /* the placement is of global ranks p*D + d */
        printf("placement: %d ranks per host (global rank g = p*%d + d on host g / %d, dp %d); between hosts %g GB/s, "
               "%g us\n",
               s->device.ranks_per_host, s->dp, s->device.ranks_per_host, s->dp, s->device.inter_host_gbytes_per_s,
               s->device.inter_host_latency_us);
    else if (s->device.ranks_per_host > 0)
        printf("placement: %d ranks per host (rank r on host r / %d); between hosts %g GB/s, %g us\n",
               s->device.ranks_per_host, s->device.ranks_per_host, s->device.inter_host_gbytes_per_s,
               s->device.inter_host_latency_us);
    printf("\n");
    printf("%4s %4s %4s %6s %-12s %-17s %6s %12s %8s %11s %10s %5s\n", "#", "pp", "vpp", "M", "backbone",
           "policy", "window", "makespan ms", "bubble", "samples/s", "peak GiB", "oom");
    for (int i = 0; i < sw->n_rows; i++) {
        const struct bm_sweep_row *r = &sw->rows[i];
        printf("%4d %4d %4d %6d %-12s %-17s %6d %12.3f %7.1f%% %11.2f %10.3f %5s\n", i + 1, r->pp, r->vpp,
               r->microbatches, bm_backbone_name(r->backbone), bm_policy_name(r->policy), r->window, r->makespan_ms,
               100 * r->bubble_ratio, r->samples_per_s, GIB(r->peak_mib), r->oom ? "OOM" : "no");
    }
    /* the notes as one block of at most 8 KiB (each reason cut at 300 characters) */
    char note[8192];
    size_t note_len = 0;
    note[0] = 0;
    for (int i = 0; i < sw->n_skipped; i++) {
        const struct bm_sweep_skip *k = &sw->skipped[i];
        char wname[16];
        bm_study_window_name(k->window, wname, sizeof wname);
        if (note_len + 400 < sizeof note)
            note_len += (size_t)snprintf(note + note_len, sizeof note - note_len,
                                         "skipped: pp %d vpp %d microbatches %d %s%s%s: %.300s\n", k->pp, k->vpp,
                                         k->microbatches, bm_policy_name(k->policy),
                                         k->policy == BM_POL_BIGMAC ? " window " : "",
                                         k->policy == BM_POL_BIGMAC ? wname : "", k->reason);
    }
    if (note_len) printf("\n%s", note);
    if (sw->best >= 0) {
        const struct bm_sweep_row *b = &sw->rows[sw->best];
        printf("\nbest: pp %d vpp %d microbatches %d %s %s", b->pp, b->vpp, b->microbatches,
               bm_backbone_name(b->backbone), bm_policy_name(b->policy));
        if (b->policy == BM_POL_BIGMAC) printf(" window %d", b->window);
        printf(": %.2f samples/s, peak %.3f GiB\n", b->samples_per_s, GIB(b->peak_mib));
    } else {
        printf("\nbest: none (%s)\n", sw->n_rows ? "every configuration is OOM" : "no valid configuration");
    }
}

/* What the command line says. */
struct args {
    struct bm_sweep_opts so;
    enum bm_policy policies[BM_N_POLICIES]; /* --policy's list (so.policies points here) */
    struct bm_plan_opts f;  /* the plan flags (BM_UNSET: not given) */
    struct bm_sim_opts sim;
    double cap_gib;
    int json, frontier;
    const char *path;
};

/* The command line into *g. Returns -1 to go on, else the exit status (--help: 0; a usage
 * error: BM_USAGE, printed). */
static int parse_args(int argc, char **argv, struct args *g)
{
    struct bm_sweep_opts *so = &g->so;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int *list = NULL, *nlist = NULL;
        if (!strcmp(a, "--pp")) list = so->pp, nlist = &so->n_pp;
        else if (!strcmp(a, "--vpp")) list = so->vpp, nlist = &so->n_vpp;
        else if (!strcmp(a, "--microbatches")) list = so->microbatches, nlist = &so->n_microbatches;
        int value_flag = list || !strcmp(a, "--policy") || !strcmp(a, "--window") || !strcmp(a, "--mem-cap-gib") ||
                         !strcmp(a, "--jitter") || !strcmp(a, "--seed");
        if (value_flag && i + 1 >= argc) {
            fprintf(stderr, "bigmac: error: %s needs a value\n", a);
            return BM_USAGE;
        }
        if (list) {
            if (parse_list(a, argv[++i], list, nlist)) return BM_USAGE;
        } else if (!strcmp(a, "--policy")) {
            if (parse_policies(argv[++i], g->policies, &so->n_policies)) return BM_USAGE;
            so->policies = g->policies;
        } else if (!strcmp(a, "--window")) {
            if (parse_windows(argv[++i], so->windows, &so->n_windows)) return BM_USAGE;
        } else if (!strcmp(a, "--mem-cap-gib") || !strcmp(a, "--jitter")) {
            if (bm_cli_double(a, argv[i + 1], a[2] == 'm' ? &g->cap_gib : &g->sim.jitter)) return BM_USAGE;
            i++;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            g->sim.seed = strtoull(argv[++i], &end, 10);
            if (*end || argv[i][0] == '-' || !argv[i][0]) {
                fprintf(stderr, "bigmac: error: --seed: expected a non-negative integer, got '%s'\n", argv[i]);
                return BM_USAGE;
            }
        } else if (!strcmp(a, "--json")) {
            g->json = 1;
        } else if (!strcmp(a, "--frontier")) {
            g->frontier = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            int k = bm_cli_plan_flag(argc, argv, &i, &g->f);
            if (k < 0) return BM_USAGE;
            if (k > 0) continue;
            if (a[0] == '-' && a[1]) {
                fprintf(stderr, "bigmac: error: sweep: unknown flag '%s'\n", a);
                usage(stderr);
                return BM_USAGE;
            }
            if (g->path) {
                fprintf(stderr, "bigmac: error: sweep: one SPEC only (got '%s' and '%s')\n", g->path, a);
                return BM_USAGE;
            }
            g->path = a;
        }
    }
    return -1;
}

/* `sweep --frontier`: one parallel setting (each list one value at most), every policy and
 * window; refuses the lists and flags that do not apply. */
static int frontier_cmd(struct args *g, struct bm_spec *s, struct bm_plan_opts base)
{
    const struct bm_sweep_opts *so = &g->so;
    const char *bad = so->n_pp > 1 ? "--pp" : so->n_vpp > 1 ? "--vpp" : so->n_microbatches > 1 ? "--microbatches"
                    : so->n_policies ? "--policy" : so->n_windows ? "--window" : g->sim.jitter > 0 ? "--jitter" : NULL;
    if (bad) {
        fprintf(stderr, "bigmac: error: sweep --frontier: %s %s\n", bad,
                so->n_policies || so->n_windows ? "is not allowed: the frontier covers every policy and window"
                                                : "takes one value here: the frontier is at one parallel setting");
        return BM_USAGE;
    }
    if (so->n_pp) base.pp = so->pp[0];
    if (so->n_vpp) base.vpp = so->vpp[0];
    if (so->n_microbatches) base.microbatches = so->microbatches[0];
    if (base.vpp > 1) base.backbone = BM_BB_INTERLEAVED;
    else if ((int)g->f.backbone == BM_UNSET && base.backbone == BM_BB_INTERLEAVED) base.backbone = BM_BB_1F1B;
    double fcap = s->device.memory_gib * 1024.0;
    if (g->cap_gib > 0 && (fcap <= 0 || g->cap_gib * 1024.0 < fcap)) fcap = g->cap_gib * 1024.0;
    return run_frontier(s, &base, fcap, g->json);
}

int bm_cmd_sweep(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* the sweep for a cluster has its own flags */
        if (!strcmp(argv[i], "--gpus") || !strcmp(argv[i], "--global-batch")) return bm_cmd_sweep_cluster(argc, argv);
    struct args g;
    memset(&g, 0, sizeof g);
    bm_plan_opts_unset(&g.f);
    g.sim = (struct bm_sim_opts){0, 1, 0};
    int prc = parse_args(argc, argv, &g);
    if (prc >= 0) return prc;
    struct bm_err err;
    struct bm_spec *s;
    struct bm_plan_opts base;
    int lrc = bm_cli_load_spec("sweep", g.path, &g.f, usage, &s, &base);
    if (lrc) return lrc;
    g.sim.samples_per_microbatch = s->data.samples_per_microbatch;
    if (g.f.unit == BM_UNSET && base.unit == s->pp) base.unit = 0; /* the spec's default unit follows pp */
    if (g.frontier) {
        int frc = frontier_cmd(&g, s, base);
        bm_spec_free(s);
        return frc;
    }
    g.so.backbone_fixed = (int)g.f.backbone != BM_UNSET;
    g.so.mem_cap_mib = g.cap_gib * 1024.0;
    g.so.sim = &g.sim;
    g.so.progress = stderr;
    struct bm_sweep sw;
    if (bm_sweep(s, &base, &g.so, &sw, &err)) {
        bm_spec_free(s);
        bm_cli_error(err.msg);
        return 1;
    }
    if (g.json) print_json(s, g.path, &sw);
    else print_human(s, g.path, &sw);
    int rc = sw.n_rows ? 0 : 1;
    if (!sw.n_rows) bm_cli_error("sweep: no valid configuration (see the skipped notes)");
    bm_sweep_free(&sw);
    bm_spec_free(s);
    return rc;
}
