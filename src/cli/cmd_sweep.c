/* cmd_sweep.c — `bigmac sweep SPEC --pp 2,4,8 --vpp 1,2 --microbatches 8,16,32 [--policy all|LIST]
 * [--window LIST] [--mem-cap-gib G] [--json]`: plan and simulate every combination, skip invalid
 * ones with a note, rank the feasible ones by throughput, mark OOM ones, name the best. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "report/frontier.h"
#include "util/util.h"

#define MAXV 64
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
            "transfers between hosts take the inter-host link (docs/multihost.md).\n"
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

struct row {
    int pp, vpp, mb, oom;
    enum bm_backbone bb;
    enum bm_policy pol;
    int window, unit;
    double makespan, bubble, sps, peak_mib;
};

static int cmp_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->oom != y->oom) return x->oom - y->oom;
    if (x->sps != y->sps) return x->sps < y->sps ? 1 : -1;
    return x->makespan < y->makespan ? -1 : x->makespan > y->makespan;
}

static json_t *row_json(const struct row *r, int rank)
{
    return json_pack("{s:i, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:b}", "rank", rank,
                     "policy", bm_policy_name(r->pol), "backbone", bm_backbone_name(r->bb), "pp",
                     r->pp, "vpp", r->vpp, "microbatches", r->mb, "unit", r->unit, "window",
                     r->window, "makespan_ms", r->makespan, "bubble_ratio", r->bubble,
                     "samples_per_s", r->sps, "peak_mem_gib", GIB(r->peak_mib), "oom", r->oom);
}

int bm_cmd_sweep(int argc, char **argv)
{
    int pps[MAXV], vpps[MAXV], mbs[MAXV], wins[MAXV], npp = 0, nvpp = 0, nmb = 0, nwin = 0, npol = 0, json = 0;
    int frontier = 0;
    enum bm_policy pols[BM_N_POLICIES];
    double cap_gib = 0;
    struct bm_cli_plan_flags f;
    memset(&f, 0, sizeof f);
    struct bm_sim_opts so = {0, 1, 0};
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int *list = NULL, *nlist = NULL;
        if (!strcmp(a, "--pp")) list = pps, nlist = &npp;
        else if (!strcmp(a, "--vpp")) list = vpps, nlist = &nvpp;
        else if (!strcmp(a, "--microbatches")) list = mbs, nlist = &nmb;
        int value_flag = list || !strcmp(a, "--policy") || !strcmp(a, "--window") || !strcmp(a, "--mem-cap-gib") ||
                         !strcmp(a, "--jitter") || !strcmp(a, "--seed");
        if (value_flag && i + 1 >= argc) {
            fprintf(stderr, "bigmac: error: %s needs a value\n", a);
            return BM_USAGE;
        }
        if (list) {
            if (parse_list(a, argv[++i], list, nlist)) return BM_USAGE;
        } else if (!strcmp(a, "--policy")) {
            if (parse_policies(argv[++i], pols, &npol)) return BM_USAGE;
        } else if (!strcmp(a, "--window")) {
            if (parse_windows(argv[++i], wins, &nwin)) return BM_USAGE;
        } else if (!strcmp(a, "--mem-cap-gib") || !strcmp(a, "--jitter")) {
            if (bm_cli_double(a, argv[i + 1], a[2] == 'm' ? &cap_gib : &so.jitter)) return BM_USAGE;
            i++;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            so.seed = strtoull(argv[++i], &end, 10);
            if (*end || argv[i][0] == '-' || !argv[i][0]) {
                fprintf(stderr, "bigmac: error: --seed: expected a non-negative integer, got '%s'\n", argv[i]);
                return BM_USAGE;
            }
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--frontier")) {
            frontier = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            int k = bm_cli_plan_flag(argc, argv, &i, &f);
            if (k < 0) return BM_USAGE;
            if (k > 0) continue;
            if (a[0] == '-' && a[1]) {
                fprintf(stderr, "bigmac: error: sweep: unknown flag '%s'\n", a);
                usage(stderr);
                return BM_USAGE;
            }
            if (path) {
                fprintf(stderr, "bigmac: error: sweep: one SPEC only (got '%s' and '%s')\n", path, a);
                return BM_USAGE;
            }
            path = a;
        }
    }
    struct bm_err err;
    struct bm_spec *s;
    struct bm_plan_opts base;
    int lrc = bm_cli_load_spec("sweep", path, &f, usage, &s, &base);
    if (lrc) return lrc;
    so.samples_per_microbatch = s->data.samples_per_microbatch;
    if (!f.unit && base.unit == s->pp) base.unit = 0; /* the spec's default unit follows pp */
    if (frontier) {
        const char *bad = npp > 1 ? "--pp" : nvpp > 1 ? "--vpp" : nmb > 1 ? "--microbatches" : npol ? "--policy"
                        : nwin ? "--window" : so.jitter > 0 ? "--jitter" : NULL;
        if (bad) {
            fprintf(stderr, "bigmac: error: sweep --frontier: %s %s\n", bad,
                    npol || nwin ? "is not allowed: the frontier covers every policy and window"
                                 : "takes one value here: the frontier is at one parallel setting");
            bm_spec_free(s);
            return BM_USAGE;
        }
        if (npp) base.pp = pps[0];
        if (nvpp) base.vpp = vpps[0];
        if (nmb) base.microbatches = mbs[0];
        if (base.vpp > 1) base.backbone = BM_BB_INTERLEAVED;
        else if (!f.backbone_set && base.backbone == BM_BB_INTERLEAVED) base.backbone = BM_BB_1F1B;
        double fcap = s->device.memory_gib * 1024.0;
        if (cap_gib > 0 && (fcap <= 0 || cap_gib * 1024.0 < fcap)) fcap = cap_gib * 1024.0;
        int frc = run_frontier(s, &base, fcap, json);
        bm_spec_free(s);
        return frc;
    }
    if (!npp) pps[npp++] = base.pp;
    if (!nvpp) vpps[nvpp++] = base.vpp;
    if (!nmb) mbs[nmb++] = base.microbatches;
    if (!npol) pols[npol++] = base.policy;
    if (!nwin) wins[nwin++] = base.window;
    int n_window_pols = 0; /* windows multiply only the policy that has one */
    for (int d = 0; d < npol; d++) n_window_pols += pols[d] == BM_POL_BIGMAC;
    double cap_mib = s->device.memory_gib * 1024.0;
    if (cap_gib > 0 && (cap_mib <= 0 || cap_gib * 1024.0 < cap_mib)) cap_mib = cap_gib * 1024.0;

    int total = npp * nvpp * nmb * (npol + n_window_pols * (nwin - 1)), done = 0, n_rows = 0;
    struct row *rows = bm_calloc((size_t)total, sizeof *rows);
    json_t *skipped = json_array();
    if (!rows) {
        bm_spec_free(s);
        bm_cli_error("sweep: out of memory");
        return 1;
    }
    char note[8192];
    size_t note_len = 0;
    note[0] = 0;
    for (int a = 0; a < npp; a++)
        for (int b = 0; b < nvpp; b++)
            for (int c = 0; c < nmb; c++)
                for (int d = 0; d < npol; d++)
                for (int w = 0; w < (pols[d] == BM_POL_BIGMAC ? nwin : 1); w++) {
                    struct bm_plan_opts o = base;
                    o.pp = pps[a];
                    o.vpp = vpps[b];
                    o.microbatches = mbs[c];
                    o.policy = pols[d];
                    o.window = wins[w];
                    /* a zero-bubble backbone stays zero-bubble: zb-interleaved at vpp > 1, zb-h1 at 1 */
                    int zb = bm_backbone_splits(base.backbone);
                    if (o.vpp > 1) o.backbone = zb ? BM_BB_ZB_INTERLEAVED : BM_BB_INTERLEAVED;
                    else if (o.backbone == BM_BB_ZB_INTERLEAVED) o.backbone = BM_BB_ZB_H1;
                    else if (!f.backbone_set && o.backbone == BM_BB_INTERLEAVED) o.backbone = BM_BB_1F1B;
                    char wname[16];
                    if (o.window == BM_WINDOW_AUTO) snprintf(wname, sizeof wname, "auto");
                    else if (o.window == BM_WINDOW_FIT) snprintf(wname, sizeof wname, "fit");
                    else snprintf(wname, sizeof wname, "%d", o.window);
                    fprintf(stderr, "sweep: [%d/%d] pp %d vpp %d microbatches %d %s%s%s\n", ++done, total,
                            o.pp, o.vpp, o.microbatches, bm_policy_name(o.policy),
                            o.policy == BM_POL_BIGMAC ? " window " : "", o.policy == BM_POL_BIGMAC ? wname : "");
                    struct bm_table *t;
                    struct bm_timeline *tl;
                    if (bm_cli_sim_run(s, &o, &so, &t, &tl, &err)) {
                        char *nl = strchr(err.msg, '\n');
                        if (nl) *nl = 0;
                        json_array_append_new(
                            skipped, json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:s}", "policy",
                                               bm_policy_name(o.policy), "backbone",
                                               bm_backbone_name(o.backbone), "pp", o.pp, "vpp", o.vpp,
                                               "microbatches", o.microbatches, "window", wname,
                                               "reason", err.msg));
                        if (note_len + 400 < sizeof note)
                            note_len += (size_t)snprintf(note + note_len, sizeof note - note_len,
                                                         "skipped: pp %d vpp %d microbatches %d %s%s%s: %.300s\n",
                                                         o.pp, o.vpp, o.microbatches,
                                                         bm_policy_name(o.policy),
                                                         o.policy == BM_POL_BIGMAC ? " window " : "",
                                                         o.policy == BM_POL_BIGMAC ? wname : "", err.msg);
                        continue;
                    }
                    struct row *r = &rows[n_rows++];
                    *r = (struct row){o.pp, o.vpp, o.microbatches, cap_mib > 0 && tl->peak_mib > cap_mib,
                                      t->backbone, t->policy, t->window, t->unit, tl->makespan_ms,
                                      tl->bubble_ratio, tl->samples_per_s, tl->peak_mib};
                    bm_timeline_free(tl);
                    bm_table_free(t);
                }
    qsort(rows, (size_t)n_rows, sizeof *rows, cmp_rows);
    int best = n_rows > 0 && !rows[0].oom ? 0 : -1;
    if (json) {
        json_t *res = json_array();
        for (int i = 0; i < n_rows; i++) json_array_append_new(res, row_json(&rows[i], i + 1));
        json_t *j = json_pack("{s:s, s:f, s:i, s:o, s:o, s:o}", "spec", s->name ? s->name : path,
                              "mem_cap_gib", GIB(cap_mib), "configs", total, "results", res,
                              "skipped", skipped, "best", best >= 0 ? row_json(&rows[0], 1) : json_null());
        if (j && s->device.ranks_per_host > 0) /* placed over hosts: every row's transfers priced so */
            json_object_set_new(j, "placement",
                                json_pack("{s:i, s:f, s:f}", "ranks_per_host", s->device.ranks_per_host,
                                          "inter_host_gbytes_per_s", s->device.inter_host_gbytes_per_s,
                                          "inter_host_latency_us", s->device.inter_host_latency_us));
        bm_cli_json_print(j);
        json_decref(j);
    } else {
        json_decref(skipped);
        printf("%s: %d configurations, memory cap %.3f GiB\n", s->name ? s->name : path, total,
               GIB(cap_mib));
        if (s->device.ranks_per_host > 0)
            printf("placement: %d ranks per host (rank r on host r / %d); between hosts %g GB/s, %g us\n",
                   s->device.ranks_per_host, s->device.ranks_per_host, s->device.inter_host_gbytes_per_s,
                   s->device.inter_host_latency_us);
        printf("\n");
        printf("%4s %4s %4s %6s %-12s %-17s %6s %12s %8s %11s %10s %5s\n", "#", "pp", "vpp", "M",
               "backbone", "policy", "window", "makespan ms", "bubble", "samples/s", "peak GiB", "oom");
        for (int i = 0; i < n_rows; i++) {
            const struct row *r = &rows[i];
            printf("%4d %4d %4d %6d %-12s %-17s %6d %12.3f %7.1f%% %11.2f %10.3f %5s\n", i + 1, r->pp,
                   r->vpp, r->mb, bm_backbone_name(r->bb), bm_policy_name(r->pol), r->window,
                   r->makespan, 100 * r->bubble, r->sps, GIB(r->peak_mib), r->oom ? "OOM" : "no");
        }
        if (note_len) printf("\n%s", note);
        if (best >= 0) {
            printf("\nbest: pp %d vpp %d microbatches %d %s %s", rows[0].pp, rows[0].vpp, rows[0].mb,
                   bm_backbone_name(rows[0].bb), bm_policy_name(rows[0].pol));
            if (rows[0].pol == BM_POL_BIGMAC) printf(" window %d", rows[0].window);
            printf(": %.2f samples/s, peak %.3f GiB\n", rows[0].sps, GIB(rows[0].peak_mib));
        }
        else
            printf("\nbest: none (%s)\n", n_rows ? "every configuration is OOM" : "no valid configuration");
    }
    int rc = n_rows ? 0 : 1;
    if (!n_rows) bm_cli_error("sweep: no valid configuration (see the skipped notes)");
    bm_free(rows);
    bm_spec_free(s);
    return rc;
}
