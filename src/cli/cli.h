/* cli.h — subcommands of bin/bigmac and shared flag parsing.
 * Exit codes: 0 ok, 1 runtime failure (including "verification failed"), 2 usage error. */
#ifndef BM_CLI_H
#define BM_CLI_H

#include <stdio.h>

#include "bigmac.h"

int bm_cmd_plan(int argc, char **argv);
int bm_cmd_verify(int argc, char **argv);
int bm_cmd_simulate(int argc, char **argv);
int bm_cmd_sweep(int argc, char **argv);
/* `sweep SPEC --gpus N --global-batch B`: the layouts of a cluster (cmd_sweep_cluster.c) */
int bm_cmd_sweep_cluster(int argc, char **argv);
int bm_cmd_train(int argc, char **argv);
int bm_cmd_render(int argc, char **argv);
int bm_cmd_calibrate(int argc, char **argv);

/* Plan flags shared by plan/simulate/sweep/render/train: --pp --vpp --microbatches --unit
 * --backbone --policy --window --ranks-per-host --dp --zero, into a struct bm_plan_opts whose
 * fields the caller set to BM_UNSET (bm_plan_opts_unset): a field stays BM_UNSET unless its flag
 * was given (--window auto: BM_WINDOW_AUTO, fit: BM_WINDOW_FIT). If argv[*i] is a plan flag,
 * parse it (and its value, advancing *i) and return 1; return 0 when it is not a plan flag;
 * print an error and return -1 on a bad value. */
int bm_cli_plan_flag(int argc, char **argv, int *i, struct bm_plan_opts *f);

/* Load the spec at 'path' (NULL: "missing SPEC" + usage, BM_USAGE), write the spec settings of
 * the flags f into it (bm_plan_opts_to_spec) and fill o with its plan options, f merged over
 * them (bm_plan_opts_merge). Prints the error and returns BM_USAGE or BM_ERR on failure; on
 * success *spec is the caller's (bm_spec_free). */
int bm_cli_load_spec(const char *cmd, const char *path, const struct bm_plan_opts *f,
                     void (*usage)(FILE *), struct bm_spec **spec, struct bm_plan_opts *o);

/* Print "bigmac: error: <msg>" (each line of a multi-line message; lines starting with
 * "hint:" are printed as "bigmac: hint: ..."). */
void bm_cli_error(const char *msg);
/* The verifier (bm_verify) on a table read from 'path' before it is simulated, drawn, written or
 * trained on: BM_OK when it holds; else BM_ERR with err reading "<path>: invariant N ...
 * violated: ..." (the verifier's message) and a hint, or with no_verify > 0 (the user's
 * --no-verify) BM_OK after a warning on stderr that names the violated invariant. no_verify < 0:
 * the command has no --no-verify (the hint does not offer it). */
int bm_cli_verify_table(const struct bm_table *t, const char *path, int no_verify, struct bm_err *err);

/* Parse a positive int for flag 'flag'; prints an error and returns -1 on failure. */
int bm_cli_int(const char *flag, const char *val, int *out);

/* Parse a non-negative number for flag 'flag'; prints an error and returns -1 on failure. */
int bm_cli_double(const char *flag, const char *val, double *out);

/* ---- printing shared by simulate and sweep (cmd_simulate.c); the JSON objects are built
 * in src/study/study.h */
struct json_t;
/* Print j to stdout (indented, 10 significant digits) and a newline. */
void bm_cli_json_print(struct json_t *j);
/* A table placed over hosts (device.ranks_per_host > 0, sim/hosts.h): one line "hosts N (...):
 * K of S transfers cross hosts, ..." to f; nothing for a table on one host. */
void bm_cli_print_hosts(FILE *f, const struct bm_table *t, const struct bm_costs *c);
/* The step after the walk (src/sim/step.h): "step X ms = walk + exposed sync + optimizer" and
 * each rank's state parts, to f; nothing when the step is the walk (one replica, no collective,
 * no optimizer time, ZeRO 0). */
void bm_cli_print_step(FILE *f, const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl);

#endif
