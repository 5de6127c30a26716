/* bench_spec.h — the large synthetic spec bench_plan and bench_render plan (ViT + LLM + DiT,
 * heterogeneous encoder costs): one definition, so both benchmarks measure the same tables. */
#ifndef BENCH_SPEC_H
#define BENCH_SPEC_H

#include <stdio.h>
#include <stdlib.h>

#include "bigmac.h"

static const char *SPEC =
    "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"bench\",\n"
    " \"inputs\": [\"image\", \"text\"],\n"
    " \"modules\": [\n"
    "  {\"name\": \"vit\", \"consumes\": [\"image\"], \"produces\": [\"emb\"],\n"
    "   \"cost\": {\"fwd_ms\": 2, \"bwd_ms\": 4, \"act_mib\": 300, \"state_mib\": 2600, \"out_mib\": 16}},\n"
    "  {\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"text\", \"emb\"], \"produces\": [\"hidden\"],\n"
    "   \"cost\": {\"fwd_ms\": 400, \"bwd_ms\": 800, \"act_mib\": 60000, \"state_mib\": 600000, \"out_mib\": 16}},\n"
    "  {\"name\": \"dit\", \"consumes\": [\"hidden\"], \"produces\": [\"loss\"],\n"
    "   \"cost\": {\"fwd_ms\": 2, \"bwd_ms\": 4, \"act_mib\": 1200, \"state_mib\": 4000, \"out_mib\": 16}}\n"
    " ],\n"
    " \"data\": {\"encoder_cost_scale\": {\"dist\": \"uniform\", \"min\": 0.5, \"max\": 2.0, \"seed\": 1}}}\n";


/* The spec parsed, and P V M from argv (defaults 64 4 1024); NULL (message printed) on failure. */
static struct bm_spec *bench_spec_load(int argc, char **argv, int *P, int *V, int *M)
{
    *P = argc > 3 ? atoi(argv[1]) : 64, *V = argc > 3 ? atoi(argv[2]) : 4, *M = argc > 3 ? atoi(argv[3]) : 1024;
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_parse(SPEC, "bench.json", &s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    return s;
}

#endif
