/* ckpt.h — checkpoints of one pipeline rank: its module instances' parameters and AdamW
 * moments, and the number of steps done. One file per rank, DIR/rank-<R>.ckpt, written to a
 * temporary file, fsync'ed and renamed, so a crash never leaves a torn checkpoint.
 *
 * Format (little-endian, as the machine writes it): "BMCKPT01", int32 rank, pp, vpp, n_inst,
 * int64 steps_done, then per instance int32 module, chunk, uint64 n, n params, n m, n v floats,
 * then a uint64 FNV-1a hash of everything before it. */
#ifndef BM_EXEC_CKPT_H
#define BM_EXEC_CKPT_H

#include "exec/exec.h"

int bm_ckpt_save(struct bm_exec *x, const struct bm_table *t, int rank, const char *dir, long steps_done,
                 struct bm_err *err);
/* Load rank's file into x (instances must match: same table, same model). *steps_done = steps
 * the checkpoint had completed (the next step to run). */
int bm_ckpt_load(struct bm_exec *x, const struct bm_table *t, int rank, const char *dir, long *steps_done,
                 struct bm_err *err);

#endif
