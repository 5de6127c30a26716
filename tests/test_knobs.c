/* test_knobs.c — the knob list (src/spec/knobs.c) against docs/spec.md and the readers and
 * writers it drives: every device and cost knob documented with its default and unit and no
 * documented key missing from the list; every device knob read by the spec loader in its
 * limits, and carried through a table's JSON and CSV by its rules. */
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

/* The text of docs/spec.md's section whose heading starts with 'heading' (up to the next "\n## "). */
static char *section(const char *doc, const char *heading)
{
    const char *a = strstr(doc, heading);
    if (!a) return NULL;
    const char *b = strstr(a + 1, "\n## ");
    size_t n = b ? (size_t)(b - a) : strlen(a);
    char *s = malloc(n + 1);
    memcpy(s, a, n);
    s[n] = 0;
    return s;
}

static const char *doc_unit(const struct bm_knob *k)
{
    return *k->unit ? k->unit : "—";
}

/* Whether a documented default cell says knob k's default: its value (%g), or "absent" for a
 * list or a knob whose default lies outside its limits (not given = none). */
static int default_ok(const struct bm_knob *k, const char *cell)
{
    char want[64];
    snprintf(want, sizeof want, "%g", k->dflt);
    size_t n = strlen(want);
    if (!strncmp(cell, want, n) && (cell[n] == 0 || cell[n] == ' ')) return 1;
    int absent_ok = k->home == BM_KNOB_LIST || k->dflt < k->lo || (k->lo_open && k->dflt <= k->lo);
    return absent_ok && !strncmp(cell, "absent", 6);
}

TEST(docs_device_table_lists_every_device_knob_with_its_unit_and_default)
{
    char *doc = slurp("docs/spec.md");
    CHECK(doc != NULL);
    if (!doc) return;
    char *sec = section(doc, "## `device`");
    CHECK(sec != NULL);
    int seen[256] = {0};
    for (char *line = sec ? strtok(sec, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "| `", 3)) continue;
        char *cells[8];
        int nc = 0;
        for (char *p = line + 2; nc < 8;) { /* "| a | b | c |" -> a, b, c */
            char *e = strstr(p, " | ");
            cells[nc++] = p;
            if (!e) break;
            *e = 0;
            p = e + 3;
        }
        CHECKF(nc >= 5, "%s: expected key | type | unit | default | constraint", cells[0]);
        if (nc < 5) continue;
        /* cells[0]: "`a`, `b`"; cells[2]: "u" or "u1, u2" */
        char *units[8], *us = NULL;
        int nu = 0;
        for (char *u = strtok_r(cells[2], ",", &us); u && nu < 8; u = strtok_r(NULL, ",", &us))
            units[nu++] = u + (*u == ' ');
        char *save = NULL;
        int ki = 0;
        for (char *kt = strtok_r(cells[0], ", ", &save); kt; kt = strtok_r(NULL, ", ", &save), ki++) {
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)strlen(kt) - 2, kt + 1); /* strip the backticks */
            const struct bm_knob *k = bm_knob_find("device", key);
            CHECKF(k != NULL, "docs/spec.md documents device.%s, which is not in the knob list", key);
            if (!k) continue;
            seen[k - bm_knobs] = 1;
            const char *u = units[ki < nu ? ki : nu - 1];
            CHECKF(!strcmp(u, doc_unit(k)), "device.%s: docs say unit \"%s\", the list \"%s\"", key, u,
                   doc_unit(k));
            CHECKF(default_ok(k, cells[3]), "device.%s: docs say default \"%s\", the list %g", key, cells[3],
                   k->dflt);
        }
    }
    for (int i = 0; i < bm_n_knobs; i++)
        if (!strcmp(bm_knobs[i].section, "device"))
            CHECKF(seen[i], "device.%s is not in docs/spec.md's device table", bm_knobs[i].key);
    free(sec);
    free(doc);
}

TEST(docs_cost_keys_list_every_cost_knob_with_its_unit_and_default)
{
    char *doc = slurp("docs/spec.md");
    CHECK(doc != NULL);
    if (!doc) return;
    const char *a = strstr(doc, "`cost` keys");
    CHECK(a != NULL);
    if (!a) {
        free(doc);
        return;
    }
    const char *b = strstr(a, "\n\n");
    size_t n = b ? (size_t)(b - a) : strlen(a);
    int seen[256] = {0};
    for (const char *p = a; (p = strstr(p, "` (")) && p < a + n; p++) { /* every "`key` (" */
        const char *q = p;
        while (q > a && q[-1] != '`') q--;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(p - q), q);
        if (strspn(key, "abcdefghijklmnopqrstuvwxyz_0123456789") != strlen(key)) continue; /* a formula */
        const struct bm_knob *k = bm_knob_find("cost", key);
        CHECKF(k != NULL, "docs/spec.md documents cost.%s, which is not in the knob list", key);
        if (!k) continue;
        seen[k - bm_knobs] = 1;
        const char *par = p + 3, *close = strchr(par, ')');
        if (*k->unit) {
            size_t ul = strlen(k->unit);
            CHECKF(!strncmp(par, k->unit, ul) && par[ul] == ',', "cost.%s: docs do not say its unit %s", key,
                   k->unit);
        }
        if (close && !strncmp(close, ") [", 3) && close[3] >= '0' && close[3] <= '9')
            CHECKF(atof(close + 3) == k->dflt, "cost.%s: docs say default [%g], the list %g", key,
                   atof(close + 3), k->dflt);
    }
    for (int i = 0; i < bm_n_knobs; i++)
        if (!strcmp(bm_knobs[i].section, "cost"))
            CHECKF(seen[i], "cost.%s is not in docs/spec.md's cost keys", bm_knobs[i].key);
    free(doc);
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
    RUN(docs_device_table_lists_every_device_knob_with_its_unit_and_default);
    RUN(docs_cost_keys_list_every_cost_knob_with_its_unit_and_default);
    RUN(every_device_knob_is_read_in_its_limits_and_round_trips_through_json_and_csv);
    RUN(every_plain_device_knob_is_refused_above_its_limit);
    return test_summary();
}
