/* test_knobs.c — the knob list (src/spec/knobs.c) against docs/spec.md and the readers and
 * writers it drives: docs/spec.md's key tables are the ones the list writes (`make docs`); every
 * device knob read by the spec loader in its limits, and carried through a table's JSON and CSV
 * by its rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"
#include "bigmac_report.h"
#include "spec/knobs.h"
#include "table/table.h"
#include "test.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* docs/spec.md's key tables are the ones the knob list writes (src/spec/knobs_doc.c, `make docs`):
 * the committed file equals its splice, both blocks (device, cost) present. */
TEST(docs_key_tables_are_the_ones_the_knob_list_writes)
{
    char *doc = slurp("docs/spec.md"), *gen = NULL;
    CHECK(doc != NULL);
    if (!doc) return;
    struct bm_err err;
    int n = bm_knob_docs_splice(doc, &gen, &err);
    CHECKF(n == 2, "docs/spec.md: %d generated key tables (want device and cost)%s%s", n, n < 0 ? ": " : "",
           n < 0 ? err.msg : "");
    if (gen && strcmp(doc, gen)) {
        int line = 1;
        size_t i = 0;
        while (doc[i] && doc[i] == gen[i]) line += doc[i++] == '\n';
        CHECKF(0, "docs/spec.md line %d differs from what the knob list writes: run `make docs` (src/spec/knobs.c "
                  "is where the keys are described)", line);
    }
    /* every knob has its row, with its unit and default */
    for (int i = 0; gen && i < bm_n_knobs; i++) {
        char row[256];
        snprintf(row, sizeof row, "| `%s` | ", bm_knobs[i].key);
        CHECKF(strstr(gen, row) != NULL, "%s.%s has no row", bm_knobs[i].section, bm_knobs[i].key);
    }
    free(gen);
    free(doc);
}

/* The generator's own rules on a small document: text outside the blocks is kept byte for byte,
 * an old table is replaced, and a block without its end or of an unknown section is refused. */
TEST(docs_splice_replaces_only_the_blocks)
{
    const char *doc = "# title\n<!-- knobs: cost -->\nold row\n<!-- /knobs -->\ntail\n";
    char *gen = NULL;
    struct bm_err err;
    CHECK(bm_knob_docs_splice(doc, &gen, &err) == 1);
    if (gen) {
        const char *head = "# title\n<!-- knobs: cost -->\n| key | type | unit | default | constraint |\n";
        CHECK(!strncmp(gen, head, strlen(head)));
        CHECK(strstr(gen, "old row") == NULL);
        CHECK(strstr(gen, "| `fwd_ms` | number | ms | 1 | > 0: forward time of one microbatch |\n") != NULL);
        CHECK(strstr(gen, "| `spread` | number | — | 0 | in [0, 10]: ") != NULL);
        size_t n = strlen(gen);
        CHECK(n > 30 && !strcmp(gen + n - 21, "<!-- /knobs -->\ntail\n"));
        CHECK(strstr(gen, "`memory_gib`") == NULL); /* the device table is another block's */
    }
    free(gen);
    gen = NULL;
    CHECK(bm_knob_docs_splice("a\n<!-- knobs: device -->\nrow\n", &gen, &err) < 0 && gen == NULL);
    CHECK_STR_CONTAINS(err.msg, "line 2: the block of \"device\" has no closing <!-- /knobs --> line");
    CHECK(bm_knob_docs_splice("<!-- knobs: gpu -->\n<!-- /knobs -->\n", &gen, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "line 1: no knob has the section \"gpu\"");
    CHECK(bm_knob_docs_splice("no blocks\n", &gen, &err) == 0 && gen && !strcmp(gen, "no blocks\n"));
    free(gen);
}

/* A value of knob i inside its limits, distinct per knob, and not its default. */
static double pick(int i)
{
    const struct bm_knob *k = &bm_knobs[i];
    if (k->integer) return 2;
    if (k->hi <= 1) return 0.25 + 0.01 * (i % 10);
    return 3 + 0.5 * i;
}

static const char *spec_with_device(char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "{\"format\": \"bigmac-spec\", \"version\": 1, \"device\": {");
    int first = 1;
    for (int i = 0; i < bm_n_knobs; i++) {
        const struct bm_knob *k = &bm_knobs[i];
        if (strcmp(k->section, "device") || k->parse == BM_KNOB_OWN) continue;
        o += (size_t)snprintf(buf + o, n - o, "%s\"%s\": %.17g", first ? "" : ", ", k->key, pick(i));
        first = 0;
    }
    snprintf(buf + o, n - o,
             "},\n \"parallel\": {\"pp\": 4, \"microbatches\": 4},\n"
             " \"schedule\": {\"backbone\": \"1f1b\", \"policy\": \"none\"},\n"
             " \"inputs\": [\"tokens\"],\n"
             " \"modules\": [{\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"tokens\"],\n"
             "   \"produces\": [\"loss\"], \"layers\": 8,\n"
             "   \"cost\": {\"fwd_ms\": 8, \"bwd_ms\": 16, \"act_mib\": 64, \"state_mib\": 512, \"out_mib\": 32}}]}\n");
    return buf;
}

/* Knob i's value in the cost model c (ms for an overhead, as us). */
static double costs_value(const struct bm_knob *k, const struct bm_costs *c)
{
    if (k->home == BM_KNOB_OVERHEAD) return *(const double *)(const void *)((const char *)c + k->costs_off) * 1000.0;
    return bm_knob_device_value(k, &c->device);
}

TEST(every_device_knob_is_read_in_its_limits_and_round_trips_through_json_and_csv)
{
    char buf[8192];
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_parse(spec_with_device(buf, sizeof buf), "k.json", &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    for (int i = 0; i < bm_n_knobs; i++) { /* the spec holds each where the list says */
        const struct bm_knob *k = &bm_knobs[i];
        if (strcmp(k->section, "device") || k->parse == BM_KNOB_OWN) continue;
        double got = k->home == BM_KNOB_OVERHEAD ? *(const double *)(const void *)((const char *)s + k->off)
                                                 : bm_knob_device_value(k, &s->device);
        CHECKF(got == pick(i), "device.%s: spec holds %g, gave %g", k->key, got, pick(i));
    }
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_table *t = NULL, *tj = NULL, *tc = NULL;
    struct bm_costs *c = NULL, *cj = NULL, *cc = NULL;
    CHECKF(bm_plan_build(s, &o, &t, &c, &err) == BM_OK, "%s", err.msg);
    char *js = NULL, *cs = NULL;
    size_t jn = 0, cn = 0;
    if (t) {
        FILE *f = open_memstream(&js, &jn);
        CHECK(bm_table_write_json(t, c, f) == BM_OK);
        fclose(f);
        f = open_memstream(&cs, &cn);
        CHECK(bm_csv_write(t, c, f) == BM_OK);
        fclose(f);
        CHECKF(bm_table_parse(js, "k.table.json", &tj, &cj, &err) == BM_OK, "%s", err.msg);
        CHECKF(bm_csv_parse(cs, "k.csv", s, NULL, &tc, &cc, &err) == BM_OK, "%s", err.msg);
    }
    for (int i = 0; tj && tc && i < bm_n_knobs; i++) {
        const struct bm_knob *k = &bm_knobs[i];
        if (strcmp(k->section, "device") || k->parse == BM_KNOB_OWN) continue;
        double want = costs_value(k, c);
        CHECK_NEAR(want, pick(i), 1e-9 * pick(i));
        if (k->json != BM_KNOB_NEVER)
            CHECKF(costs_value(k, cj) == want || fabs(costs_value(k, cj) - want) <= 1e-12 * want,
                   "device.%s: the JSON table gives %.17g back, wrote %.17g", k->key, costs_value(k, cj), want);
        if (k->csv != BM_KNOB_NEVER)
            CHECKF(costs_value(k, cc) == want, "device.%s: the CSV gives %.17g back, wrote %.17g", k->key,
                   costs_value(k, cc), want);
    }
    free(js);
    free(cs);
    bm_table_free(t);
    bm_table_free(tj);
    bm_table_free(tc);
    bm_costs_free(c);
    bm_costs_free(cj);
    bm_costs_free(cc);
    bm_spec_free(s);
}

TEST(every_plain_device_knob_is_refused_above_its_limit)
{
    for (int i = 0; i < bm_n_knobs; i++) {
        const struct bm_knob *k = &bm_knobs[i];
        if (strcmp(k->section, "device") || k->parse != BM_KNOB_PLAIN) continue;
        char text[1024], want[128];
        snprintf(text, sizeof text,
                 "{\"format\": \"bigmac-spec\", \"version\": 1, \"device\": {\"%s\": %.17g},\n"
                 " \"inputs\": [\"t\"], \"modules\": [{\"name\": \"m\", \"role\": \"backbone\", "
                 "\"consumes\": [\"t\"], \"produces\": [\"l\"]}]}\n",
                 k->key, k->hi * 2);
        snprintf(want, sizeof want, "device.%s must be <= %g", k->key, k->hi);
        struct bm_spec *s = NULL;
        struct bm_err err;
        CHECKF(bm_spec_parse(text, "k.json", &s, &err) == BM_ERR && strstr(err.msg, want), "%s: %s", k->key,
               err.msg);
        bm_spec_free(s);
    }
}

int main(void)
{
    RUN(docs_key_tables_are_the_ones_the_knob_list_writes);
    RUN(docs_splice_replaces_only_the_blocks);
    RUN(every_device_knob_is_read_in_its_limits_and_round_trips_through_json_and_csv);
    RUN(every_plain_device_knob_is_refused_above_its_limit);
    return test_summary();
}
