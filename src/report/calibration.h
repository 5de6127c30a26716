/* calibration.h — `bigmac calibrate` as a library call: measured executor traces (one plan,
 * possibly several runs) loaded and turned into the figures a calibrated spec carries (module
 * costs, per-rank time scale, per-microbatch encoder scale, cost spread, per-op dispatch time
 * and link latency) by the estimators of src/sim/calibrate.h; src/spec/calibrated.h writes them
 * out. */
#ifndef BM_REPORT_CALIBRATION_H
#define BM_REPORT_CALIBRATION_H

#include "bigmac.h"
#include "spec/calibrated.h"

struct bm_calibration_opts {
    int mean;        /* means instead of medians (--mean) */
    int rank_scale;  /* also the per-rank time scale (--rank-scale) */
    int spread;      /* also each module's cost spread (--spread) */
    int run_median;  /* every trace fitted on its own, then the median over the traces of every
                      * number (--run-median, bm_calibrate_median_runs) */
};

/* The figures (cal, pointing into the arrays here) and what they came from. */
struct bm_calibration {
    struct bm_spec_calibration cal;
    struct bm_table **t;             /* [n] the traces' tables (t[0] names the modules) */
    struct bm_timeline **tl;         /* [n] their measured timelines */
    int n;
    struct bm_cost *costs;           /* [n_modules] */
    double *rank_scale, *mb_scale, *spread; /* NULL when not measured */
    const char **names;              /* [n_modules], into t[0] */
    double link_latency_short_us;    /* > 0: the transfers were this much shorter than their
                                      * bytes' modelled time, so the latency written is 0 (the
                                      * caller warns: out_mib overstate the tensors) */
};

/* Load the n traces (each measured by `bigmac train --trace`, all of one plan: another plan's
 * or a simulated trace is refused by name) and calibrate them into *out. The microbatch
 * encoder scale is measured when the plan has an encoder (together with the rank scale when
 * asked for). BM_ERR with err set on failure (out then holds nothing). Release with
 * bm_calibration_free (safe on a failed or zeroed one). */
int bm_calibration_build(const char *const *traces, int n, const struct bm_calibration_opts *o,
                         struct bm_calibration *out, struct bm_err *err);
void bm_calibration_free(struct bm_calibration *c);

#endif
