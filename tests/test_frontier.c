/* test_frontier.c — the compute/memory frontier: the Pareto marks against an independent
 * reference (sort by memory, sweep the running best makespan) on random point sets with ties,
 * and the frontier of a real spec (every policy x recompute choice present, bigmac windows
 * growing while they pay, the spec left as it was). */
#include "study/frontier.h"
#include "test.h"
#include "util/util.h"

/* Reference: p is non-dominated iff no point has (mem <= , ms <=) with one strict. After
 * sorting by (mem, ms), a point is dominated iff an earlier point in the order with a
 * different (mem, ms) pair has ms <= its ms. */
static void reference_marks(const struct bm_frontier_point *p, int n, int *out)
{
    int *ord = bm_malloc((size_t)n * sizeof *ord);
    for (int i = 0; i < n; i++) ord[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort by (mem, ms) */
        for (int j = i; j > 0; j--) {
            const struct bm_frontier_point *a = &p[ord[j - 1]], *b = &p[ord[j]];
            if (a->peak_mib < b->peak_mib || (a->peak_mib == b->peak_mib && a->makespan_ms <= b->makespan_ms)) break;
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    double best = 1e300; /* best makespan among strictly smaller (mem, ms) pairs seen so far */
    for (int i = 0; i < n;) {
        int j = i; /* group of identical pairs */
        while (j < n && p[ord[j]].peak_mib == p[ord[i]].peak_mib && p[ord[j]].makespan_ms == p[ord[i]].makespan_ms) j++;
        for (int k = i; k < j; k++) out[ord[k]] = !(best <= p[ord[i]].makespan_ms);
        if (p[ord[i]].makespan_ms < best) best = p[ord[i]].makespan_ms;
        i = j;
    }
    bm_free(ord);
}

TEST(pareto_marks_equal_reference_on_random_sets)
{
    struct bm_rng rng;
    bm_rng_seed(&rng, 7);
    int mismatches = 0, marked = 0;
    for (int trial = 0; trial < 500; trial++) {
        int n = 1 + (int)(bm_rng_uniform(&rng) * 30);
        struct bm_frontier_point p[32];
        int want[32];
        for (int i = 0; i < n; i++) { /* small integer grid: many ties on one or both axes */
            memset(&p[i], 0, sizeof p[i]);
            p[i].peak_mib = (int)(bm_rng_uniform(&rng) * 6);
            p[i].makespan_ms = (int)(bm_rng_uniform(&rng) * 6);
        }
        bm_frontier_mark(p, n);
        reference_marks(p, n, want);
        for (int i = 0; i < n; i++) {
            mismatches += p[i].pareto != want[i];
            marked += p[i].pareto;
        }
    }
    CHECKF(mismatches == 0, "%d marks differ from the reference", mismatches);
    CHECK(marked > 500); /* every set has at least one */
}

TEST(frontier_of_a_spec)
{
    struct bm_spec *s = NULL;
    struct bm_err err;
    CHECKF(bm_spec_load("tests/specs/recompute-oom.json", &s, &err) == BM_OK, "%s", err.msg);
    if (!s) return;
    s->modules[0].recompute = 1; /* the spec's own setting must come back */
    struct bm_plan_opts o;
    bm_plan_opts_from_spec(&o, s);
    struct bm_frontier fr;
    int failed = -1;
    CHECKF(bm_frontier_build(s, &o, s->device.memory_gib * 1024, 1, &fr, &failed, &err) == BM_OK, "%s", err.msg);
    CHECK(s->modules[0].recompute == 1 && s->modules[1].recompute == 0);
    CHECK(failed == 0);
    int seen[BM_N_POLICIES][BM_FRC_N] = {{0}};
    for (int i = 0; i < fr.n; i++) {
        const struct bm_frontier_point *p = &fr.pts[i];
        seen[p->policy][p->recompute]++;
        CHECK(p->oom == (p->peak_mib > 56 * 1024.0));
        CHECK(p->policy != BM_POL_NONE);
        CHECK(p->policy == BM_POL_BIGMAC || p->policy == BM_POL_IDEAL ? p->window > 0 : p->window == 0);
        /* bigmac windows of one recompute choice: increasing, each faster than the one before */
        if (i > 0 && p->policy == BM_POL_BIGMAC && fr.pts[i - 1].policy == BM_POL_BIGMAC &&
            fr.pts[i - 1].recompute == p->recompute) {
            CHECK(p->window == fr.pts[i - 1].window + 1);
            CHECK(p->makespan_ms < fr.pts[i - 1].makespan_ms);
        }
    }
    for (int pol = 0; pol < BM_N_POLICIES; pol++)
        for (int r = 0; r < BM_FRC_N; r++)
            CHECKF(pol == BM_POL_NONE ? seen[pol][r] == 0 : seen[pol][r] >= 1, "policy %d recompute %d: %d points",
                   pol, r, seen[pol][r]);
    CHECK(seen[BM_POL_BIGMAC][BM_FRC_NONE] >= 2); /* auto 3, then 4 pays */
    int want[256];
    CHECK(fr.n <= 256);
    if (fr.n <= 256) {
        reference_marks(fr.pts, fr.n, want);
        for (int i = 0; i < fr.n; i++) CHECK(fr.pts[i].pareto == want[i]);
    }
    /* recomputing costs time and saves memory, policy by policy */
    for (int i = 0; i < fr.n; i++)
        for (int j = 0; j < fr.n; j++) {
            const struct bm_frontier_point *a = &fr.pts[i], *b = &fr.pts[j];
            if (a->policy != b->policy || a->policy == BM_POL_BIGMAC || a->recompute != BM_FRC_NONE ||
                b->recompute != BM_FRC_ALL)
                continue;
            CHECK(b->peak_mib < a->peak_mib && b->makespan_ms > a->makespan_ms);
        }
    /* kept: each point's table and timeline, the timeline's figures the point's */
    for (int i = 0; i < fr.n; i++)
        CHECK(fr.tables && fr.tls && fr.tables[i] && fr.tls[i] && fr.tls[i]->makespan_ms == fr.pts[i].makespan_ms &&
              fr.tables[i]->policy == fr.pts[i].policy);
    bm_frontier_free(&fr);
    bm_spec_free(s);
}

int main(void)
{
    RUN(pareto_marks_equal_reference_on_random_sets);
    RUN(frontier_of_a_spec);
    return test_summary();
}
