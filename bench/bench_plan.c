/* bench_plan.c — the planner at scale (issue 28). Two parts, printed; asserts nothing
 * (docs/style.md):
 *
 *  1. planning, verifying and writing a P-rank, V, M interleaved plan of bench_spec.h's spec (one
 *     encoder, one grad_to_backbone generator; bigmac with window auto and 3, optimus, none);
 *  2. plan + simulate, the figure a sweep pays per point: `simulate SPEC --pp P --vpp V --backbone
 *     interleaved --microbatches M --unit P --window 3` on bench_spec.h's spec and on the two
 *     paper-shaped examples with "layers" removed from every module. In-process: bm_plan_build +
 *     bm_simulate_summary (what sweep, the planner's window search and `bigmac simulate` run:
 *     every figure, no per-op timeline; row "in-proc") and bm_plan_build + bm_simulate (the
 *     timeline kept, as render and trace need it; row "in-full"), best of 3 wall and CPU seconds,
 *     each run in a fresh process (this program run again with --child) so that its peak RSS and
 *     its heap are its own (the largest RSS of the 3 is printed). Then the same command through the CLI of
 *     this build and, with --old BIN (e.g. main at 2023d2d built in a scratch worktree), of that
 *     binary, alternating, five runs each from the same run: best wall seconds, the largest peak
 *     RSS, the makespan each printed, and old / new.
 *
 * Usage: build/bench/bench_plan [P V M] [--old OLD_BIGMAC] [--new NEW_BIGMAC (default bin/bigmac)]
 *        [--examples DIR (default examples)] */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"
#include "bench_spec.h"

static void table_part(struct bm_spec *s, int P, int V, int M)
{
    struct bm_err err;
    printf("plan P=%d V=%d M=%d interleaved, vit + llm + dit\n", P, V, M);
    printf("%-22s %10s %10s %10s %12s %12s %8s\n", "policy", "plan s", "verify s", "write s",
           "ops", "JSON MiB", "window");
    for (int variant = 0; variant < 4; variant++) {
        struct bm_plan_opts o = {.pp = P, .vpp = V, .microbatches = M, .backbone = BM_BB_INTERLEAVED, .policy = BM_POL_BIGMAC};
        const char *label = "bigmac (window auto)";
        if (variant == 1) o.window = 3, label = "bigmac (window 3)";
        if (variant == 2) o.policy = BM_POL_OPTIMUS, label = "optimus";
        if (variant == 3) o.policy = BM_POL_NONE, label = "none";
        struct bm_table *t;
        struct bm_costs *t_c = NULL;
        double t0 = bm_now();
        if (bm_plan_build(s, &o, &t, &t_c, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return;
        }
        double t1 = bm_now();
        int ok = bm_verify(t, &err) == BM_OK;
        double t2 = bm_now();
        char *buf = NULL;
        size_t n = 0;
        FILE *mf = open_memstream(&buf, &n);
        if (mf) {
            bm_table_write_json(t, t_c, mf);
            fclose(mf);
        }
        double t3 = bm_now();
        free(buf);
        printf("%-22s %10.3f %10.3f %10.3f %12ld %12.1f %8d%s\n", label, t1 - t0, t2 - t1, t3 - t2,
               bm_table_n_ops(t), (double)n / 1048576.0, t->window, ok ? "" : "  VERIFY FAILED");
        bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    }
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

struct figures {
    double wall, cpu, makespan;
    long rss_kb;
    int ok;
};

/* plan + simulate once in this process (a fresh one: main's "--child"), the figures written to fd. */
static int child_run(const char *spec_path, int P, int V, int M, int full, int fd)
{
    struct bm_spec *s;
    struct bm_err err;
    struct figures c = {0, 0, 0, 0, 0};
    struct bm_plan_opts o;
    struct bm_table *t;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *tl;
    if (bm_spec_load(spec_path, &s, &err) == BM_OK) {
        bm_plan_opts_from_spec(&o, s);
        o.pp = P, o.vpp = V, o.microbatches = M, o.unit = P, o.window = 3;
        o.backbone = BM_BB_INTERLEAVED, o.policy = BM_POL_BIGMAC;
        double w0 = bm_now(), c0 = cpu_s();
        if (bm_plan_build(s, &o, &t, &t_c, &err) == BM_OK &&
            (full ? bm_simulate : bm_simulate_summary)(t, t_c, NULL, &tl, &err) == BM_OK) {
            c.wall = bm_now() - w0, c.cpu = cpu_s() - c0, c.makespan = tl->makespan_ms, c.ok = 1;
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            c.rss_kb = ru.ru_maxrss;
        }
    }
    if (!c.ok) fprintf(stderr, "%s\n", err.msg);
    return write(fd, &c, sizeof c) == (ssize_t)sizeof c ? 0 : 1;
}

/* plan + simulate once, in a fresh process (this program again, "--child"): its peak RSS is this
 * run's alone, and its heap is new, as a user's program's would be (a forked child would write
 * into the parent's freed heap, copying each page on write: 5-10% slower than a fresh process). */
static struct figures one_child(const char *spec_path, int P, int V, int M, int full)
{
    struct figures f = {0, 0, 0, 0, 0};
    int fd[2];
    if (pipe(fd)) return f;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        char a[5][32];
        snprintf(a[0], sizeof a[0], "%d", P), snprintf(a[1], sizeof a[1], "%d", V);
        snprintf(a[2], sizeof a[2], "%d", M), snprintf(a[3], sizeof a[3], "%d", full);
        snprintf(a[4], sizeof a[4], "%d", fd[1]);
        execl("/proc/self/exe", "bench_plan", "--child", spec_path, a[0], a[1], a[2], a[3], a[4], (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    if (pid > 0 && read(fd[0], &f, sizeof f) != (ssize_t)sizeof f) f.ok = 0;
    close(fd[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return f;
}

/* Three runs: the best wall and CPU seconds, the largest peak RSS. */
static struct figures in_process(const char *spec_path, int P, int V, int M, int full)
{
    struct figures best = {1e9, 1e9, 0, 0, 1};
    for (int rep = 0; rep < 3 && best.ok; rep++) {
        struct figures f = one_child(spec_path, P, V, M, full);
        if (!f.ok) return f;
        if (f.wall < best.wall) best.wall = f.wall;
        if (f.cpu < best.cpu) best.cpu = f.cpu;
        if (f.rss_kb > best.rss_kb) best.rss_kb = f.rss_kb;
        best.makespan = f.makespan;
    }
    return best;
}

/* One run of the CLI, `BIN simulate SPEC ... --window 3 --json`, folded into f: the best wall
 * seconds, the largest peak RSS, the makespan it printed. */
static void cli(const char *bin, const char *spec_path, int P, int V, int M, struct figures *fp)
{
    struct figures f = *fp;
    char p[16], v[16], m[16];
    snprintf(p, sizeof p, "%d", P), snprintf(v, sizeof v, "%d", V), snprintf(m, sizeof m, "%d", M);
    for (int rep = 0; rep < 1 && f.ok; rep++) {
        int fd[2];
        if (pipe(fd)) {
            fp->ok = 0;
            return;
        }
        double w0 = bm_now();
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 1);
            close(fd[0]);
            execl(bin, bin, "simulate", spec_path, "--pp", p, "--vpp", v, "--backbone", "interleaved",
                  "--microbatches", m, "--unit", p, "--policy", "bigmac", "--window", "3", "--json", (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        char out[65536];
        size_t n = 0;
        ssize_t k;
        while ((k = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)k;
        out[n] = 0;
        close(fd[0]);
        int status;
        struct rusage ru;
        if (pid < 0 || wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
            f.ok = 0;
            break;
        }
        double w = bm_now() - w0;
        if (w < f.wall) f.wall = w;
        if (ru.ru_maxrss > f.rss_kb) f.rss_kb = ru.ru_maxrss;
        const char *ms = strstr(out, "\"makespan_ms\":");
        f.makespan = ms ? strtod(ms + 14, NULL) : 0;
    }
    *fp = f;
}

/* examples/NAME.json with "layers" removed from every module (both workloads split the backbone
 * evenly; 48 layers cannot fill P*V = 256 chunks), written to path. */
static int strip_layers(const char *src, const char *path)
{
    json_error_t je;
    json_t *root = json_load_file(src, 0, &je);
    if (!root) {
        fprintf(stderr, "%s:%d: %s\n", src, je.line, je.text);
        return -1;
    }
    size_t i;
    json_t *mod;
    json_array_foreach(json_object_get(root, "modules"), i, mod) json_object_del(mod, "layers");
    int rc = json_dump_file(root, path, 0);
    json_decref(root);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 8 && !strcmp(argv[1], "--child"))
        return child_run(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
    const char *old = NULL, *newbin = "bin/bigmac", *ex = "examples";
    char *pos[3];
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--old") && i + 1 < argc) old = argv[++i];
        else if (!strcmp(argv[i], "--new") && i + 1 < argc) newbin = argv[++i];
        else if (!strcmp(argv[i], "--examples") && i + 1 < argc) ex = argv[++i];
        else if (np < 3) pos[np++] = argv[i];
    }
    char *pargv[4] = {argv[0], np == 3 ? pos[0] : NULL, np == 3 ? pos[1] : NULL, np == 3 ? pos[2] : NULL};
    int P, V, M;
    struct bm_spec *s = bench_spec_load(np == 3 ? 4 : 1, pargv, &P, &V, &M);
    if (!s) return 1;
    table_part(s, P, V, M);
    bm_spec_free(s);

    char dir[] = "/tmp/bench_plan.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    const char *names[3] = {"bench_spec.h", "understanding", "generation"};
    char paths[3][256];
    snprintf(paths[0], sizeof paths[0], "%s/bench.json", dir);
    FILE *f = fopen(paths[0], "w");
    if (!f) return 1;
    fputs(SPEC, f);
    fclose(f);
    const char *src[2] = {"understanding-qwen3-30b-a3b.json", "generation-mmdit-20b.json"};
    for (int k = 0; k < 2; k++) {
        char from[512];
        snprintf(from, sizeof from, "%s/%s", ex, src[k]);
        snprintf(paths[k + 1], sizeof paths[k + 1], "%s/%s.json", dir, names[k + 1]);
        if (strip_layers(from, paths[k + 1])) return 1;
    }
    printf("\nplan + simulate: simulate SPEC --pp %d --vpp %d --backbone interleaved --microbatches %d "
           "--unit %d --window 3\n", P, V, M, P);
    printf("%-14s %-9s %9s %9s %9s %12s\n", "spec", "run", "wall s", "cpu s", "RSS MB", "makespan ms");
    for (int k = 0; k < 3; k++) {
        struct figures in = in_process(paths[k], P, V, M, 0), inf = in_process(paths[k], P, V, M, 1);
        /* new and old alternate, five runs each, so both meet the same load */
        struct figures cn = {1e9, 0, 0, 0, 1}, co = {1e9, 0, 0, 0, 1};
        for (int rep = 0; rep < 5; rep++) {
            cli(newbin, paths[k], P, V, M, &cn);
            if (old) cli(old, paths[k], P, V, M, &co);
        }
        printf("%-14s %-9s %9.3f %9.3f %9.1f %12.1f%s\n", names[k], "in-proc", in.wall, in.cpu,
               in.rss_kb / 1024.0, in.makespan, in.ok ? "" : "  FAILED");
        printf("%-14s %-9s %9.3f %9.3f %9.1f %12.1f%s\n", names[k], "in-full", inf.wall, inf.cpu,
               inf.rss_kb / 1024.0, inf.makespan, inf.ok ? "" : "  FAILED");
        printf("%-14s %-9s %9.3f %9s %9.1f %12.1f%s\n", names[k], "CLI new", cn.wall, "", cn.rss_kb / 1024.0,
               cn.makespan, cn.ok ? "" : "  FAILED");
        if (old) {
            printf("%-14s %-9s %9.3f %9s %9.1f %12.1f%s\n", names[k], "CLI old", co.wall, "",
                   co.rss_kb / 1024.0, co.makespan, co.ok ? "" : "  FAILED");
            if (co.ok && cn.ok)
                printf("%-14s %-9s %9.2fx %9s %9.2fx %12s\n", names[k], "old/new", co.wall / cn.wall, "",
                       (double)co.rss_kb / (double)cn.rss_kb,
                       co.makespan >= cn.makespan - 1e-6 ? "new <= old" : "NEW SLOWER");
        }
    }
    for (int k = 0; k < 3; k++) unlink(paths[k]);
    rmdir(dir);
    return 0;
}
