/* cluster.h — the sweep for a cluster (`bigmac sweep SPEC --gpus N --global-batch B`): every
 * pp x dp = N (pp dividing the backbone's layers), vpp, M = B / (dp * samples_per_microbatch),
 * policy, window and ZeRO stage, planned and simulated as a whole step (src/sim/step.h), ranked
 * by samples/s. Private to the study package and the CLI. */
#ifndef BM_STUDY_CLUSTER_H
#define BM_STUDY_CLUSTER_H

#include <stdio.h>

#include "bigmac.h"

struct bm_cluster_opts {
    int gpus;                    /* N = pp * dp */
    int global_batch;            /* B samples per step */
    double mem_cap_mib;          /* OOM above min(device memory, this); 0: the device memory */
    int search;                  /* placement search budget (bm_plan_build_search) */
    FILE *progress;              /* one line per configuration; NULL: none */
};

struct bm_cluster_row {
    int pp, dp, vpp, microbatches, window, zero;
    enum bm_policy policy;
    enum bm_backbone backbone;
    double makespan_ms, step_ms, sync_exposed_ms, sync_total_ms, optimizer_ms;
    double samples_per_s;        /* dp * M * samples_per_microbatch per step_ms */
    double walk_samples_per_s;   /* the same per makespan_ms: the ranking without the step's tail */
    double peak_mib;
    int oom;                     /* peak over the cap */
    int pareto;                  /* no fitting row has less peak memory and more samples/s, or
                                  * as much of one and more of the other (fitting rows only) */
};

struct bm_cluster {
    double cap_mib;
    int configs;                 /* configurations tried (plans x ZeRO stages) */
    struct bm_cluster_row *rows; /* ranked: fitting first, by samples/s, then step_ms */
    int n_rows, n_fit;
    int skipped;                 /* configurations that did not plan */
    int same;                    /* bigmac at window fit that chose auto's window (not listed twice) */
    char first_skip[512];        /* the first one's reason (empty: none) */
    char layouts[1024];          /* the pp x dp layouts tried, or why none ("pp 2 x dp 64, ...") */
};

/* Run it. BM_ERR when memory runs out or no pp x dp layout exists (err says why). */
int bm_cluster_sweep(const struct bm_spec *s, const struct bm_plan_opts *base, const struct bm_cluster_opts *o,
                     struct bm_cluster *out, struct bm_err *err);
void bm_cluster_free(struct bm_cluster *c);

#endif
