/* comm.h — the executor's transport: point-to-point messages between pipeline ranks and the
 * few collectives a training step needs. Two implementations:
 *
 *   comm_mpi.c    one pipeline rank per MPI process (the ONLY file that includes mpi.h);
 *   comm_local.c  every pipeline rank in this one process: in-memory mailboxes, run
 *                 cooperatively (the executor walks each rank's op list until it would block,
 *                 then moves to the next rank). Used by tests and `bigmac train --local`.
 *
 * A process runs `nlocal` pipeline ranks: first_rank .. first_rank + nlocal - 1 (MPI: 1 rank,
 * the process's own; local: all P). Collectives take one buffer per local rank (bufs[i] belongs
 * to pipeline rank first_rank + i).
 *
 * Data parallel (docs/design.md §2): the job runs D = dp replicas of the pipeline, world = P * D
 * ranks; pipeline rank p of replica d is global rank p * D + d. After split(c, D) first_rank and
 * size are the pipeline rank and P, point-to-point peers are pipeline ranks of the caller's own
 * replica, an all-reduce sums over the data-parallel group (the D replicas of one pipeline rank:
 * BM_COMM_DP) or over every rank of the job (BM_COMM_WORLD), and gather, bcast, allreduce_max and
 * clock_offset act over the whole job, rooted at global rank 0. Before split (and with D = 1)
 * global rank = pipeline rank. comm_local runs one pipeline (D = 1) only.
 *
 * Point to point: isend/irecv start a transfer and give a request id; wait() completes it.
 * A message matches on (sender, receiver, tag); the executor makes tags unique per
 * (tensor, microbatch) within a step; tag_ub itself is reserved for the clock ping-pong. isend's buffer must stay untouched until its request
 * completes. With block = 0, wait() only tests (*done = 0 when not complete yet); with block = 1
 * it returns when the request completed (MPI: polls, failing after timeout_s seconds; local:
 * same as block = 0, since nothing else could make progress while we wait).
 */
#ifndef BM_EXEC_COMM_H
#define BM_EXEC_COMM_H

#include <stddef.h>
#include <stdio.h>

#include "bigmac.h"

struct bm_comm;

/* Who an all-reduce sums over. */
enum bm_comm_group {
    BM_COMM_WORLD = 0, /* every rank of the job (replicated encoders and generators) */
    BM_COMM_DP = 1     /* the D replicas of this pipeline rank (its backbone chunks) */
};

struct bm_comm_ops {
    int (*isend)(struct bm_comm *c, int from, int to, int tag, const void *buf, size_t bytes,
                 long *req, struct bm_err *err);
    int (*irecv)(struct bm_comm *c, int to, int from, int tag, void *buf, size_t bytes,
                 long *req, struct bm_err *err);
    /* Test or wait for request req (see above). A completed request id is released. */
    int (*wait)(struct bm_comm *c, long req, int block, int *done, struct bm_err *err);
    /* bufs[i][0..n-1] summed over the ranks of group; every rank of it gets the sum. */
    int (*allreduce_sum)(struct bm_comm *c, float **bufs, size_t n, enum bm_comm_group group,
                         struct bm_err *err);
    /* ZeRO-1's halves (docs/simulator.md "The step"): the group's n ranks own the slices
     * [N*k/n, N*(k+1)/n) of the N = 'count' floats, k the rank's index in the group (its global
     * rank for BM_COMM_WORLD, its replica for BM_COMM_DP; bm_comm_group_index).
     * reduce_scatter_sum: each rank's own slice of bufs[i] becomes the group's sum of it (the
     * rest of the buffer is undefined afterwards). allgather: every rank's slice of its buffer
     * into every rank's buffer. */
    int (*reduce_scatter_sum)(struct bm_comm *c, float **bufs, size_t count, enum bm_comm_group group,
                              struct bm_err *err);
    int (*allgather)(struct bm_comm *c, float **bufs, size_t count, enum bm_comm_group group, struct bm_err *err);
    /* The gradient collectives started inside the walk (Megatron's overlap, docs/simulator.md
     * "The step"): allreduce_sum (scatter 0) or reduce_scatter_sum (scatter 1) of ONE local
     * rank's buffer, started now and completed by coll_wait; *req names it. buf stays untouched
     * until then. Every rank of a group starts the group's collectives in the same order. Only
     * for transports with one local rank (MPI); NULL in comm_local, whose collectives take every
     * local rank's buffer at once (the driver then runs them after the walk). */
    int (*icoll)(struct bm_comm *c, int scatter, float *buf, size_t n, enum bm_comm_group group, long *req,
                 struct bm_err *err);
    /* Test (block 0: *done = 0 when not complete yet) or wait (block 1, failing after timeout_s
     * like wait) for collective req; a completed id is released. Each call also lets every
     * other started transfer progress. */
    int (*coll_wait)(struct bm_comm *c, long req, int block, int *done, struct bm_err *err);
    /* Max of one int per local rank over all ranks (agreement on a status). */
    int (*allreduce_max)(struct bm_comm *c, const int *vals, int *out, struct bm_err *err);
    /* Variable-size gather to global rank 0: items[i] of bytes[i] from each local rank.
     * On the process hosting rank 0, *out gets a new buffer of all ranks' items in global rank
     * order and out_bytes[0..world-1] their sizes (caller frees *out with bm_free); elsewhere
     * *out = NULL. */
    int (*gather)(struct bm_comm *c, const void *const *items, const size_t *bytes, void **out,
                  size_t *out_bytes, struct bm_err *err);
    /* Broadcast bytes from global rank 0's buffer to everyone's. */
    int (*bcast)(struct bm_comm *c, void *buf, size_t bytes, struct bm_err *err);
    /* Offset (seconds) to add to this process's bm_now() to read rank 0's clock, estimated by
     * ping-pong with rank 0 (the round with the smallest round trip; NTP's midpoint rule). 0 in
     * one process. Every rank must call it (collective). */
    int (*clock_offset)(struct bm_comm *c, double *offset, struct bm_err *err);
    /* Make the job D replicas of a P = world / D pipeline (see above). BM_ERR when world is not
     * a multiple of D, or (local) D > 1. Collective: every process calls it once, before the
     * first message. */
    int (*split)(struct bm_comm *c, int dp, struct bm_err *err);
    /* End every process of the job with exit status code (never returns). */
    void (*abort)(struct bm_comm *c, int code);
    void (*free)(struct bm_comm *c);
};

struct bm_comm {
    const struct bm_comm_ops *ops;
    int size;          /* pipeline ranks P (before split: the world) */
    int first_rank;    /* first pipeline rank this process runs */
    int dp;            /* data-parallel replicas D (1 before split) */
    int replica;       /* this process's replica d: its global rank is first_rank * dp + replica */
    int world;         /* ranks in the job, P * D */
    int nlocal;        /* pipeline ranks this process runs */
    int tag_ub;        /* largest usable tag */
    int cooperative;   /* 1: wait never blocks; the caller round-robins its local ranks */
    double timeout_s;  /* MPI: a blocking wait fails after this long (0 = never) */
    void *impl;
    char **hosts;      /* [world] each global rank's host name when the ranks span several
                        * hosts (MPI), NULL when they share one; owned by the transport */
};

/* Global rank of pipeline rank p in this process's replica. */
static inline int bm_comm_global(const struct bm_comm *c, int p)
{
    return p * c->dp + c->replica;
}

/* How messages name pipeline rank p of this process's replica: "rank p" with one pipeline,
 * "rank g (pp p / dp d)" with several. */
static inline void bm_comm_rank_name(const struct bm_comm *c, int p, char *buf, size_t n)
{
    if (c->dp > 1) snprintf(buf, n, "rank %d (pp %d / dp %d)", bm_comm_global(c, p), p, c->replica);
    else snprintf(buf, n, "rank %d", p);
}

/* All P pipeline ranks in this process (in-memory mailboxes). NULL on OOM. */
struct bm_comm *bm_comm_local_new(int P);

/* How the MPI transport starts. A start-up that takes longer than timeout_s ends the job with a
 * message naming the rank and the phase: MPI_Init (a watchdog timer: the call cannot be
 * polled), then the exchange of host names (polled; rank 0 names the ranks it heard nothing
 * from). The fault fields are the test hook of `--inject-fault RANK:init|hosts:KIND`. */
struct bm_comm_mpi_start {
    double timeout_s;  /* 0: never */
    int fault_rank;    /* the rank (MPI_COMM_WORLD) that misbehaves ... */
    int fault_at;      /* ... at BM_TRAIN_FAULT_AT_INIT or _HOSTS (include/bigmac.h); 0: none */
    int fault_kind;    /* BM_TRAIN_FAULT_CRASH, _EXIT or _HANG */
};

/* One pipeline rank per MPI process: calls MPI_Init (argc/argv may be NULL). start NULL: a 60 s
 * start-up timeout and no fault. NULL with err set when MPI cannot start. Defined in
 * comm_mpi.c, linked only into programs built with mpicc. */
struct bm_comm *bm_comm_mpi_new(int *argc, char ***argv, const struct bm_comm_mpi_start *start,
                                struct bm_err *err);

#endif
