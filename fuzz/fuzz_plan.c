/* fuzz_plan.c — libFuzzer target: the planner on a fixed, valid model whose shape and
 * parallel settings come from the input bytes.
 *
 * Byte layout (missing bytes read as 0):
 *   0  model variant: bit 0 generator present, bit 1 grad_to_backbone, bit 2 backbone
 *      "layers", bit 3 a second encoder chained behind the first (vit -> proj), bit 4 a
 *      uniform encoder cost scale, bit 5 raw options (skip the consistency fixes below),
 *      bit 6 a second generator on the hidden states (with bit 0: two gradient tensors into
 *      the backbone), bit 7 a second, parallel encoder (audio) feeding the backbone
 *   1  pp-1 (mod 8)        2  vpp-1 (mod 4)      3  microbatches-1 (mod 32)
 *   4  unit (mod 9, 0 = default)                 5  window (mod 7: 0 auto, 6 fit, else W)
 *   6  backbone (mod 5: gpipe, 1f1b, interleaved, zb-h1, zb-interleaved)
 *   7  policy (mod 6)      8  backbone layers (mod 64)
 *   9..18 module costs (fwd, bwd per module): (byte + 1) / 4 milliseconds
 *   19 device.rank_time_scale: bit 0 present, bit 1 one entry too many (must be refused)
 *   20.. the per-rank scales: 0.25 + byte / 64
 *
 * bm_plan_build must return BM_OK or a clean BM_ERR (NULL table, a message). A BM_OK table
 * that fails bm_verify or bm_simulate is a planner bug: abort(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmac.h"
#include "bigmac_cost.h"
#include "util/util.h"

static unsigned byte_at(const uint8_t *d, size_t n, size_t i) { return i < n ? d[i] : 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned v = byte_at(data, size, 0);
    int gen = v & 1, g2b = (v >> 1) & 1, layers = (v >> 2) & 1, chain = (v >> 3) & 1;
    int scale = (v >> 4) & 1, raw = (v >> 5) & 1, gen2 = (v >> 6) & 1, enc2 = (v >> 7) & 1;
    double c[10];
    for (int i = 0; i < 10; i++) c[i] = (byte_at(data, size, 9 + (size_t)i) + 1) / 4.0;
    int nl = 1 + (int)(byte_at(data, size, 8) % 64);

    char spec[4096], lay[32] = "";
    size_t len = 0;
    if (layers) snprintf(lay, sizeof lay, " \"layers\": %d,", nl);
    len += (size_t)snprintf(spec + len, sizeof spec - len,
                            "{\"format\": \"bigmac-spec\", \"version\": 1, \"name\": \"fuzz\",\n"
                            " \"inputs\": [\"image\", \"audio\", \"text\"],\n \"modules\": [\n"
                            "  {\"name\": \"vit\", \"role\": \"encoder\", \"consumes\": [\"image\"], "
                            "\"produces\": [\"%s\"], \"cost\": {\"fwd_ms\": %g, \"bwd_ms\": %g, "
                            "\"act_mib\": 3, \"state_mib\": 1, \"out_mib\": 2}},\n",
                            chain ? "vis" : "vis_emb", c[0], c[1]);
    if (enc2)
        len += (size_t)snprintf(spec + len, sizeof spec - len,
                                "  {\"name\": \"whisper\", \"role\": \"encoder\", \"consumes\": [\"audio\"], "
                                "\"produces\": [\"aud\"], \"cost\": {\"fwd_ms\": %g, \"bwd_ms\": %g, "
                                "\"act_mib\": 2, \"out_mib\": 1}},\n",
                                c[8], c[9]);
    if (chain)
        len += (size_t)snprintf(spec + len, sizeof spec - len,
                                "  {\"name\": \"proj\", \"consumes\": [\"vis\"], \"produces\": "
                                "[\"vis_emb\"], \"cost\": {\"fwd_ms\": %g, \"bwd_ms\": %g, "
                                "\"out_mib\": 1}},\n",
                                c[2], c[3]);
    len += (size_t)snprintf(spec + len, sizeof spec - len,
                            "  {\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"text\", "
                            "\"vis_emb\"%s], \"produces\": [\"hidden\"],%s \"cost\": {\"fwd_ms\": "
                            "%g, \"bwd_ms\": %g, \"act_mib\": 10, \"state_mib\": 5, \"out_mib\": 1}}%s\n",
                            enc2 ? ", \"aud\"" : "", lay,
                            c[4], c[5], gen ? "," : "");
    if (gen)
        len += (size_t)snprintf(spec + len, sizeof spec - len,
                                "  {\"name\": \"dit\", \"role\": \"generator\", \"consumes\": "
                                "[\"hidden\"], \"produces\": [\"loss\"], \"grad_to_backbone\": %s, "
                                "\"cost\": {\"fwd_ms\": %g, \"bwd_ms\": %g, \"act_mib\": 4}}%s\n",
                                g2b ? "true" : "false", c[6], c[7], gen2 ? "," : "");
    if (gen && gen2)
        len += (size_t)snprintf(spec + len, sizeof spec - len,
                                "  {\"name\": \"dit2\", \"role\": \"generator\", \"consumes\": "
                                "[\"hidden\"], \"produces\": [\"loss2\"], \"cost\": {\"fwd_ms\": %g, "
                                "\"bwd_ms\": %g, \"act_mib\": 2}}\n",
                                c[7], c[6]);
    len += (size_t)snprintf(spec + len, sizeof spec - len, " ]%s}\n",
                            scale ? ", \"data\": {\"encoder_cost_scale\": {\"dist\": \"uniform\", "
                                    "\"min\": 0.5, \"max\": 2.0, \"seed\": 3}}"
                                  : "");
    struct bm_spec *s;
    struct bm_err err;
    if (bm_spec_parse(spec, "fuzz-plan.json", &s, &err) != BM_OK) {
        fprintf(stderr, "fixed spec does not parse: %s\n%s", err.msg, spec);
        abort();
    }

    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    o.pp = 1 + (int)(byte_at(data, size, 1) % 8);
    o.vpp = 1 + (int)(byte_at(data, size, 2) % 4);
    o.microbatches = 1 + (int)(byte_at(data, size, 3) % 32);
    o.unit = (int)(byte_at(data, size, 4) % 9);
    o.window = (int)(byte_at(data, size, 5) % 7);
    if (o.window == 6) o.window = BM_WINDOW_FIT;
    o.backbone = (enum bm_backbone)(byte_at(data, size, 6) % 5);
    o.policy = (enum bm_policy)(byte_at(data, size, 7) % BM_N_POLICIES);
    if (!raw) {
        int interleaved = o.backbone == BM_BB_INTERLEAVED || o.backbone == BM_BB_ZB_INTERLEAVED;
        if (!interleaved) o.vpp = 1;
        else o.microbatches = ((o.microbatches + o.pp - 1) / o.pp) * o.pp;
        if (o.backbone == BM_BB_ZB_INTERLEAVED && o.vpp < 2) o.vpp = 2;
    }
    unsigned rs = byte_at(data, size, 19); /* device.rank_time_scale: bit 0 on, bit 1 one too many */
    if (rs & 1) {
        int n = o.pp + ((rs >> 1) & 1);
        s->rank_time_scale = bm_malloc((size_t)n * sizeof(double));
        if (!s->rank_time_scale) abort();
        s->n_rank_time_scale = n;
        for (int r = 0; r < n; r++) s->rank_time_scale[r] = 0.25 + byte_at(data, size, 20 + (size_t)r) / 64.0;
    }

    struct bm_table *t = (struct bm_table *)1;
    struct bm_costs *t_c = NULL;
    err.msg[0] = 0;
    /* a small placement-search budget: every input exercises the search, none takes seconds
     * (the default budget, 5000 timings per descent and window, took 15 s under the sanitizers on
     * a P = 8, V = 4 input) */
    int rc = bm_plan_build_search(s, &o, 64, &t, &t_c, NULL, &err);
    if (rc != BM_OK) {
        if (rc != BM_ERR || t != NULL || !err.msg[0]) abort();
        bm_spec_free(s);
        return 0;
    }
    if (bm_verify(t, &err) != BM_OK) {
        fprintf(stderr, "planned table fails verification (P=%d V=%d M=%d U=%d W=%d %s %s):\n%s\n",
                o.pp, o.vpp, o.microbatches, o.unit, o.window, bm_backbone_name(o.backbone),
                bm_policy_name(o.policy), err.msg);
        abort();
    }
    struct bm_timeline *tl;
    if (bm_simulate(t, t_c, NULL, &tl, &err) != BM_OK) {
        fprintf(stderr, "planned, verified table does not simulate: %s\n", err.msg);
        abort();
    }
    bm_timeline_free(tl);
    bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
    bm_spec_free(s);
    return 0;
}
