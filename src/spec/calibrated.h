/* calibrated.h — what `bigmac calibrate` writes, in the spec's own schema: the spec rewritten
 * with measured costs (every traced module's "cost", data.encoder_cost_scale.values,
 * device.op_overhead_us, device.link_latency_us and device.rank_time_scale), or the cost fragment
 * {"format": "bigmac-costs", ...} whose "cost" objects paste into a spec (docs/executor.md
 * "Calibration"). The measurements come from src/sim/calibrate.h; this file only knows where
 * they go in a spec, so the spec schema stays inside src/spec/. */
#ifndef BM_SPEC_CALIBRATED_H
#define BM_SPEC_CALIBRATED_H

#include "bigmac.h"

/* A calibration's figures, per module of the traced table (names[k], costs[k]). */
struct bm_spec_calibration {
    int n_modules;
    const char *const *names;     /* [n_modules] module names */
    const struct bm_cost *costs;  /* [n_modules] measured costs (w_ms kept when 0 < w_ms < bwd_ms) */
    const double *spread;         /* [n_modules] cost.spread, or NULL (none written) */
    const double *rank_scale;     /* [pp] device.rank_time_scale, or NULL */
    int pp;
    const double *mb_scale;       /* [microbatches] data.encoder_cost_scale.values, or NULL */
    int microbatches;
    double op_overhead_us;        /* device.op_overhead_us */
    double op_overhead_sd_us;     /* device.op_overhead_sd_us, written only with spread (both feed
                                   * the expected makespan) */
    double recv_overhead_us;      /* device.recv_overhead_us */
    double step_lead_us;          /* device.step_lead_us */
    int have_link_latency;        /* 1: device.link_latency_us = link_latency_us is written */
    double link_latency_us;
    int have_optimizer;           /* 1: device.optimizer_ms_per_gib is written (calibrate --step-log) */
    double optimizer_ms_per_gib;
    /* calibrate --step-log: the collectives' ring (device.coll_*, inter_host_coll_*); [0] within
     * a host, [1] across hosts; have_coll_bw / have_coll_lat: written */
    int have_coll_bw[2], have_coll_lat[2];
    double coll_gbytes_per_s[2], coll_latency_us[2];
};

/* Write the spec at spec_path with c's figures in place to out ("-" = stdout, then a newline):
 * each module of c found by name gets its "cost" replaced, data.encoder_cost_scale becomes
 * {"values": mb_scale} (removed when mb_scale is NULL), device.op_overhead_us,
 * recv_overhead_us, step_lead_us, op_overhead_sd_us (with spread; removed without),
 * device.link_latency_us (when measured) and device.rank_time_scale are set; every other key stays where it was. The spec is read through
 * the guarded JSON parser (bm_json_parse); it is not checked as a spec. */
int bm_spec_write_calibrated(const char *spec_path, const struct bm_spec_calibration *c, const char *out,
                             struct bm_err *err);

/* Write the cost fragment of c to out ("-" = stdout): {"format": "bigmac-costs", "version": 1,
 * "trace": traces[0], "traces": [...], "modules": [{"name", "cost"}], "op_overhead_us",
 * "recv_overhead_us", "step_lead_us", "op_overhead_sd_us" (with spread), "link_latency_us" and "rank_time_scale" (when measured), "encoder_cost_scale": {"values"} (when measured)}. */
int bm_spec_write_costs(const struct bm_spec_calibration *c, const char *const *traces, int n_traces,
                        const char *out, struct bm_err *err);

#endif
