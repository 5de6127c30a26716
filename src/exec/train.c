/* train.c — bm_train: `bigmac train` as a library call with typed options (include/bigmac.h).
 * It picks the transport (MPI, or every rank in this process), plans or checks the table, and
 * hands over to the executor's driver (bm_exec_train, run.c); in reference mode it runs the
 * single-process reference trainer (src/train/). The CLI (src/cli/train_main.c) only parses
 * flags into struct bm_train_opts and prints what this returns. Referencing the MPI transport,
 * this file pulls src/exec/comm_mpi.o into a program that calls bm_train. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "bigmac.h"
#include "exec/comm.h"
#include "exec/exec.h"
#include "train/train.h"
#include "util/util.h"

/* Keep freed memory in the process instead of handing it back to the kernel. glibc serves an
 * allocation over 128 KiB (a module's activation context, a receive buffer) with a fresh mmap
 * and unmaps it when freed, and trims the heap's top: every step then page-faults its buffers in
 * again, ~700-1000 minor faults per tiny-mllm step on this project's VM, 15% of the step. How
 * many depends on the order of the allocations and frees, i.e. on the schedule, so the same
 * module op ran 5-15% slower under one policy than under another (bench/RESULTS.md, issue 16
 * fifth session) and costs calibrated from one policy's trace mispredicted the others. With
 * the heap kept, after the first step the buffers are reused: op times depend on the op, not on
 * what ran before it. The process's resident memory then stays at its peak (what a caching
 * allocator does too); allocations over 32 MiB (glibc's largest mmap threshold) still map.
 * Set at the start of bm_train, before the trainer allocates anything of a step. */
static void keep_freed_memory(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

/* ------------------------------------------------------------------ reference trainer */

/* The reference trainer over a whole step's microbatches: D replicas of M are D * M
 * (docs/design.md §2: replica d's microbatch m is the step's d*M + m). */
static int train_reference(const struct bm_spec *spec, const struct bm_train_opts *o, struct bm_err *err)
{
    struct bm_spec sc = *spec; /* a shallow copy with the step's microbatches; read only */
    const struct bm_spec *s = &sc;
    int D = o->dp > 0 ? o->dp : spec->dp > 1 ? spec->dp : 1;
    if ((long)sc.microbatches * D > 1000000)
        return bm_err_set(err, "dp %d x %d microbatches is more than 1000000 microbatches a step", D, sc.microbatches);
    sc.microbatches *= D;
    if (o->trace_path || o->ckpt_dir || o->resume_dir || o->fault)
        return bm_err_set(err, "the reference trainer takes only steps, a log and a parameter dump");
    return bm_ref_train(s, o, err);
}

/* ------------------------------------------------------------------ pipelined */

/* The data-parallel replicas D of a run: --dp (o->dp), else the given table's, else the spec's
 * parallel.dp. */
static int run_dp(const struct bm_spec *s, const struct bm_table *given, const struct bm_train_opts *o)
{
    int d = o->dp > 0 ? o->dp : given ? given->dp : s->dp;
    return d > 1 ? d : 1;
}

/* A data-parallel layout the world cannot run: "WHATthe layout pp P x dp D needs P*D ranks but
 * N run it". */
static int layout_fail(const char *what, int P, int D, int ranks, struct bm_err *err)
{
    if (ranks % D)
        return bm_err_set(err, "%sthe layout pp %d \u00d7 dp %d needs %d ranks but %d run it\nhint: mpirun -np %d", what,
                          P, D, P * D, ranks, P * D);
    return bm_err_set(err, "%sthe layout pp %d \u00d7 dp %d needs %d ranks but %d run it\nhint: mpirun -np %d, or --pp %d",
                      what, P, D, P * D, ranks, P * D, ranks / D);
}

/* The table to run (*t): the caller's (verified, its pp checked against the ranks), or a new
 * plan of s (also in *own, which the caller frees, with its cost model *own_costs, which the
 * executor only passes on to its traces). ranks: the MPI world size, 0 when not under
 * MPI; D: the data-parallel replicas, so P * D must be the world. */
static int table_for(const struct bm_spec *s, const struct bm_table *given, const struct bm_train_opts *o, int ranks,
                     int D, const struct bm_table **t, struct bm_table **own, struct bm_costs **own_costs,
                     struct bm_err *err)
{
    const struct bm_plan_opts *plan = o->plan;
    *own = NULL;
    *t = given;
    if (given) {
        if (ranks && (long)given->pp * D != ranks) {
            char what[4200];
            snprintf(what, sizeof what, "%s: ", o->table_name ? o->table_name : "the table");
            if (D > 1) return layout_fail(what, given->pp, D, ranks, err);
            return bm_err_set(err, "%s%sthe table has pp %d but %d ranks run it\nhint: mpirun -np %d",
                              o->table_name ? o->table_name : "", o->table_name ? ": " : "", given->pp, ranks,
                              given->pp);
        }
        return bm_verify(given, err);
    }
    struct bm_plan_opts po;
    if (plan) po = *plan;
    else bm_plan_opts_from_spec(&po, s);
    if (!po.pp) { /* under mpirun --pp defaults to the ranks of one replica */
        if (ranks && ranks % D)
            return bm_err_set(err, "%d ranks cannot hold %d data-parallel replicas of one pipeline (not a multiple)\n"
                                   "hint: mpirun -np %d, or --dp %d",
                              ranks, D, ranks / D > 0 ? ranks / D * D : D, ranks);
        po.pp = ranks ? ranks / D : s->pp;
    }
    if (ranks && (long)po.pp * D != ranks) {
        if (D > 1) return layout_fail("", po.pp, D, ranks, err);
        return bm_err_set(err, "the plan has pp %d but %d ranks run it\nhint: mpirun -np %d, or --pp %d", po.pp,
                          ranks, po.pp, ranks);
    }
    if (bm_plan_build(s, &po, own, own_costs, err)) return BM_ERR;
    (*own)->dp = D; /* the replicas that run it (the trace embeds the table) */
    *t = *own;
    return BM_OK;
}

/* The MPI transport's start-up settings from o: the timeout (0: 60 s, < 0: never) and a
 * start-up fault. */
static const struct bm_comm_mpi_start *mpi_start(const struct bm_train_opts *o, struct bm_comm_mpi_start *st)
{
    memset(st, 0, sizeof *st);
    st->timeout_s = o->timeout_s > 0 ? o->timeout_s : o->timeout_s < 0 ? 0 : 60;
    if (o->fault != BM_TRAIN_FAULT_NONE && (o->fault_op == BM_TRAIN_FAULT_AT_INIT || o->fault_op == BM_TRAIN_FAULT_AT_HOSTS))
        st->fault_rank = o->fault_rank, st->fault_at = o->fault_op, st->fault_kind = o->fault;
    return st;
}

int bm_train(const struct bm_spec *spec, const struct bm_table *table, const struct bm_costs *costs,
             const struct bm_train_opts *opts, int *argc, char ***argv, struct bm_err *err)
{
    static const struct bm_train_opts defaults = {0};
    const struct bm_train_opts *o = opts ? opts : &defaults;
    struct bm_comm *comm = NULL;
    const struct bm_table *t = NULL;
    struct bm_table *own = NULL;
    struct bm_costs *own_costs = NULL;
    int rc = BM_ERR, setup = 1, report = 1;
    struct bm_comm_mpi_start start;
    keep_freed_memory();
    if ((unsigned)o->fault > BM_TRAIN_FAULT_HANG) bm_err_set(err, "unknown fault kind %d", (int)o->fault);
    else if (o->ckpt_every && !o->ckpt_dir) bm_err_set(err, "a checkpoint interval needs a checkpoint directory");
    else if (o->fault && o->mode != BM_TRAIN_MPI &&
             (o->fault_op == BM_TRAIN_FAULT_AT_INIT || o->fault_op == BM_TRAIN_FAULT_AT_HOSTS))
        bm_err_set(err, "--inject-fault at start-up (init, hosts) needs MPI (mpirun), not --local");
    else if (o->mode == BM_TRAIN_REFERENCE) rc = train_reference(spec, o, err), setup = 0;
    else if (o->mode != BM_TRAIN_MPI && o->mode != BM_TRAIN_LOCAL) bm_err_set(err, "unknown train mode %d", (int)o->mode);
    else if (o->mode == BM_TRAIN_MPI && !(comm = bm_comm_mpi_new(argc, argv, mpi_start(o, &start), err))) {
        /* err says why MPI did not start */
    } else {
        if (comm) {
            report = comm->first_rank == 0;
            comm->timeout_s = o->timeout_s > 0 ? o->timeout_s : o->timeout_s < 0 ? 0 : 60; /* 0: never */
        }
        int D = run_dp(spec, table, o);
        if (o->mode == BM_TRAIN_LOCAL && D > 1) {
            bm_err_set(err, "dp %d: --local runs one pipeline in this process\nhint: data parallel runs under mpirun: "
                            "mpirun -np P*%d bigmac train SPEC --dp %d", D, D, D);
        } else if (table_for(spec, table, o, comm ? comm->size : 0, D, &t, &own, &own_costs, err) == BM_OK) {
            if (!comm && !(comm = bm_comm_local_new(t->pp))) {
                bm_err_set(err, "out of memory");
            } else if (comm->ops->split(comm, D, err) == BM_OK) {
                setup = 0, report = 1;
                rc = bm_exec_train(spec, t, own ? own_costs : costs, comm, o, err); /* costs: for the trace only */
            }
        }
    }
    /* an empty message: the failure was another rank's, which reports it (run.c agree) */
    if (rc && report && o->on_error && err->msg[0]) o->on_error(o->ctx, err->msg, setup);
    bm_table_free(own);
    bm_costs_free(own_costs);
    if (comm) comm->ops->free(comm);
    return rc;
}

int bm_train_fail(const struct bm_train_opts *opts, int *argc, char ***argv, const char *msg)
{
    int report = 1;
    struct bm_comm *comm = NULL;
    struct bm_err err;
    struct bm_comm_mpi_start start;
    if (opts && opts->mode == BM_TRAIN_MPI && (comm = bm_comm_mpi_new(argc, argv, mpi_start(opts, &start), &err)))
        report = comm->first_rank == 0;
    if (report && opts && opts->on_error) opts->on_error(opts->ctx, msg, 1);
    if (comm) comm->ops->free(comm);
    return BM_ERR;
}
