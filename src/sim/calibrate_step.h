/* calibrate_step.h — the step after the walk from the executors' step logs (`train --log`,
 * bigmac.torch's log): device.optimizer_ms_per_gib (src/sim/step.h) fitted from each rank's
 * measured optimizer time and the optimizer state it updated, and the collectives' ring
 * (device.coll_gbytes_per_s, coll_latency_us, inter_host_coll_*) from their measured times. */
#ifndef BM_SIM_CALIBRATE_STEP_H
#define BM_SIM_CALIBRATE_STEP_H

#include "bigmac.h"

/* The median over the log's steps (the first left out when there are more) and ranks of
 * optimizer_ms / (optimizer_state_bytes / 2^30), into *ms_per_gib; *n: the values it is the
 * median of. BM_ERR (err names path:line and the key) for an unreadable log, a line that is not
 * a step object, or a log without those keys (written by an older bigmac). */
int bm_calibrate_optimizer(const char *path, double *ms_per_gib, int *n, struct bm_err *err);

/* The collectives' ring fitted from a step log's "collectives" (each rank's: op, group, ranks,
 * bytes, start_ms, end_ms, link): a collective of one step is the members' records of the same
 * (group, module, chunk, of, op); its time is the duration of the member that started last (it
 * waited for no one); each collective's median over the steps (the first left out when there
 * are more) is one point; per link class (intra, inter host) a least-squares fit through the
 * origin of  t = f(n-1)/n * bytes / bw + f(n-1) * latency  (f = 2 for an all-reduce, 1 for a
 * reduce-scatter or an all-gather: src/sim/step.h). When the points cannot tell bandwidth from
 * latency (one size) or the fit is unphysical, latency alone is fitted (have_bw = 0). */
struct bm_coll_link {
    int n;                 /* collectives (points) of this class; 0: none, nothing fitted */
    int have_bw;           /* 1: gbytes_per_s fitted */
    double gbytes_per_s, latency_us;
};
struct bm_coll_fit {
    struct bm_coll_link intra, inter;
};
int bm_calibrate_collectives(const char *path, struct bm_coll_fit *out, struct bm_err *err);

/* The model's real weights from a step log's first step: param_mib[m] for the module names[m]
 * (0 .. n_modules-1) = the bytes of the weights of every copy's "params" entry (a replicated
 * module once, each backbone chunk once) / 2^20; -1 where the log has none of it. BM_ERR when the
 * log cannot be read or has no "params". */
int bm_calibrate_param_sizes(const char *path, int n_modules, const char *const *names, double *param_mib,
                             struct bm_err *err);

#endif
