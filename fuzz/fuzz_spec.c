/* fuzz_spec.c — libFuzzer target: bm_spec_parse on arbitrary bytes.
 * The input is copied into a NUL-terminated buffer (a spec is text; an embedded NUL just ends
 * it early). Every input must give either a spec or BM_ERR with a message; the sanitizers
 * catch the rest (overreads, leaks, UB). Build and run: `make fuzz` (docs/hardening.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct bm_spec *s = (struct bm_spec *)1;
    struct bm_err err;
    err.msg[0] = 0;
    int rc = bm_spec_parse(text, "fuzz.json", &s, &err);
    if (rc == BM_OK) {
        if (!s || s->n_modules < 1 || s->pp < 1 || s->microbatches < 1) abort();
        bm_spec_free(s);
    } else if (rc != BM_ERR || s != NULL || !err.msg[0]) {
        abort(); /* a failure must be clean: no object, a message */
    }
    free(text);
    return 0;
}
