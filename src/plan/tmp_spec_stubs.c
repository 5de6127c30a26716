/* tmp_spec_stubs.c — TEMPORARY weak stand-in until the spec loader (branch spec) merges. */
#include "bigmac.h"
__attribute__((weak)) void bm_spec_encoder_scales(const struct bm_spec *s, int M, double *out)
{
    (void)s;
    for (int m = 0; m < M; m++) out[m] = 1.0;
}
