/* exec.h — the pipelined executor (docs/design.md §9): one rank's op walker (exec.c) and the training
 * driver around it (run.c). See docs/executor.md.
 *
 * A process drives comm->nlocal pipeline ranks (1 under MPI, all P with comm_local). Each rank
 * owns its backbone chunks (layer ranges from table->chunk_layers) and a replica of every
 * encoder and generator, all created through bm_module_find(impl)->create with the reference
 * trainer's seeds (bm_train_module_seed), so replicas are identical on every rank and the
 * whole model equals the reference's.
 *
 * One step on a rank: bm_exec_step_prepare (draw the microbatches the rank touches, post every
 * recv of the step) -> bm_exec_step_begin (zero grads; the step's clock starts) ->
 * bm_exec_advance until done (walk the op list; compute ops run
 * forward/backward, sends start non-blocking transfers, recvs wait for theirs) ->
 * bm_exec_step_finish (complete the sends, check nothing is left alive). Then the driver sums the
 * replicated modules' gradients over ranks and steps AdamW.
 *
 * Activation accounting: a context's ctx_bytes counts for its module's role from the end of its
 * F until its B starts (when backward frees it). Tensors in flight (outputs waiting to be sent
 * or consumed, received buffers) are NOT counted: they are the simulator's out_mib traffic, not
 * act_mib, and the reference trainer does not count them either. */
#ifndef BM_EXEC_H
#define BM_EXEC_H

#include <stdio.h>

#include "bigmac.h"
#include "bigmac_module.h"
#include "exec/comm.h"

enum bm_fault { BM_FAULT_NONE = 0, BM_FAULT_NAN, BM_FAULT_CRASH, BM_FAULT_EXIT, BM_FAULT_HANG };

struct bm_exec_opts {
    int steps;                 /* 0 = spec's train.steps */
    const char *log_path;      /* JSON line per step (rank 0) */
    const char *trace_path;    /* Chrome trace of the last step (rank 0) */
    int trace_from;            /* > 0: also every step from this one (1-based) to STEM.step<K>.json */
    const char *dump_params;   /* final parameters, raw little-endian floats in spec module order */
    const char *ckpt_dir;      /* write checkpoints here ... */
    int ckpt_every;            /* ... every N steps (0 = only after the last step) */
    const char *resume_dir;    /* resume from the checkpoint in this directory */
    FILE *progress;            /* progress lines (rank 0 only); NULL = quiet */
    int fault_rank, fault_op;  /* --inject-fault RANK:OP:KIND (op index in the rank's list, or
                                * BM_TRAIN_FAULT_AT_CHECKPOINT: rank's checkpoint file, half written) */
    int fault_step;            /* the step (0-based) the fault fires in */
    enum bm_fault fault;
    double *loss_out;          /* optional [steps]: each step's loss (process of rank 0) */
    double *peak_out;          /* optional [P * 3]: last step's peak act bytes per rank and role */
    double *ms_out;            /* optional [steps]: each step's wall time, ms (rank 0) */
    int resume_force;          /* resume although the checkpoint's settings differ (--resume-force) */
    /* The table's cost model, never read here: only handed to the trace writer, which embeds it
     * with the table (the executor does not include include/bigmac_cost.h). NULL: none. */
    const struct bm_costs *costs;
};

/* Per-step figures of one rank (gathered to rank 0). */
struct bm_exec_rank_stats {
    size_t peak_act[BM_N_ROLES];  /* peak live context bytes per role during the step */
    double ms;                    /* wall time of the rank's op walk: step begin to finish */
    /* the step after the walk (bm_exec_note_tail): when the rank's gradient collectives started
     * and ended (ms from the step's origin, rank 0's clock) and how long its optimizer took */
    double sync_start_ms, sync_end_ms, optimizer_ms;
};

struct bm_exec;

/* Build pipeline rank 'rank' of table t for spec s. The table must carry chunk_layers (or the
 * backbone arch.layers must split evenly). Caller owns *out (bm_exec_free). */
int bm_exec_new(const struct bm_spec *s, const struct bm_table *t, int rank, struct bm_comm *comm,
                const struct bm_exec_opts *o, struct bm_exec **out, struct bm_err *err);
void bm_exec_free(struct bm_exec *x);
/* Offset (seconds) that turns this process's bm_now() into rank 0's clock (comm clock_offset). */
void bm_exec_set_clock_offset(struct bm_exec *x, double offset);
/* Now, in ms from the current step's origin on rank 0's clock (what op times are measured in). */
double bm_exec_now_ms(const struct bm_exec *x);
/* Record the step's tail after the walk for bm_exec_stats (run.c measures it). */
void bm_exec_note_tail(struct bm_exec *x, double sync_start_ms, double sync_end_ms, double optimizer_ms);
/* Prepare step 'step' (0-based): draw the microbatches the rank touches and post every recv of
 * the step (data loading is not part of the measured op walk, as with a prefetching loader). */
int bm_exec_step_prepare(struct bm_exec *x, long step, struct bm_err *err);
/* Start the prepared step's walk: zero grads, reset the accounting and the profile. origin: the
 * shared clock origin (seconds, bm_now() of rank 0) that op times are measured from. */
int bm_exec_step_begin(struct bm_exec *x, double origin, struct bm_err *err);
/* Walk ops from the current position. block = 1: wait at recvs until done; block = 0: return
 * at the first recv whose data has not arrived. *done = 1 when the op list is finished.
 * *progress = number of ops executed by this call. On failure err reads
 * "rank R: op #K ACTION: what went wrong". */
int bm_exec_advance(struct bm_exec *x, int block, int *done, int *progress, struct bm_err *err);
/* Complete outstanding sends and check that the step left no context or tensor behind. */
int bm_exec_step_finish(struct bm_exec *x, struct bm_err *err);
/* AdamW on every module instance of the rank (the gradients are final: call after the
 * replicated modules' all-reduce). step is 0-based. */
void bm_exec_optimizer(struct bm_exec *x, long step);
/* AdamW on elements [lo, hi) of instance i only (ZeRO-1: this rank's shard; run.c). */
void bm_exec_optimizer_range(struct bm_exec *x, int i, size_t lo, size_t hi, long step);
/* 1 when the rank's table asks for ZeRO-1 (table->zero). */
int bm_exec_zero(const struct bm_exec *x);

/* Module instances of the rank: for i in 0..n-1, module index (spec order), global chunk (-1 for
 * non-backbone), replicated (1 = encoder/generator replica, all-reduced). */
int bm_exec_n_inst(const struct bm_exec *x);
void bm_exec_inst(const struct bm_exec *x, int i, int *module, int *chunk, int *replicated);
/* 1 when instance i's module is frozen ("trainable": false): no optimizer step, no gradient sum. */
int bm_exec_inst_frozen(const struct bm_exec *x, int i);
/* Parameters / gradients / AdamW moments (m then v, 2n floats) of instance i. */
float *bm_exec_inst_params(struct bm_exec *x, int i, size_t *n);
float *bm_exec_inst_grads(struct bm_exec *x, int i, size_t *n);
float *bm_exec_inst_moments(struct bm_exec *x, int i, size_t *n);

/* Losses of the last step's microbatches computed on this rank (0 elsewhere): lm[M], gen[M]. */
const double *bm_exec_losses_lm(const struct bm_exec *x);
const double *bm_exec_losses_gen(const struct bm_exec *x);
void bm_exec_stats(const struct bm_exec *x, struct bm_exec_rank_stats *st);

/* The last step's measured op times, parallel to table->ranks[rank].ops: 3 doubles per op
 * (start_ms, end_ms, ready_ms from the origin); and the activation trace: 4 doubles per point
 * (t_ms, encoder, backbone, generator bytes). Pointers valid until the next step. */
const double *bm_exec_op_times(const struct bm_exec *x, int *n_ops);
const double *bm_exec_mem_trace(const struct bm_exec *x, int *n_points);
/* Measured context bytes of F ops of the last step: out[k] for the rank's op k (0 for non-F). */
const size_t *bm_exec_op_bytes(const struct bm_exec *x);
/* Per op of this rank: for the forward of a recomputed module ("recompute": "full"), the bytes
 * of the input it keeps until its backward (the table's in_bytes); 0 otherwise. Valid like
 * bm_exec_op_bytes. */
const size_t *bm_exec_op_in_bytes(const struct bm_exec *x);
/* Per op of this rank: a send's or recv's message bytes in the last step (0 for compute ops);
 * the trace's "bytes" (bm_exec_timeline). */
const double *bm_exec_msg_bytes(const struct bm_exec *x);

/* ---------------------------------------------------------------- driver (run.c) */

/* One whole training step of the local ranks x[0 .. comm->nlocal-1]: begin, walk (cooperative
 * round-robin when comm is), finish, all-reduce the replicas' gradients, AdamW. */
int bm_exec_run_step(struct bm_exec **x, struct bm_comm *c, long step, struct bm_err *err);

/* Train: plan (or take) table t, build the local ranks, run opts->steps steps, log, trace,
 * checkpoint. The process runs comm->nlocal ranks. Returns 0 on success; on a failure the
 * message is in err (cooperative comm), or the job was aborted (MPI, a failure in a step), or
 * (MPI, a failure every rank met at one point: an output path, the checkpoint to resume, a
 * checkpoint set, an output written at the end) BM_ERR in every process, err holding the message
 * in the failing rank's process and empty in the others. Rank 0's process writes the log and
 * trace. */
int bm_exec_train(const struct bm_spec *s, const struct bm_table *t, struct bm_comm *comm,
                  const struct bm_exec_opts *o, struct bm_err *err);

#endif
