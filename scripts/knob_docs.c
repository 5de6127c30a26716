/* knob_docs.c — `make docs`: rewrite the key tables of docs/spec.md (or the files named) from the
 * knob list (src/spec/knobs.c): every block between "<!-- knobs: SECTION -->" and
 * "<!-- /knobs -->" becomes the table of that section's knobs (bm_knob_docs_splice). A file
 * already up to date is left untouched. Built against libbigmac.a (it needs only what `make
 * deps` installs); tests/test_knobs.c checks the committed file against the same function.
 *
 *   build/scripts/knob_docs [FILE...]      (default: docs/spec.md) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/knobs.h"
#include "util/util.h"

static int one(const char *path)
{
    char *out = NULL;
    struct bm_err err;
    char *doc = bm_read_file(path, NULL, &err);
    if (!doc) {
        fprintf(stderr, "knob_docs: error: %s\n", err.msg);
        return 1;
    }
    int n = bm_knob_docs_splice(doc, &out, &err);
    if (n < 0) fprintf(stderr, "knob_docs: error: %s:%s\n", path, err.msg);
    else if (n == 0) fprintf(stderr, "knob_docs: error: %s has no <!-- knobs: SECTION --> block\n", path);
    int rc = n <= 0;
    if (!rc && strcmp(doc, out)) {
        FILE *f = fopen(path, "wb");
        if (!f || fputs(out, f) < 0 || fclose(f)) {
            fprintf(stderr, "knob_docs: error: cannot write %s\n", path);
            rc = 1;
        } else {
            printf("%s: %d key table%s rewritten from src/spec/knobs.c\n", path, n, n == 1 ? "" : "s");
        }
    } else if (!rc) {
        printf("%s: %d key table%s up to date\n", path, n, n == 1 ? "" : "s");
    }
    free(doc);
    free(out);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 0;
    if (argc < 2) return one("docs/spec.md");
    for (int i = 1; i < argc; i++) rc |= one(argv[i]);
    return rc;
}
