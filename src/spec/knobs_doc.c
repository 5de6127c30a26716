/* knobs_doc.c — docs/spec.md's key tables written from the knob list (knobs.h): one markdown row
 * per knob (key, type, unit, default, limits and meaning), and the splice that puts them between
 * the file's "<!-- knobs: SECTION -->" and "<!-- /knobs -->" lines. `make docs` runs it over the
 * file (scripts/knob_docs.c); tests/test_knobs.c fails when the file differs from what it
 * writes. */
#include <stdlib.h>
#include <string.h>

#include "spec/knobs.h"
#include "util/util.h"

/* Limits at or above this are guards against overflow, not a knob's range: the tables leave them
 * out (docs/spec.md "Limits against absurd input" names them). */
#define GUARD 1e9

static void put_num(double v, FILE *f)
{
    char b[32];
    fputs(bm_knob_num(v, b, sizeof b), f);
}

static void put_default(const struct bm_knob *k, FILE *f)
{
    int absent = k->home == BM_KNOB_LIST || k->dflt < k->lo || (k->lo_open && k->dflt <= k->lo);
    const char *d = k->dflt_doc ? k->dflt_doc : absent ? "absent" : "%g";
    const char *g = strstr(d, "%g");
    if (!g) {
        fputs(d, f);
        return;
    }
    fprintf(f, "%.*s", (int)(g - d), d);
    put_num(k->dflt, f);
    fputs(g + 2, f);
}

static void put_limits(const struct bm_knob *k, FILE *f)
{
    char b[80];
    if (k->hi < GUARD) {
        fprintf(f, "%sin %s", k->home == BM_KNOB_LIST ? "each " : "", bm_knob_range(k, b, sizeof b));
    } else {
        fputs(k->lo_open ? "> " : "≥ ", f);
        put_num(k->lo, f);
    }
    if (k->doc) fprintf(f, "%s%s", strncmp(k->doc, "and ", 4) ? ": " : " ", k->doc);
}

void bm_knob_docs(const char *section, FILE *f)
{
    fputs("| key | type | unit | default | constraint |\n|---|---|---|---|---|\n", f);
    for (int i = 0; i < bm_n_knobs; i++) {
        const struct bm_knob *k = &bm_knobs[i];
        if (strcmp(k->section, section)) continue;
        fprintf(f, "| `%s` | %s | %s | ", k->key,
                k->home == BM_KNOB_LIST ? "array of numbers" : k->integer ? "integer" : "number",
                *k->unit ? k->unit : "—");
        put_default(k, f);
        fputs(" | ", f);
        put_limits(k, f);
        fputs(" |\n", f);
    }
}

#define OPEN "<!-- knobs: "
#define CLOSE "<!-- /knobs -->"

int bm_knob_docs_splice(const char *doc, char **out, struct bm_err *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    *out = NULL;
    if (!f) return bm_err_set(err, "out of memory"), -1;
    int blocks = 0, line = 1, rc = 0;
    for (const char *p = doc; *p && !rc;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e + 1 - p) : strlen(p);
        fwrite(p, 1, len, f);
        if (!strncmp(p, OPEN, strlen(OPEN))) { /* the block's section, then its generated lines */
            const char *s = p + strlen(OPEN);
            char section[32];
            snprintf(section, sizeof section, "%.*s", (int)strcspn(s, " \n-"), s);
            int known = 0;
            for (int i = 0; i < bm_n_knobs; i++) known |= !strcmp(bm_knobs[i].section, section);
            const char *c = strstr(p + len - 1, "\n" CLOSE); /* from the open line's own newline */
            if (!known) rc = bm_err_set(err, "line %d: no knob has the section \"%s\"", line, section);
            else if (!c) rc = bm_err_set(err, "line %d: the block of \"%s\" has no closing %s line", line, section, CLOSE);
            if (rc) break;
            bm_knob_docs(section, f);
            for (const char *q = p; q <= c; q++) line += *q == '\n';
            p = c + 1;
            blocks++;
            continue;
        }
        line++;
        p += len;
    }
    if (fclose(f) || !buf) rc = rc ? rc : bm_err_set(err, "out of memory");
    if (rc) {
        free(buf);
        return -1;
    }
    *out = buf;
    return blocks;
}
