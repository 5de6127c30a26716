/* test_table_stream.c — the table loader reads the ops from the text (src/table/json.c, "ranks,
 * streamed"): planned tables of every backbone and policy load back to the very ops, tensors and
 * text the planner wrote; ops in another form than the writer's (escapes, reals, another key
 * order, other spacing) take the per-op jansson path and give the same table; a bad op is named
 * as the tree loader names it. The reference is the planner's table in memory. */
#include <stdio.h>

#include "test.h"
#include "table/table.h"
#include "util/util.h"

/* t with its costs c as JSON text (caller frees). */
static char *to_text(const struct bm_table *t, const struct bm_costs *c)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) abort();
    bm_table_write_json(t, c, f);
    fclose(f);
    return buf;
}

/* s with every "from" replaced by "to" (caller frees). */
static char *replace_all(const char *s, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    for (const char *p = s; (p = strstr(p, from)); p += nf) count++;
    char *out = malloc(strlen(s) + count * (nt > nf ? nt - nf : 0) + 1), *o = out;
    if (!out) abort();
    for (const char *p = s, *q; ; p = q + nf) {
        q = strstr(p, from);
        size_t k = q ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, k), o += k;
        if (!q) break;
        memcpy(o, to, nt), o += nt;
    }
    *o = 0;
    return out;
}

/* a and b hold the same ranks, ops and tensors. A send's or recv's module is what the writer
 * does not write (the planner keeps the module it placed the transfer for, a loader the tensor's
 * producer): compared only when 'comm_module'. */
static int same_table(const struct bm_table *a, const struct bm_table *b, int comm_module)
{
    if (a->pp != b->pp || a->vpp != b->vpp || a->microbatches != b->microbatches || a->n_tensors != b->n_tensors ||
        a->n_modules != b->n_modules)
        return 0;
    for (int r = 0; r < a->pp; r++) {
        if (a->ranks[r].n_ops != b->ranks[r].n_ops) return 0;
        for (int i = 0; i < a->ranks[r].n_ops; i++) {
            const struct bm_op *x = &a->ranks[r].ops[i], *y = &b->ranks[r].ops[i];
            if (x->kind != y->kind || x->pass != y->pass || x->chunk != y->chunk || x->mb != y->mb ||
                x->peer != y->peer || x->tensor != y->tensor ||
                ((x->kind == BM_OP_COMPUTE || comm_module) && x->module != y->module))
                return 0;
        }
    }
    for (int i = 0; i < a->n_tensors; i++)
        if (strcmp(a->tensors[i].name, b->tensors[i].name)) return 0;
    return 1;
}

static struct bm_spec *spec;

/* The planned table of the example under backbone bb and policy pol (P=4, V=2 for looped
 * backbones), or NULL when that combination does not plan. */
static struct bm_table *planned(enum bm_backbone bb, enum bm_policy pol, struct bm_costs **t_c)
{
    struct bm_plan_opts o;
    struct bm_err err;
    bm_plan_opts_from_spec(&o, spec);
    o.backbone = bb;
    o.policy = pol;
    o.vpp = bb == BM_BB_INTERLEAVED || bb == BM_BB_ZB_INTERLEAVED ? 2 : 1;
    struct bm_table *t = NULL;
    if (bm_plan_build(spec, &o, &t, t_c, &err)) return NULL;
    return t;
}

TEST(planned_tables_load_back_exactly)
{
    static const enum bm_backbone bbs[] = {BM_BB_GPIPE, BM_BB_1F1B, BM_BB_INTERLEAVED, BM_BB_ZB_H1, BM_BB_ZB_INTERLEAVED};
    int n = 0;
    for (size_t b = 0; b < sizeof bbs / sizeof bbs[0]; b++)
        for (int pol = BM_POL_BIGMAC; pol <= BM_POL_NONE; pol++) {
            struct bm_costs *t_c = NULL, *u_c = NULL;
            struct bm_table *t = planned(bbs[b], (enum bm_policy)pol, &t_c), *u = NULL;
            if (!t) continue;
            char *text = to_text(t, t_c);
            struct bm_err err;
            CHECKF(bm_table_parse(text, "planned.json", &u, &u_c, &err) == BM_OK, "%s", err.msg);
            if (u) {
                CHECKF(same_table(t, u, 0), "backbone %d policy %d", (int)bbs[b], pol);
                char *again = to_text(u, u_c);
                CHECK(!strcmp(text, again));
                free(again);
                n++;
            }
            free(text);
            bm_table_free(u), bm_costs_free(u_c), u_c = NULL;
            bm_table_free(t), bm_costs_free(t_c);
        }
    CHECKF(n >= 20, "only %d backbone/policy pairs planned", n);
}

TEST(other_forms_of_ops_give_the_same_table)
{
    struct bm_costs *p_c = NULL;
    struct bm_table *p = planned(BM_BB_ZB_INTERLEAVED, BM_POL_BIGMAC, &p_c), *t = NULL;
    CHECK(p != NULL);
    if (!p) return;
    char *text = to_text(p, p_c);
    struct bm_err e0;
    CHECK(bm_table_parse(text, "t.json", &t, NULL, &e0) == BM_OK); /* the reference: the writer's form */
    bm_table_free(p), bm_costs_free(p_c);
    if (!t) return;
    /* each rewrite makes some ops leave the writer's form; the table must not change */
    static const char *const rw[][2] = {
        {"\"pass\": \"F\"", "\"pass\": \"\\u0046\""},          /* an escape in a value */
        {"{\"op\": \"send\"", "{\"o\\u0070\": \"send\""},      /* an escape in a key */
        {", \"mb\": 1}", ", \"mb\": 1.0}"},                    /* a whole real */
        {"{\"op\": \"recv\", ", "{\"mb\": 0, \"op\": \"recv\", "}, /* key order (mb given twice: see below) */
        {"\"mb\": ", "\"mb\"\t:\n  "},                         /* spacing */
    };
    for (size_t k = 0; k < sizeof rw / sizeof rw[0]; k++) {
        char *v = replace_all(text, rw[k][0], rw[k][1]);
        struct bm_table *u = NULL;
        struct bm_costs *u_c = NULL;
        struct bm_err err;
        int rc = bm_table_parse(v, "v.json", &u, &u_c, &err);
        if (k == 3) { /* a duplicated key is refused, as by the tree loader */
            CHECK(rc == BM_ERR);
            CHECK_STR_CONTAINS(err.msg, "duplicate object key");
        } else {
            CHECKF(rc == BM_OK, "rewrite %zu: %s", k, err.msg);
            if (u) CHECKF(same_table(t, u, 1), "rewrite %zu", k);
        }
        bm_table_free(u), bm_costs_free(u_c), u_c = NULL;
        free(v);
    }
    /* the key order alone (mb moved first, not duplicated) */
    char *v = replace_all(text, "{\"op\": \"compute\", \"module\": \"gpt\", \"pass\": \"B\", ",
                          "{\"pass\": \"B\", \"module\": \"gpt\", \"op\": \"compute\", ");
    struct bm_table *u = NULL;
    struct bm_costs *u_c = NULL;
    struct bm_err err;
    CHECKF(bm_table_parse(v, "v.json", &u, &u_c, &err) == BM_OK, "%s", err.msg);
    if (u) CHECK(same_table(t, u, 1));
    bm_table_free(u), bm_costs_free(u_c), u_c = NULL;
    free(v);
    free(text);
    bm_table_free(t);
}

TEST(bad_ops_are_named_by_position_and_field)
{
    struct bm_costs *t_c = NULL;
    struct bm_table *t = planned(BM_BB_1F1B, BM_POL_BIGMAC, &t_c);
    CHECK(t != NULL);
    if (!t) return;
    char *text = to_text(t, t_c);
    static const char *const bad[][3] = {
        {"\"mb\": 3}", "\"mb\": 99}", "\"mb\" is 99, must be in 0..7"},
        {"\"module\": \"vit\"", "\"module\": \"vti\"", "unknown module \"vti\""},
        {"\"tensor\": \"vis_emb\"", "\"tensor\": \"vis\"", "unknown tensor \"vis\""},
        {"\"pass\": \"B\"", "\"pass\": \"Q\"", "unknown pass \"Q\" (F, B, W)"},
        {"\"mb\": 2}", "\"mb\": 2, \"x\": 1}", "unknown key \"x\" in ranks["},
        {"\"mb\": 2}", "\"mb\": 2}}", "invalid JSON"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *v = replace_all(text, bad[k][0], bad[k][1]);
        struct bm_table *u = NULL;
        struct bm_costs *u_c = NULL;
        struct bm_err err;
        CHECK(bm_table_parse(v, "b.json", &u, &u_c, &err) == BM_ERR);
        CHECK(u == NULL);
        CHECK_STR_CONTAINS(err.msg, bad[k][2]);
        CHECK_STR_CONTAINS(err.msg, "b.json:");
        free(v);
    }
    free(text);
    bm_table_free(t), bm_costs_free(t_c);
}

int main(void)
{
    struct bm_err err;
    if (bm_spec_load("examples/tiny-mllm.json", &spec, &err)) {
        printf("FAIL spec: %s\n", err.msg);
        return 1;
    }
    RUN(planned_tables_load_back_exactly);
    RUN(other_forms_of_ops_give_the_same_table);
    RUN(bad_ops_are_named_by_position_and_field);
    bm_spec_free(spec);
    return test_summary();
}
