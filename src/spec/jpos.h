/* jpos.h — find where a JSON value lives in the raw text (line and column), for diagnostics.
 *
 * jansson reports line/column only for syntax errors. Loaders that check a parsed document
 * (the spec, the operator table) know the *path* of the offending value, e.g.
 * "modules[2].cost.fwd_ms"; bm_jpos_find walks the raw text with a tiny tokenizer and turns
 * that path into a position, so every message can read "file:line:col: ...".
 *
 * Path syntax
 *   ""                     the root value
 *   key                    member "key" of an object (first segment: no leading dot)
 *   .key                   member of an object; key = bytes up to the next '.', '[' or end
 *   [3]                    element 3 (0-based) of an array
 *   ["any key"]            member whose key contains '.', '[' or other bytes; inside the
 *                          quotes \" and \\ stand for " and \
 *   Example: modules[2].cost.fwd_ms, parallel["micro.batches"], [0].ops[5]
 *   Keys are compared with the JSON key *after* decoding its escapes (\n, \u00e9, surrogate
 *   pairs -> UTF-8), so a path in UTF-8 finds "caf\u00e9" written either way.
 *
 * Positions
 *   Lines and columns are 1-based. Columns count Unicode code points (UTF-8 lead bytes), the
 *   way jansson counts them for its syntax errors; a tab is one column; a line ends at '\n'.
 *   For an object member the position is the opening quote of its key; for an array element
 *   (and for the root) it is the element's first character.
 *   When an object has the same key twice, the first occurrence is used.
 *
 * The functions never allocate, never read past the terminating NUL and tolerate malformed
 * text (they then report "not found"). */
#ifndef BM_JPOS_H
#define BM_JPOS_H

#include <stddef.h>

#include <jansson.h>

#include "bigmac.h"

/* Position of 'path' in the JSON 'text'. Returns 0 and sets *line, *col when found. Returns -1
 * when not found (or the text or the path is malformed); *line, *col then hold the position of
 * the deepest enclosing element that was found (1:1 when not even the root was). */
int bm_jpos_find(const char *text, const char *path, int *line, int *col);

/* Append a member segment for 'key' to the NUL-terminated path in buf (capacity n):
 * ".key", or "key" when buf is empty, or ["key"] (escaped) when key holds bytes other than
 * [A-Za-z0-9_-] or is empty. Returns 0, or -1 when it does not fit (buf then unchanged). */
int bm_jpos_key(char *buf, size_t n, const char *key);
/* Append "[i]" to the path in buf. Returns 0, or -1 when it does not fit (buf unchanged). */
int bm_jpos_index(char *buf, size_t n, long i);

/* Check that no object/array in 'text' nests deeper than max_depth (the root counts as 1).
 * Returns 0 when it does not; otherwise -1 with the position of the first '{' or '['
 * that opens level max_depth+1. Strings are skipped; the text need not be valid JSON. */
int bm_jpos_depth(const char *text, int max_depth, int *line, int *col);

/* Line and column (as above) of byte offset 'off' in text (clamped to the text's end). */
void bm_jpos_offset(const char *text, size_t off, int *line, int *col);

/* The one integer rule of spec and table files: a JSON integer, or a real whose value is a whole
 * number (4.0, as a generator script may write it; not 4.5, nor anything of 9e18 and beyond,
 * which no field needs). Returns 1 and stores the value in *out, 0 otherwise. */
int bm_json_whole(const json_t *v, long long *out);

/* Parse 'text' with jansson (flags as for json_loads, e.g. JSON_REJECT_DUPLICATES), allocating
 * through bm_malloc so fault injection reaches the parser. Returns the document (caller owns it:
 * json_decref), or NULL with err reading "name:line:col: JSON nested deeper than N levels",
 * "name:line:col: invalid JSON: <jansson's text>" or "name: out of memory while parsing JSON".
 * The nesting check (max_depth > 0) runs first, so deep input never reaches jansson's recursion.
 * Any allocation failure during the parse fails it: jansson's lexer ignores a failed buffer
 * grow and silently drops a byte, so such a document cannot be trusted. Not thread-safe
 * (jansson's allocator hooks are global). */
json_t *bm_json_parse(const char *text, const char *name, int max_depth, size_t flags,
                      struct bm_err *err);

#endif
