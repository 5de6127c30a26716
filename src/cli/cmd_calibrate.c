/* cmd_calibrate.c — `bigmac calibrate TRACE.json... [--spec SPEC.json] [--mean] [--run-median] [--rank-scale] [--spread] [-o FILE]`: measured
 * op times and bytes of executor traces -> spec costs (docs/executor.md). Flag parsing and
 * printing only: the calibration package src/calib/ (calib.h: bm_calibration_build runs the
 * traces through the estimators; bm_spec_write_calibrated / bm_spec_write_costs write the
 * calibrated spec or the cost fragment). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "calib/calib.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac calibrate TRACE.json... [--spec SPEC.json] [--mean] [--run-median] [--rank-scale] [--spread]\n"
            "                       [--step-log LOG.json] [--replica slowest|N]\n"
            "                        [-o FILE]\n"
            "\n"
            "Turns the measured op times and activation bytes of an executor trace\n"
            "(`bigmac train ... --trace TRACE.json`) into per-module spec costs: fwd_ms/bwd_ms per\n"
            "microbatch (the backbone's summed over its chunks: whole model), act_mib from the\n"
            "measured bytes, out_mib from the measured message sizes (the traces' \"bytes\"; kept without\n"
            "them), state_mib kept. Durations are medians over the\n"
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
            "between an op and the rank's previous one; \"op_overhead_us\" in the fragment),\n"
            "device.recv_overhead_us to the mean time a recv of an arrived message took and\n"
            "device.step_lead_us to the time before each rank's first op (the step's setup):\n"
            "ready for `bigmac simulate`; and device.link_latency_us to the latency the transfers\n"
            "imply (send issue to the completion of a recv that waited for it, less the bytes' time\n"
            "on the modelled link; \"link_latency_us\" in the fragment; 0 with a warning when the\n"
            "bytes' time alone is longer). --spread also writes each module's cost.spread (sigma of\n"
            "log op time around the model, within a step) and device.op_overhead_sd_us (the\n"
            "dispatch gaps' standard deviation): `simulate` then also gives the expected makespan\n"
            "under both; of one traced step calibrated alone it is the prediction of that step\n"
            "(docs/simulator.md \"Predicting a run\").\n"
            "--rank-scale also measures how much slower or faster each rank ran than the module\n"
            "costs say (its compute time over the costs' prediction for its ops) and writes it as\n"
            "device.rank_time_scale (with --spec; \"rank_time_scale\" in the fragment): one\n"
            "multiplier per rank, so the spec then plans only at the trace's pp.\n"
            "--step-log LOG.json (`bigmac train --log`) also fits device.optimizer_ms_per_gib: the\n"
            "median over steps and ranks of each rank's optimizer time per GiB of the optimizer\n"
            "state it updated (docs/simulator.md \"The step\"); and, from the log's \"collectives\", the\n"
            "ring's device.coll_gbytes_per_s and coll_latency_us (inter_host_coll_* for collectives\n"
            "whose group spans hosts): a least-squares fit of each collective's median time (that of\n"
            "its last member to start, from that rank's walk or previous collective: its work to\n"
            "issue it) to f(n-1)/n * bytes / bw + f(n-1) * latency; and each\n"
            "module's cost.param_mib from the weights the ranks hold (the log's \"params\") with\n"
            "state_mib = 4 x param_mib (weights, gradients, AdamW's two moments).\n"
            "");
    fprintf(f,
            "A trace of a data-parallel run (`train --dp D`) holds every replica's ranks; the fits\n"
            "take, in each trace, the replica whose walk was longest (--replica slowest, the\n"
            "default): the step ends with the slowest replica, since every gradient collective\n"
            "waits for it, and the simulator models the replicas alike. --replica N takes\n"
            "replica N of every trace instead.\n"
            "-o - (the default) writes to stdout.\n");
}

int bm_cmd_calibrate(int argc, char **argv)
{
    const char *spec = NULL, *out = "-";
    /* the trace paths, gathered at the front of argv (never ahead of the scan) */
    const char **traces = (const char **)argv;
    int n_traces = 0;
    int mean = 0, rank_scale = 0, want_spread = 0, run_median = 0, replica = -1;
    const char *step_log = NULL;
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
        } else if (!strcmp(a, "--step-log")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: --step-log needs a value (a `bigmac train --log` file)\n");
                return BM_USAGE;
            }
            step_log = argv[++i];
        } else if (!strcmp(a, "--replica")) {
            char *end;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 < argc && !strcmp(argv[i + 1], "slowest")) {
                replica = -1;
            } else if (i + 1 >= argc || !*argv[i + 1] || *end || v < 0 || v > 1000000) {
                fprintf(stderr, "bigmac: error: --replica needs 'slowest' or a replica number >= 0%s%s%s\n",
                        i + 1 < argc ? " (got '" : "", i + 1 < argc ? argv[i + 1] : "", i + 1 < argc ? "')" : "");
                return BM_USAGE;
            } else {
                replica = (int)v;
            }
            i++;
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
    struct bm_calibration c;
    struct bm_calibration_opts co = {.mean = mean, .rank_scale = rank_scale, .spread = want_spread,
                                     .run_median = run_median, .replica = replica};
    int rc = bm_calibration_build(traces, n_traces, &co, &c, &err);
    if (rc == BM_OK && c.link_latency_short_us > 0)
        fprintf(stderr, "bigmac: warning: calibrate: the measured transfers are %.1f us shorter than the model charges "
                        "for their bytes alone (the tensors' out_mib over device.link_gbytes_per_s): link_latency_us "
                        "written as 0\nbigmac: hint: the modules' out_mib overstate the tensors they send\n",
                c.link_latency_short_us);
    if (rc == BM_OK && step_log) { /* the optimizer's time per GiB of state (calib/step_log.c) */
        int nv;
        rc = bm_calibrate_optimizer(step_log, &c.cal.optimizer_ms_per_gib, &nv, &err);
        c.cal.have_optimizer = rc == BM_OK;
        if (c.cal.have_optimizer) c.model->device.optimizer_ms_per_gib = c.cal.optimizer_ms_per_gib;
    }
    struct bm_cost *sized = NULL; /* the costs with the model's real sizes from the step log */
    double *pm = NULL;
    if (rc == BM_OK && step_log && c.cal.n_modules > 0) {
        sized = bm_malloc((size_t)c.cal.n_modules * sizeof *sized);
        pm = bm_malloc((size_t)c.cal.n_modules * sizeof *pm);
        if (!sized || !pm) rc = bm_err_set(&err, "out of memory");
        else if (bm_calibrate_param_sizes(step_log, c.cal.n_modules, c.cal.names, pm, &err) == BM_OK) {
            /* param_mib: each module's weights as the executor holds them (every chunk, every
             * replica once); state_mib: AdamW's resident state, weights + gradients + two moments */
            memcpy(sized, c.cal.costs, (size_t)c.cal.n_modules * sizeof *sized);
            for (int m = 0; m < c.cal.n_modules; m++)
                if (pm[m] > 0) sized[m].param_mib = pm[m], sized[m].state_mib = 4 * pm[m];
            c.cal.costs = sized;
        } else {
            fprintf(stderr, "bigmac: warning: calibrate: %s\nbigmac: hint: param_mib and state_mib keep the spec's "
                            "figures\n", err.msg);
        }
    }
    if (rc == BM_OK && step_log) { /* the collectives' ring, where the log has collectives of > 1 rank */
        struct bm_coll_fit cf;
        struct bm_err e2;
        if (bm_calibrate_collectives(step_log, &cf, &e2) == BM_OK) {
            const struct bm_coll_link *L[2] = {&cf.intra, &cf.inter};
            for (int k = 0; k < 2; k++) {
                c.cal.have_coll_lat[k] = L[k]->n > 0, c.cal.coll_latency_us[k] = L[k]->latency_us;
                c.cal.have_coll_bw[k] = L[k]->n > 0 && L[k]->have_bw, c.cal.coll_gbytes_per_s[k] = L[k]->gbytes_per_s;
                if (L[k]->n > 0 && !L[k]->have_bw)
                    fprintf(stderr, "bigmac: warning: calibrate: the %s-host collectives of %s do not tell bandwidth "
                                    "from latency (one size, or a fit below zero): %s written alone\n",
                            k ? "inter" : "intra", step_log, k ? "inter_host_coll_latency_us" : "coll_latency_us");
            }
        } else {
            fprintf(stderr, "bigmac: warning: calibrate: %s\nbigmac: hint: the collectives' ring keeps the spec's "
                            "figures\n", e2.msg);
        }
    }
    if (rc == BM_OK)
        rc = spec ? bm_spec_write_calibrated(spec, &c.cal, out, &err)
                  : bm_spec_write_costs(&c.cal, traces, n_traces, out, &err);
    if (rc) bm_cli_error(err.msg);
    bm_free(sized), bm_free(pm);
    bm_calibration_free(&c);
    return rc ? 1 : 0;
}
