/* flags.c — plan flags shared by several subcommands, and error printing. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

void bm_cli_error(const char *msg)
{
    const char *p = msg;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (len >= 5 && !strncmp(p, "hint:", 5))
            fprintf(stderr, "bigmac: hint:%.*s\n", len - 5, p + 5);
        else if (len >= 2 && p[0] == ' ' && p[1] == ' ')
            fprintf(stderr, "%.*s\n", len, p);
        else
            fprintf(stderr, "bigmac: error: %.*s\n", len, p);
        p += len;
        if (*p == '\n') p++;
    }
}

int bm_cli_verify_table(const struct bm_table *t, const char *path, int no_verify, struct bm_err *err)
{
    struct bm_err v;
    if (bm_verify(t, &v) == BM_OK) return BM_OK;
    if (no_verify > 0) {
        int first = (int)strcspn(v.msg, "\n");
        fprintf(stderr, "bigmac: warning: %s: --no-verify: using a table that fails verification (%.*s); "
                        "what comes out does not describe a valid schedule\n", path, first, v.msg);
        return BM_OK;
    }
    return bm_err_set(err, "%s: %s\nhint: only valid tables are simulated, drawn or run; `bigmac verify %s` "
                           "explains the failure%s", path, v.msg, path,
                      no_verify < 0 ? "" : ", --no-verify uses the table anyway");
}

int bm_cli_int(const char *flag, const char *val, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || *end || end == val || v < 1 || v > INT_MAX) {
        fprintf(stderr, "bigmac: error: %s: expected a positive integer, got '%s'\n", flag, val);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static const char *need_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "bigmac: error: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int bm_cli_plan_flag(int argc, char **argv, int *i, struct bm_plan_opts *f)
{
    const char *a = argv[*i], *v;
    int *intp = NULL;
    if (!strcmp(a, "--pp")) intp = &f->pp;
    else if (!strcmp(a, "--vpp")) intp = &f->vpp;
    else if (!strcmp(a, "--microbatches")) intp = &f->microbatches;
    else if (!strcmp(a, "--unit")) intp = &f->unit;
    else if (!strcmp(a, "--ranks-per-host")) intp = &f->ranks_per_host;
    else if (!strcmp(a, "--dp")) intp = &f->dp;
    if (intp) {
        if (!(v = need_value(argc, argv, i))) return -1;
        return bm_cli_int(a, v, intp) ? -1 : 1;
    }
    if (!strcmp(a, "--zero")) { /* train.zero: 0 or 1 (ZeRO-1) */
        if (!(v = need_value(argc, argv, i))) return -1;
        if (strcmp(v, "0") && strcmp(v, "1")) {
            fprintf(stderr, "bigmac: error: --zero: expected 0 (every replica keeps the whole optimizer state) "
                            "or 1 (ZeRO-1: sharded), got '%s'\n", v);
            return -1;
        }
        f->zero = v[0] - '0';
        return 1;
    }
    if (!strcmp(a, "--window")) {
        if (!(v = need_value(argc, argv, i))) return -1;
        if (!strcmp(v, "auto")) {
            f->window = BM_WINDOW_AUTO;
            return 1;
        }
        if (!strcmp(v, "fit")) {
            f->window = BM_WINDOW_FIT;
            return 1;
        }
        return bm_cli_int(a, v, &f->window) ? -1 : 1;
    }
    if (!strcmp(a, "--backbone")) {
        if (!(v = need_value(argc, argv, i))) return -1;
        if (bm_backbone_parse(v, &f->backbone)) {
            fprintf(stderr, "bigmac: error: --backbone: unknown schedule '%s' (gpipe, 1f1b, interleaved, zb-h1, zb-interleaved, zb-v, dualpipe-v)\n", v);
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--policy")) {
        if (!(v = need_value(argc, argv, i))) return -1;
        if (bm_policy_parse(v, &f->policy)) {
            fprintf(stderr,
                    "bigmac: error: --policy: unknown policy '%s' (bigmac, optimus, unified, "
                    "unified-balanced, ideal, none)\n", v);
            return -1;
        }
        return 1;
    }
    return 0;
}

int bm_cli_load_spec(const char *cmd, const char *path, const struct bm_plan_opts *f,
                     void (*usage)(FILE *), struct bm_spec **spec, struct bm_plan_opts *o)
{
    *spec = NULL;
    if (!path) {
        fprintf(stderr, "bigmac: error: %s: missing SPEC\n", cmd);
        if (usage) usage(stderr);
        return BM_USAGE;
    }
    struct bm_err err;
    if (bm_spec_load(path, spec, &err)) {
        bm_cli_error(err.msg);
        return BM_ERR;
    }
    bm_plan_opts_to_spec(f, *spec);
    bm_plan_opts_from_spec(o, *spec);
    bm_plan_opts_merge(o, f);
    return BM_OK;
}
