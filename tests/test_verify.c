/* test_verify.c — the verifier (docs/design.md §7): correct tables pass, and each invariant is broken
 * by a targeted mutation whose message names the right rank and op. Tables are built here by a
 * small dataflow-driven lowering (independent of the planner): each rank runs its backbone
 * order; nested ops of microbatch m run on rank m % P (or rank 0 / P-1 for "unified"), as
 * early as their inputs allow; a send follows its producer, a recv precedes its consumer. Ops
 * are emitted in one global order in which every recv follows its send, so the result is
 * deadlock-free by construction. */
#include <time.h>

#include "test.h"
#include "table/flow.h"
#include "util/util.h"

/* ---------------------------------------------------------------- table fixtures */

struct fx {
    int P, V, M;
    enum bm_backbone bb;
    enum bm_policy pol;
    int window, unit, warmup_extra;
    int vit, dit;          /* include the encoder / generator */
    int dit_grad;          /* generator's grad_to_backbone */
    int enc_limit;         /* max live encoder microbatches per rank while building (0 = none) */
    int unified;           /* encoders on rank 0, generators on rank P-1 */
};

static struct fx fx_default(int P, int M)
{
    struct fx f = {P, 1, M, BM_BB_1F1B, BM_POL_OPTIMUS, 0, 0, 0, 1, 0, 1, 0, 0};
    return f;
}

static char **strv(int n, const char *a, const char *b)
{
    char **v = bm_calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    if (n > 0) v[0] = bm_strdup(a);
    if (n > 1) v[1] = bm_strdup(b);
    return v;
}

/* Header and modules only. */
static struct bm_table *fx_table(const struct fx *f)
{
    struct bm_table *t = bm_table_new(f->P);
    t->vpp = f->V;
    t->microbatches = f->M;
    t->unit = f->unit ? f->unit : f->P;
    t->window = f->window;
    t->backbone = f->bb;
    t->policy = f->pol;
    t->warmup_extra = f->warmup_extra;
    int n = 1 + (f->vit != 0) + (f->dit != 0);
    t->modules = bm_calloc((size_t)n, sizeof *t->modules);
    t->n_modules = n;
    int k = 0;
    if (f->vit) {
        struct bm_table_module *m = &t->modules[k++];
        m->name = bm_strdup("vit");
        m->role = BM_ROLE_ENCODER;
        m->consumes = strv(1, "image", NULL), m->n_consumes = 1;
        m->produces = strv(1, "vis_emb", NULL), m->n_produces = 1;
    }
    t->backbone_module = k;
    struct bm_table_module *l = &t->modules[k++];
    l->name = bm_strdup("llm");
    l->role = BM_ROLE_BACKBONE;
    l->consumes = f->vit ? strv(2, "text", "vis_emb") : strv(1, "text", NULL);
    l->n_consumes = f->vit ? 2 : 1;
    l->produces = strv(1, "hidden", NULL), l->n_produces = 1;
    if (f->dit) {
        struct bm_table_module *m = &t->modules[k++];
        m->name = bm_strdup("dit");
        m->role = BM_ROLE_GENERATOR;
        m->grad_to_backbone = f->dit_grad;
        m->consumes = strv(1, "hidden", NULL), m->n_consumes = 1;
        m->produces = strv(1, "loss", NULL), m->n_produces = 1;
    }
    return t;
}

struct bld {
    const struct fx *f;
    struct bm_table *t;
    const struct bm_flow *flow; /* the table's (bm_table_finish) */
    int N, C, bb;
    int *avail;    /* [T*M] producing rank + 1 */
    char *done;    /* [(N+C)*2*M] */
    int *cons;     /* [T][2*(N+C)]: (module, chunk) pairs needing tensor x; -1 ends */
    int cons_w;
};

static int owner(const struct bld *b, int module, int chunk, int mb)
{
    if (module == b->bb) return chunk % b->f->P;
    if (b->f->unified)
        return b->t->modules[module].role == BM_ROLE_ENCODER ? 0 : b->f->P - 1;
    return mb % b->f->P;
}

static int active(const struct bld *b, int module)
{
    return b->f->pol != BM_POL_NONE || module == b->bb;
}

static size_t dkey(const struct bld *b, int module, int chunk, int pass, int mb)
{
    int u = module == b->bb ? b->N + chunk : module;
    return ((size_t)u * 3 + (size_t)pass) * (size_t)b->f->M + (size_t)mb;
}

static int ready(const struct bld *b, int module, int chunk, int pass, int mb)
{
    if (pass == BM_PASS_W) return b->done[dkey(b, module, chunk, BM_PASS_B, mb)];
    const struct bm_flow_op *o = bm_flow_get(b->flow, module, chunk, pass);
    for (int k = 0; k < o->n_needs; k++) {
        int pm, pc, pp;
        bm_flow_producer(b->flow, o->needs[k], &pm, &pc, &pp);
        if (!active(b, pm)) continue;
        if (!b->avail[(size_t)o->needs[k] * b->f->M + mb]) return 0;
    }
    if (pass == BM_PASS_B && !b->done[dkey(b, module, chunk, BM_PASS_F, mb)]) return 0;
    return 1;
}

static void push(struct bm_table *t, int r, struct bm_op op)
{
    struct bm_err err;
    if (bm_table_push(t, r, op, &err)) abort();
}

static void emit(struct bld *b, int r, int module, int chunk, int pass, int mb)
{
    if (pass == BM_PASS_W) { /* a weight gradient: no tensor travels */
        push(b->t, r, (struct bm_op){BM_OP_COMPUTE, BM_PASS_W, (int16_t)module, chunk, mb, -1, -1});
        b->done[dkey(b, module, chunk, pass, mb)] = 1;
        return;
    }
    const struct bm_flow_op *o = bm_flow_get(b->flow, module, chunk, pass);
    int M = b->f->M;
    for (int k = 0; k < o->n_needs; k++) {
        int x = o->needs[k], pm, pc, pp;
        bm_flow_producer(b->flow, x, &pm, &pc, &pp);
        if (!active(b, pm)) continue;
        int src = b->avail[(size_t)x * M + mb] - 1;
        if (src != r)
            push(b->t, r, (struct bm_op){BM_OP_RECV, 0, (int16_t)pm, -1, mb, src, x});
    }
    push(b->t, r, (struct bm_op){BM_OP_COMPUTE, (uint8_t)pass, (int16_t)module,
                                 module == b->bb ? chunk : -1, mb, -1, -1});
    b->done[dkey(b, module, chunk, pass, mb)] = 1;
    /* sends: one per (made tensor, consumer rank other than r) */
    for (int k = 0; k < o->n_makes; k++) {
        int x = o->makes[k];
        b->avail[(size_t)x * M + mb] = r + 1;
        char sent_to[1024] = {0};
        for (const int *cp = &b->cons[(size_t)x * b->cons_w]; *cp >= 0; cp += 2) {
            int dst = owner(b, cp[0], cp[1], mb);
            if (dst == r || sent_to[dst]) continue;
            sent_to[dst] = 1;
            push(b->t, r, (struct bm_op){BM_OP_SEND, 0, (int16_t)module, -1, mb, dst, x});
        }
    }
}

/* The j-th microbatch rank r runs for nested module m, or -1. */
static int nth_mb(const struct bld *b, int m, int r, int j)
{
    int P = b->f->P, M = b->f->M;
    if (b->f->unified) return owner(b, m, -1, 0) == r && j < M ? j : -1;
    int mb = r + j * P;
    return mb < M ? mb : -1;
}

/* Build a correct table for f, or NULL when the greedy lowering gets stuck (e.g. enc_limit
 * too small for the schedule). Never loops forever: a round without progress stops it. */
static struct bm_table *fx_build(const struct fx *f)
{
    struct bm_err err;
    struct bld b = {0};
    b.f = f;
    b.t = fx_table(f);
    if (bm_table_finish(b.t, &err) || !(b.flow = bm_table_flow(b.t))) {
        fprintf(stderr, "flow: %s\n", err.msg);
        abort();
    }
    b.N = b.t->n_modules;
    b.C = f->P * f->V;
    b.bb = b.t->backbone_module;
    int P = f->P, M = f->M, T = b.t->n_tensors;
    b.avail = bm_calloc((size_t)T * M + 1, sizeof *b.avail);
    b.cons_w = 2 * 2 * (b.N + b.C) + 1;
    b.cons = bm_malloc((size_t)T * b.cons_w * sizeof *b.cons);
    for (int x = 0; x < T; x++) {
        int n = 0, *cv = &b.cons[(size_t)x * b.cons_w];
        for (int cm = 0; cm < b.N; cm++) {
            if (!active(&b, cm)) continue;
            for (int cc = 0; cc < (cm == b.bb ? b.C : 1); cc++)
                for (int cp = 0; cp < 2; cp++) {
                    const struct bm_flow_op *co = bm_flow_get(b.flow, cm, cm == b.bb ? cc : -1, cp);
                    for (int j = 0; j < co->n_needs; j++)
                        if (co->needs[j] == x) cv[n++] = cm, cv[n++] = cc;
                }
        }
        cv[n] = -1;
    }
    b.done = bm_calloc((size_t)(b.N + b.C) * 3 * M, 1);
    struct bm_bb_step **ord = bm_calloc((size_t)P, sizeof *ord);
    int *next_bb = bm_calloc((size_t)P, sizeof *next_bb);
    int n_bb = bm_backbone_n_steps(f->bb, f->V, M);
    /* per rank and nested module: next F index and next B index into the rank's mb list */
    int *nf = bm_calloc((size_t)P * b.N, sizeof *nf), *nb = bm_calloc((size_t)P * b.N, sizeof *nb);
    int *live = bm_calloc((size_t)P * b.N, sizeof *live);
    for (int r = 0; r < P; r++) {
        ord[r] = bm_malloc((size_t)n_bb * sizeof **ord);
        if (bm_backbone_order(f->bb, P, f->V, M, r, f->warmup_extra, ord[r], &err)) {
            fprintf(stderr, "order: %s\n", err.msg);
            abort();
        }
    }
    long total = (long)P * n_bb, emitted = 0;
    for (int m = 0; m < b.N; m++)
        if (m != b.bb && active(&b, m)) total += 2L * M;
    int progress = 1;
    while (emitted < total && progress) {
        progress = 0;
        for (int r = 0; r < P; r++) {
            int again = 1;
            while (again) {
                again = 0;
                for (int m = 0; m < b.N; m++) {
                    if (m == b.bb || !active(&b, m)) continue;
                    int *pf = &nf[r * b.N + m], *pb = &nb[r * b.N + m], *lv = &live[r * b.N + m];
                    /* microbatches this rank owns, in order: the j-th is found by scanning */
                    for (;;) { /* backwards first (free memory) */
                        int mb = nth_mb(&b, m, r, *pb);
                        if (mb < 0 || *pb >= *pf || !ready(&b, m, -1, BM_PASS_B, mb)) break;
                        emit(&b, r, m, -1, BM_PASS_B, mb);
                        (*pb)++, (*lv)--, emitted++, again = 1;
                    }
                    do { /* one forward at a time, so a ready backward goes first */
                        int mb = nth_mb(&b, m, r, *pf);
                        int lim = b.t->modules[m].role == BM_ROLE_ENCODER ? f->enc_limit : 0;
                        if (mb < 0 || (lim && *lv >= lim) || !ready(&b, m, -1, BM_PASS_F, mb))
                            break;
                        emit(&b, r, m, -1, BM_PASS_F, mb);
                        (*pf)++, (*lv)++, emitted++, again = 1;
                    } while (0);
                }
                if (next_bb[r] < n_bb) {
                    struct bm_bb_step s = ord[r][next_bb[r]];
                    if (ready(&b, b.bb, s.chunk, s.pass, s.mb)) {
                        emit(&b, r, b.bb, s.chunk, s.pass, s.mb);
                        next_bb[r]++, emitted++, again = 1;
                    }
                }
                progress |= again;
            }
        }
    }
    for (int r = 0; r < P; r++) bm_free(ord[r]);
    bm_free(ord);
    bm_free(next_bb);
    bm_free(nf);
    bm_free(nb);
    bm_free(live);
    bm_free(b.avail);
    bm_free(b.cons);
    bm_free(b.done);
    if (emitted < total) {
        bm_table_free(b.t);
        return NULL;
    }
    return b.t;
}

/* ---------------------------------------------------------------- mutation helpers */

/* Index of the op whose action string is 'a' on rank r, or -1. */
static int find(const struct bm_table *t, int r, const char *a)
{
    char buf[512];
    for (int i = 0; i < t->ranks[r].n_ops; i++) {
        bm_op_format(t, &t->ranks[r].ops[i], buf, sizeof buf);
        if (!strcmp(buf, a)) return i;
    }
    return -1;
}

static void del(struct bm_table *t, int r, int i)
{
    struct bm_rank_ops *ro = &t->ranks[r];
    memmove(&ro->ops[i], &ro->ops[i + 1], (size_t)(ro->n_ops - i - 1) * sizeof *ro->ops);
    ro->n_ops--;
}

static void ins(struct bm_table *t, int r, int i, struct bm_op op)
{
    push(t, r, op); /* grow */
    struct bm_rank_ops *ro = &t->ranks[r];
    memmove(&ro->ops[i + 1], &ro->ops[i], (size_t)(ro->n_ops - 1 - i) * sizeof *ro->ops);
    ro->ops[i] = op;
}

/* Move op 'from' so that it ends up at index 'to' (indices in the final list). */
static void mv(struct bm_table *t, int r, int from, int to)
{
    struct bm_op op = t->ranks[r].ops[from];
    del(t, r, from);
    ins(t, r, to, op);
}

static void dump(const struct bm_table *t)
{
    char buf[512];
    for (int r = 0; r < t->pp; r++) {
        fprintf(stderr, "rank %d:", r);
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            bm_op_format(t, &t->ranks[r].ops[i], buf, sizeof buf);
            fprintf(stderr, " %d:%s", i, buf);
        }
        fprintf(stderr, "\n");
    }
}

static int verify_ok(const struct bm_table *t)
{
    struct bm_err err;
    if (bm_verify(t, &err) == BM_OK) return 1;
    fprintf(stderr, "  unexpected failure:\n%s\n", err.msg);
    dump(t);
    return 0;
}

/* Verify expecting failure; returns the message (static buffer). */
static const char *verify_fail(const struct bm_table *t)
{
    static struct bm_err err;
    if (bm_verify(t, &err) == BM_OK) {
        snprintf(err.msg, sizeof err.msg, "(verified OK)");
        return err.msg;
    }
    return err.msg;
}

/* P=2, M=2, 1f1b, vit on rank m % 2. */
static struct bm_table *small(void)
{
    struct fx f = fx_default(2, 2);
    return fx_build(&f);
}

/* ---------------------------------------------------------------- correct tables */

TEST(small_table_verifies)
{
    struct bm_table *t = small();
    CHECK(t != NULL);
    if (!t) return;
    CHECK(verify_ok(t));
    CHECK(bm_verify(t, NULL) == BM_OK);
    bm_table_free(t);
}

TEST(grid_of_correct_tables_verifies)
{
    enum bm_backbone bbs[3] = {BM_BB_GPIPE, BM_BB_1F1B, BM_BB_INTERLEAVED};
    int built = 0;
    for (int P = 1; P <= 4; P++)
        for (int bi = 0; bi < 3; bi++)
            for (int V = 1; V <= (bbs[bi] == BM_BB_INTERLEAVED ? 3 : 1); V++)
                for (int mm = 1; mm <= 3; mm++)
                    for (int mods = 0; mods < 4; mods++)
                        for (int uni = 0; uni < 2; uni++) {
                            struct fx f = fx_default(P, P * mm);
                            f.V = V;
                            f.bb = bbs[bi];
                            f.vit = mods & 1;
                            f.dit = (mods & 2) != 0;
                            f.dit_grad = mm != 2;
                            f.unified = uni;
                            if (uni) f.pol = BM_POL_UNIFIED;
                            struct bm_table *t = fx_build(&f);
                            CHECKF(t != NULL, "build P=%d V=%d M=%d bb=%d mods=%d", P, V,
                                   P * mm, bi, mods);
                            if (!t) continue;
                            built++;
                            CHECKF(verify_ok(t), "P=%d V=%d M=%d bb=%s mods=%d uni=%d", P, V,
                                   P * mm, bm_backbone_name(f.bb), mods, uni);
                            bm_table_free(t);
                        }
    CHECK(built > 100);
}

TEST(bigmac_table_within_window_verifies)
{
    struct fx f = fx_default(4, 16);
    f.pol = BM_POL_BIGMAC;
    f.window = 2;
    f.enc_limit = 2;
    f.dit = 1;
    struct bm_table *t = fx_build(&f);
    CHECK(t != NULL);
    if (!t) return;
    CHECK(verify_ok(t));
    bm_table_free(t);
}

TEST(policy_none_ignores_other_modules)
{
    struct fx f = fx_default(2, 4);
    f.pol = BM_POL_NONE;
    f.dit = 1;
    struct bm_table *t = fx_build(&f);
    CHECK(t != NULL);
    if (!t) return;
    CHECK(find(t, 0, "vit:F0") < 0);
    CHECK(verify_ok(t));
    /* a nested op in a policy-none table is a structure error */
    ins(t, 0, 0, (struct bm_op){BM_OP_COMPUTE, BM_PASS_F, 0, -1, 0, -1, -1});
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 0 (structure)");
    CHECK_STR_CONTAINS(msg, "rank 0 op #0 vit:F0: policy none runs the backbone only");
    bm_table_free(t);
}

/* ---------------------------------------------------------------- 0. structure */

/* ---------------------------------------------------------------- split backward (W) */

TEST(zero_bubble_tables_verify)
{
    for (int zi = 0; zi < 2; zi++)
        for (int P = 2; P <= 4; P += 2) {
            struct fx f = fx_default(P, 2 * P);
            f.bb = zi ? BM_BB_ZB_INTERLEAVED : BM_BB_ZB_H1;
            f.V = zi ? 2 : 1;
            f.dit = 1;
            struct bm_table *t = fx_build(&f);
            CHECK(t != NULL);
            if (t) CHECKF(verify_ok(t), "%s P=%d", bm_backbone_name(f.bb), P);
            bm_table_free(t);
        }
}

TEST(w_before_its_b_is_rejected)
{
    struct fx f = fx_default(2, 4);
    f.bb = BM_BB_ZB_H1;
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    /* the backbone's W must follow its own B: invariant 3 names it (the order covers W) */
    int w = find(t, 1, "1W0"), b = find(t, 1, "1I0");
    CHECK(w > b && b >= 0);
    mv(t, 1, w, b);
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 3 (backbone order) violated: rank 1");
    CHECK_STR_CONTAINS(msg, "expected 1I0, found 1W0");
    bm_table_free(t);
    /* a nested module's W before its B: invariant 4 names the op */
    t = fx_build(&f);
    if (!t) return;
    int vb = find(t, 0, "vit:B0");
    CHECK(vb >= 0);
    ins(t, 0, vb, (struct bm_op){BM_OP_COMPUTE, BM_PASS_W, 0, -1, 0, -1, -1});
    for (int m = 1; m < 4; m++) { /* W for the other microbatches, after their B */
        char a[32];
        snprintf(a, sizeof a, "vit:B%d", m);
        int r = m % 2, i = find(t, r, a);
        CHECK(i >= 0);
        ins(t, r, i + 1, (struct bm_op){BM_OP_COMPUTE, BM_PASS_W, 0, -1, m, -1, -1});
    }
    msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 4 (dependencies) violated: rank 0 op #");
    CHECK_STR_CONTAINS(msg, "vit:W0 runs a weight-gradient W before its B");
    CHECK_STR_CONTAINS(msg, "needs vit:B0 earlier on rank 0");
    /* moved right after its B, the table verifies */
    int w0 = find(t, 0, "vit:W0");
    mv(t, 0, w0, find(t, 0, "vit:B0"));
    CHECK(verify_ok(t));
    bm_table_free(t);
}

TEST(missing_w_is_rejected)
{
    struct fx f = fx_default(2, 4);
    f.bb = BM_BB_ZB_H1;
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    del(t, 0, find(t, 0, "0W2"));
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 1 (counts) violated: 1 compute op missing");
    CHECK_STR_CONTAINS(msg, "missing: 0W2 (llm chunk 0, rank 0) (the weight-gradient W of a split backward");
    bm_table_free(t);
    /* a nested module with a W for some microbatches has one for all */
    t = fx_build(&f);
    if (!t) return;
    int vb = find(t, 1, "vit:B1");
    ins(t, 1, vb + 1, (struct bm_op){BM_OP_COMPUTE, BM_PASS_W, 0, -1, 1, -1, -1});
    msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "3 compute ops missing");
    CHECK_STR_CONTAINS(msg, "missing: vit:W0 (the weight-gradient W");
    bm_table_free(t);
}

TEST(w_on_the_wrong_rank_is_rejected)
{
    struct fx f = fx_default(2, 4);
    f.bb = BM_BB_ZB_H1;
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    /* every vit microbatch gets its W; mb 1's lands on rank 0, but its B ran on rank 1 */
    for (int m = 0; m < 4; m++) {
        char a[32];
        snprintf(a, sizeof a, "vit:B%d", m);
        int r = m % 2, i = find(t, r, a);
        CHECK(i >= 0);
        ins(t, m == 1 ? 0 : r, m == 1 ? t->ranks[0].n_ops : i + 1,
            (struct bm_op){BM_OP_COMPUTE, BM_PASS_W, 0, -1, m, -1, -1});
    }
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "vit:W1 runs a weight-gradient W on a rank other than its B's");
    CHECK_STR_CONTAINS(msg, "but vit:B1 is at rank 1 op #");
    CHECK_STR_CONTAINS(msg, "hint: move vit:W1 to rank 1, after vit:B1");
    bm_table_free(t);
    /* a backbone W on another rank breaks the chunk's placement */
    t = fx_build(&f);
    if (!t) return;
    int w = find(t, 0, "0W1");
    struct bm_op op = t->ranks[0].ops[w];
    del(t, 0, w);
    ins(t, 1, t->ranks[1].n_ops, op);
    CHECK_STR_CONTAINS(verify_fail(t), "0W1: backbone chunk 0 lives on rank 0 (chunk % pp), not rank 1");
    bm_table_free(t);
}

TEST(residency_counts_live_until_w)
{
    /* bigmac window 1, unit 2 (one vit microbatch per rank and unit): vit:F2 after vit:B0 but
     * before vit:W0 holds two microbatches on rank 0 */
    struct fx f = fx_default(2, 4);
    f.bb = BM_BB_ZB_H1;
    f.pol = BM_POL_BIGMAC;
    f.window = 1;
    f.enc_limit = 1;
    struct bm_table *t = fx_build(&f);
    CHECK(t != NULL);
    if (!t) return;
    for (int m = 0; m < 4; m++) {
        char a[32];
        snprintf(a, sizeof a, "vit:B%d", m);
        int r = m % 2, i = find(t, r, a);
        ins(t, r, i + 1, (struct bm_op){BM_OP_COMPUTE, BM_PASS_W, 0, -1, m, -1, -1});
    }
    CHECK(verify_ok(t));
    int peak[2 * 2];
    bm_table_peak_live(t, peak);
    CHECK(peak[0 * 2 + 0] == 1); /* vit on rank 0 */
    int w0 = find(t, 0, "vit:W0"), f2 = find(t, 0, "vit:F2");
    CHECK(w0 >= 0 && f2 > w0);
    mv(t, 0, w0, f2); /* W0 now after F2 */
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 5 (residency) violated");
    CHECK_STR_CONTAINS(msg, "rank 0: encoder vit has 2 live microbatches at op #");
    bm_table_peak_live(t, peak);
    CHECK(peak[0] == 2);
    bm_table_free(t);
}

TEST(structure_errors_name_rank_and_op)
{
    struct bm_table *t = small();
    if (!t) return;
    int i = find(t, 1, "vit:F1");
    CHECK(i >= 0);
    t->ranks[1].ops[i].mb = 7;
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 0 (structure) violated: 1 problem");
    CHECKF(strstr(msg, "rank 1 op #") && strstr(msg, "vit:F7: mb 7 is out of range 0..1"), "%s",
           msg);
    t->ranks[1].ops[i].mb = 1;

    int j = find(t, 0, "0F0");
    t->ranks[0].ops[j].chunk = 1;
    msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "1F0: backbone chunk 1 lives on rank 1 (chunk % pp), not rank 0");
    t->ranks[0].ops[j].chunk = 9;
    CHECK_STR_CONTAINS(verify_fail(t), "backbone chunk 9 is out of range 0..1");
    t->ranks[0].ops[j].chunk = 0;

    t->ranks[0].ops[j].pass = BM_PASS_W;
    /* a W where the backbone schedule (1f1b) does not split the backward */
    CHECK_STR_CONTAINS(verify_fail(t), "unexpected: 0W0 (llm chunk 0, rank 0) at rank 0 op #");
    t->ranks[0].ops[j].pass = BM_PASS_F;

    int s = find(t, 0, "SEND_F:llm.c0.out:0>1");
    CHECK(s >= 0);
    t->ranks[0].ops[s].peer = 0;
    CHECK_STR_CONTAINS(verify_fail(t), "SEND_F:llm.c0.out:0>0: a rank cannot send to itself");
    t->ranks[0].ops[s].peer = 5;
    CHECK_STR_CONTAINS(verify_fail(t), "peer 5 is not a rank 0..1");
    t->ranks[0].ops[s].peer = 1;
    t->ranks[0].ops[s].tensor = 99;
    CHECK_STR_CONTAINS(verify_fail(t), "tensor index 99 is out of range");
    t->ranks[0].ops[s].tensor = -1;
    CHECK_STR_CONTAINS(verify_fail(t), "tensor index -1 is out of range");
    t->ranks[0].ops[s].tensor = bm_table_find_tensor(t, "llm.c0.out");

    int v = find(t, 0, "vit:F0");
    t->ranks[0].ops[v].chunk = 0;
    CHECK_STR_CONTAINS(verify_fail(t), "module vit is not the backbone, so its chunk must be -1");
    t->ranks[0].ops[v].chunk = -1;
    t->ranks[0].ops[v].module = 42;
    CHECK_STR_CONTAINS(verify_fail(t), "compute: module index 42 is out of range (the table has 2 modules)");
    t->ranks[0].ops[v].module = 0;
    t->ranks[0].ops[v].kind = 7;
    CHECK_STR_CONTAINS(verify_fail(t), "unknown op kind 7");
    t->ranks[0].ops[v].kind = BM_OP_COMPUTE;
    CHECK(verify_ok(t));

    t->microbatches = 0;
    CHECK_STR_CONTAINS(verify_fail(t), "microbatches is 0");
    t->microbatches = 2;
    t->backbone_module = 5;
    CHECK_STR_CONTAINS(verify_fail(t), "backbone_module is 5");
    t->backbone_module = 1;
    CHECK(verify_ok(t));
    bm_table_free(t);
}

TEST(structure_many_problems_are_summarised)
{
    struct fx f = fx_default(4, 32);
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) t->ranks[r].ops[i].mb = 1000 + i;
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 0 (structure) violated: at least ");
    CHECK_STR_CONTAINS(msg, "more line");
    CHECK(strlen(msg) < sizeof(((struct bm_err *)0)->msg));
    bm_table_free(t);
}

TEST(malformed_headers_are_structure_errors)
{
    struct bm_table *t = small();
    if (!t) return;
    struct bm_rank_ops *ranks = t->ranks;
    t->ranks = NULL;
    CHECK_STR_CONTAINS(verify_fail(t), "the table has no rank list (pp 2)");
    t->ranks = ranks;
    t->pp = -1;
    CHECK_STR_CONTAINS(verify_fail(t), "pp is -1");
    t->pp = 2;
    t->vpp = 0;
    CHECK_STR_CONTAINS(verify_fail(t), "vpp is 0");
    t->vpp = 1;
    t->n_modules = 0;
    CHECK_STR_CONTAINS(verify_fail(t), "the table lists 0 modules");
    t->n_modules = 2;
    t->modules[0].role = BM_ROLE_BACKBONE;
    CHECK_STR_CONTAINS(verify_fail(t), "module vit has role backbone but the backbone is module #1");
    t->modules[0].role = 9;
    CHECK_STR_CONTAINS(verify_fail(t), "module vit has unknown role 9");
    t->modules[0].role = BM_ROLE_ENCODER;
    char *name = t->modules[0].name;
    t->modules[0].name = t->modules[1].name;
    CHECK_STR_CONTAINS(verify_fail(t), "module name llm is used twice");
    t->modules[0].name = NULL;
    CHECK_STR_CONTAINS(verify_fail(t), "module #0 has no name");
    t->modules[0].name = name;
    char *c0 = t->modules[1].consumes[0];
    t->modules[1].consumes[0] = NULL;
    CHECK_STR_CONTAINS(verify_fail(t), "module llm: consumes[0] is null");
    t->modules[1].consumes[0] = c0;
    t->policy = 77;
    CHECK_STR_CONTAINS(verify_fail(t), "unknown policy 77");
    t->policy = BM_POL_OPTIMUS;
    t->window = -2;
    CHECK_STR_CONTAINS(verify_fail(t), "window is -2");
    t->window = 0;
    t->microbatches = 1 << 24;
    t->vpp = 4096;
    CHECK_STR_CONTAINS(verify_fail(t), "too large to verify");
    t->microbatches = 2;
    t->vpp = 1;
    /* two tensors with one name */
    CHECK(t->n_tensors >= 2);
    char *n1 = t->tensors[1].name;
    t->tensors[1].name = bm_strdup(t->tensors[0].name);
    char want[128];
    snprintf(want, sizeof want, "tensor name %s is used twice (#0 and #1)", t->tensors[0].name);
    CHECK_STR_CONTAINS(verify_fail(t), want);
    bm_free(t->tensors[1].name);
    t->tensors[1].name = n1;
    CHECK(verify_ok(t));
    bm_table_free(t);
}

TEST(tensor_unknown_to_graph_is_structure_error)
{
    struct bm_table *t = small();
    if (!t) return;
    int x = bm_table_tensor(t, "mystery", 0, 0);
    int s = find(t, 0, "SEND_F:llm.c0.out:0>1");
    int rr = find(t, 1, "RECV_F:llm.c0.out:0<0");
    t->ranks[0].ops[s].tensor = x;
    t->ranks[1].ops[rr].tensor = x;
    CHECK_STR_CONTAINS(verify_fail(t), "no module of the graph makes tensor mystery");
    bm_table_free(t);
}

/* ---------------------------------------------------------------- 1. counts */

TEST(counts_missing_op)
{
    struct bm_table *t = small();
    if (!t) return;
    del(t, 1, find(t, 1, "vit:F1"));
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 1 (counts) violated: 1 compute op missing");
    CHECK_STR_CONTAINS(msg, "missing: vit:F1");
    bm_table_free(t);

    t = small();
    del(t, 1, find(t, 1, "1B0"));
    CHECK_STR_CONTAINS(verify_fail(t), "missing: 1B0 (llm chunk 1, rank 1)");
    bm_table_free(t);
}

TEST(counts_duplicated_op)
{
    struct bm_table *t = small();
    if (!t) return;
    int i = find(t, 0, "0F1");
    ins(t, 0, i + 1, t->ranks[0].ops[i]);
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "0 compute ops missing, 1 duplicated");
    char want[128];
    snprintf(want, sizeof want, "duplicated: 0F1 (llm chunk 0, rank 0) at rank 0 op #%d and rank 0 "
             "op #%d", i, i + 1);
    CHECK_STR_CONTAINS(msg, want);
    bm_table_free(t);

    /* the same nested op on two ranks */
    t = small();
    ins(t, 1, 0, (struct bm_op){BM_OP_COMPUTE, BM_PASS_F, 0, -1, 0, -1, -1});
    CHECK_STR_CONTAINS(verify_fail(t), "duplicated: vit:F0 at rank 0 op #0 and rank 1 op #0");
    bm_table_free(t);
}

TEST(counts_unmatched_send_and_recv)
{
    struct bm_table *t = small();
    if (!t) return;
    int s = find(t, 1, "SEND_F:vis_emb:1>0");
    del(t, 0, find(t, 0, "RECV_F:vis_emb:1<1"));
    char want[160];
    snprintf(want, sizeof want, "unmatched: SEND_F:vis_emb:1>0 at rank 1 op #%d has no matching "
             "RECV_F:vis_emb:1<1 on rank 0", s);
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "1 unmatched send/recv");
    CHECK_STR_CONTAINS(msg, want);
    bm_table_free(t);

    t = small();
    int r = find(t, 1, "RECV_B:grad:llm.c0.out:1<1");
    CHECK(r < 0); /* rank 1 sends that one */
    r = find(t, 0, "RECV_B:grad:llm.c0.out:1<1");
    del(t, 1, find(t, 1, "SEND_B:grad:llm.c0.out:1>0"));
    snprintf(want, sizeof want, "unmatched: RECV_B:grad:llm.c0.out:1<1 at rank 0 op #%d has no "
             "matching SEND_B:grad:llm.c0.out:1>0 on rank 1", r);
    CHECK_STR_CONTAINS(verify_fail(t), want);
    bm_table_free(t);

    /* a recv twice */
    t = small();
    r = find(t, 1, "RECV_F:llm.c0.out:0<0");
    ins(t, 1, r, t->ranks[1].ops[r]);
    CHECK_STR_CONTAINS(verify_fail(t), "duplicated: RECV_F:llm.c0.out:0<0 2 times");
    bm_table_free(t);
}

/* ---------------------------------------------------------------- 2. deadlock */

TEST(deadlock_two_ranks_receiving_first)
{
    struct bm_table *t = small();
    if (!t) return;
    /* rank 0 waits for rank 1's backward gradient before doing anything; rank 1 waits for
     * rank 0's forward activation */
    mv(t, 0, find(t, 0, "RECV_B:grad:llm.c0.out:0<1"), 0);
    int r1 = find(t, 1, "RECV_F:llm.c0.out:0<0");
    int s1 = find(t, 1, "SEND_B:grad:llm.c0.out:0>0");
    int s0 = find(t, 0, "SEND_F:llm.c0.out:0>1");
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 2 (deadlock freedom) violated: 2 of 2 ranks cannot finish");
    char want[256];
    snprintf(want, sizeof want, "rank 0 blocked at op #0 RECV_B:grad:llm.c0.out:0<1: waits for "
             "rank 1's op #%d SEND_B:grad:llm.c0.out:0>0; rank 1 is itself blocked at op #%d "
             "RECV_F:llm.c0.out:0<0", s1, r1);
    CHECK_STR_CONTAINS(msg, want);
    snprintf(want, sizeof want, "rank 1 blocked at op #%d RECV_F:llm.c0.out:0<0: waits for rank "
             "0's op #%d SEND_F:llm.c0.out:0>1; rank 0 is itself blocked at op #0", r1, s0);
    CHECK_STR_CONTAINS(msg, want);
    CHECK_STR_CONTAINS(msg, "cycle: rank 0 -> rank 1 -> rank 0");
    bm_table_free(t);
}

TEST(deadlock_cycle_with_bystanders)
{
    struct fx f = fx_default(4, 4);
    f.vit = 0;
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    /* rank 1 waits for rank 2's grad before its first op; rank 2 waits for rank 1's output,
     * rank 3 waits for rank 2 (blocked, not on the cycle); rank 0 runs until its backward. */
    mv(t, 1, find(t, 1, "RECV_B:grad:llm.c1.out:0<2"), 0);
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 2 (deadlock freedom)");
    CHECK_STR_CONTAINS(msg, "cycle: rank 1 -> rank 2 -> rank 1");
    CHECK_STR_CONTAINS(msg, "rank 1 blocked at op #0 RECV_B:grad:llm.c1.out:0<2");
    CHECK_STR_CONTAINS(msg, "rank 3 blocked at op #0 RECV_F:llm.c2.out:0<2");
    bm_table_free(t);
}

/* ---------------------------------------------------------------- 3. backbone order */

TEST(order_swapped_backbone_ops)
{
    struct fx f = fx_default(2, 4);
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    int a = find(t, 0, "0F2"), b = find(t, 0, "0F3");
    struct bm_op tmp = t->ranks[0].ops[a];
    t->ranks[0].ops[a] = t->ranks[0].ops[b];
    t->ranks[0].ops[b] = tmp;
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 3 (backbone order) violated: rank 0's backbone ops differ "
                            "from 1f1b (P=2 V=1 M=4, warm-up 1)");
    char want[128];
    snprintf(want, sizeof want, "rank 0 backbone position 3 (op #%d): expected 0F2, found 0F3", a);
    CHECK_STR_CONTAINS(msg, want);
    bm_table_free(t);
}

TEST(order_wrong_schedule_label)
{
    struct fx f = fx_default(2, 4);
    f.bb = BM_BB_GPIPE;
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    CHECK(verify_ok(t));
    t->backbone = BM_BB_1F1B;
    CHECK_STR_CONTAINS(verify_fail(t), "expected 0B0, found 0F2");
    t->backbone = BM_BB_GPIPE;
    t->warmup_extra = 1; /* gpipe ignores the warm-up; still fine */
    CHECK(verify_ok(t));
    t->backbone = BM_BB_INTERLEAVED;
    t->warmup_extra = 0;
    t->microbatches = 3; /* fewer mbs: structure/counts catch it first */
    CHECK_STR_CONTAINS(verify_fail(t), "invariant 0");
    t->microbatches = 4;
    t->vpp = 1;
    CHECK_STR_CONTAINS(verify_fail(t), "invariant 3 (backbone order)");
    bm_table_free(t);

    f.bb = BM_BB_1F1B;
    f.V = 1;
    t = fx_build(&f);
    t->warmup_extra = 1; /* rank 0 would hold 2 forwards before B0 */
    CHECK_STR_CONTAINS(verify_fail(t), "(P=2 V=1 M=4, warm-up 2)");
    bm_table_free(t);
}

/* ---------------------------------------------------------------- 4. dependencies */

TEST(deps_consumer_before_producer)
{
    struct bm_table *t = small();
    if (!t) return;
    int c = find(t, 0, "0F1");
    int r = find(t, 0, "RECV_F:vis_emb:1<1");
    CHECK(r >= 0 && r < c);
    mv(t, 0, r, c); /* the recv now follows its consumer */
    c = find(t, 0, "0F1");
    r = find(t, 0, "RECV_F:vis_emb:1<1");
    const char *msg = verify_fail(t);
    char want[256];
    snprintf(want, sizeof want, "rank 0 op #%d 0F1 (llm F chunk 0 mb 1) needs vis_emb (mb 1), "
             "which is not on rank 0 yet: produced by vit:F1 on rank 1, received by op #%d, after "
             "this op", c, r);
    CHECK_STR_CONTAINS(msg, "invariant 4 (dependencies) violated");
    CHECK_STR_CONTAINS(msg, want);
    bm_table_free(t);
}

TEST(deps_recv_on_wrong_rank)
{
    /* P=3: vis_emb of mb 1 is sent to rank 2 instead of rank 0 */
    struct fx f = fx_default(3, 3);
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    int s = find(t, 1, "SEND_F:vis_emb:1>0");
    int r = find(t, 0, "RECV_F:vis_emb:1<1");
    struct bm_op rop = t->ranks[0].ops[r];
    del(t, 0, r);
    t->ranks[1].ops[s].peer = 2;
    ins(t, 2, 0, rop);
    int c = find(t, 0, "0F1");
    char want[256];
    snprintf(want, sizeof want, "rank 0 op #%d 0F1 (llm F chunk 0 mb 1) needs vis_emb (mb 1), "
             "which is not on rank 0 yet: produced by vit:F1 on rank 1, no recv before this op", c);
    CHECK_STR_CONTAINS(verify_fail(t), want);
    bm_table_free(t);
}

TEST(deps_send_before_tensor_exists)
{
    struct bm_table *t = small();
    if (!t) return;
    int p = find(t, 1, "vit:F1");
    mv(t, 1, find(t, 1, "SEND_F:vis_emb:1>0"), p);
    int s = find(t, 1, "SEND_F:vis_emb:1>0");
    p = find(t, 1, "vit:F1");
    char want[256];
    snprintf(want, sizeof want, "rank 1 op #%d SEND_F:vis_emb:1>0 sends vis_emb (mb 1), which is "
             "not on rank 1 yet: made by vit:F1 at rank 1 op #%d, after this op", s, p);
    CHECK_STR_CONTAINS(verify_fail(t), want);
    bm_table_free(t);
}

TEST(deps_backward_before_own_forward)
{
    struct bm_table *t = small();
    if (!t) return;
    mv(t, 0, find(t, 0, "vit:B0"), 0);
    int f = find(t, 0, "vit:F0");
    char want[256];
    snprintf(want, sizeof want, "rank 0 op #0 vit:B0 (vit B mb 0) needs its forward vit:F0 earlier "
             "on rank 0 (activations are local), but vit:F0 is at rank 0 op #%d", f);
    CHECK_STR_CONTAINS(verify_fail(t), want);
    bm_table_free(t);
}

TEST(deps_backward_on_other_rank_than_forward)
{
    struct bm_table *t = small();
    if (!t) return;
    /* vit:B1 moves from rank 1 to rank 0, right after rank 0 made grad:vis_emb:1 */
    int b = find(t, 1, "vit:B1");
    struct bm_op op = t->ranks[1].ops[b];
    del(t, 1, b);
    int g = find(t, 0, "0B1");
    ins(t, 0, g + 1, op);
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "vit:B1 (vit B mb 1) needs its forward vit:F1 earlier on rank 0");
    CHECK_STR_CONTAINS(msg, "but vit:F1 is at rank 1 op #");
    bm_table_free(t);
}

/* ---------------------------------------------------------------- 5. residency */

TEST(residency_encoder_exceeded)
{
    struct fx f = fx_default(2, 8);
    f.pol = BM_POL_BIGMAC;
    f.window = 1;
    f.unit = 2; /* limit window * ceil(2/2) = 1 per rank */
    struct bm_table *t = fx_build(&f); /* no build limit: all encoder forwards hoisted */
    if (!t) return;
    const char *msg = verify_fail(t);
    CHECK_STR_CONTAINS(msg, "invariant 5 (residency) violated");
    int i = find(t, 0, "vit:F2");
    char want[256];
    snprintf(want, sizeof want, "rank 0: encoder vit has 2 live microbatches at op #%d vit:F2 "
             "(peak 4), limit window*ceil(unit/pp) = 1*1 = 1", i);
    CHECK_STR_CONTAINS(msg, want);
    CHECK_STR_CONTAINS(msg, "rank 1: encoder vit has 2 live microbatches");
    /* the same table under the unbounded policies is fine */
    t->policy = BM_POL_OPTIMUS;
    CHECK(verify_ok(t));
    t->policy = BM_POL_BIGMAC;
    t->window = 4;
    CHECK(verify_ok(t));
    bm_table_free(t);
}

TEST(residency_generator_exceeded)
{
    struct fx f = fx_default(2, 4);
    f.bb = BM_BB_GPIPE;
    f.pol = BM_POL_BIGMAC;
    f.window = 4;
    f.vit = 0;
    f.dit = 1;
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    CHECK(verify_ok(t));
    /* delay dit:B0 and its gradient send on rank 0 until after dit:F2 */
    int b = find(t, 0, "dit:B0");
    CHECK(find(t, 0, "SEND_B:grad:hidden:0>1") == b + 1);
    struct bm_op gb = t->ranks[0].ops[b], gs = t->ranks[0].ops[b + 1];
    del(t, 0, b);
    del(t, 0, b);
    int f2 = find(t, 0, "dit:F2");
    ins(t, 0, f2 + 1, gb);
    ins(t, 0, f2 + 2, gs);
    const char *msg = verify_fail(t);
    char want[256];
    snprintf(want, sizeof want, "rank 0: generator dit has 2 live microbatches at op #%d dit:F2 "
             "(peak 2), limit ceil(unit/pp) = 1", f2);
    CHECK_STR_CONTAINS(msg, want);
    bm_table_free(t);
}

TEST(peak_live_counts)
{
    struct bm_table *t = small(); /* P=2 M=2 1f1b, modules vit(0) llm(1) */
    if (!t) return;
    int out[4];
    bm_table_peak_live(t, out);
    CHECK(out[0 * 2 + 1] == 2); /* rank 0: F0 F1 B0 B1 */
    CHECK(out[1 * 2 + 1] == 1); /* rank 1: F0 B0 F1 B1 */
    CHECK(out[0 * 2 + 0] == 1); /* vit mb 0 on rank 0 */
    CHECK(out[1 * 2 + 0] == 1);
    bm_table_free(t);

    struct fx f = fx_default(2, 4);
    f.V = 2;
    f.bb = BM_BB_INTERLEAVED;
    t = fx_build(&f);
    int o2[4];
    bm_table_peak_live(t, o2);
    /* interleaved P=2 V=2: rank 0 warm-up 2*(2-0-1) + (2-1)*2 = 4 forwards, then 1F1B: the
     * backbone peak is warm-up + 1 (summed over both chunks) */
    CHECK(o2[0 * 2 + 1] == 5);
    CHECK(o2[1 * 2 + 1] == 3);
    CHECK(o2[0 * 2 + 0] == 2); /* all encoder forwards hoisted: mbs 0, 2 */
    bm_table_free(t);
}

/* ---------------------------------------------------------------- robustness */

static uint64_t rng_state = 88172645463325252ULL;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

TEST(random_mutations_never_crash_or_hang)
{
    struct fx f = fx_default(3, 6);
    f.dit = 1;
    f.pol = BM_POL_BIGMAC;
    f.window = 2;
    f.enc_limit = 2;
    int fails = 0, runs = 0;
    for (int it = 0; it < 3000; it++) {
        struct bm_table *t = fx_build(&f);
        if (!t) {
            CHECK(t != NULL);
            return;
        }
        int nm = 1 + (int)(rnd() % 3);
        for (int k = 0; k < nm; k++) {
            int r = (int)(rnd() % 3);
            struct bm_rank_ops *ro = &t->ranks[r];
            if (!ro->n_ops) continue;
            int i = (int)(rnd() % (unsigned)ro->n_ops), j = (int)(rnd() % (unsigned)ro->n_ops);
            struct bm_op *op = &ro->ops[i];
            int v = (int)(rnd() % 9) - 2;
            switch (rnd() % 10) {
            case 0: del(t, r, i); break;
            case 1: ins(t, r, j, *op); break;
            case 2: mv(t, r, i, j); break;
            case 3: op->mb += v; break;
            case 4: op->chunk += v; break;
            case 5: op->peer += v; break;
            case 6: op->tensor += v; break;
            case 7: op->module = (int16_t)(op->module + v); break;
            case 8: op->pass = (uint8_t)(op->pass + v); break;
            case 9: op->kind = (uint8_t)(op->kind + v); break;
            }
        }
        struct bm_err err;
        int rc = bm_verify(t, &err);
        runs++;
        if (rc != BM_OK) {
            fails++;
            CHECK(strncmp(err.msg, "invariant ", 10) == 0);
        }
        bm_table_free(t);
    }
    CHECK(fails > runs / 2);
}

TEST(allocation_failures_are_reported)
{
    struct fx f = fx_default(2, 4);
    f.dit = 1;
    struct bm_table *t = fx_build(&f);
    if (!t) return;
    int ok_at = 0;
    for (long n = 1; n < 200 && !ok_at; n++) {
        struct bm_err err;
        bm_alloc_fail_at(n);
        int rc = bm_verify(t, &err);
        int fired = bm_alloc_failed();
        bm_alloc_fail_at(0);
        if (!fired) {
            CHECK(rc == BM_OK);
            ok_at = (int)n;
        } else {
            CHECKF(rc == BM_ERR && strstr(err.msg, "out of memory"), "n=%ld: %s", n, err.msg);
        }
    }
    CHECK(ok_at > 5);
    bm_table_free(t);
}

/* The verifier must handle planner-sized tables quickly; the time is printed, not asserted. */
TEST(large_interleaved_table_is_fast)
{
    struct fx f = fx_default(64, 1024);
    f.V = 4;
    f.bb = BM_BB_INTERLEAVED;
    f.dit = 1;
    f.pol = BM_POL_OPTIMUS;
    const char *env = getenv("BM_VERIFY_BIG");
    if (env && !strcmp(env, "0")) return;
    double t0 = bm_now();
    struct bm_table *t = fx_build(&f);
    double t1 = bm_now();
    CHECK(t != NULL);
    (void)t1;
    if (!t) return;
    struct bm_err err;
    double best = 1e9;
    for (int k = 0; k < 3; k++) { /* the first run pays for page faults */
        double a = bm_now();
        int rc = bm_verify(t, &err);
        double b = bm_now();
        CHECKF(rc == BM_OK, "%s", err.msg);
        if (b - a < best) best = b - a;
    }
    printf("  large table: P=64 V=4 M=1024, %ld ops; built in %.2fs, verified in %.3fs (best of 3)\n",
           bm_table_n_ops(t), t1 - t0, best);
    bm_table_free(t);
}

int main(void)
{
    RUN(zero_bubble_tables_verify);
    RUN(w_before_its_b_is_rejected);
    RUN(missing_w_is_rejected);
    RUN(w_on_the_wrong_rank_is_rejected);
    RUN(residency_counts_live_until_w);
    RUN(small_table_verifies);
    RUN(grid_of_correct_tables_verifies);
    RUN(bigmac_table_within_window_verifies);
    RUN(policy_none_ignores_other_modules);
    RUN(structure_errors_name_rank_and_op);
    RUN(structure_many_problems_are_summarised);
    RUN(malformed_headers_are_structure_errors);
    RUN(tensor_unknown_to_graph_is_structure_error);
    RUN(counts_missing_op);
    RUN(counts_duplicated_op);
    RUN(counts_unmatched_send_and_recv);
    RUN(deadlock_two_ranks_receiving_first);
    RUN(deadlock_cycle_with_bystanders);
    RUN(order_swapped_backbone_ops);
    RUN(order_wrong_schedule_label);
    RUN(deps_consumer_before_producer);
    RUN(deps_recv_on_wrong_rank);
    RUN(deps_send_before_tensor_exists);
    RUN(deps_backward_before_own_forward);
    RUN(deps_backward_on_other_rank_than_forward);
    RUN(residency_encoder_exceeded);
    RUN(residency_generator_exceeded);
    RUN(peak_live_counts);
    RUN(random_mutations_never_crash_or_hang);
    RUN(allocation_failures_are_reported);
    RUN(large_interleaved_table_is_fast);
    return test_summary();
}
