/* fuzz_trace.c — libFuzzer target: the Chrome trace loader (bm_trace_parse, docs/trace.md), a
 * streaming JSON reader of its own, on arbitrary bytes. A failure must be clean (no table, no
 * timeline, a message); a loaded trace must come with a timeline shaped like its table. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"
#include "report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    (void)bm_trace_sniff(text);
    struct bm_table *t = (struct bm_table *)1;
    struct bm_costs *t_c = NULL;
    struct bm_timeline *tl = (struct bm_timeline *)1;
    struct bm_err err;
    err.msg[0] = 0;
    int rc = bm_trace_parse(text, "fuzz.trace.json", &t, &t_c, &tl, &err);
    free(text);
    if (rc != BM_OK) {
        if (rc != BM_ERR || !err.msg[0]) abort();
        if (t != NULL && t != (struct bm_table *)1) abort();
        if (tl != NULL && tl != (struct bm_timeline *)1) abort();
        return 0;
    }
    if (!t || !tl || tl->pp != t->pp) abort();
    for (int r = 0; r < t->pp; r++)
        if (tl->ranks[r].n_ops != t->ranks[r].n_ops) abort();
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    return 0;
}
