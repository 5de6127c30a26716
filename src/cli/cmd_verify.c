/* cmd_verify.c — `bigmac verify TABLE.json`: load an operator table and check every invariant
 * of docs/design.md §7 (bm_verify). Exit 0 when they hold, 1 when one fails (or the table cannot be
 * loaded), 2 on usage errors. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(void)
{
    printf(
            "usage: bigmac verify TABLE.json\n"
            "\n"
            "Check an operator table (from `bigmac plan`, or edited by hand):\n"
            "  0. structure   indices in range, backbone chunks on their rank (chunk %% pp, or the\n"
            "                 table's chunk_rank), passes F/B\n"
            "  1. counts      every compute op exactly once, every send with exactly one recv\n"
            "  2. deadlock    sends are non-blocking, a recv waits for its send: all ranks finish\n"
            "  3. order       each rank's backbone ops follow the table's backbone schedule\n"
            "  4. deps        every input (and every sent tensor) is on the rank before use\n"
            "  5. residency   policy bigmac: live encoder microbatches per rank <= window*ceil(unit/pp),\n"
            "                 generator <= ceil(unit/pp)\n"
            "The first invariant that fails is explained, naming ranks and ops (`rank 1 op #5 1F3`).\n"
            "\n"
            "Exit status: 0 all hold, 1 a check failed or the table is unreadable, 2 usage error.\n");
}

int bm_cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "bigmac: error: verify: unknown option '%s'\n", argv[i]);
            fprintf(stderr, "usage: bigmac verify TABLE.json   (--help for more)\n");
            return BM_USAGE;
        }
        if (path) {
            fprintf(stderr, "bigmac: error: verify: one table at a time (got '%s' and '%s')\n",
                    path, argv[i]);
            fprintf(stderr, "usage: bigmac verify TABLE.json   (--help for more)\n");
            return BM_USAGE;
        }
        path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "bigmac: error: verify: which table? (a TABLE.json from `bigmac plan`)\n");
        fprintf(stderr, "usage: bigmac verify TABLE.json   (--help for more)\n");
        return BM_USAGE;
    }

    struct bm_err err;
    struct bm_table *t = NULL;
    if (bm_table_load(path, &t, NULL, &err) != BM_OK) { /* the schedule alone: verify reads no costs */
        bm_cli_error(err.msg);
        return BM_ERR;
    }
    int rc = bm_verify(t, &err);
    if (rc != BM_OK) {
        static char msg[sizeof err.msg + 1024];
        snprintf(msg, sizeof msg, "%s: %s", path, err.msg);
        bm_cli_error(msg);
    } else if (t->policy == BM_POL_BIGMAC && t->window > 0) {
        printf("%s: OK \u2014 %d ranks, %ld ops, invariants 1-5 hold\n", path, t->pp,
               bm_table_n_ops(t));
    } else {
        printf("%s: OK \u2014 %d ranks, %ld ops, invariants 1-4 hold (5, residency, applies to "
               "policy bigmac with a window; this table is %s)\n",
               path, t->pp, bm_table_n_ops(t), bm_policy_name(t->policy));
    }
    bm_table_free(t);
    return rc == BM_OK ? 0 : BM_ERR;
}
