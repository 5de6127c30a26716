/* cmd_calibrate.c — `bigmac calibrate TRACE.json... [--spec SPEC.json] [--mean] [--rank-scale] [--spread] [-o FILE]`: measured
 * op times and bytes of executor traces -> spec costs (src/sim/calibrate.h, docs/executor.md). The
 * calibrated spec and the cost fragment are written by src/spec/calibrated.c (the spec schema
 * stays in src/spec/). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sim/calibrate.h"
#include "report/report.h"
#include "spec/calibrated.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac calibrate TRACE.json... [--spec SPEC.json] [--mean] [--rank-scale] [--spread] [-o FILE]\n"
            "\n"
            "Turns the measured op times and activation bytes of an executor trace\n"
            "(`bigmac train ... --trace TRACE.json`) into per-module spec costs: fwd_ms/bwd_ms per\n"
            "microbatch (the backbone's summed over its chunks: whole model), act_mib from the\n"
            "measured bytes. state_mib and out_mib are kept. Durations are medians over the\n"
            "microbatches (robust to an op preempted by another process); --mean takes means\n"
            "(the unbiased estimate for a trace of an undisturbed run). Several traces of the same\n"
            "plan (repeated runs) are pooled: on a machine whose speed drifts, costs from several\n"
            "runs predict a typical run better than one run's.\n"
            "\n"
            "Without --spec it writes a cost fragment:\n"
            "  {\"format\": \"bigmac-costs\", \"version\": 1, \"trace\": ..., \"traces\": [...],\n"
            "   \"modules\": [{\"name\": \"vit\", \"cost\": {\"fwd_ms\": ..., ...}}, ...]}\n"
            "(\"trace\": the first trace; \"traces\": all of them), whose \"cost\" objects paste\n"
            "into the spec's modules. With --spec it writes that spec\n"
            "with every traced module's \"cost\" replaced and data.encoder_cost_scale set to the\n"
            "measured per-microbatch encoder multipliers ({\"values\": [...]}: each microbatch's\n"
            "encoder time over what the calibrated costs say; \"encoder_cost_scale\" in the\n"
            "fragment) and device.op_overhead_us to the measured per-op dispatch time (the mean gap\n"
            "between an op and the rank's previous one; \"op_overhead_us\" in the fragment):\n"
            "ready for `bigmac simulate`. --spread also writes each module's cost.spread (sigma of\n"
            "log op time around the model, within a step): `simulate` then also gives the expected\n"
            "makespan under that spread (experimental: docs/simulator.md).\n"
            "--rank-scale also measures how much slower or faster each rank ran than the module\n"
            "costs say (its compute time over the costs' prediction for its ops) and writes it as\n"
            "device.rank_time_scale (with --spec; \"rank_time_scale\" in the fragment): one\n"
            "multiplier per rank, so the spec then plans only at the trace's pp.\n"
            "-o - (the default) writes to stdout.\n");
}

int bm_cmd_calibrate(int argc, char **argv)
{
    const char *spec = NULL, *out = "-";
    /* the trace paths, gathered at the front of argv (never ahead of the scan) */
    const char **traces = (const char **)argv;
    int n_traces = 0;
    int mean = 0, rank_scale = 0, want_spread = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--mean")) {
            mean = 1;
        } else if (!strcmp(a, "--rank-scale")) {
            rank_scale = 1;
        } else if (!strcmp(a, "--spread")) {
            want_spread = 1;
        } else if (!strcmp(a, "--spec") || !strcmp(a, "-o")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a value\n", a);
                return BM_USAGE;
            }
            if (!strcmp(a, "-o")) out = argv[++i];
            else spec = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bigmac: error: calibrate: unknown flag '%s'\n", a);
            usage(stderr);
            return BM_USAGE;
        } else {
            traces[n_traces++] = a;
        }
    }
    if (!n_traces) {
        usage(stderr);
        return BM_USAGE;
    }
    struct bm_err err;
    struct bm_table **t = bm_calloc((size_t)n_traces, sizeof *t);
    struct bm_timeline **tl = bm_calloc((size_t)n_traces, sizeof *tl);
    struct bm_cost *costs = NULL;
    double *rs = NULL;                  /* device.rank_time_scale, with --rank-scale */
    double *mbs = NULL;                 /* data.encoder_cost_scale.values (when there are encoders) */
    double *spread = NULL;              /* cost.spread per module */
    const char **names = NULL;          /* the modules' names */
    int rc = 1;
    if (!t || !tl) {
        bm_err_set(&err, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n_traces; i++) {
        if (bm_trace_load(traces[i], &t[i], &tl[i], &err)) goto fail;
        if (!tl[i]->measured) {
            bm_err_set(&err, "%s: a simulated trace; calibrate needs one measured by `bigmac train --trace`", traces[i]);
            goto fail;
        }
        if (!bm_calibrate_same_table(t[0], t[i])) {
            bm_err_set(&err, "%s: not a run of the same plan as %s (ranks, chunks, microbatches, modules or "
                             "op order differ); pool only traces of one plan", traces[i], traces[0]);
            goto fail;
        }
    }
    costs = bm_calloc((size_t)t[0]->n_modules, sizeof *costs);
    if (!costs) {
        bm_err_set(&err, "out of memory");
        goto fail;
    }
    if (bm_calibrate_runs(t[0], (const struct bm_timeline *const *)tl, n_traces, mean, costs, &err)) goto fail;
    if (rank_scale) {
        rs = bm_malloc((size_t)t[0]->pp * sizeof *rs);
        if (!rs) {
            bm_err_set(&err, "out of memory");
            goto fail;
        }
    }
    /* the measured per-microbatch encoder multipliers (when there are encoders), fitted
     * together with the rank scale when that is asked for */
    int has_enc = 0;
    for (int k = 0; k < t[0]->n_modules; k++) has_enc |= t[0]->modules[k].role == BM_ROLE_ENCODER;
    if (has_enc) {
        double *ms = bm_malloc((size_t)t[0]->microbatches * sizeof *ms);
        if (!ms) {
            bm_err_set(&err, "out of memory");
            goto fail;
        }
        bm_calibrate_scales(t[0], (const struct bm_timeline *const *)tl, n_traces, costs, rs, ms);
        mbs = ms;
    } else if (rs) {
        bm_calibrate_rank_scale(t[0], (const struct bm_timeline *const *)tl, n_traces, costs, rs);
    }
    /* the op-to-op spread around all of that, per module */
    if (want_spread) spread = bm_malloc((size_t)t[0]->n_modules * sizeof *spread);
    if (spread) bm_calibrate_spread(t[0], (const struct bm_timeline *const *)tl, n_traces, costs, rs, mbs, spread);
    names = bm_malloc((size_t)t[0]->n_modules * sizeof *names);
    if (!names) {
        bm_err_set(&err, "out of memory");
        goto fail;
    }
    for (int k = 0; k < t[0]->n_modules; k++) names[k] = t[0]->modules[k].name;
    struct bm_spec_calibration cal = {
        .n_modules = t[0]->n_modules, .names = names, .costs = costs, .spread = spread, .rank_scale = rs,
        .pp = t[0]->pp, .mb_scale = mbs, .microbatches = t[0]->microbatches,
        .op_overhead_us = bm_calibrate_op_overhead_ms(t[0], (const struct bm_timeline *const *)tl, n_traces) * 1000.0};
    if (spec ? bm_spec_write_calibrated(spec, &cal, out, &err) : bm_spec_write_costs(&cal, traces, n_traces, out, &err))
        goto fail;
    rc = 0;
    goto done;
fail:
    bm_cli_error(err.msg);
done:
    bm_free(names);
    bm_free(rs);
    bm_free(mbs);
    bm_free(spread);
    bm_free(costs);
    for (int i = 0; i < n_traces; i++) {
        if (tl) bm_timeline_free(tl[i]);
        if (t) bm_table_free(t[i]);
    }
    bm_free(tl), bm_free(t);
    return rc;
}
