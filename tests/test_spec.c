/* test_spec.c — spec loading: examples, defaults, role derivation, cost derivation, every
 * diagnostic with its exact file:line:col, encoder-scale determinism, allocation failures. */
#include <stdint.h>
#include <unistd.h>

#include "test.h"
#include "util/util.h"

/* A valid spec laid out so positions are easy to reason about ("microbatches" at 5:17). */
static const char *BASE =
    "{\n"
    "  \"format\": \"bigmac-spec\", \"version\": 1,\n"
    "  \"name\": \"t\",\n"
    "  \"parallel\": {\"pp\": 4, \"vpp\": 1,\n"
    "                \"microbatches\": 8, \"unit\": 4},\n"
    "  \"schedule\": {\"backbone\": \"1f1b\", \"policy\": \"bigmac\", \"window\": \"auto\"},\n"
    "  \"device\": {\"memory_gib\": 80, \"peak_tflops\": 989, \"efficiency\": 0.4,\n"
    "             \"link_gbytes_per_s\": 25, \"link_latency_us\": 10},\n"
    "  \"inputs\": [\"image\", \"text\"],\n"
    "  \"modules\": [\n"
    "    {\"name\": \"vit\", \"role\": \"encoder\", \"consumes\": [\"image\"], \"produces\": [\"vis_emb\"],\n"
    "     \"cost\": {\"fwd_ms\": 4, \"bwd_ms\": 8, \"act_mib\": 300, \"state_mib\": 2600, \"out_mib\": 16}},\n"
    "    {\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"text\", \"vis_emb\"], \"produces\": [\"hidden\"],\n"
    "     \"layers\": 48, \"impl\": \"gpt\", \"arch\": {\"hidden\": 64, \"heads\": 4},\n"
    "     \"cost\": {\"fwd_ms\": 40, \"bwd_ms\": 80, \"act_mib\": 6000, \"state_mib\": 60000, \"out_mib\": 16}},\n"
    "    {\"name\": \"dit\", \"role\": \"generator\", \"consumes\": [\"hidden\"], \"produces\": [\"loss\"],\n"
    "     \"grad_to_backbone\": true, \"cost\": {\"fwd_ms\": 10, \"bwd_ms\": 20}}\n"
    "  ],\n"
    "  \"data\": {\"seed\": 3, \"encoder_cost_scale\": {\"dist\": \"uniform\", \"min\": 0.5, \"max\": 2.0, \"seed\": 1}},\n"
    "  \"train\": {\"steps\": 20, \"lr\": 0.001}\n"
    "}\n";

/* A minimal valid spec, for cases where BASE's layout gets in the way. */
static const char *MIN =
    "{\"format\": \"bigmac-spec\", \"version\": 1,\n"
    " \"device\": {}, \"inputs\": [], \"modules\": [{\"name\": \"llm\"}]}";

static char bufs_[4][1 << 16];
static int buf_i_;

/* BASE (or 'base') with the first occurrence of 'from' replaced by 'to' (in one of four
 * rotating buffers, so calls nest). */
static const char *with2(const char *base, const char *from, const char *to)
{
    char *buf_ = bufs_[buf_i_++ % 4];
    const char *p = strstr(base, from);
    if (!p) {
        fprintf(stderr, "  test bug: \"%s\" not in base\n", from);
        abort();
    }
    snprintf(buf_, sizeof bufs_[0], "%.*s%s%s", (int)(p - base), base, to, p + strlen(from));
    return buf_;
}
static const char *with(const char *from, const char *to) { return with2(BASE, from, to); }

/* Reference position of the nth (0-based) occurrence of 'needle' in text, counted
 * independently of jpos: lines at '\n', columns in code points. */
static void ref_pos(const char *text, const char *needle, int nth, int *line, int *col)
{
    const char *p = text;
    for (int i = 0; i <= nth; i++) {
        p = strstr(i ? p + 1 : p, needle);
        if (!p) {
            fprintf(stderr, "  test bug: occurrence %d of \"%s\" not found\n", nth, needle);
            abort();
        }
    }
    *line = 1;
    *col = 1;
    for (const char *q = text; q < p; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)q[1] & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

/* Parse 'text' (named spec.json), expect failure at the nth occurrence of 'needle' (or at
 * line:col when needle is NULL), and a message containing 'sub'. Returns the message. */
static char last_msg[4096];
static int expect_err_at(const char *text, const char *needle, int nth, int l, int c,
                         const char *sub, int srcline)
{
    struct bm_spec *s = (struct bm_spec *)(intptr_t)1;
    struct bm_err err;
    err.msg[0] = 0;
    int rc = bm_spec_parse(text, "spec.json", &s, &err);
    snprintf(last_msg, sizeof last_msg, "%s", err.msg);
    if (rc != BM_ERR || s != NULL) {
        fprintf(stderr, "  line %d: parse did not fail (rc %d)\n", srcline, rc);
        if (rc == BM_OK) bm_spec_free(s);
        return 1;
    }
    if (needle) ref_pos(text, needle, nth, &l, &c);
    char want[64];
    snprintf(want, sizeof want, "spec.json:%d:%d: ", l, c);
    int bad = 0;
    if (strncmp(err.msg, want, strlen(want))) {
        fprintf(stderr, "  line %d: wanted position %s got: %s\n", srcline, want, err.msg);
        bad = 1;
    }
    if (sub && !strstr(err.msg, sub)) {
        fprintf(stderr, "  line %d: message lacks \"%s\": %s\n", srcline, sub, err.msg);
        bad = 1;
    }
    return bad;
}

#define ERR_AT(text, needle, sub) CHECK(!expect_err_at((text), (needle), 0, 0, 0, (sub), __LINE__))
#define ERR_AT_N(text, needle, nth, sub) \
    CHECK(!expect_err_at((text), (needle), (nth), 0, 0, (sub), __LINE__))
#define ERR_AT_LC(text, l, c, sub) CHECK(!expect_err_at((text), NULL, 0, (l), (c), (sub), __LINE__))

static struct bm_spec *parse_ok(const char *text)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    if (bm_spec_parse(text, "spec.json", &s, &err) != BM_OK) {
        fprintf(stderr, "  unexpected error: %s\n", err.msg);
        return NULL;
    }
    return s;
}

/* ---------------------------------------------------------------- valid specs */

TEST(tiny_mllm_example_loads)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    int rc = bm_spec_load("examples/tiny-mllm.json", &s, &err);
    CHECKF(rc == BM_OK, "%s", err.msg);
    if (rc != BM_OK) return;
    CHECK(!strcmp(s->path, "examples/tiny-mllm.json"));
    CHECK(!strcmp(s->name, "tiny-mllm"));
    CHECK(s->doc && strstr(s->doc, "ViT"));
    CHECK(s->pp == 4 && s->vpp == 2 && s->microbatches == 8 && s->unit == 0 /* follows pp */);
    CHECK(s->backbone == BM_BB_INTERLEAVED && s->policy == BM_POL_BIGMAC && s->window == 0);
    CHECK(s->n_inputs == 3 && !strcmp(s->inputs[2], "target"));
    CHECK(s->n_modules == 3);
    CHECK(s->modules[0].role == BM_ROLE_ENCODER && s->modules[0].role_given);
    CHECK(s->modules[1].role == BM_ROLE_BACKBONE && s->backbone_module == 1);
    CHECK(s->modules[2].role == BM_ROLE_GENERATOR && s->modules[2].grad_to_backbone == 1);
    CHECK(s->modules[1].layers == 8 && s->modules[1].cost_given);
    CHECK_NEAR(s->modules[1].cost.fwd_ms, 8, 0);
    CHECK_NEAR(s->modules[2].cost.out_mib, 0.1, 1e-12);
    CHECK_NEAR(s->device.memory_gib, 1, 0);
    CHECK_NEAR(s->device.peak_tflops, 0.05, 1e-12);
    CHECK(s->data.encoder_cost_scale.dist == BM_DIST_UNIFORM);
    CHECK(s->modules[2].n_consumes == 2 && !strcmp(s->modules[2].consumes[1], "target"));
    CHECK(bm_spec_find_module(s, "dit") == 2 && bm_spec_find_module(s, "nope") == -1);
    bm_spec_free(s);
}

TEST(design_example_loads)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    int rc = bm_spec_load("tests/specs/design-example.json", &s, &err);
    CHECKF(rc == BM_OK, "%s", err.msg);
    if (rc != BM_OK) return;
    CHECK(s->pp == 4 && s->vpp == 1 && s->microbatches == 16 && s->unit == 4 && s->window == 3);
    CHECK(s->backbone == BM_BB_1F1B && s->policy == BM_POL_BIGMAC);
    CHECK(s->backbone_module == 1 && s->modules[1].layers == 48);
    CHECK_NEAR(s->modules[1].cost.state_mib, 60000, 0);
    CHECK_NEAR(s->modules[0].cost.act_mib, 300, 0);
    CHECK(s->modules[2].role == BM_ROLE_GENERATOR);
    bm_spec_free(s);
}

TEST(base_spec_loads)
{
    struct bm_spec *s = parse_ok(BASE);
    CHECK(s != NULL);
    if (!s) return;
    CHECK(!strcmp(s->path, "spec.json") && !strcmp(s->name, "t"));
    CHECK(s->data.seed == 3 && s->train.steps == 20);
    CHECK(s->modules[1].impl && !strcmp(s->modules[1].impl, "gpt"));
    CHECK(s->modules[1].has_arch && s->modules[1].arch.hidden == 64 && s->modules[1].arch.heads == 4);
    CHECK_NEAR(s->modules[1].cost.fwd_ms, 40, 0); /* explicit cost wins over arch */
    CHECK_NEAR(s->modules[2].cost.act_mib, 0, 0); /* missing fields of a given cost */
    bm_spec_free(s);
}

TEST(defaults)
{
    struct bm_spec *s = parse_ok("{\"format\": \"bigmac-spec\", \"version\": 1, "
                                 "\"modules\": [{\"name\": \"llm\"}]}");
    CHECK(s != NULL);
    if (!s) return;
    CHECK(!strcmp(s->name, "spec"));  /* from the file name */
    CHECK(s->doc == NULL);
    CHECK_NEAR(s->device.memory_gib, 80, 0);
    CHECK_NEAR(s->device.peak_tflops, 989, 0);
    CHECK_NEAR(s->device.efficiency, 0.4, 0);
    CHECK_NEAR(s->device.link_gbytes_per_s, 25, 0);
    CHECK_NEAR(s->device.link_latency_us, 10, 0);
    CHECK(s->pp == 1 && s->vpp == 1 && s->microbatches == 1 && s->unit == 0);
    CHECK(s->backbone == BM_BB_1F1B && s->policy == BM_POL_BIGMAC && s->window == 0);
    CHECK(s->n_inputs == 0 && s->n_modules == 1 && s->backbone_module == 0);
    const struct bm_module *m = &s->modules[0];
    CHECK(m->role == BM_ROLE_BACKBONE && !m->role_given && !m->cost_given && !m->has_arch);
    CHECK(m->layers == 0 && m->impl == NULL && m->grad_to_backbone == 1);
    CHECK_NEAR(m->cost.fwd_ms, 1, 0);
    CHECK_NEAR(m->cost.bwd_ms, 2, 0);
    CHECK_NEAR(m->cost.act_mib + m->cost.state_mib + m->cost.out_mib, 0, 0);
    CHECK(s->data.encoder_cost_scale.dist == BM_DIST_NONE && s->data.encoder_cost_scale.seed == 1);
    CHECK(s->data.seed == 1 && s->data.samples_per_microbatch == 1 && s->data.max_images == 1);
    CHECK(s->train.steps == 20 && s->train.seed == 1);
    CHECK_NEAR(s->train.lr, 1e-3, 0);
    CHECK_NEAR(s->train.weight_decay, 0, 0);
    CHECK_NEAR(s->train.beta1, 0.9, 0);
    CHECK_NEAR(s->train.beta2, 0.999, 0);
    CHECK_NEAR(s->train.eps, 1e-8, 0);
    bm_spec_free(s);

    /* microbatches default to pp; "auto" unit and window mean 0 */
    s = parse_ok("{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": 6, \"unit\": "
                 "\"auto\"}, \"modules\": [{\"name\": \"llm\"}]}");
    CHECK(s && s->pp == 6 && s->microbatches == 6 && s->unit == 0);
    bm_spec_free(s);
    /* integral reals are integers */
    s = parse_ok("{\"format\": \"bigmac-spec\", \"version\": 1, \"parallel\": {\"pp\": 2.0}, "
                 "\"modules\": [{\"name\": \"llm\"}]}");
    CHECK(s && s->pp == 2);
    bm_spec_free(s);
}

TEST(role_derivation_without_roles)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    int rc = bm_spec_load("tests/specs/derive-roles.json", &s, &err);
    CHECKF(rc == BM_OK, "%s", err.msg);
    if (rc != BM_OK) return;
    /* vit is costlier than llm but not connected to "audio", so it cannot be the backbone */
    CHECK(s->backbone_module == bm_spec_find_module(s, "llm"));
    CHECK(s->modules[bm_spec_find_module(s, "vit")].role == BM_ROLE_ENCODER);
    CHECK(s->modules[bm_spec_find_module(s, "audio")].role == BM_ROLE_ENCODER);
    CHECK(s->modules[bm_spec_find_module(s, "proj")].role == BM_ROLE_ENCODER);
    CHECK(s->modules[bm_spec_find_module(s, "dit")].role == BM_ROLE_GENERATOR);
    CHECK(s->modules[bm_spec_find_module(s, "vae")].role == BM_ROLE_GENERATOR);
    CHECK(s->modules[bm_spec_find_module(s, "dit")].grad_to_backbone == 0);
    CHECK(s->modules[bm_spec_find_module(s, "vae")].grad_to_backbone == 1);
    for (int i = 0; i < s->n_modules; i++) CHECK(!s->modules[i].role_given);
    bm_spec_free(s);

    /* a chain a -> b -> c: every module is connected to all others; the costliest wins */
    const char *chain =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"inputs\": [\"x\"], \"modules\": ["
        "{\"name\": \"a\", \"consumes\": [\"x\"], \"produces\": [\"y\"], \"cost\": {\"fwd_ms\": 1}},"
        "{\"name\": \"b\", \"consumes\": [\"y\"], \"produces\": [\"z\"], \"cost\": {\"fwd_ms\": 9}},"
        "{\"name\": \"c\", \"consumes\": [\"z\"], \"produces\": [\"w\"], \"cost\": {\"fwd_ms\": 2}}]}";
    s = parse_ok(chain);
    CHECK(s && s->backbone_module == 1);
    if (s) CHECK(s->modules[0].role == BM_ROLE_ENCODER && s->modules[2].role == BM_ROLE_GENERATOR);
    bm_spec_free(s);
    /* ... and a module marked encoder/generator is no candidate even when it is costliest */
    s = parse_ok(with2(chain, "\"cost\": {\"fwd_ms\": 1}", "\"role\": \"encoder\", \"layers\": 2,"
                       " \"arch\": {\"params\": 1}, \"doc\": \"x\", \"cost\": {\"bwd_ms\": 99}"));
    CHECK(s && s->backbone_module == 1);
    bm_spec_free(s);
}

TEST(cost_derived_from_arch)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    int rc = bm_spec_load("tests/specs/arch-cost.json", &s, &err);
    CHECKF(rc == BM_OK, "%s", err.msg);
    if (rc != BM_OK) return;
    const struct bm_module *m = &s->modules[0];
    /* flops = 100e12 * 0.5; fwd = 2 * 1e9 * 4096 / flops s */
    CHECK_NEAR(m->cost.fwd_ms, 163.84, 1e-9);
    CHECK_NEAR(m->cost.bwd_ms, 327.68, 1e-9);
    CHECK_NEAR(m->cost.state_mib, 16e9 / 1048576.0, 1e-6);
    CHECK_NEAR(m->cost.out_mib, 16, 1e-12);       /* 4096 * 2048 * 2 bytes */
    CHECK_NEAR(m->cost.act_mib, 6528, 1e-9);      /* 24 * 4096 * 2048 * 34 bytes */
    CHECK(m->layers == 24 && !m->cost_given && m->has_arch);
    CHECK(m->arch.vocab == 32000 && m->arch.seq == 1024);
    /* split backward (Qi et al. Table 1, s = seq 1024, h 2048, a 16): W = 3h/(6h+s) of the
     * backward, 32h/(34h+5as) of the activation kept from B to W */
    CHECK_NEAR(m->cost.w_ms, 327.68 * 3 * 2048 / (6 * 2048 + 1024.0), 1e-9);
    CHECK_NEAR(m->cost.act_w_mib, 6528 * 32 * 2048 / (34 * 2048 + 5 * 16 * 1024.0), 1e-9);
    bm_spec_free(s);
}

TEST(split_backward_costs)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    /* explicit, and the fixed defaults (no arch: 0 = bm_cost_w_ms's half) */
    const char *t = with("\"cost\": {\"fwd_ms\": 4, \"bwd_ms\": 8, \"act_mib\": 300,",
                         "\"cost\": {\"fwd_ms\": 4, \"bwd_ms\": 8, \"w_ms\": 3, \"act_w_mib\": 100, \"act_mib\": 300,");
    CHECK(bm_spec_parse(t, "spec.json", &s, &err) == BM_OK);
    if (s) {
        CHECK(s->modules[0].cost.w_ms == 3 && s->modules[0].cost.act_w_mib == 100);
        CHECK(s->modules[2].cost.w_ms == 0 && s->modules[2].cost.act_w_mib == 0);
        /* BASE's backbone: arch hidden 64, heads 4 but no seq/tokens/image: no s, fixed defaults */
        CHECK(s->modules[1].cost.w_ms == 0);
        bm_spec_free(s);
    }
    ERR_AT(with("\"bwd_ms\": 8,", "\"bwd_ms\": 8, \"w_ms\": 8,"), "\"w_ms\"",
           "\"w_ms\" (8) must be less than \"bwd_ms\" (8)");
    ERR_AT(with("\"bwd_ms\": 8,", "\"bwd_ms\": 8, \"w_ms\": 0,"), "\"w_ms\"", "w_ms must be > 0, got 0");
    ERR_AT(with("\"act_mib\": 300,", "\"act_mib\": 300, \"act_w_mib\": 301,"), "\"act_w_mib\"",
           "\"act_w_mib\" (301) must be at most \"act_mib\" (300)");
    /* the zero-bubble schedules' own constraints */
    ERR_AT(with("\"backbone\": \"1f1b\"", "\"backbone\": \"zb-interleaved\""), "\"vpp\"",
           "schedule.backbone \"zb-interleaved\" needs parallel.vpp >= 2");
    ERR_AT(with2(with2(with("\"backbone\": \"1f1b\"", "\"backbone\": \"zb-interleaved\""), "\"vpp\": 1", "\"vpp\": 2"),
                 "\"microbatches\": 8", "\"microbatches\": 6"),
           "\"microbatches\"", "for the \"zb-interleaved\" backbone schedule\nhint: use 4 or 8 microbatches, or the \"zb-h1\"");
    ERR_AT(with2(with("\"backbone\": \"1f1b\"", "\"backbone\": \"zb-h1\""), "\"vpp\": 1", "\"vpp\": 2"),
           "\"vpp\"", "virtual stages need the \"interleaved\" schedule");
    CHECK(bm_spec_parse(with("\"backbone\": \"1f1b\"", "\"backbone\": \"zb-h1\""), "spec.json", &s, &err) == BM_OK);
    if (s) CHECK(s->backbone == BM_BB_ZB_H1);
    bm_spec_free(s);
}

/* ---------------------------------------------------------------- diagnostics */

TEST(err_json_syntax)
{
    ERR_AT_LC(with("\"pp\": 4,", "\"pp\": 4,,"), 4, 24, "invalid JSON");
    ERR_AT_LC("", 1, 1, "invalid JSON");
    ERR_AT_LC(with("\"name\": \"t\"", "\"name\": \"t\", \"name\": \"u\""), 3, 21, "duplicate");
}

TEST(err_format_and_version)
{
    ERR_AT(with("\"bigmac-spec\"", "\"bigmac-spek\""), "\"format\"", "\"format\" must be \"bigmac-spec\"");
    ERR_AT(with("\"format\": \"bigmac-spec\", ", ""), "{", "missing \"format\"");
    ERR_AT(with("\"version\": 1", "\"version\": 2"), "\"version\"", "unsupported spec version 2");
    ERR_AT(with("\"version\": 1", "\"version\": \"1\""), "\"version\"", "version");
    ERR_AT(with(", \"version\": 1", ""), "{", "missing \"version\"");
    ERR_AT(with("\"format\"", "\"formt\""), "\"formt\"", "unknown key \"formt\" in the spec\nhint: did you mean \"format\"?");
    ERR_AT(with("\"format\": \"bigmac-spec\"", "\"format\": \"bigmac-table\", \"ranks\": []"), "\"format\"",
           "hint: this is an operator table");
    ERR_AT_LC("[1, 2]", 1, 1, "must be a JSON object");
}

TEST(err_unknown_keys)
{
    struct bm_err err;
    struct bm_spec *s;
    /* the exact message of the brief */
    CHECK(bm_spec_parse(with("\"microbatches\"", "\"microbatchs\""), "spec.json", &s, &err) == BM_ERR);
    CHECK(!strcmp(err.msg, "spec.json:5:17: unknown key \"microbatchs\" in \"parallel\"\n"
                           "hint: did you mean \"microbatches\"?"));
    ERR_AT(with("\"name\": \"t\"", "\"nmae\": \"t\""), "\"nmae\"",
           "unknown key \"nmae\" in the spec\nhint: did you mean \"name\"?");
    ERR_AT(with("\"memory_gib\"", "\"memory_gb\""), "\"memory_gb\"", "in \"device\"");
    ERR_AT(with("\"window\"", "\"windw\""), "\"windw\"", "in \"schedule\"\nhint: did you mean \"window\"?");
    ERR_AT(with("\"consumes\": [\"hidden\"]", "\"consume\": [\"hidden\"]"), "\"consume\"",
           "unknown key \"consume\" in module \"dit\"\nhint: did you mean \"consumes\"?");
    ERR_AT(with("\"fwd_ms\": 40", "\"fwd\": 40"), "\"fwd\"", "in \"cost\" of module \"llm\"");
    ERR_AT(with("\"hidden\": 64", "\"hiden\": 64"), "\"hiden\"",
           "in \"arch\" of module \"llm\"\nhint: did you mean \"hidden\"?");
    ERR_AT(with("\"seed\": 3", "\"sed\": 3"), "\"sed\"", "in \"data\"");
    ERR_AT(with("\"max\": 2.0", "\"maximum\": 2.0"), "\"maximum\"", "in \"data.encoder_cost_scale\"");
    ERR_AT(with("\"steps\"", "\"step\""), "\"step\"", "in \"train\"\nhint: did you mean \"steps\"?");
    /* nothing close: the hint lists what is accepted */
    ERR_AT(with("\"steps\"", "\"zzzzzzzzz\""), "\"zzzzzzzzz\"", "hint: \"train\" accepts: \"steps\", \"lr\"");
    /* odd bytes in a key are escaped in the message, and the key is still located */
    ERR_AT(with("\"steps\"", "\"a.b[\\\"c\""), "\"a.b[", "unknown key \"a.b[\\\"c\"");
    ERR_AT(with("\"steps\"", "\"\xc3\xa9tapes\""), "\"\xc3\xa9tapes\"", "unknown key");
}

TEST(err_wrong_types)
{
    ERR_AT(with("\"pp\": 4", "\"pp\": \"four\""), "\"pp\"",
           "parallel.pp must be an integer, got a string (\"four\")");
    ERR_AT(with("\"pp\": 4", "\"pp\": 4.5"), "\"pp\"", "parallel.pp must be an integer, got 4.5");
    ERR_AT(with("\"fwd_ms\": 40", "\"fwd_ms\": \"40\""), "\"fwd_ms\": \"40\"",
           "module \"llm\": cost.fwd_ms must be a number, got a string (\"40\")");
    ERR_AT(with("\"consumes\": [\"image\"]", "\"consumes\": \"image\""), "\"consumes\"",
           "module \"vit\": consumes must be an array of names, got a string");
    ERR_AT(with("\"consumes\": [\"image\"]", "\"consumes\": [\"image\", 7]"), "7]",
           "module \"vit\": consumes[1] must be a string, got 7");
    ERR_AT(with("\"grad_to_backbone\": true", "\"grad_to_backbone\": 1"), "\"grad_to_backbone\"",
           "module \"dit\": grad_to_backbone must be true or false, got 1");
    ERR_AT(with("\"name\": \"vit\"", "\"name\": 5"), "\"name\": 5", "modules[0].name must be a string");
    ERR_AT(with("{\"name\": \"vit\"", "{\"nam\": \"vit\""), "\"nam\"",
           "unknown key \"nam\" in modules[0]\nhint: did you mean \"name\"?");
    ERR_AT(with("{\"name\": \"vit\", ", "{"), "{\"role\": \"encoder\"", "modules[0] has no \"name\"");
    ERR_AT(with2(MIN, "\"device\": {}", "\"device\": []"), "\"device\"", "device must be an object, got an array");
    ERR_AT(with2(MIN, "\"inputs\": []", "\"inputs\": {}"), "\"inputs\"", "inputs must be an array");
    ERR_AT(with("\"role\": \"encoder\"", "\"role\": \"encoderr\""), "\"role\"",
           "module \"vit\": role must be one of \"encoder\", \"backbone\", \"generator\", got \"encoderr\"\n"
           "hint: did you mean \"encoder\"?");
    ERR_AT(with("\"name\": \"t\"", "\"name\": [\"t\"]"), "\"name\"", "name must be a string, got an array");
    ERR_AT(with2(MIN, "\"modules\": [{\"name\": \"llm\"}]", "\"modules\": {\"a\": 1}"), "\"modules\"", "modules must be an array");
    ERR_AT(with("{\"name\": \"vit\"", "7, {\"name\": \"vit\""), "7,", "modules[0] must be an object, got 7");
    ERR_AT(with("\"seed\": 1}", "\"seed\": -1}"), "\"seed\": -1",
           "data.encoder_cost_scale.seed must be an integer >= 0, got -1");
    ERR_AT(with("\"lr\": 0.001", "\"lr\": null"), "\"lr\"", "train.lr must be a number, got null");
}

TEST(err_missing_producer)
{
    ERR_AT(with("\"consumes\": [\"text\", \"vis_emb\"]", "\"consumes\": [\"text\", \"vit.patches\"]"),
           "\"vit.patches\"",
           "module \"llm\" consumes \"vit.patches\", but it is not in \"inputs\" and no module produces it\n"
           "hint: add \"produces\": [\"vit.patches\"] to module \"vit\"");
    ERR_AT(with("\"consumes\": [\"text\", \"vis_emb\"]", "\"consumes\": [\"text\", \"vis_embs\"]"),
           "\"vis_embs\"", "hint: did you mean \"vis_emb\" (produced by module \"vit\")?");
    ERR_AT(with("\"consumes\": [\"image\"]", "\"consumes\": [\"imag\"]"), "\"imag\"",
           "hint: did you mean the input \"image\"?");
    ERR_AT(with("\"consumes\": [\"image\"]", "\"consumes\": [\"pixels\"]"), "\"pixels\"",
           "hint: add \"pixels\" to \"inputs\" if it is data, or to the \"produces\" of the module");
}

TEST(err_producers)
{
    ERR_AT_N(with("\"produces\": [\"loss\"]", "\"produces\": [\"hidden\"]"), "\"hidden\"", 3,
             "tensor \"hidden\" is produced by two modules: \"llm\" and \"dit\"");
    ERR_AT_N(with("\"produces\": [\"vis_emb\"]", "\"produces\": [\"vis_emb\", \"text\"]"), "\"text\"]", 1,
           "module \"vit\" produces \"text\", which is a spec input");
    ERR_AT(with("\"produces\": [\"vis_emb\"]", "\"produces\": [\"vis_emb\", \"vis_emb\"]"), "\"vis_emb\"]",
           "module \"vit\": produces lists \"vis_emb\" twice");
    ERR_AT(with("\"inputs\": [\"image\", \"text\"]", "\"inputs\": [\"image\", \"text\", \"image\"]"),
           "\"image\"]", "inputs lists \"image\" twice");
    ERR_AT(with("\"inputs\": [\"image\", \"text\"]", "\"inputs\": [\"image\", \"\"]"), "\"\"]",
           "inputs[1] must not be empty");
}

TEST(err_duplicate_module_names)
{
    ERR_AT_N(with("\"name\": \"dit\"", "\"name\": \"vit\""), "\"name\"", 3,
             "duplicate module name \"vit\"\nhint: the first \"vit\" is at spec.json:11:6");
}

TEST(err_cycles)
{
    ERR_AT(with("\"consumes\": [\"image\"]", "\"consumes\": [\"image\", \"loss\"]"), "\"loss\"]",
           "cycle in the module graph: vit -> llm -> dit -> vit");
    const char *two =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"inputs\": [\"image\", \"text\"],\n"
        " \"modules\": [\n"
        "  {\"name\": \"vit\", \"consumes\": [\"image\", \"proj_out\"], \"produces\": [\"vit_out\"]},\n"
        "  {\"name\": \"proj\", \"consumes\": [\"vit_out\"], \"produces\": [\"proj_out\"]},\n"
        "  {\"name\": \"llm\", \"role\": \"backbone\", \"consumes\": [\"text\", \"proj_out\"]}]}";
    ERR_AT(two, "\"proj_out\"]", "cycle in the module graph: vit -> proj -> vit");
    ERR_AT(with("\"consumes\": [\"hidden\"]", "\"consumes\": [\"hidden\", \"loss\"]"), "\"loss\"]",
           "cycle in the module graph: dit -> dit");
}

TEST(err_backbone_count)
{
    ERR_AT_N(with("\"role\": \"generator\"", "\"role\": \"backbone\""), "\"role\"", 2,
             "several backbones: modules \"llm\" and \"dit\" are both marked \"role\": \"backbone\"");
    const char *apart =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"inputs\": [\"x\", \"y\"],\n"
        " \"modules\": [{\"name\": \"a\", \"consumes\": [\"x\"]}, {\"name\": \"b\", \"consumes\": [\"y\"]}]}";
    ERR_AT(apart, "\"modules\"", "no backbone: no module is marked \"role\": \"backbone\"");
    const char *tie =
        "{\"format\": \"bigmac-spec\", \"version\": 1, \"inputs\": [\"x\"],\n"
        " \"modules\": [{\"name\": \"a\", \"consumes\": [\"x\"], \"produces\": [\"y\"]},\n"
        "             {\"name\": \"b\", \"consumes\": [\"y\"]}]}";
    ERR_AT(tie, "\"modules\"", "no unique backbone: modules \"a\" and \"b\" both qualify");
    ERR_AT(with2(MIN, "\"modules\": [{\"name\": \"llm\"}]", "\"modules\": []"), "\"modules\"", "\"modules\" is empty");
    ERR_AT_LC("{\"format\": \"bigmac-spec\", \"version\": 1}", 1, 1, "the spec has no \"modules\"");
}

TEST(err_roles)
{
    ERR_AT(with("\"role\": \"encoder\"", "\"role\": \"generator\""), "\"role\"",
           "module \"vit\" is marked \"role\": \"generator\" but the graph makes it an encoder "
           "(its outputs feed the backbone)");
    ERR_AT(with("\"role\": \"generator\"", "\"role\": \"encoder\""), "\"role\": \"encoder\", \"consumes\": [\"hidden",
           "module \"dit\" is marked \"role\": \"encoder\" but the graph makes it a generator");
    const char *t = with("{\"name\": \"dit\"", "{\"name\": \"aux\", \"consumes\": [\"image\"], \"produces\": [\"aux\"]},\n"
                                            "    {\"name\": \"dit\"");
    ERR_AT(t, "\"name\": \"aux\"", "module \"aux\" is neither upstream nor downstream of the backbone \"llm\"");
    ERR_AT(with("\"produces\": [\"vis_emb\"],", "\"produces\": [\"vis_emb\"], \"grad_to_backbone\": false,"),
           "\"grad_to_backbone\"", "\"grad_to_backbone\" is only for generators, but module \"vit\" is an encoder");
}

TEST(err_sizes)
{
    ERR_AT(with("\"pp\": 4", "\"pp\": 0"), "\"pp\"", "parallel.pp must be an integer >= 1, got 0");
    ERR_AT(with("\"vpp\": 1", "\"vpp\": -2"), "\"vpp\"", "parallel.vpp must be an integer >= 1, got -2");
    ERR_AT(with("\"microbatches\": 8", "\"microbatches\": 0"), "\"microbatches\"", ">= 1, got 0");
    ERR_AT(with("\"unit\": 4", "\"unit\": 0"), "\"unit\"", "parallel.unit must be an integer >= 1 or \"auto\", got 0");
    ERR_AT(with("\"window\": \"auto\"", "\"window\": 0"), "\"window\"", "schedule.window must be an integer >= 1 or \"auto\"");
    ERR_AT(with("\"window\": \"auto\"", "\"window\": \"autom\""), "\"window\"", "got a string (\"autom\")");
    ERR_AT(with("\"layers\": 48", "\"layers\": 0"), "\"layers\"", "module \"llm\": layers must be an integer >= 1, got 0");
    ERR_AT(with("\"hidden\": 64", "\"hidden\": 0"), "\"hidden\": 0", "module \"llm\": arch.hidden must be an integer >= 1");
    ERR_AT(with("\"hidden\": 64", "\"params\": -1"), "\"params\"", "arch.params must be > 0, got -1");
    ERR_AT(with("\"fwd_ms\": 40", "\"fwd_ms\": 0"), "\"fwd_ms\": 0", "module \"llm\": cost.fwd_ms must be > 0, got 0");
    ERR_AT(with("\"bwd_ms\": 20", "\"bwd_ms\": -20"), "\"bwd_ms\": -20", "cost.bwd_ms must be > 0");
    ERR_AT(with("\"act_mib\": 300", "\"act_mib\": -1"), "\"act_mib\"", "module \"vit\": cost.act_mib must be >= 0, got -1");
    ERR_AT(with("\"memory_gib\": 80", "\"memory_gib\": 0"), "\"memory_gib\"", "device.memory_gib must be > 0, got 0");
    ERR_AT(with("\"efficiency\": 0.4", "\"efficiency\": 1.5"), "\"efficiency\"", "device.efficiency must be <= 1, got 1.5");
    ERR_AT(with("\"link_gbytes_per_s\": 25", "\"link_gbytes_per_s\": 0"), "\"link_gbytes_per_s\"", "must be > 0");
    ERR_AT(with("\"link_latency_us\": 10", "\"link_latency_us\": -1"), "\"link_latency_us\"", "must be >= 0");
    ERR_AT(with("\"steps\": 20", "\"steps\": 0"), "\"steps\"", "train.steps must be an integer >= 1");
    ERR_AT(with("\"min\": 0.5", "\"min\": 3"), "\"min\"", "data.encoder_cost_scale.min (3) is larger than max (2)");
    ERR_AT(with("\"min\": 0.5, ", ""), "\"dist\"", "\"uniform\" needs \"min\" and \"max\"");
    ERR_AT(with("\"uniform\"", "\"lognormal\""), "\"dist\"", "\"lognormal\" needs \"sigma\"");
    ERR_AT(with("\"uniform\"", "\"normal\""), "\"dist\"",
           "data.encoder_cost_scale.dist must be one of \"none\", \"uniform\", \"lognormal\", got \"normal\"");
    ERR_AT(with("\"seed\": 3", "\"seed\": 3, \"samples_per_microbatch\": 0"), "\"samples_per_microbatch\"",
           "data.samples_per_microbatch must be an integer >= 1, got 0");
}

TEST(err_schedule_names)
{
    ERR_AT(with("\"1f1b\"", "\"1F1B\""), "\"backbone\"",
           "schedule.backbone must be one of \"gpipe\", \"1f1b\", \"interleaved\", \"zb-h1\", "
           "\"zb-interleaved\", \"zb-v\", \"dualpipe-v\", got \"1F1B\"\n"
           "hint: did you mean \"1f1b\"?");
    ERR_AT(with("\"bigmac\"", "\"bigmak\""), "\"policy\"", "hint: did you mean \"bigmac\"?");
    ERR_AT(with("\"bigmac\"", "\"fastest\""), "\"policy\"",
           "hint: valid values are: \"bigmac\", \"optimus\", \"unified\", \"unified-balanced\", \"ideal\", \"none\"");
}

TEST(err_interleaved_and_vpp)
{
    const char *t = with2(with("\"1f1b\"", "\"interleaved\""), "\"microbatches\": 8", "\"microbatches\": 10");
    ERR_AT(t, "\"microbatches\"",
           "parallel.microbatches (10) must be a multiple of parallel.pp (4) for the \"interleaved\" "
           "backbone schedule\nhint: use 8 or 12 microbatches");
    t = with2(with("\"1f1b\"", "\"interleaved\""), "\"microbatches\": 8", "\"microbatches\": 3");
    ERR_AT(t, "\"microbatches\"", "hint: use 4 microbatches");
    ERR_AT(with("\"vpp\": 1", "\"vpp\": 2"), "\"vpp\"",
           "parallel.vpp is 2 but schedule.backbone is \"1f1b\": virtual stages need the \"interleaved\" schedule");
    /* interleaved with a multiple is fine */
    struct bm_spec *s = parse_ok(with2(with("\"1f1b\"", "\"interleaved\""), "\"vpp\": 1", "\"vpp\": 2"));
    CHECK(s && s->vpp == 2 && s->backbone == BM_BB_INTERLEAVED);
    bm_spec_free(s);
}

TEST(err_limits)
{
    ERR_AT(with("\"pp\": 4", "\"pp\": 5000"), "\"pp\"", "parallel.pp is 5000, more than the limit 4096");
    ERR_AT(with("\"vpp\": 1", "\"vpp\": 65"), "\"vpp\"", "more than the limit 64");
    ERR_AT(with("\"microbatches\": 8", "\"microbatches\": 2000000"), "\"microbatches\"", "more than the limit 1000000");
    /* 257 modules */
    static char big[1 << 16];
    size_t o = (size_t)snprintf(big, sizeof big, "{\"format\": \"bigmac-spec\", \"version\": 1, \"modules\": [");
    for (int i = 0; i < 257; i++)
        o += (size_t)snprintf(big + o, sizeof big - o, "%s{\"name\": \"m%d\"}", i ? ", " : "", i);
    snprintf(big + o, sizeof big - o, "]}");
    ERR_AT(big, "{\"name\": \"m256\"}", "the spec has 257 modules; the limit is 256");
    /* names at most 200 bytes */
    char name[260];
    memset(name, 'x', 201);
    name[201] = 0;
    char rep[300];
    snprintf(rep, sizeof rep, "\"name\": \"%s\"", name);
    ERR_AT(with("\"name\": \"vit\"", rep), "\"name\": \"xx", "modules[0].name is 201 bytes long; the limit is 200");
    name[200] = 0;
    snprintf(rep, sizeof rep, "\"name\": \"%s\"", name);
    struct bm_spec *s = parse_ok(with("\"name\": \"vit\"", rep));
    CHECK(s != NULL);
    bm_spec_free(s);
    /* nesting deeper than 64 */
    char deep[400];
    o = (size_t)snprintf(deep, sizeof deep, "{\"format\": \"bigmac-spec\", \"doc\": ");
    for (int i = 0; i < 70; i++) deep[o++] = '[';
    for (int i = 0; i < 70; i++) deep[o++] = ']';
    snprintf(deep + o, sizeof deep - o, "}");
    ERR_AT_LC(deep, 1, 34 + 63, "JSON nested deeper than 64 levels");
    /* text over 8 MiB: refused before parsing */
    size_t big_n = (8u << 20) + 16;
    char *huge = malloc(big_n + 1);
    CHECK(huge != NULL);
    if (!huge) return;
    memset(huge, ' ', big_n);
    memcpy(huge + big_n - 2, "{}", 2);
    huge[big_n] = 0;
    struct bm_spec *hs = (struct bm_spec *)(intptr_t)1;
    struct bm_err err;
    CHECK(bm_spec_parse(huge, "spec.json", &hs, &err) == BM_ERR && hs == NULL);
    CHECK_STR_CONTAINS(err.msg, "spec.json: the spec is 8388624 bytes; a spec may be at most 8 MiB");
    free(huge);
}

TEST(err_invalid_json_value_out_of_range)
{
    /* jansson rejects integers beyond long long: a syntax-level error at jansson's position */
    ERR_AT_LC(with("\"pp\": 4", "\"pp\": 99999999999999999999"), 4, 41, "invalid JSON: too big integer");
}

TEST(load_errors)
{
    struct bm_spec *s = (struct bm_spec *)(intptr_t)1;
    struct bm_err err;
    CHECK(bm_spec_load("tests/specs/no-such-file.json", &s, &err) == BM_ERR && s == NULL);
    CHECK_STR_CONTAINS(err.msg, "tests/specs/no-such-file.json");
    /* a NUL byte inside the file */
    char path[256];
    const char *tmp = getenv("TEST_TMP");
    snprintf(path, sizeof path, "%s/nul.json", tmp ? tmp : "/tmp");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite("{\n  \"a\"\0 }", 1, 10, f);
    fclose(f);
    CHECK(bm_spec_load(path, &s, &err) == BM_ERR && s == NULL);
    CHECK_STR_CONTAINS(err.msg, ":2:6: the file contains a NUL byte");
    unlink(path);
}

/* ---------------------------------------------------------------- encoder scales */

TEST(encoder_scales_deterministic)
{
    struct bm_spec *s = parse_ok(BASE);
    CHECK(s != NULL);
    if (!s) return;
    double a[64], b[64], c[8];
    bm_spec_encoder_scales(s, 64, a);
    bm_spec_encoder_scales(s, 64, b);
    bm_spec_encoder_scales(s, 8, c);
    int same = 1, in_range = 1, varied = 0;
    for (int i = 0; i < 64; i++) {
        same &= a[i] == b[i];
        in_range &= a[i] >= 0.5 && a[i] < 2.0;
        varied |= fabs(a[i] - a[0]) > 1e-3;
    }
    for (int i = 0; i < 8; i++) same &= c[i] == a[i];  /* prefixes agree across M */
    CHECK(same && in_range && varied);
    /* another seed, another list */
    s->data.encoder_cost_scale.seed = 2;
    bm_spec_encoder_scales(s, 64, b);
    int differ = 0;
    for (int i = 0; i < 64; i++) differ |= a[i] != b[i];
    CHECK(differ);
    /* none: all ones */
    s->data.encoder_cost_scale.dist = BM_DIST_NONE;
    bm_spec_encoder_scales(s, 64, b);
    for (int i = 0; i < 64; i++) CHECK(b[i] == 1.0);
    /* lognormal: mean ~1, clamped to [min, max] */
    static double l[20000];
    s->data.encoder_cost_scale = (struct bm_scale_dist){BM_DIST_LOGNORMAL, 0, 0, 0.5, 7};
    bm_spec_encoder_scales(s, 20000, l);
    double sum = 0;
    for (int i = 0; i < 20000; i++) sum += l[i];
    CHECK_NEAR(sum / 20000, 1.0, 0.03);
    s->data.encoder_cost_scale.min = 0.8;
    s->data.encoder_cost_scale.max = 1.25;
    bm_spec_encoder_scales(s, 20000, l);
    int clamped = 1, hit_lo = 0, hit_hi = 0;
    for (int i = 0; i < 20000; i++) {
        clamped &= l[i] >= 0.8 && l[i] <= 1.25;
        hit_lo |= l[i] == 0.8;
        hit_hi |= l[i] == 1.25;
    }
    CHECK(clamped && hit_lo && hit_hi);
    bm_spec_free(s);

    /* lognormal parsed from a spec */
    s = parse_ok(with("\"dist\": \"uniform\", \"min\": 0.5, \"max\": 2.0", "\"dist\": \"lognormal\", \"sigma\": 0.3"));
    CHECK(s && s->data.encoder_cost_scale.dist == BM_DIST_LOGNORMAL);
    if (s) CHECK_NEAR(s->data.encoder_cost_scale.sigma, 0.3, 0);
    bm_spec_free(s);
}

/* ---------------------------------------------------------------- robustness */

/* Random mutations of BASE: every outcome is a clean success or a positioned message. */
TEST(mutations_never_crash)
{
    struct bm_rng r;
    bm_rng_seed(&r, 42);
    static char t[8192];
    const char *ins = "{}[]\",:0-9e.\\ a\xc3\xa9";
    size_t n0 = strlen(BASE);
    int lines = 0;
    for (const char *p = BASE; *p; p++) lines += *p == '\n';
    int errors = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(t, BASE, n0 + 1);
        size_t n = n0;
        int k = 1 + (int)(bm_rng_next(&r) % 4);
        for (int j = 0; j < k; j++) {
            size_t at = (size_t)(bm_rng_next(&r) % n);
            int op = (int)(bm_rng_next(&r) % 3);
            if (op == 0) {                 /* delete a byte */
                memmove(t + at, t + at + 1, n - at);
                n--;
            } else if (op == 1) {          /* replace a byte */
                t[at] = ins[bm_rng_next(&r) % strlen(ins)];
            } else if (n + 2 < sizeof t) { /* insert a byte */
                memmove(t + at + 1, t + at, n - at + 1);
                t[at] = ins[bm_rng_next(&r) % strlen(ins)];
                n++;
            }
        }
        struct bm_spec *s = NULL;
        struct bm_err err;
        err.msg[0] = 0;
        if (bm_spec_parse(t, "spec.json", &s, &err) == BM_OK) {
            CHECK(s && s->n_modules >= 1 && s->backbone_module >= 0);
            bm_spec_free(s);
            continue;
        }
        errors++;
        int l = 0, c = 0;
        int got = sscanf(err.msg, "spec.json:%d:%d: ", &l, &c);
        CHECKF(got == 2 && l >= 1 && c >= 1 && l <= lines + 3, "%s", err.msg);
        CHECK(s == NULL);
    }
    CHECK(errors > 1000);
}

/* ---------------------------------------------------------------- allocation failures */

TEST(every_allocation_failure_is_clean)
{
    int n, ok = 0;
    for (n = 1; n < 100000; n++) {
        struct bm_spec *s = (struct bm_spec *)(intptr_t)1;
        struct bm_err err;
        err.msg[0] = 0;
        bm_alloc_fail_at(n);
        int rc = bm_spec_load("examples/tiny-mllm.json", &s, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        if (rc == BM_OK) {
            CHECK(!fired);
            CHECK(s && s->n_modules == 3);
            bm_spec_free(s);
            ok = 1;
            break;
        }
        CHECKF(fired, "n=%d failed without an injected failure: %s", n, err.msg);
        CHECKF(s == NULL, "n=%d", n);
        CHECKF(strstr(err.msg, "out of memory") != NULL, "n=%d: %s", n, err.msg);
    }
    CHECK(ok);
    CHECKF(n > 20, "only %d allocations?", n);
}

int main(void)
{
    RUN(tiny_mllm_example_loads);
    RUN(design_example_loads);
    RUN(base_spec_loads);
    RUN(defaults);
    RUN(role_derivation_without_roles);
    RUN(cost_derived_from_arch);
    RUN(split_backward_costs);
    RUN(err_json_syntax);
    RUN(err_format_and_version);
    RUN(err_unknown_keys);
    RUN(err_wrong_types);
    RUN(err_missing_producer);
    RUN(err_producers);
    RUN(err_duplicate_module_names);
    RUN(err_cycles);
    RUN(err_backbone_count);
    RUN(err_roles);
    RUN(err_sizes);
    RUN(err_schedule_names);
    RUN(err_interleaved_and_vpp);
    RUN(err_limits);
    RUN(err_invalid_json_value_out_of_range);
    RUN(load_errors);
    RUN(encoder_scales_deterministic);
    RUN(mutations_never_crash);
    RUN(every_allocation_failure_is_clean);
    return test_summary();
}
