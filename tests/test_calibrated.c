/* test_calibrated.c — src/spec/calibrated.c on its own: the calibrated spec keeps every key
 * where it was and replaces exactly the traced modules' costs and the calibration keys; the
 * cost fragment lists every module; a too-deep or missing spec fails with a message. */
#include "test.h"

#include "bigmac.h"
#include "calib/calib.h"
#include "util/util.h"

static const char *tmp(const char *name)
{
    static char buf[4][512];
    static int k;
    const char *dir = getenv("TEST_TMP");
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/calibrated_%s", dir && *dir ? dir : "/tmp", name);
    return b;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

static char *get(const char *path)
{
    struct bm_err err;
    size_t len;
    return bm_read_file_max(path, 1 << 20, &len, &err);
}

/* param_mib at its default (state_mib / 4, as a loaded spec or table has it): not written */
static const struct bm_cost COSTS[2] = {{.fwd_ms = 1.5, .bwd_ms = 3, .act_mib = 2, .state_mib = 4, .out_mib = 0.5,
                                         .param_mib = 1},
                                        {.fwd_ms = 7, .bwd_ms = 14, .act_mib = 8, .state_mib = 16, .out_mib = 1,
                                         .w_ms = 5, .param_mib = 4}};
static const char *const NAMES[2] = {"enc", "bb"};

TEST(calibrated_spec_replaces_only_calibration_keys)
{
    const char *in = tmp("in.json"), *out = tmp("out.json");
    put(in, "{\"format\": \"bigmac-spec\", \"name\": \"x\",\n"
            " \"device\": {\"memory_gib\": 8},\n"
            " \"modules\": [{\"name\": \"enc\", \"cost\": {\"fwd_ms\": 9}, \"role\": \"encoder\"},\n"
            "             {\"name\": \"other\", \"cost\": {\"fwd_ms\": 9}}],\n"
            " \"data\": {\"seed\": 3, \"encoder_cost_scale\": {\"dist\": \"uniform\"}}}\n");
    double mb[3] = {0.5, 1, 2}, rs[2] = {1.25, 0.75};
    struct bm_spec_calibration c = {.n_modules = 2, .names = NAMES, .costs = COSTS, .rank_scale = rs, .pp = 2,
                                    .mb_scale = mb, .microbatches = 3, .op_overhead_us = 12.5,
                                    .op_overhead_sd_us = 30, .recv_overhead_us = 0.5, .step_lead_us = 60};
    struct bm_err err;
    CHECKF(bm_spec_write_calibrated(in, &c, out, &err) == BM_OK, "%s", err.msg);
    char *s = get(out);
    CHECK_STR_CONTAINS(s, "\"name\": \"enc\",\n      \"cost\": {\n        \"fwd_ms\": 1.5,\n        \"bwd_ms\": 3.0,");
    CHECK_STR_CONTAINS(s, "\"out_mib\": 0.5\n      },\n      \"role\": \"encoder\""); /* in place, w_ms 0 not written */
    CHECK_STR_CONTAINS(s, "\"name\": \"other\",\n      \"cost\": {\n        \"fwd_ms\": 9\n"); /* not traced */
    /* no spread measured: no dispatch sd either (both feed the expected makespan) */
    CHECK_STR_CONTAINS(s, "\"device\": {\n    \"memory_gib\": 8,\n    \"op_overhead_us\": 12.5,\n"
                          "    \"recv_overhead_us\": 0.5,\n    \"step_lead_us\": 60.0,\n"
                          "    \"rank_time_scale\": [\n      1.25,\n      0.75\n    ]\n  }");
    CHECK_STR_CONTAINS(s, "\"data\": {\n    \"seed\": 3,\n    \"encoder_cost_scale\": {\n      \"values\": [\n"
                          "        0.5,\n        1.0,\n        2.0\n      ]");
    CHECK(s && !strstr(s, "uniform"));
    bm_free(s);
    /* no measured microbatch scales: the spec's encoder_cost_scale goes (it described other costs) */
    c.mb_scale = NULL, c.rank_scale = NULL;
    CHECKF(bm_spec_write_calibrated(in, &c, out, &err) == BM_OK, "%s", err.msg);
    s = get(out);
    CHECK(s && !strstr(s, "encoder_cost_scale") && !strstr(s, "rank_time_scale"));
    bm_free(s);
    /* with the spreads: the dispatch sd too; without them again: an earlier one is removed */
    double spread[2] = {0.1, 0};
    c.spread = spread;
    CHECKF(bm_spec_write_calibrated(in, &c, out, &err) == BM_OK, "%s", err.msg);
    s = get(out);
    CHECK_STR_CONTAINS(s, "\"op_overhead_us\": 12.5,\n    \"op_overhead_sd_us\": 30.0,\n");
    bm_free(s);
    put(in, "{\"format\": \"bigmac-spec\", \"device\": {\"op_overhead_sd_us\": 7}, \"modules\": []}\n");
    c.spread = NULL;
    CHECKF(bm_spec_write_calibrated(in, &c, out, &err) == BM_OK, "%s", err.msg);
    s = get(out);
    CHECK(s && !strstr(s, "op_overhead_sd_us") && strstr(s, "\"step_lead_us\": 60.0"));
    bm_free(s);
}

TEST(cost_fragment_lists_every_module)
{
    const char *out = tmp("costs.json");
    double spread[2] = {0.1, 0};
    struct bm_spec_calibration c = {.n_modules = 2, .names = NAMES, .costs = COSTS, .spread = spread,
                                    .op_overhead_us = 3};
    const char *traces[2] = {"a.json", "b.json"};
    struct bm_err err;
    CHECKF(bm_spec_write_costs(&c, traces, 2, out, &err) == BM_OK, "%s", err.msg);
    char *s = get(out);
    CHECK_STR_CONTAINS(s, "\"format\": \"bigmac-costs\",\n  \"version\": 1,\n  \"trace\": \"a.json\",");
    CHECK_STR_CONTAINS(s, "\"traces\": [\n    \"a.json\",\n    \"b.json\"\n  ]");
    CHECK_STR_CONTAINS(s, "\"spread\": 0.1\n"); /* enc: spread, no w_ms */
    CHECK_STR_CONTAINS(s, "\"out_mib\": 1.0,\n        \"w_ms\": 5.0\n"); /* bb: w_ms < bwd_ms, no spread */
    CHECK(s && !strstr(s, "rank_time_scale") && !strstr(s, "encoder_cost_scale"));
    CHECK_STR_CONTAINS(s, "\"op_overhead_us\": 3.0,\n  \"op_overhead_sd_us\": 0.0,\n  \"recv_overhead_us\": 0.0,\n"
                          "  \"step_lead_us\": 0.0");
    bm_free(s);
}

TEST(bad_spec_fails_with_a_message)
{
    const char *in = tmp("deep.json"), *out = tmp("never.json");
    char deep[400];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof deep, "{\"modules\": ");
    for (int i = 0; i < 100; i++) deep[n++] = '[';
    for (int i = 0; i < 100; i++) deep[n++] = ']';
    deep[n++] = '}', deep[n] = 0;
    put(in, deep);
    struct bm_spec_calibration c = {.n_modules = 2, .names = NAMES, .costs = COSTS};
    struct bm_err err;
    CHECK(bm_spec_write_calibrated(in, &c, out, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "deep.json:1:76: JSON nested deeper than 64 levels");
    CHECK(bm_spec_write_calibrated(tmp("missing.json"), &c, out, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "missing.json: cannot open");
}

int main(void)
{
    RUN(calibrated_spec_replaces_only_calibration_keys);
    RUN(cost_fragment_lists_every_module);
    RUN(bad_spec_fails_with_a_message);
    return test_summary();
}
