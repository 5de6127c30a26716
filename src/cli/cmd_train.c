/* cmd_train.c — `bigmac train SPEC --reference [--steps N] [--log FILE]`. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "train/train.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bigmac train SPEC --reference [--steps N] [--log FILE]\n"
            "\n"
            "Train the model SPEC describes (each module names a built-in model with \"impl\"\n"
            "and its sizes with \"arch\") on the built-in shapes-and-captions dataset.\n"
            "\n"
            "  --reference   single process, no pipeline: for each microbatch encoder F,\n"
            "                backbone F, generator F, generator B, backbone B, encoder B;\n"
            "                then AdamW. The numbers the pipelined executor must reproduce.\n"
            "  --steps N     training steps (default: the spec's train.steps)\n"
            "  --log FILE    one JSON object per step: step, loss, ms, per-rank peak\n"
            "                activation bytes per role\n");
}

int bm_cmd_train(int argc, char **argv)
{
    const char *path = NULL, *log_path = NULL;
    int reference = 0, steps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--reference")) {
            reference = 1;
        } else if (!strcmp(a, "--steps") || !strcmp(a, "--log")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bigmac: error: %s needs a value\n", a);
                return BM_USAGE;
            }
            if (!strcmp(a, "--log")) log_path = argv[++i];
            else if (bm_cli_int(a, argv[++i], &steps)) return BM_USAGE;
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
    if (!reference) {
        fprintf(stderr, "bigmac: error: pipelined training arrives with the executor; only "
                        "single-process training exists yet\n"
                        "bigmac: hint: run `bigmac train %s --reference`\n", path);
        return 1;
    }
    struct bm_err err;
    struct bm_spec *spec;
    if (bm_spec_load(path, &spec, &err) != BM_OK) {
        bm_cli_error(err.msg);
        return 1;
    }
    FILE *log = NULL;
    if (log_path && !(log = fopen(log_path, "w"))) {
        fprintf(stderr, "bigmac: error: %s: cannot open for writing\n", log_path);
        bm_spec_free(spec);
        return 1;
    }
    int rc = bm_ref_train(spec, steps ? steps : spec->train.steps, stdout, log, NULL, NULL, &err);
    if (rc) {
        char msg[sizeof err.msg + 64];
        snprintf(msg, sizeof msg, "%s: %s", path, err.msg);
        bm_cli_error(msg);
    }
    if (log) fclose(log);
    bm_spec_free(spec);
    return rc ? 1 : 0;
}
