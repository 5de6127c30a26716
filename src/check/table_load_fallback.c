/* table_load_fallback.c — TEMPORARY, branch `verify` only: a weak bm_table_load so that
 * bin/bigmac links before src/plan/table_json.c (the real loader) lands. The real definition
 * overrides this one; delete this file when merging table_json.c. */
#include "util/util.h"

#ifdef __GNUC__
__attribute__((weak))
#endif
int bm_table_load(const char *path, struct bm_table **out, struct bm_err *err)
{
    *out = NULL;
    return bm_err_set(err, "%s: cannot load tables: the table loader is not built in this branch",
                      path);
}
