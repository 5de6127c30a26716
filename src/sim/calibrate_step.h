/* calibrate_step.h — the step after the walk from the executor's step log (`train --log`):
 * device.optimizer_ms_per_gib (src/sim/step.h) fitted from each rank's measured optimizer time
 * and the optimizer state it updated. */
#ifndef BM_SIM_CALIBRATE_STEP_H
#define BM_SIM_CALIBRATE_STEP_H

#include "bigmac.h"

/* The median over the log's steps (the first left out when there are more) and ranks of
 * optimizer_ms / (optimizer_state_bytes / 2^30), into *ms_per_gib; *n: the values it is the
 * median of. BM_ERR (err names path:line and the key) for an unreadable log, a line that is not
 * a step object, or a log without those keys (written by an older bigmac). */
int bm_calibrate_optimizer(const char *path, double *ms_per_gib, int *n, struct bm_err *err);

#endif
