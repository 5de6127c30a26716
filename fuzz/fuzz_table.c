/* fuzz_table.c — libFuzzer target: bm_table_parse on arbitrary bytes, then bm_verify, and
 * when the table verifies, bm_simulate. A verified table must simulate (the verifier proved it
 * deadlock-free and complete), so a simulator error on it is a bug: abort(). Every table that
 * loads must also survive a round trip through the writer: bm_table_write_json, then
 * bm_table_parse again, with the same ranks and ops. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct bm_table *t = (struct bm_table *)1;
    struct bm_costs *t_c = NULL;
    struct bm_err err;
    err.msg[0] = 0;
    int rc = bm_table_parse(text, "fuzz.json", &t, &t_c, &err);
    free(text);
    if (rc != BM_OK) {
        if (rc != BM_ERR || t != NULL || !err.msg[0]) abort();
        return 0;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    if (mf) {
        if (bm_table_write_json(t, t_c, mf)) abort();
        fclose(mf);
        struct bm_table *t2;
        struct bm_costs *t2_c = NULL;
        if (bm_table_parse(buf, "roundtrip.json", &t2, &t2_c, &err) != BM_OK) {
            fprintf(stderr, "written table does not load: %s\n", err.msg);
            abort();
        }
        if (t2->pp != t->pp || bm_table_n_ops(t2) != bm_table_n_ops(t) || t2->n_modules != t->n_modules)
            abort();
        for (int r = 0; r < t->pp; r++)
            for (int i = 0; i < t->ranks[r].n_ops; i++) {
                const struct bm_op *a = &t->ranks[r].ops[i], *b = &t2->ranks[r].ops[i];
                if (a->kind != b->kind || a->pass != b->pass || a->module != b->module ||
                    a->chunk != b->chunk || a->mb != b->mb || a->peer != b->peer)
                    abort();
            }
        bm_table_free(t2), bm_costs_free(t2_c), t2_c = NULL;
        free(buf);
    }
    err.msg[0] = 0;
    if (bm_verify(t, &err) == BM_OK) {
        struct bm_timeline *tl = NULL;
        struct bm_sim_opts so = {0.1, 7, 1};
        if (bm_simulate(t, t_c, &so, &tl, &err) != BM_OK) {
            fprintf(stderr, "verified table does not simulate: %s\n", err.msg);
            abort();
        }
        if (!(tl->makespan_ms >= 0)) abort();
        bm_timeline_free(tl);
    } else if (!err.msg[0]) {
        abort();
    }
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    return 0;
}
