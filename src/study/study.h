/* study.h — the study package's own helpers (src/study/): what bm_compare and bm_sweep
 * (include/bigmac.h) are built from, and the JSON objects that `bigmac simulate --json`, its
 * --compare variant and the Python binding print, so that one builder writes each of them.
 * The package sits above plan and sim, below report and cli. */
#ifndef BM_STUDY_H
#define BM_STUDY_H

#include <jansson.h>

#include "bigmac.h"

/* Largest per-rank encoder + generator busy time of a timeline (the nested work the
 * zero-added-bubble bound adds to none's makespan). */
double bm_study_nested_max_ms(const struct bm_timeline *tl);

/* A window as the sweep names it: "auto", "fit" or the number (buf of n bytes). */
void bm_study_window_name(int w, char *buf, size_t n);

/* The JSON object `simulate --json` prints for one table and its timeline (new reference):
 * policy, backbone, settings, makespan, bubble, samples/s, memory, per-rank figures, and
 * "hosts" for a table placed over hosts. */
json_t *bm_study_sim_json(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl);
/* The host-placement figures of t (src/sim/hosts.h) as the "hosts" object (new reference). */
json_t *bm_study_hosts_json(const struct bm_table *t, const struct bm_costs *c);

/* bm_compare of s (opts->keep is replaced) and the object `simulate --compare --json` prints:
 * {"results": [one bm_study_sim_json per row, or {"policy", "error"}, optimus+recompute after
 * optimus], "zero_bubble_bound_ms", "lower_bound_ms"}, into *out (new reference). *n_failed:
 * the policy rows that failed. BM_ERR only when memory runs out. */
int bm_study_compare_json(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *opts,
                          json_t **out, int *n_failed, struct bm_err *err);

#endif
