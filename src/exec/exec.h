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

/* The executor's options are bm_train's (struct bm_train_opts, include/bigmac.h): one type for
 * `bigmac train`, bm_train, the reference trainer and the tests; faults are enum bm_train_fault.
 * Progress lines go to stdout on rank 0 unless o->quiet. The table's cost model
 * (costs, NULL: none) is never read here: bm_exec_train only hands it to the trace writer, which
 * embeds it with the table (the executor does not include include/bigmac_cost.h). */

/* Per-step figures of one rank (gathered to rank 0). */
struct bm_exec_rank_stats {
    size_t peak_act[BM_N_ROLES];  /* peak live context bytes per role during the step */
    double ms;                    /* wall time of the rank's op walk: step begin to finish */
    /* the step after the walk (bm_exec_note_tail): when the rank's gradient collectives started
     * and ended (ms from the step's origin, rank 0's clock) and how long its optimizer took */
    double sync_start_ms, sync_end_ms, optimizer_ms;
};

/* One gradient or weight collective of a step on one rank (run.c; the step log's
 * "collectives", docs/executor.md "The step log"). */
enum bm_exec_coll_op { BM_COLL_ALL_REDUCE = 0, BM_COLL_REDUCE_SCATTER = 1, BM_COLL_ALL_GATHER = 2 };
struct bm_exec_coll {
    int inst;              /* the instance (bm_exec_inst) */
    int op;                /* enum bm_exec_coll_op: what the transport ran */
    int weights;           /* 0: the gradients' sum; 1: ZeRO-1's gather of the updated weights */
    int group;             /* BM_COMM_WORLD or BM_COMM_DP */
    int ranks;             /* ranks in the group */
    int inter;             /* 1: the group spans hosts */
    double bytes;          /* the buffer's bytes (each rank's whole buffer) */
    double start_ms, end_ms; /* on the step's clock (bm_exec_now_ms) */
    int in_walk;           /* 1: started inside the walk, before the rank's last op (the end is
                            * when the rank first saw it done, after the op running then) */
};

struct bm_exec;

/* Build pipeline rank 'rank' of table t for spec s. The table must carry chunk_layers (or the
 * backbone arch.layers must split evenly). Caller owns *out (bm_exec_free). */
int bm_exec_new(const struct bm_spec *s, const struct bm_table *t, int rank, struct bm_comm *comm,
                const struct bm_train_opts *o, struct bm_exec **out, struct bm_err *err);
void bm_exec_free(struct bm_exec *x);
/* Offset (seconds) that turns this process's bm_now() into rank 0's clock (comm clock_offset). */
void bm_exec_set_clock_offset(struct bm_exec *x, double offset);
/* Now, in ms from the current step's origin on rank 0's clock (what op times are measured in). */
double bm_exec_now_ms(const struct bm_exec *x);
/* The step's collectives on this rank: forget the last step's (bm_exec_step_begin does), add
 * one (at most 2 per instance a step; BM_ERR beyond), and read them (valid until the next step). */
int bm_exec_note_coll(struct bm_exec *x, const struct bm_exec_coll *e);
const struct bm_exec_coll *bm_exec_colls(const struct bm_exec *x, int *n);
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
 * replicated modules' all-reduce): on each instance's shard (bm_exec_inst_shard), the whole
 * instance unless ZeRO-1. step is 0-based. */
void bm_exec_optimizer(struct bm_exec *x, long step);
/* AdamW on instance i's shard only (nothing for a frozen module). */
void bm_exec_optimizer_inst(struct bm_exec *x, int i, long step);
/* 1 when the rank's table asks for ZeRO-1 (table->zero). */
int bm_exec_zero(const struct bm_exec *x);

/* The rank's op (index into its op list) that ends instance i's last backward (B or W) in a
 * step, after which its gradients are final; -1 when the rank runs no backward of it. */
int bm_exec_inst_last_bwd(const struct bm_exec *x, int i);
/* Instance i's module's role (enum bm_role). */
int bm_exec_inst_role(const struct bm_exec *x, int i);
/* Called by bm_exec_advance after each op k of the walk completes (hook NULL: none); a failure
 * (BM_ERR, err set) fails the op. run.c starts each instance's gradient collective there. */
typedef int (*bm_exec_op_hook)(void *arg, int k, struct bm_err *err);
void bm_exec_set_op_hook(struct bm_exec *x, bm_exec_op_hook hook, void *arg);

/* Module instances of the rank: for i in 0..n-1, module index (spec order), global chunk (-1 for
 * non-backbone), replicated (1 = encoder/generator replica, all-reduced). */
int bm_exec_n_inst(const struct bm_exec *x);
void bm_exec_inst(const struct bm_exec *x, int i, int *module, int *chunk, int *replicated);
/* 1 when instance i's module is frozen ("trainable": false): no optimizer step, no gradient sum. */
int bm_exec_inst_frozen(const struct bm_exec *x, int i);
/* Parameters / gradients of instance i (n floats each); its AdamW moments: m then v of the
 * shard the rank keeps, *n = hi - lo floats each (bm_exec_inst_shard; 0 and NULL for a frozen
 * module, which has no optimizer state). */
float *bm_exec_inst_params(struct bm_exec *x, int i, size_t *n);
float *bm_exec_inst_grads(struct bm_exec *x, int i, size_t *n);
float *bm_exec_inst_moments(struct bm_exec *x, int i, size_t *n);
/* The elements [*lo, *hi) of instance i whose optimizer state this rank keeps and updates:
 * under ZeRO-1 (table "zero": 1) the k-th of 'parts' equal slices over the copies' group (a
 * replicated module: every rank of the job, k its global rank; a backbone chunk: its D
 * replicas, k the replica), else [0, n); empty for a frozen module. Returns parts (1: whole). */
int bm_exec_inst_shard(const struct bm_exec *x, int i, size_t *lo, size_t *hi);

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
int bm_exec_train(const struct bm_spec *s, const struct bm_table *t, const struct bm_costs *costs,
                  struct bm_comm *comm, const struct bm_train_opts *o, struct bm_err *err);

#endif
