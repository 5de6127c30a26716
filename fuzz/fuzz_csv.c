/* fuzz_csv.c — libFuzzer target: the CSV schedule loader (bm_csv_parse, docs/csv.md) on
 * arbitrary bytes, once standalone (modules from the CSV's '#' lines) and once with a fixed spec
 * supplying the modules; then bm_verify, and bm_simulate when it verifies. Failures must be
 * clean (no table, a message); a verified table must simulate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"
#include "report/report.h"

/* the module graph of examples/tiny-mllm.json, whose CSVs seed the corpus */
static const char *const spec_text =
    "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"fuzz\",\n"
    " \"inputs\": [\"image\", \"text\", \"target\"],\n \"modules\": [\n"
    "  {\"name\": \"vit\", \"consumes\": [\"image\"], \"produces\": [\"vis_emb\"]},\n"
    "  {\"name\": \"gpt\", \"consumes\": [\"text\", \"vis_emb\"], \"produces\": [\"hidden\"],"
    " \"cost\": {\"fwd_ms\": 4, \"bwd_ms\": 8}},\n"
    "  {\"name\": \"dit\", \"consumes\": [\"hidden\", \"target\"], \"produces\": [\"loss\"]}\n ]}\n";

static void check(const char *text, const struct bm_spec *spec)
{
    struct bm_table *t = (struct bm_table *)1;
    struct bm_costs *t_c = NULL;
    struct bm_err err;
    err.msg[0] = 0;
    int rc = bm_csv_parse(text, "fuzz.csv", spec, NULL, &t, &t_c, &err);
    if (rc != BM_OK) {
        if (rc != BM_ERR || t != NULL || !err.msg[0]) abort();
        return;
    }
    if (bm_verify(t, &err) == BM_OK) {
        struct bm_timeline *tl;
        if (bm_simulate(t, t_c, NULL, &tl, &err) != BM_OK) {
            fprintf(stderr, "verified CSV table does not simulate: %s\n", err.msg);
            abort();
        }
        bm_timeline_free(tl);
    }
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct bm_spec *spec;
    if (!spec) {
        struct bm_err err;
        if (bm_spec_parse(spec_text, "fuzz-spec.json", &spec, &err) != BM_OK) abort();
    }
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    check(text, NULL);
    check(text, spec);
    free(text);
    return 0;
}
