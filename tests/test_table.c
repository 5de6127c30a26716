/* test_table.c — the table package on its own (src/table/): the one send/recv matcher against a
 * brute-force reference, the one op validator rule by rule, and the dataflow kept inside a
 * finished table without changing tables it is built for. Tables are built by hand here. */
#include "test.h"
#include "table/flow.h"
#include "table/table.h"
#include "util/util.h"

static int add_module(struct bm_table *t, const char *name, enum bm_role role, const char *consumes,
                      const char *produces)
{
    int i = t->n_modules;
    struct bm_table_module *m = bm_realloc(t->modules, (size_t)(i + 1) * sizeof *m);
    if (!m) abort();
    t->modules = m;
    memset(&m[i], 0, sizeof m[i]);
    m[i].name = bm_strdup(name);
    m[i].role = role;
    m[i].grad_to_backbone = 1;
    m[i].consumes = bm_calloc(2, sizeof(char *));
    m[i].produces = bm_calloc(2, sizeof(char *));
    if (consumes) m[i].consumes[m[i].n_consumes++] = bm_strdup(consumes);
    if (produces) m[i].produces[m[i].n_produces++] = bm_strdup(produces);
    t->n_modules++;
    if (role == BM_ROLE_BACKBONE) t->backbone_module = i;
    return i;
}

static struct bm_table *new_table(int P, int V, int M)
{
    struct bm_table *t = bm_table_new(P);
    t->vpp = V;
    t->microbatches = M;
    t->unit = P;
    t->backbone = V > 1 ? BM_BB_INTERLEAVED : BM_BB_1F1B;
    t->policy = BM_POL_BIGMAC;
    add_module(t, "llm", BM_ROLE_BACKBONE, NULL, NULL);
    return t;
}

static void push(struct bm_table *t, int r, int kind, int pass, int module, int chunk, int mb, int peer,
                 int tensor)
{
    struct bm_op op = {(uint8_t)kind, (uint8_t)pass, (int16_t)module, chunk, mb, peer, tensor};
    struct bm_err err;
    if (bm_table_push(t, r, op, &err)) abort();
}

/* ---------------------------------------------------------------- matcher */

/* The k-th recv of a key matches the k-th send of it, by brute force: O(ops^2). */
static int reference_peer(const struct bm_table *t, int r, int i)
{
    const struct bm_op *op = &t->ranks[r].ops[i];
    if (op->kind != BM_OP_SEND && op->kind != BM_OP_RECV) return -1;
    int q = op->peer, k = 0;
    for (int j = 0; j < i; j++) {
        const struct bm_op *o = &t->ranks[r].ops[j];
        k += o->kind == op->kind && o->peer == q && o->tensor == op->tensor && o->mb == op->mb;
    }
    int other = op->kind == BM_OP_SEND ? BM_OP_RECV : BM_OP_SEND;
    for (int j = 0; j < t->ranks[q].n_ops; j++) {
        const struct bm_op *o = &t->ranks[q].ops[j];
        if (o->kind == other && o->peer == r && o->tensor == op->tensor && o->mb == op->mb && k-- == 0) return j;
    }
    return -1;
}

TEST(matcher_pairs_in_program_order)
{
    struct bm_table *t = new_table(3, 1, 4);
    int x = bm_table_tensor(t, "x", 0, 0), y = bm_table_tensor(t, "y", 0, 0);
    /* rank 0 sends x:0 twice to 1 (a duplicate key), y:0 to 1 and x:0 to 2; rank 1 receives
     * y first, then x:0 twice; rank 2 receives x:1, which nobody sends */
    push(t, 0, BM_OP_SEND, 0, 0, -1, 0, 1, x);
    push(t, 0, BM_OP_SEND, 0, 0, -1, 0, 2, x);
    push(t, 0, BM_OP_SEND, 0, 0, -1, 0, 1, y);
    push(t, 0, BM_OP_SEND, 0, 0, -1, 0, 1, x);
    push(t, 1, BM_OP_RECV, 0, 0, -1, 0, 0, y);
    push(t, 1, BM_OP_RECV, 0, 0, -1, 0, 0, x);
    push(t, 1, BM_OP_RECV, 0, 0, -1, 0, 0, x);
    push(t, 2, BM_OP_RECV, 0, 0, -1, 0, 0, x);
    push(t, 2, BM_OP_RECV, 0, 0, -1, 1, 0, x);
    struct bm_match m;
    struct bm_err err;
    CHECK(bm_match_build(t, &m, &err) == BM_OK);
    CHECK(bm_match_peer(&m, 1, 0) == 2 && bm_match_peer(&m, 0, 2) == 0);  /* y */
    CHECK(bm_match_peer(&m, 1, 1) == 0 && bm_match_peer(&m, 0, 0) == 1);  /* first x:0 -> first recv */
    CHECK(bm_match_peer(&m, 1, 2) == 3 && bm_match_peer(&m, 0, 3) == 2);  /* second -> second */
    CHECK(bm_match_peer(&m, 2, 0) == 1 && bm_match_peer(&m, 0, 1) == 0);  /* to rank 2 */
    CHECK(bm_match_peer(&m, 2, 1) == -1);                                 /* never sent */
    CHECK(m.n_msgs == 4);
    const struct bm_msg *e = bm_match_msg(&m, 1, 1);
    CHECK(e && e->src == 0 && e->dst == 1 && e->tensor == x && e->mb == 0);
    CHECK(e && e->n_send == 2 && e->n_recv == 2 && e->send_op == 0 && e->send_op2 == 3 && e->recv_op == 1 &&
          e->recv_op2 == 2);
    e = bm_match_msg(&m, 2, 1);
    CHECK(e && e->n_send == 0 && e->n_recv == 1 && e->send_op == -1 && e->recv_op == 1);
    CHECK(bm_match_msg(&m, 0, 0) == bm_match_msg(&m, 0, 3));
    bm_match_free(&m);
    bm_match_free(&m); /* safe twice */
    bm_table_free(t);
}

TEST(matcher_equals_brute_force_on_random_tables)
{
    struct bm_rng g;
    bm_rng_seed(&g, 7);
    long checked = 0;
    for (int iter = 0; iter < 400; iter++) {
        /* the last 100 with M = 5000 and mbs 0, 1, 4999: tensors x M beyond the ops, where
         * bm_match_peers hashes the keys instead of indexing them */
        int big = iter >= 300;
        int P = 2 + (int)(bm_rng_next(&g) % 4), M = big ? 5000 : 1 + (int)(bm_rng_next(&g) % 3),
            T = 1 + (int)(bm_rng_next(&g) % 3);
        struct bm_table *t = new_table(P, 1, M);
        for (int k = 0; k < T; k++) {
            char name[16];
            snprintf(name, sizeof name, "t%d", k);
            bm_table_tensor(t, name, 0, 0);
        }
        int n = (int)(bm_rng_next(&g) % 40);
        for (int k = 0; k < n; k++) { /* random sends and recvs, some with bad peers or tensors */
            int r = (int)(bm_rng_next(&g) % (unsigned)P), q = (int)(bm_rng_next(&g) % (unsigned)(P + 1));
            int tensor = (int)(bm_rng_next(&g) % (unsigned)(T + 1)), mb = (int)(bm_rng_next(&g) % (unsigned)M);
            if (big) mb = (int[]){0, 1, 4999}[bm_rng_next(&g) % 3];
            push(t, r, bm_rng_next(&g) % 2 ? BM_OP_SEND : BM_OP_RECV, 0, 0, -1, mb, q, tensor);
            if (bm_rng_next(&g) % 4 == 0) push(t, r, BM_OP_COMPUTE, BM_PASS_F, 0, r, mb, -1, -1);
        }
        struct bm_match m, mp; /* the full matcher and the peers-only one the simulator uses */
        struct bm_err err;
        CHECK(bm_match_build(t, &m, &err) == BM_OK);
        CHECK(bm_match_peers(t, &mp, &err) == BM_OK && !mp.msgs && !mp.msg_of);
        for (int r = 0; r < P; r++)
            for (int i = 0; i < t->ranks[r].n_ops; i++) {
                const struct bm_op *op = &t->ranks[r].ops[i];
                int valid = op->peer >= 0 && op->peer < P && op->peer != r && op->tensor >= 0 && op->tensor < T;
                int want = valid ? reference_peer(t, r, i) : -1;
                CHECKF(bm_match_peer(&m, r, i) == want, "iter %d rank %d op %d: %d, brute force %d", iter, r, i,
                       bm_match_peer(&m, r, i), want);
                CHECKF(bm_match_peer(&mp, r, i) == want, "iter %d rank %d op %d: peers-only %d, brute force %d",
                       iter, r, i, bm_match_peer(&mp, r, i), want);
                checked++;
            }
        bm_match_free(&m);
        bm_match_free(&mp);
        bm_table_free(t);
    }
    CHECK(checked > 4000);
}

TEST(matcher_reports_out_of_memory)
{
    struct bm_table *t = new_table(2, 1, 1);
    int x = bm_table_tensor(t, "x", 0, 0);
    push(t, 0, BM_OP_SEND, 0, 0, -1, 0, 1, x);
    push(t, 1, BM_OP_RECV, 0, 0, -1, 0, 0, x);
    int failures = 0;
    for (long n = 1; n < 100; n++) {
        struct bm_match m;
        struct bm_err err;
        bm_alloc_fail_at(n);
        int rc = bm_match_build(t, &m, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        if (!fired) {
            CHECK(rc == BM_OK);
            bm_match_free(&m);
            break;
        }
        failures++;
        CHECK(rc == BM_ERR && m.base == NULL);
        CHECK_STR_CONTAINS(err.msg, "out of memory");
    }
    CHECK(failures >= 4);
    failures = 0;
    for (long n = 1; n < 100; n++) { /* the peers-only matcher likewise */
        struct bm_match m;
        struct bm_err err;
        bm_alloc_fail_at(n);
        int rc = bm_match_peers(t, &m, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        if (!fired) {
            CHECK(rc == BM_OK && bm_match_peer(&m, 1, 0) == 0 && bm_match_peer(&m, 0, 0) == 0);
            bm_match_free(&m);
            break;
        }
        failures++;
        CHECK(rc == BM_ERR && m.base == NULL);
        CHECK_STR_CONTAINS(err.msg, "out of memory");
    }
    CHECK(failures >= 3);
    bm_table_free(t);
}

/* ---------------------------------------------------------------- validator */

struct whys {
    char text[1024];
};

static void collect(void *ctx, const char *why)
{
    struct whys *w = ctx;
    size_t len = strlen(w->text);
    snprintf(w->text + len, sizeof w->text - len, "%s%s", len ? "; " : "", why);
}

static int problems(const struct bm_table *t, int r, struct bm_op op, char *out)
{
    struct whys w = {""};
    int n = bm_op_check(t, r, &op, collect, &w);
    strcpy(out, w.text);
    return n;
}

TEST(validator_rule_by_rule)
{
    struct bm_table *t = new_table(2, 2, 3);
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, "image", "emb");
    int x = bm_table_tensor(t, "emb", vit, 0);
    char why[1024];
    struct { struct bm_op op; int rank, n; const char *want; } cases[] = {
        {{BM_OP_COMPUTE, BM_PASS_F, 0, 3, 2, -1, -1}, 1, 0, ""},
        {{BM_OP_COMPUTE, BM_PASS_W, 0, 0, 0, -1, -1}, 0, 0, ""},
        {{BM_OP_COMPUTE, BM_PASS_B, (int16_t)vit, -1, 1, -1, -1}, 1, 0, ""},
        {{BM_OP_SEND, 0, (int16_t)vit, -1, 0, 1, x}, 0, 0, ""},
        {{BM_OP_RECV, 0, -1, -1, 0, 0, x}, 1, 0, ""},
        {{7, 0, 0, 0, 0, -1, -1}, 0, 1, "unknown op kind 7"},
        {{BM_OP_COMPUTE, BM_PASS_F, 0, 0, 3, -1, -1}, 0, 1, "mb 3 is out of range 0..2"},
        {{BM_OP_COMPUTE, BM_PASS_F, 0, 0, -1, -1, -1}, 0, 1, "mb -1 is out of range 0..2"},
        {{BM_OP_COMPUTE, BM_PASS_F, 5, 0, 0, -1, -1}, 0, 1, "module index 5 is out of range (the table has 2 modules)"},
        {{BM_OP_COMPUTE, 3, 0, 0, 0, -1, -1}, 0, 1, "unknown pass 3"},
        {{BM_OP_COMPUTE, BM_PASS_F, 0, 4, 0, -1, -1}, 0, 1, "backbone chunk 4 is out of range 0..3"},
        {{BM_OP_COMPUTE, BM_PASS_F, 0, -1, 0, -1, -1}, 0, 1, "backbone chunk -1 is out of range 0..3"},
        {{BM_OP_COMPUTE, BM_PASS_F, (int16_t)vit, 0, 0, -1, -1}, 0, 1,
         "module vit is not the backbone, so its chunk must be -1 (got 0)"},
        {{BM_OP_SEND, 0, -1, -1, 0, 2, x}, 0, 1, "peer 2 is not a rank 0..1"},
        {{BM_OP_SEND, 0, -1, -1, 0, 0, x}, 0, 1, "a rank cannot send to itself"},
        {{BM_OP_RECV, 0, -1, -1, 0, 1, x}, 1, 1, "a rank cannot receive from itself"},
        {{BM_OP_RECV, 0, -1, -1, 0, 1, 9}, 0, 1, "tensor index 9 is out of range 0..0"},
        {{BM_OP_RECV, 0, 9, -1, 0, 1, x}, 0, 1, "module index 9 is out of range"},
        /* several problems of one op, each named */
        {{BM_OP_COMPUTE, 3, 0, 9, 7, -1, -1}, 1, 3,
         "mb 7 is out of range 0..2; unknown pass 3; backbone chunk 9 is out of range 0..3"},
        {{BM_OP_SEND, 0, -1, -1, 5, -3, -2}, 0, 3,
         "mb 5 is out of range 0..2; peer -3 is not a rank 0..1; tensor index -2 is out of range 0..0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = problems(t, cases[i].rank, cases[i].op, why);
        CHECKF(n == cases[i].n && !strcmp(why, cases[i].want), "case %zu: %d problems \"%s\", want %d \"%s\"", i, n,
               why, cases[i].n, cases[i].want);
        char first[512];
        CHECK(bm_op_why(t, cases[i].rank, &cases[i].op, first, sizeof first) == cases[i].n);
        CHECK(!strncmp(why, first, strlen(first)));
    }
    /* the whole-table check names the first bad op with its action string */
    push(t, 0, BM_OP_COMPUTE, BM_PASS_F, 0, 0, 0, -1, -1);
    push(t, 1, BM_OP_COMPUTE, BM_PASS_F, 0, 1, 0, -1, -1);
    push(t, 1, BM_OP_SEND, 0, -1, -1, 0, 1, x);
    struct bm_err err;
    CHECK(bm_table_check_ops(t, "simulate", &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "simulate: rank 1 op #1 SEND_F:emb:0>1: a rank cannot send to itself");
    t->ranks[1].ops[1].peer = 0;
    CHECK(bm_table_check_ops(t, "train", &err) == BM_OK);
    t->ranks[0].ops[0].module = 40;
    CHECK(bm_table_check_ops(t, "train", &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "train: rank 0 op #0 compute: module index 40 is out of range");
    t->microbatches = 0;
    CHECK(bm_table_check_ops(t, "simulate", &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "simulate: table has pp=2 microbatches=0");
    bm_table_free(t);
}

/* ---------------------------------------------------------------- dataflow in the table */

TEST(flow_does_not_change_the_table_and_finish_keeps_indices)
{
    struct bm_table *t = new_table(2, 1, 2);
    /* the backbone consumes two encoders' outputs, listed against module order */
    t->modules[0].consumes = bm_realloc(t->modules[0].consumes, 2 * sizeof(char *));
    t->modules[0].consumes[0] = bm_strdup("aud_emb");
    t->modules[0].consumes[1] = bm_strdup("vis_emb");
    t->modules[0].n_consumes = 2;
    int vit = add_module(t, "vit", BM_ROLE_ENCODER, "image", "vis_emb");
    int aud = add_module(t, "aud", BM_ROLE_ENCODER, "audio", "aud_emb");
    int g = bm_table_tensor(t, "grad:vis_emb", vit, 1); /* a hand-made table's own order */
    CHECK(g == 0 && t->n_tensors == 1);
    struct bm_flow *f;
    struct bm_err err;
    CHECK(bm_flow_build(t, &f, &err) == BM_OK);
    CHECK(t->n_tensors == 1 && bm_table_flow(t) == NULL); /* t unchanged */
    CHECK(f->n_table == 1 && f->n_tensors == 6);           /* llm.c0.out, its grad, 2 x 2 embs */
    const struct bm_flow_op *c0f = bm_flow_get(f, 0, 0, BM_PASS_F), *c1b = bm_flow_get(f, 0, 1, BM_PASS_B);
    CHECK(c0f && c0f->n_needs == 2 && c1b && c1b->n_makes == 1);
    int m, c, p;
    CHECK(bm_flow_producer(f, g, &m, &c, &p) == 0 && m == 0 && c == 0 && p == BM_PASS_B);
    /* the consumes order is the graph's; the parts are in module order (vit before aud) */
    CHECK(!strcmp(bm_flow_tensor(f, t, c0f->needs[0])->name, "aud_emb"));
    CHECK(f->n_parts[0] == 2 && !strcmp(bm_flow_tensor(f, t, f->parts[0][0])->name, "vis_emb") &&
          !strcmp(bm_flow_tensor(f, t, f->parts[0][1])->name, "aud_emb"));
    CHECK(f->n_parts[1] == 2 && !strcmp(bm_flow_tensor(f, t, f->parts[1][0])->name, "grad:vis_emb"));
    CHECK(bm_flow_tensor(f, t, 6) == NULL && bm_flow_tensor(f, t, -1) == NULL);
    CHECK(bm_flow_tensor(f, t, 3)->module == aud || bm_flow_tensor(f, t, 3)->module == vit ||
          bm_flow_tensor(f, t, 3)->module == 0);
    /* finishing adds exactly the flow's extra tensors at the flow's indices */
    CHECK(bm_table_finish(t, &err) == BM_OK);
    const struct bm_flow *tf = bm_table_flow(t);
    CHECK(tf && t->n_tensors == 6 && tf->n_table == 6 && tf->n_tensors == 6);
    for (int i = 0; i < 6; i++)
        CHECKF(!strcmp(t->tensors[i].name, bm_flow_tensor(f, t, i)->name), "tensor %d: %s vs %s", i,
               t->tensors[i].name, bm_flow_tensor(f, t, i)->name);
    CHECK(bm_table_find_tensor(t, "grad:vis_emb") == g);
    bm_flow_free(f);
    CHECK(bm_table_finish(t, &err) == BM_OK && t->n_tensors == 6); /* again: the same */
    bm_table_free(t);
}

/* ---------------------------------------------------------------- one integer rule */

static char *replaced(const char *path, const char *from, const char *to)
{
    struct bm_err err;
    char *text = bm_read_file(path, NULL, &err), *at = text ? strstr(text, from) : NULL;
    if (!at) return text;
    size_t n = strlen(text) + strlen(to) + 1;
    char *out = bm_malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    bm_free(text);
    return out;
}

TEST(spec_and_table_share_one_integer_rule)
{
    /* 4 and 4.0 are integers in both files; 4.5 is one in neither */
    static const char *const whole[] = {"\"pp\": 2, ", "\"pp\": 2.0, ", "\"pp\": 2e0, "};
    for (int i = 0; i < 3; i++) {
        char *spec = replaced("examples/tiny-mllm.json", "\"pp\": 4, ", whole[i]);
        char *table = replaced("tests/corpus/table/valid-tiny-bigmac-p2-v2-m4.json", "\"pp\": 2, ", whole[i]);
        struct bm_spec *s;
        struct bm_table *t;
        struct bm_costs *t_c = NULL;
        struct bm_err err;
        CHECKF(spec && bm_spec_parse(spec, "s.json", &s, &err) == BM_OK, "%s: %s", whole[i], err.msg);
        CHECKF(table && bm_table_parse(table, "t.json", &t, &t_c, &err) == BM_OK, "%s: %s", whole[i], err.msg);
        if (s) {
            CHECK(s->pp == 2);
            bm_spec_free(s);
        }
        if (t) {
            CHECK(t->pp == 2);
            bm_table_free(t), bm_costs_free(t_c), t_c = NULL;
        }
        bm_free(spec);
        bm_free(table);
    }
    char *spec = replaced("examples/tiny-mllm.json", "\"pp\": 4, ", "\"pp\": 2.5, ");
    char *table = replaced("tests/corpus/table/valid-tiny-bigmac-p2-v2-m4.json", "\"pp\": 2, ", "\"pp\": 2.5, ");
    struct bm_spec *s;
    struct bm_table *t;
    struct bm_costs *t_c = NULL;
    struct bm_err err;
    CHECK(bm_spec_parse(spec, "s.json", &s, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "parallel.pp must be an integer, got 2.5");
    CHECK(bm_table_parse(table, "t.json", &t, &t_c, &err) == BM_ERR);
    CHECK_STR_CONTAINS(err.msg, "\"pp\" must be an integer");
    bm_free(spec);
    bm_free(table);
}

int main(void)
{
    RUN(matcher_pairs_in_program_order);
    RUN(matcher_equals_brute_force_on_random_tables);
    RUN(matcher_reports_out_of_memory);
    RUN(validator_rule_by_rule);
    RUN(flow_does_not_change_the_table_and_finish_keeps_indices);
    RUN(spec_and_table_share_one_integer_rule);
    return test_summary();
}
