/* fuzz_table.c — libFuzzer target: bm_table_parse on arbitrary bytes, then bm_verify, and
 * when the table verifies, bm_simulate. A verified table must simulate (the verifier proved it
 * deadlock-free and complete), so a simulator error on it is a bug: abort(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct bm_table *t = (struct bm_table *)1;
    struct bm_err err;
    err.msg[0] = 0;
    int rc = bm_table_parse(text, "fuzz.json", &t, &err);
    free(text);
    if (rc != BM_OK) {
        if (rc != BM_ERR || t != NULL || !err.msg[0]) abort();
        return 0;
    }
    err.msg[0] = 0;
    if (bm_verify(t, &err) == BM_OK) {
        struct bm_timeline *tl = NULL;
        struct bm_sim_opts so = {0.1, 7, 1};
        if (bm_simulate(t, &so, &tl, &err) != BM_OK) {
            fprintf(stderr, "verified table does not simulate: %s\n", err.msg);
            abort();
        }
        if (!(tl->makespan_ms >= 0)) abort();
        bm_timeline_free(tl);
    } else if (!err.msg[0]) {
        abort();
    }
    bm_table_free(t);
    return 0;
}
