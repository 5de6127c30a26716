/* train_main.c — `bigmac train`: the pipelined executor (MPI or --local) and the single-process
 * reference (--reference). Flag parsing and printing only: the flags become struct
 * bm_train_opts and the work is bm_train (src/exec/train.c). bm_train_main stays public
 * (include/bigmac.h): a program that registers its own modules can hand it its command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P*D bigmac train SPEC [plan flags] [--dp D] [--steps N] [--log FILE]\n"
            "                     [--trace FILE [--trace-from K]]\n"
            "                     [--table FILE] [--checkpoint DIR [--checkpoint-every N]] [--resume DIR [--resume-force]]\n"
            "                     [--dump-params FILE] [--inject-fault RANK:OP:KIND[:STEP]] [--timeout S]\n"
            "       bigmac train SPEC --local [...]        all P ranks in this process (debugging)\n"
            "       bigmac train SPEC --reference [--dp D] [--steps N] [--log FILE] [--dump-params FILE]\n"
            "\n"
            "Train the model SPEC describes (each module names a built-in model with \"impl\"\n"
            "and its sizes with \"arch\") on the built-in shapes-and-captions dataset.\n"
            "\n"
            "Pipelined (default): every rank plans the operator table (or loads --table), builds its\n"
            "backbone chunks and a replica of every encoder/generator, and walks its op list; the\n"
            "replicas' gradients are all-reduced, then AdamW. Same losses and parameters as\n"
            "--reference within float tolerance. Plan flags (--pp --vpp --microbatches --unit\n"
            "--backbone --policy --window --ranks-per-host --dp --zero) override the spec; --pp defaults to\n"
            "the number of ranks over --dp. Over several hosts: docs/multihost.md.\n"
            "\n"
            "  --dp D             D data-parallel replicas of the pipeline (parallel.dp): mpirun -np P*D,\n"
            "                     pipeline rank p of replica d is global rank p*D + d; replica d trains\n"
            "                     the step's microbatches d*M .. d*M+M-1, gradients are summed over the\n"
            "                     replicas; --reference --dp D trains the same D*M microbatches\n"
            "\n"
            "  --reference        single process, no pipeline: for each microbatch encoder F,\n"
            "                     backbone F, generator F, generator B, backbone B, encoder B; AdamW\n"
            "  --local            run all P pipeline ranks in this process (no MPI)\n"
            "  --steps N          train until step N (default: the spec's train.steps)\n"
            "  --log FILE         one JSON object per step: step, loss, lm, gen, ms, per-rank peak\n"
            "                     activation bytes per role\n"
            "  --trace FILE       Chrome trace of the last step (measured op times and live bytes;\n"
            "                     `bigmac render FILE --format html`, `bigmac calibrate FILE`)\n"
            "  --trace-from K     with --trace: also trace every step from K (1-based) to the last,\n"
            "                     each to FILE less .json plus .stepK.json (the data differs per step)\n"
            "  --table FILE       run this operator table instead of planning (its pp = ranks)\n"
            "  --checkpoint DIR   write model + optimizer state after the last step, and every N\n"
            "                     steps with --checkpoint-every N: one set per step, DIR/step-<N>/, made\n"
            "                     current by one commit once every rank's file is written\n"
            "  --resume DIR       continue from the newest complete set in DIR (same pp and vpp; the\n"
            "                     spec's train and data settings must be the checkpoint's)\n"
            "  --resume-force     resume although those settings differ (a warning names them)\n"
            "  --dump-params FILE final parameters as raw floats, spec module order\n"
            "  --inject-fault R:K:KIND[:STEP]  make rank R fail at its op #K (KIND nan, crash, exit,\n"
            "                     hang) in step STEP (default 0), to test failure handling; K may also be\n"
            "                     checkpoint (rank R's checkpoint file after step STEP, half written),\n"
            "                     init (start-up, before MPI_Init) or hosts (start-up, after it)\n"
            "  --timeout S        a rank waiting longer than S seconds for a message or for the job's\n"
            "                     start-up fails (default 60)\n"
            "  --quiet            no progress lines\n");
}

/* RANK:OP:KIND[:STEP], OP an op index or a place: checkpoint, init, hosts (BM_TRAIN_FAULT_AT_*). */
static int parse_fault(const char *v, struct bm_train_opts *o)
{
    char kind[32] = "", place[32] = "";
    int n = 0, end = 0;
    o->fault_step = 0;
    if (sscanf(v, "%d:%d:%31[a-z]%n", &o->fault_rank, &o->fault_op, kind, &n) == 3) {
        if (o->fault_op < 0) return -1; /* an op index */
    } else {
        if (sscanf(v, "%d:%31[a-z]:%31[a-z]%n", &o->fault_rank, place, kind, &n) < 3) return -1;
        if (!strcmp(place, "checkpoint")) o->fault_op = BM_TRAIN_FAULT_AT_CHECKPOINT;
        else if (!strcmp(place, "init")) o->fault_op = BM_TRAIN_FAULT_AT_INIT;
        else if (!strcmp(place, "hosts")) o->fault_op = BM_TRAIN_FAULT_AT_HOSTS;
        else return -1;
        if (!strcmp(kind, "nan")) return -1; /* no numbers to poison there */
    }
    if (o->fault_rank < 0) return -1;
    if (v[n] == ':' && (sscanf(v + n + 1, "%d%n", &o->fault_step, &end) != 1 || v[n + 1 + end] || o->fault_step < 0))
        return -1;
    if (v[n] && v[n] != ':') return -1;
    if (!strcmp(kind, "nan")) o->fault = BM_TRAIN_FAULT_NAN;
    else if (!strcmp(kind, "crash")) o->fault = BM_TRAIN_FAULT_CRASH;
    else if (!strcmp(kind, "exit")) o->fault = BM_TRAIN_FAULT_EXIT;
    else if (!strcmp(kind, "hang")) o->fault = BM_TRAIN_FAULT_HANG;
    else return -1;
    return 0;
}

/* The value of flag a (argv[*i], advancing *i) into o or *table_path. Prints the error and
 * returns BM_USAGE on a bad value. */
static int value_flag(const char *a, const char *v, struct bm_train_opts *o, const char **table_path)
{
    if (!strcmp(a, "--steps")) {
        if (bm_cli_int(a, v, &o->steps)) return BM_USAGE;
    } else if (!strcmp(a, "--checkpoint-every")) {
        if (bm_cli_int(a, v, &o->ckpt_every)) return BM_USAGE;
    } else if (!strcmp(a, "--timeout")) {
        char *end;
        double s = strtod(v, &end);
        if (*end || end == v || s < 0) {
            fprintf(stderr, "bigmac: error: --timeout: expected seconds, got '%s'\n", v);
            return BM_USAGE;
        }
        o->timeout_s = s > 0 ? s : -1; /* --timeout 0: never */
    } else if (!strcmp(a, "--trace-from")) {
        if (bm_cli_int(a, v, &o->trace_from)) return BM_USAGE; /* a step >= 1 */
    } else if (!strcmp(a, "--log")) o->log_path = v;
    else if (!strcmp(a, "--trace")) o->trace_path = v;
    else if (!strcmp(a, "--table")) *table_path = v;
    else if (!strcmp(a, "--checkpoint")) o->ckpt_dir = v;
    else if (!strcmp(a, "--resume")) o->resume_dir = v;
    else if (!strcmp(a, "--dump-params")) o->dump_params = v;
    else if (parse_fault(v, o)) {
        fprintf(stderr, "bigmac: error: --inject-fault: expected RANK:OP:nan|crash|exit|hang[:STEP] or "
                        "RANK:checkpoint|init|hosts:crash|exit|hang[:STEP], got '%s'\n", v);
        return BM_USAGE;
    }
    return 0;
}

static int takes_value(const char *a)
{
    static const char *const flags[] = {"--steps", "--log", "--trace", "--trace-from", "--table", "--checkpoint", "--checkpoint-every",
                                        "--resume", "--dump-params", "--inject-fault", "--timeout"};
    for (size_t k = 0; k < sizeof flags / sizeof *flags; k++)
        if (!strcmp(a, flags[k])) return 1;
    return 0;
}

/* What the command line says. */
struct args {
    struct bm_train_opts o;
    const char *path, *table_path;
    int reference, local;
    struct bm_plan_opts pf;           /* the plan flags (BM_UNSET: not given) */
};

/* The command line into *g. Returns -1 to go on, else the exit status (--help: 0; a usage
 * error: BM_USAGE, printed). */
static int parse_args(int argc, char **argv, struct args *g)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = bm_cli_plan_flag(argc, argv, &i, &g->pf);
        if (r < 0) return BM_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--reference")) {
            g->reference = 1;
        } else if (!strcmp(a, "--local")) {
            g->local = 1;
        } else if (!strcmp(a, "--quiet")) {
            g->o.quiet = 1;
        } else if (!strcmp(a, "--resume-force")) {
            g->o.resume_force = 1;
        } else if (takes_value(a)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a value\n", a);
                return BM_USAGE;
            }
            if (value_flag(a, argv[++i], &g->o, &g->table_path)) return BM_USAGE;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bigmac: error: train: unknown flag '%s'\n", a);
            usage(stderr);
            return BM_USAGE;
        } else if (g->path) {
            fprintf(stderr, "bigmac: error: train: more than one spec ('%s', '%s')\n", g->path, a);
            return BM_USAGE;
        } else {
            g->path = a;
        }
    }
    if (!g->path) {
        usage(stderr);
        return BM_USAGE;
    }
    if (g->o.trace_from && !g->o.trace_path) {
        fprintf(stderr, "bigmac: error: --trace-from needs --trace FILE\n");
        return BM_USAGE;
    }
    if (g->o.resume_force && !g->o.resume_dir) {
        fprintf(stderr, "bigmac: error: --resume-force needs --resume DIR\n");
        return BM_USAGE;
    }
    if (g->o.ckpt_every && !g->o.ckpt_dir) {
        fprintf(stderr, "bigmac: error: --checkpoint-every needs --checkpoint DIR\n");
        return BM_USAGE;
    }
    const struct bm_train_opts *o = &g->o;
    if (g->reference && (o->ckpt_dir || o->resume_dir || o->trace_path || g->table_path || o->fault || g->local)) {
        fprintf(stderr, "bigmac: error: --reference takes only --steps, --log, --dump-params, --microbatches and --dp\n");
        return BM_USAGE;
    }
    if (g->local && g->pf.dp > 1) {
        fprintf(stderr, "bigmac: error: --dp %d with --local: --local runs one pipeline in this process; data parallel "
                        "runs under mpirun (mpirun -np P*%d bigmac train SPEC --dp %d)\n", g->pf.dp, g->pf.dp, g->pf.dp);
        return BM_USAGE;
    }
    g->o.dp = g->pf.dp != BM_UNSET ? g->pf.dp : 0;
    g->o.mode = g->reference ? BM_TRAIN_REFERENCE : g->local ? BM_TRAIN_LOCAL : BM_TRAIN_MPI;
    return -1;
}

/* The plan options of a pipelined run without --table: the spec's with the plan flags over
 * them; no --pp under MPI: pp 0, the number of ranks (bm_train). */
static void plan_opts(struct args *g, struct bm_spec *spec, struct bm_plan_opts *po)
{
    bm_plan_opts_from_spec(po, spec);
    /* a unit the spec tied to its own pp follows the pp actually used (docs/design.md §2: U = P) */
    if (g->pf.unit == BM_UNSET && po->unit == po->pp) po->unit = 0;
    bm_plan_opts_merge(po, &g->pf);
    if (g->pf.pp == BM_UNSET && g->o.mode == BM_TRAIN_MPI) po->pp = 0;
    spec->microbatches = po->microbatches;
}

/* bm_train's on_error: "bigmac: error: SPEC: message" for a failure before the first step,
 * "bigmac: error: message" for a failing step (the message names rank and op). */
static void print_error(void *ctx, const char *msg, int setup)
{
    const struct args *g = ctx;
    /* a message about the table (its loader's, its verification) names the table, not the spec;
     * one that names the spec already is not prefixed twice */
    size_t n = strlen(g->path);
    int about_table = g->table_path && !strncmp(msg, g->table_path, strlen(g->table_path));
    int named = !strncmp(msg, g->path, n) && msg[n] == ':';
    if ((g->reference || setup) && !about_table && !named) {
        char line[sizeof(struct bm_err) + 1024];
        snprintf(line, sizeof line, "%s: %s", g->path, msg);
        bm_cli_error(line);
    } else {
        bm_cli_error(msg);
    }
}

int bm_train_main(int argc, char **argv)
{
    struct args g;
    memset(&g, 0, sizeof g);
    bm_plan_opts_unset(&g.pf);
    int prc = parse_args(argc, argv, &g);
    if (prc >= 0) return prc;
    struct bm_err err;
    struct bm_spec *spec = NULL;
    struct bm_table *t = NULL;
    struct bm_costs *costs = NULL; /* the table file's, passed on to the trace unread */
    struct bm_plan_opts po;
    g.o.on_error = print_error, g.o.ctx = &g;
    int rc = 1;
    if (bm_spec_load(g.path, &spec, &err) != BM_OK) {
        bm_train_fail(&g.o, &argc, &argv, err.msg); /* under mpirun: rank 0 prints it */
        goto out;
    }
    if (g.reference) {
        if (g.pf.microbatches != BM_UNSET) spec->microbatches = g.pf.microbatches;
    } else {
        bm_plan_opts_to_spec(&g.pf, spec);
        if (g.table_path) {
            if (bm_table_load(g.table_path, &t, &costs, &err) || bm_cli_verify_table(t, g.table_path, -1, &err)) {
                bm_train_fail(&g.o, &argc, &argv, err.msg);
                goto out;
            }
            g.o.table_name = g.table_path;
        } else {
            plan_opts(&g, spec, &po);
            g.o.plan = &po;
        }
    }
    rc = bm_train(spec, t, costs, &g.o, &argc, &argv, &err) ? 1 : 0;
out:
    bm_table_free(t);
    bm_costs_free(costs);
    bm_spec_free(spec);
    return rc;
}
