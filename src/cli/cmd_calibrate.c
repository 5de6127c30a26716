/* cmd_calibrate.c — `bigmac calibrate TRACE.json... [--spec SPEC.json] [--mean] [--run-median] [--rank-scale] [--spread] [-o FILE]`: measured
 * op times and bytes of executor traces -> spec costs (src/sim/calibrate.h, docs/executor.md). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sim/calibrate.h"
#include "report/report.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac calibrate TRACE.json... [--spec SPEC.json] [--mean] [--run-median] [--rank-scale] [--spread]\n"
            "                        [-o FILE]\n"
            "\n"
            "Turns the measured op times and activation bytes of an executor trace\n"
            "(`bigmac train ... --trace TRACE.json`) into per-module spec costs: fwd_ms/bwd_ms per\n"
            "microbatch (the backbone's summed over its chunks: whole model), act_mib from the\n"
            "measured bytes. state_mib and out_mib are kept. Durations are medians over the\n"
            "microbatches (robust to an op preempted by another process); --mean takes means\n"
            "(the unbiased estimate for a trace of an undisturbed run). Several traces of the same\n"
            "plan (repeated runs) are pooled: on a machine whose speed drifts, costs from several\n"
            "runs predict a typical run better than one run's. --run-median fits every trace on\n"
            "its own (with --mean: means within the run) and writes the median over the traces of\n"
            "every fitted number (costs, scales, dispatch, latency, spread), so one run disturbed\n"
            "by another process does not move them (docs/simulator.md \"Predicting a run\").\n"
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
            "ready for `bigmac simulate`; and device.link_latency_us to the latency the transfers\n"
            "imply (send issue to the completion of a recv that waited for it, less the bytes' time\n"
            "on the modelled link; \"link_latency_us\" in the fragment; 0 with a warning when the\n"
            "bytes' time alone is longer). --spread also writes each module's cost.spread (sigma of\n"
            "log op time around the model, within a step): `simulate` then also gives the expected\n"
            "makespan under that spread (experimental: docs/simulator.md).\n"
            "--rank-scale also measures how much slower or faster each rank ran than the module\n"
            "costs say (its compute time over the costs' prediction for its ops) and writes it as\n"
            "device.rank_time_scale (with --spec; \"rank_time_scale\" in the fragment): one\n"
            "multiplier per rank, so the spec then plans only at the trace's pp.\n"
            "-o - (the default) writes to stdout.\n");
}

static json_t *cost_json(const struct bm_cost *c, double spread)
{
    json_t *o = json_object();
    json_object_set_new(o, "fwd_ms", json_real(c->fwd_ms));
    json_object_set_new(o, "bwd_ms", json_real(c->bwd_ms));
    json_object_set_new(o, "act_mib", json_real(c->act_mib));
    json_object_set_new(o, "state_mib", json_real(c->state_mib));
    json_object_set_new(o, "out_mib", json_real(c->out_mib));
    if (spread > 0) json_object_set_new(o, "spread", json_real(spread));
    if (c->w_ms > 0 && c->w_ms < c->bwd_ms) /* a split backward was measured: its W part */
        json_object_set_new(o, "w_ms", json_real(c->w_ms));
    return o;
}

int bm_cmd_calibrate(int argc, char **argv)
{
    const char *spec = NULL, *out = "-";
    /* the trace paths, gathered at the front of argv (never ahead of the scan) */
    const char **traces = (const char **)argv;
    int n_traces = 0;
    int mean = 0, rank_scale = 0, want_spread = 0, run_median = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--mean")) {
            mean = 1;
        } else if (!strcmp(a, "--run-median")) {
            run_median = 1;
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
    json_t *root = NULL, *scale = NULL; /* scale: device.rank_time_scale, with --rank-scale */
    json_t *mb_values = NULL;           /* data.encoder_cost_scale.values */
    double *spread = NULL;              /* cost.spread per module */
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
    double *rs = NULL;
    if (rank_scale) {
        rs = bm_malloc((size_t)t[0]->pp * sizeof *rs);
        if (!rs) {
            bm_err_set(&err, "out of memory");
            goto fail;
        }
    }
    double *mbs = NULL; /* the microbatch scales, kept for the spread */
    /* the measured per-microbatch encoder multipliers (when there are encoders), fitted
     * together with the rank scale when that is asked for */
    int has_enc = 0;
    for (int k = 0; k < t[0]->n_modules; k++) has_enc |= t[0]->modules[k].role == BM_ROLE_ENCODER;
    if (has_enc) {
        double *ms = bm_malloc((size_t)t[0]->microbatches * sizeof *ms);
        if (!ms) {
            bm_free(rs);
            bm_err_set(&err, "out of memory");
            goto fail;
        }
        bm_calibrate_scales(t[0], (const struct bm_timeline *const *)tl, n_traces, costs, rs, ms);
        mb_values = json_array();
        for (int m = 0; m < t[0]->microbatches; m++) json_array_append_new(mb_values, json_real(ms[m]));
        mbs = ms;
    } else if (rs) {
        bm_calibrate_rank_scale(t[0], (const struct bm_timeline *const *)tl, n_traces, costs, rs);
    }
    if (rs) {
        scale = json_array();
        for (int r = 0; r < t[0]->pp; r++) json_array_append_new(scale, json_real(rs[r]));
    }
    /* the op-to-op spread around all of that, per module */
    if (want_spread) spread = bm_malloc((size_t)t[0]->n_modules * sizeof *spread);
    if (spread) bm_calibrate_spread(t[0], (const struct bm_timeline *const *)tl, n_traces, costs, rs, mbs, spread);
    double overhead_us = bm_calibrate_op_overhead_ms(t[0], (const struct bm_timeline *const *)tl, n_traces) * 1000.0;
    if (run_median) { /* every number again: per trace, then the median over the traces */
        double *ms = bm_malloc((size_t)(t[0]->microbatches > 0 ? t[0]->microbatches : 1) * sizeof *ms), oh = 0;
        if (!ms || bm_calibrate_median_runs(t[0], (const struct bm_timeline *const *)tl, n_traces, mean, costs, ms, rs,
                                            spread, &oh, &err)) {
            if (!ms) bm_err_set(&err, "out of memory");
            bm_free(ms), bm_free(rs), bm_free(mbs);
            goto fail;
        }
        overhead_us = oh * 1000.0;
        if (mb_values) {
            json_array_clear(mb_values);
            for (int m = 0; m < t[0]->microbatches; m++) json_array_append_new(mb_values, json_real(ms[m]));
        }
        if (scale) {
            json_array_clear(scale);
            for (int r = 0; r < t[0]->pp; r++) json_array_append_new(scale, json_real(rs[r]));
        }
        bm_free(ms);
    }
    bm_free(rs);
    bm_free(mbs);
    /* the link latency the transfers imply (device.link_latency_us), when some recv waited */
    double lat_ms = 0;
    int have_lat = run_median ? bm_calibrate_median_link_latency_ms(t[0], (const struct bm_timeline *const *)tl,
                                                                    n_traces, &lat_ms) > 0
                              : bm_calibrate_link_latency_ms(t[0], (const struct bm_timeline *const *)tl, n_traces,
                                                             &lat_ms) > 0;
    if (have_lat && lat_ms < 0) {
        fprintf(stderr, "bigmac: warning: calibrate: the measured transfers are %.1f us shorter than the model charges "
                        "for their bytes alone (the tensors' out_mib over device.link_gbytes_per_s): link_latency_us "
                        "written as 0\nbigmac: hint: the modules' out_mib overstate the tensors they send\n", -lat_ms * 1e3);
        lat_ms = 0;
    }
    if (spec) {
        json_error_t je;
        root = json_load_file(spec, 0, &je);
        if (!root) {
            bm_err_set(&err, "%s:%d:%d: %s", spec, je.line, je.column, je.text);
            goto fail;
        }
        json_t *mods = json_object_get(root, "modules");
        size_t i;
        json_t *m;
        json_array_foreach(mods, i, m)
        {
            const char *name = json_string_value(json_object_get(m, "name"));
            int k = name ? bm_table_find_module(t[0], name) : -1;
            if (k >= 0) json_object_set_new(m, "cost", cost_json(&costs[k], spread ? spread[k] : 0));
        }
        json_t *data = json_object_get(root, "data");
        if (data) json_object_del(data, "encoder_cost_scale");
        if (mb_values) {
            if (!json_is_object(data)) json_object_set_new(root, "data", data = json_object());
            json_object_set_new(data, "encoder_cost_scale", json_pack("{s:o}", "values", mb_values));
            mb_values = NULL;
        }
        json_t *dev = json_object_get(root, "device");
        if (!json_is_object(dev)) json_object_set_new(root, "device", dev = json_object());
        json_object_set_new(dev, "op_overhead_us", json_real(overhead_us));
        if (have_lat) json_object_set_new(dev, "link_latency_us", json_real(lat_ms * 1e3));
        if (scale) {
            json_object_set_new(dev, "rank_time_scale", scale);
            scale = NULL;
        }
    } else {
        root = json_object();
        json_object_set_new(root, "format", json_string("bigmac-costs"));
        json_object_set_new(root, "version", json_integer(1));
        json_object_set_new(root, "trace", json_string(traces[0]));
        json_t *all = json_array();
        for (int i = 0; i < n_traces; i++) json_array_append_new(all, json_string(traces[i]));
        json_object_set_new(root, "traces", all);
        json_t *mods = json_array();
        for (int k = 0; k < t[0]->n_modules; k++) {
            json_t *m = json_object();
            json_object_set_new(m, "name", json_string(t[0]->modules[k].name));
            json_object_set_new(m, "cost", cost_json(&costs[k], spread ? spread[k] : 0));
            json_array_append_new(mods, m);
        }
        json_object_set_new(root, "modules", mods);
        json_object_set_new(root, "op_overhead_us", json_real(overhead_us));
        if (have_lat) json_object_set_new(root, "link_latency_us", json_real(lat_ms * 1e3));
        if (scale) json_object_set_new(root, "rank_time_scale", scale);
        scale = NULL;
        if (mb_values) json_object_set_new(root, "encoder_cost_scale", json_pack("{s:o}", "values", mb_values));
        mb_values = NULL;
    }
    size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6);
    int wr = !strcmp(out, "-") ? json_dumpf(root, stdout, flags) : json_dump_file(root, out, flags);
    if (!strcmp(out, "-")) printf("\n");
    if (wr) {
        bm_err_set(&err, "%s: write failed", out);
        goto fail;
    }
    rc = 0;
    goto done;
fail:
    bm_cli_error(err.msg);
done:
    if (root) json_decref(root);
    if (scale) json_decref(scale);
    if (mb_values) json_decref(mb_values);
    bm_free(spread);
    bm_free(costs);
    for (int i = 0; i < n_traces; i++) {
        if (tl) bm_timeline_free(tl[i]);
        if (t) bm_table_free(t[i]);
    }
    bm_free(tl), bm_free(t);
    return rc;
}
