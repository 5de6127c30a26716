/* train_main.c — `bigmac train`: the pipelined executor (MPI or --local) and the single-process
 * reference (--reference). bm_train_main is public (include/bigmac.h) so that programs that
 * register their own modules (examples/custom_encoder.c) train through the same entry point. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "bigmac_module.h"
#include "cli/cli.h"
#include "exec/comm.h"
#include "exec/exec.h"
#include "train/train.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P bigmac train SPEC [plan flags] [--steps N] [--log FILE] [--trace FILE]\n"
            "                     [--table FILE] [--checkpoint DIR [--checkpoint-every N]] [--resume DIR]\n"
            "                     [--dump-params FILE] [--inject-fault RANK:OP:KIND[:STEP]] [--timeout S]\n"
            "       bigmac train SPEC --local [...]        all P ranks in this process (debugging)\n"
            "       bigmac train SPEC --reference [--steps N] [--log FILE] [--dump-params FILE]\n"
            "\n"
            "Train the model SPEC describes (each module names a built-in model with \"impl\"\n"
            "and its sizes with \"arch\") on the built-in shapes-and-captions dataset.\n"
            "\n"
            "Pipelined (default): every rank plans the operator table (or loads --table), builds its\n"
            "backbone chunks and a replica of every encoder/generator, and walks its op list; the\n"
            "replicas' gradients are all-reduced, then AdamW. Same losses and parameters as\n"
            "--reference within float tolerance. Plan flags (--pp --vpp --microbatches --unit\n"
            "--backbone --policy --window --ranks-per-host) override the spec; --pp defaults to the\n"
            "number of ranks. Over several hosts: docs/multihost.md.\n"
            "\n"
            "  --reference        single process, no pipeline: for each microbatch encoder F,\n"
            "                     backbone F, generator F, generator B, backbone B, encoder B; AdamW\n"
            "  --local            run all P pipeline ranks in this process (no MPI)\n"
            "  --steps N          train until step N (default: the spec's train.steps)\n"
            "  --log FILE         one JSON object per step: step, loss, lm, gen, ms, per-rank peak\n"
            "                     activation bytes per role\n"
            "  --trace FILE       Chrome trace of the last step (measured op times and live bytes;\n"
            "                     `bigmac render FILE --format html`, `bigmac calibrate FILE`)\n"
            "  --table FILE       run this operator table instead of planning (its pp = ranks)\n"
            "  --checkpoint DIR   write model + optimizer state (one file per rank) after the last\n"
            "                     step, and every N steps with --checkpoint-every N\n"
            "  --resume DIR       continue from the checkpoint in DIR (same table)\n"
            "  --dump-params FILE final parameters as raw floats, spec module order\n"
            "  --inject-fault R:K:KIND[:STEP]  make rank R fail at its op #K (KIND nan, crash, exit,\n"
            "                     hang) in step STEP (default 0), to test failure handling\n"
            "  --timeout S        a rank waiting longer than S seconds for a message fails (default 60)\n"
            "  --quiet            no progress lines\n");
}

static int parse_fault(const char *v, struct bm_exec_opts *o)
{
    char kind[32] = "";
    int n = 0;
    o->fault_step = 0;
    if (sscanf(v, "%d:%d:%31[a-z]%n", &o->fault_rank, &o->fault_op, kind, &n) < 3) return -1;
    if (v[n] == ':' && sscanf(v + n + 1, "%d", &o->fault_step) != 1) return -1;
    if (!strcmp(kind, "nan")) o->fault = BM_FAULT_NAN;
    else if (!strcmp(kind, "crash")) o->fault = BM_FAULT_CRASH;
    else if (!strcmp(kind, "exit")) o->fault = BM_FAULT_EXIT;
    else if (!strcmp(kind, "hang")) o->fault = BM_FAULT_HANG;
    else return -1;
    return 0;
}

/* --reference with --dump-params: the reference trainer step by step. */
static int reference_dump(const struct bm_spec *s, int steps, FILE *log, const char *dump, struct bm_err *err)
{
    struct bm_ref *r;
    if (bm_ref_new(s, &r, err)) return BM_ERR;
    int rc = BM_OK;
    for (long k = 0; k < steps && rc == BM_OK; k++) {
        struct bm_step_stats st;
        if ((rc = bm_ref_step(r, k, &st, err))) break;
        printf("step %4ld/%d  loss %.4f  (lm %.4f  gen %.4f)  %7.1f ms\n", k + 1, steps, st.loss, st.lm, st.gen, st.ms);
        if (log)
            fprintf(log, "{\"step\": %ld, \"loss\": %.6f, \"lm\": %.6f, \"gen\": %.6f, \"ms\": %.3f, "
                         "\"ranks\": [{\"rank\": 0, \"peak_act_bytes\": {\"encoder\": %zu, "
                         "\"backbone\": %zu, \"generator\": %zu}}]}\n",
                    k + 1, st.loss, st.lm, st.gen, st.ms, st.peak_act[BM_ROLE_ENCODER], st.peak_act[BM_ROLE_BACKBONE],
                    st.peak_act[BM_ROLE_GENERATOR]);
    }
    if (rc == BM_OK) {
        FILE *f = fopen(dump, "wb");
        if (!f) rc = bm_err_set(err, "%s: cannot open for writing", dump);
        for (int i = 0; f && i < s->n_modules; i++) {
            size_t n;
            float *p = bm_ref_params(r, i, &n);
            fwrite(p, sizeof(float), n, f);
        }
        if (f && fclose(f)) rc = bm_err_set(err, "%s: write failed", dump);
    }
    bm_ref_free(r);
    return rc;
}

/* Keep freed memory in the process instead of handing it back to the kernel. glibc serves an
 * allocation over 128 KiB (a module's activation context, a receive buffer) with a fresh mmap
 * and unmaps it when freed, and trims the heap's top: every step then page-faults its buffers in
 * again, ~700-1000 minor faults per tiny-mllm step on this project's VM, 15% of the step. How
 * many depends on the order of the allocations and frees, i.e. on the schedule, so the same
 * module op ran 5-15% slower under one policy than under another (bench/RESULTS.md, issue 16
 * fifth session) and costs calibrated from one policy's trace mispredicted the others. With
 * the heap kept, after the first step the buffers are reused: op times depend on the op, not on
 * what ran before it. The process's resident memory then stays at its peak (what a caching
 * allocator does too); allocations over 32 MiB (glibc's largest mmap threshold) still map. */
static void keep_freed_memory(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

int bm_train_main(int argc, char **argv)
{
    keep_freed_memory();
    const char *path = NULL, *table_path = NULL;
    int reference = 0, local = 0, quiet = 0;
    double timeout_s = 60;
    struct bm_exec_opts o = {0};
    struct bm_cli_plan_flags pf = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = bm_cli_plan_flag(argc, argv, &i, &pf);
        if (r < 0) return BM_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--reference")) {
            reference = 1;
        } else if (!strcmp(a, "--local")) {
            local = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--steps") || !strcmp(a, "--log") || !strcmp(a, "--trace") || !strcmp(a, "--table") ||
                   !strcmp(a, "--checkpoint") || !strcmp(a, "--checkpoint-every") || !strcmp(a, "--resume") ||
                   !strcmp(a, "--dump-params") || !strcmp(a, "--inject-fault") || !strcmp(a, "--timeout")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a value\n", a);
                return BM_USAGE;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--steps")) {
                if (bm_cli_int(a, v, &o.steps)) return BM_USAGE;
            } else if (!strcmp(a, "--checkpoint-every")) {
                if (bm_cli_int(a, v, &o.ckpt_every)) return BM_USAGE;
            } else if (!strcmp(a, "--timeout")) {
                char *end;
                timeout_s = strtod(v, &end);
                if (*end || end == v || timeout_s < 0) {
                    fprintf(stderr, "bigmac: error: --timeout: expected seconds, got '%s'\n", v);
                    return BM_USAGE;
                }
            } else if (!strcmp(a, "--log")) o.log_path = v;
            else if (!strcmp(a, "--trace")) o.trace_path = v;
            else if (!strcmp(a, "--table")) table_path = v;
            else if (!strcmp(a, "--checkpoint")) o.ckpt_dir = v;
            else if (!strcmp(a, "--resume")) o.resume_dir = v;
            else if (!strcmp(a, "--dump-params")) o.dump_params = v;
            else if (parse_fault(v, &o)) {
                fprintf(stderr, "bigmac: error: --inject-fault: expected RANK:OP:nan|crash|exit|hang[:STEP], got '%s'\n", v);
                return BM_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bigmac: error: train: unknown flag '%s'\n", a);
            usage(stderr);
            return BM_USAGE;
        } else if (path) {
            fprintf(stderr, "bigmac: error: train: more than one spec ('%s', '%s')\n", path, a);
            return BM_USAGE;
        } else {
            path = a;
        }
    }
    if (!path) {
        usage(stderr);
        return BM_USAGE;
    }
    if (o.ckpt_every && !o.ckpt_dir) {
        fprintf(stderr, "bigmac: error: --checkpoint-every needs --checkpoint DIR\n");
        return BM_USAGE;
    }
    if (reference && (o.ckpt_dir || o.resume_dir || o.trace_path || table_path || o.fault || local)) {
        fprintf(stderr, "bigmac: error: --reference takes only --steps, --log, --dump-params and --microbatches\n");
        return BM_USAGE;
    }
    struct bm_err err;
    struct bm_spec *spec = NULL;
    struct bm_table *t = NULL;
    struct bm_comm *comm = NULL;
    int rc = 1, rank0 = 1;
    if (reference) {
        if (bm_spec_load(path, &spec, &err) != BM_OK) goto fail;
        if (pf.microbatches) spec->microbatches = pf.microbatches;
        int steps = o.steps ? o.steps : spec->train.steps;
        FILE *log = NULL;
        if (o.log_path && !(log = fopen(o.log_path, "w"))) {
            bm_err_set(&err, "%s: cannot open for writing", o.log_path);
            goto fail;
        }
        int r = o.dump_params ? reference_dump(spec, steps, log, o.dump_params, &err)
                              : bm_ref_train(spec, steps, quiet ? NULL : stdout, log, NULL, NULL, &err);
        if (log) fclose(log);
        if (r) goto fail;
        bm_spec_free(spec);
        return 0;
    }
    if (!local) {
        if (!(comm = bm_comm_mpi_new(&argc, &argv, &err))) goto fail;
        rank0 = comm->first_rank == 0;
        comm->timeout_s = timeout_s;
    }
    o.progress = quiet ? NULL : stdout;
    if (bm_spec_load(path, &spec, &err) != BM_OK) goto fail;
    bm_cli_spec_apply(&pf, spec);
    if (table_path) {
        if (bm_table_load(table_path, &t, &err)) goto fail;
        if (comm && t->pp != comm->size) {
            bm_err_set(&err, "%s: the table has pp %d but %d ranks run it\nhint: mpirun -np %d", table_path, t->pp,
                       comm->size, t->pp);
            goto fail;
        }
        if (bm_verify(t, &err)) goto fail;
    } else {
        struct bm_plan_opts po;
        bm_plan_opts_from_spec(&po, spec);
        int spec_pp = po.pp;
        if (comm && !pf.pp) pf.pp = comm->size;
        /* a unit the spec tied to its own pp follows the pp actually used (docs/design.md §2: U = P) */
        if (pf.pp && pf.pp != spec_pp && !pf.unit && po.unit == spec_pp) po.unit = 0;
        bm_cli_plan_apply(&pf, &po);
        spec->microbatches = po.microbatches;
        if (bm_plan_build(spec, &po, &t, &err)) goto fail;
    }
    if (comm && t->pp != comm->size) {
        bm_err_set(&err, "the plan has pp %d but %d ranks run it\nhint: mpirun -np %d, or --pp %d", t->pp, comm->size,
                   t->pp, comm->size);
        goto fail;
    }
    if (local && !(comm = bm_comm_local_new(t->pp))) {
        bm_err_set(&err, "out of memory");
        goto fail;
    }
    rc = bm_exec_train(spec, t, comm, &o, &err) ? 1 : 0;
    if (rc) bm_cli_error(err.msg);
    goto out;
fail:
    rc = 1;
    if (rank0) {
        char msg[sizeof err.msg + 64];
        snprintf(msg, sizeof msg, "%s: %s", path, err.msg);
        bm_cli_error(msg);
    }
out:
    bm_table_free(t);
    bm_spec_free(spec);
    if (comm) comm->ops->free(comm);
    return rc;
}
