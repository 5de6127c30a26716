/* ckpt.h — checkpoints as sets (docs/executor.md "Checkpoints"): the files of every pipeline rank
 * at one step, made current together by one commit marker.
 *
 * Layout of a checkpoint directory DIR:
 *
 *   DIR/step-<N>/rank-<R>.ckpt   one per pipeline rank R (N: steps done, 8 digits), written by
 *                                replica 0 (every replica holds the same state) ...
 *   DIR/step-<N>/rank-<R>.dp-<d>.ckpt  ... except under ZeRO-1 with dp > 1: one per global rank,
 *                                each holding its own shard of the optimizer state
 *   DIR/step-<N>/COMPLETE        the commit marker: written by rank 0 after every rank's file of
 *                                the set is on disk (a barrier over every process of the job)
 *
 * Protocol (run.c): every writer rank writes its file (to a .tmp, fsync, rename, fsync the
 * directory), then a barrier that also agrees on success; then rank 0 writes COMPLETE the same
 * way; then a second agreement, after which each rank removes its files of the other sets (rank 0
 * also their markers). So at any moment the newest set with a COMPLETE marker is whole: a crash
 * while set N is written leaves set N without a marker and the previous set untouched.
 * `--resume DIR` takes the newest set with a marker.
 *
 * Rank file (little-endian, as the machine writes it): "BMCKPT03", int32 rank, pp, vpp, n_inst,
 * int64 steps_done, then per instance int32 module, chunk, uint64 n, lo, hi, n params, then the
 * AdamW m and v of elements [lo, hi) (hi - lo floats each: the shard the rank keeps, the whole
 * [0, n) without ZeRO-1, none for a frozen module), then a uint64 FNV-1a hash of everything
 * before it. "BMCKPT02" files (before the shards: no lo, hi; every moment whole) still load.
 * A file whose part holds the shard a rank keeps loads into it (a ZeRO-0 set resumes under
 * ZeRO-1 at any dp; a ZeRO-1 set only under the same zero and dp).
 *
 * COMPLETE is text, one "key value" per line: "bigmac-checkpoint 2", then step, pp, vpp,
 * microbatches, files (the number of rank files), and the settings a resumed run must share to
 * continue the same run: train.lr, train.weight_decay, train.beta1, train.beta2, train.eps,
 * train.seed, data.seed, data.samples_per_microbatch, data.max_images (doubles with 17
 * significant digits, so they compare exactly); under ZeRO-1 also "zero 1" and "dp D". */
#ifndef BM_EXEC_CKPT_H
#define BM_EXEC_CKPT_H

#include "exec/exec.h"

/* What a set's COMPLETE marker records. */
struct bm_ckpt_meta {
    long step;                 /* steps done */
    int pp, vpp, microbatches, files; /* microbatches: per step, over every replica */
    struct bm_train train;     /* train.steps is not recorded (a resumed run may go further) */
    uint64_t data_seed;
    int samples_per_microbatch, max_images;
    int zero, dp;              /* ZeRO-1 sets ("zero 1"): the dp whose shards the files hold */
};

/* The marker a run of spec s on table t with dp data-parallel replicas writes after 'step' steps
 * (its microbatches: the step's, dp * the table's, so that a checkpoint resumes under another dp
 * with the same global batch: the state does not depend on dp). */
void bm_ckpt_meta_of(const struct bm_spec *s, const struct bm_table *t, int dp, long step, struct bm_ckpt_meta *m);

/* The settings of a (checkpoint) and b (this run) that differ, as "train.lr 0.003 (this run:
 * 0.002); data.seed 1 (this run: 2)" into out; returns how many differ. The shape (pp, vpp) is
 * not compared here (the rank files check it). */
int bm_ckpt_meta_diff(const struct bm_ckpt_meta *a, const struct bm_ckpt_meta *b, char *out, size_t n);

/* Every rank that will write checkpoints, before the first step: DIR exists or is created (its
 * parent must exist), and a file can be created in it. Messages name the flag. */
int bm_ckpt_check_dir(const char *dir, int rank, struct bm_err *err);

/* Rank 'rank''s file of the set (replica >= 0: the ZeRO-1 file of that replica; -1: rank-R.ckpt) of 'steps_done' steps. midway(ctx), when given, is called with the
 * file half written (before it is complete, synced and renamed): the fault injection's hook for
 * a rank that dies while a set is written. */
int bm_ckpt_save(struct bm_exec *x, const struct bm_table *t, int rank, int replica, const char *dir, long steps_done,
                 void (*midway)(void *ctx), void *ctx, struct bm_err *err);

/* Rank 0, after every rank's file of the set is written: the COMPLETE marker of m->step. */
int bm_ckpt_commit(const char *dir, const struct bm_ckpt_meta *m, struct bm_err *err);

/* After set 'keep' was committed: remove rank's files of every other set, and (rank 0) their
 * markers; empty set directories are removed. Best effort: what cannot be removed stays, and
 * an older set without its marker is never resumed from. */
void bm_ckpt_prune(const char *dir, int rank, int replica, long keep);

/* The newest set in dir that has a COMPLETE marker, into *m. BM_ERR (err says why) when dir
 * has none or its marker cannot be read. *found = 0 with BM_OK when none exists and
 * missing_ok. */
int bm_ckpt_newest(const char *dir, int missing_ok, struct bm_ckpt_meta *m, int *found, struct bm_err *err);

/* Load rank's file (replica as for bm_ckpt_save) of set 'step' into x (instances must match: same table, same model). */
int bm_ckpt_load(struct bm_exec *x, const struct bm_table *t, int rank, int replica, const char *dir, long step,
                 struct bm_err *err);

#endif
