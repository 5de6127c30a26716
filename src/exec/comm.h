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
 * to pipeline rank first_rank + i) and act over all P pipeline ranks.
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

#include "bigmac.h"

struct bm_comm;

struct bm_comm_ops {
    int (*isend)(struct bm_comm *c, int from, int to, int tag, const void *buf, size_t bytes,
                 long *req, struct bm_err *err);
    int (*irecv)(struct bm_comm *c, int to, int from, int tag, void *buf, size_t bytes,
                 long *req, struct bm_err *err);
    /* Test or wait for request req (see above). A completed request id is released. */
    int (*wait)(struct bm_comm *c, long req, int block, int *done, struct bm_err *err);
    /* bufs[i][0..n-1] of every pipeline rank summed in rank order; every rank gets the sum. */
    int (*allreduce_sum)(struct bm_comm *c, float **bufs, size_t n, struct bm_err *err);
    /* Max of one int per local rank over all ranks (agreement on a status). */
    int (*allreduce_max)(struct bm_comm *c, const int *vals, int *out, struct bm_err *err);
    /* Variable-size gather to pipeline rank 0: items[i] of bytes[i] from each local rank.
     * On the process hosting rank 0, *out gets a new buffer of all ranks' items in rank order and
     * out_bytes[0..P-1] their sizes (caller frees *out with bm_free); elsewhere *out = NULL. */
    int (*gather)(struct bm_comm *c, const void *const *items, const size_t *bytes, void **out,
                  size_t *out_bytes, struct bm_err *err);
    /* Broadcast bytes from pipeline rank 0's buffer to everyone's. */
    int (*bcast)(struct bm_comm *c, void *buf, size_t bytes, struct bm_err *err);
    /* Offset (seconds) to add to this process's bm_now() to read rank 0's clock, estimated by
     * ping-pong with rank 0 (the round with the smallest round trip; NTP's midpoint rule). 0 in
     * one process. Every rank must call it (collective). */
    int (*clock_offset)(struct bm_comm *c, double *offset, struct bm_err *err);
    /* End every process of the job with exit status code (never returns). */
    void (*abort)(struct bm_comm *c, int code);
    void (*free)(struct bm_comm *c);
};

struct bm_comm {
    const struct bm_comm_ops *ops;
    int size;          /* pipeline ranks P */
    int first_rank;    /* first pipeline rank this process runs */
    int nlocal;        /* pipeline ranks this process runs */
    int tag_ub;        /* largest usable tag */
    int cooperative;   /* 1: wait never blocks; the caller round-robins its local ranks */
    double timeout_s;  /* MPI: a blocking wait fails after this long (0 = never) */
    void *impl;
    char **hosts;      /* [size] each rank's host name when the ranks span several hosts (MPI),
                        * NULL when they share one; owned by the transport */
};

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
