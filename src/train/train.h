/* train.h — single-process reference training (no pipeline): the numbers the pipelined
 * executor must reproduce.
 *
 * One step, for each of the spec's M microbatches m (data drawn by (data.seed, step, m)):
 *   every encoder's F -> backbone F (all layers, one chunk) -> each generator's F and B ->
 *   backbone B -> every encoder's B
 * (the backbone's input is the encoders' outputs one after another in spec module order, its
 * input gradient is split back the same way; include/bigmac_module.h)
 * with every module's loss gradient scaled by 1/M, so the accumulated gradients are those of
 *   loss = (1/M) sum_m (LM loss_m + generator loss_m)
 * whatever order the microbatches run in; then AdamW (spec "train") on every module's flat
 * parameter buffer. */
#ifndef BM_TRAIN_H
#define BM_TRAIN_H

#include <stdio.h>

#include "bigmac.h"
#include "bigmac_module.h"
#include "data/data.h"

/* The dataset configuration a spec implies (data.seed, samples_per_microbatch, max_images;
 * image/channels of the encoders; seq of the backbone). */
int bm_train_data_cfg(const struct bm_spec *s, struct bm_data_cfg *cfg, struct bm_err *err);

/* bm_train_module_seed (module i's init seed) and the dataset handle (bm_dataset_new, over
 * bm_train_data_cfg and bm_data_batch) are public: include/bigmac_module.h. */

struct bm_step_stats {
    double loss, lm, gen;          /* means over the step's microbatches */
    double ms;                     /* wall time of the step */
    double flops;                  /* analytic matmul FLOPs of the step (fwd + bwd) */
    size_t peak_act[BM_N_ROLES];   /* peak live context bytes per role during the step */
};

struct bm_ref;

/* Build every module of s (the backbone as one chunk of all its layers) and the optimizer
 * state. Each module needs an "impl" naming a registered implementation whose role agrees.
 * Caller owns *out (bm_ref_free). */
int bm_ref_new(const struct bm_spec *s, struct bm_ref **out, struct bm_err *err);
void bm_ref_free(struct bm_ref *r);
/* Run training step `step` (0-based): forward/backward of all microbatches, then AdamW. */
int bm_ref_step(struct bm_ref *r, long step, struct bm_step_stats *st, struct bm_err *err);
/* The flat parameters of module i (spec order); NULL when i is out of range. */
float *bm_ref_params(struct bm_ref *r, int module, size_t *n);
/* Its gradients: after bm_ref_step, the step's accumulated gradient of the mean loss. */
float *bm_ref_grads(struct bm_ref *r, int module, size_t *n);

/* Train o->steps steps (0: the spec's train.steps) of the whole step's microbatches, with the
 * options `bigmac train --reference` takes (struct bm_train_opts): progress lines on stdout
 * unless o->quiet, one JSON object per step to o->log_path, the final parameters to
 * o->dump_params (raw floats, spec module order), each step's loss and time into o->loss_out
 * and o->ms_out. The other options (a table, checkpoints, traces, faults) are the pipelined
 * executor's; the caller refuses them (bm_train). */
int bm_ref_train(const struct bm_spec *s, const struct bm_train_opts *o, struct bm_err *err);

#endif
