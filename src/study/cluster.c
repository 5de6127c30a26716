/* cluster.c — bm_cluster_sweep: the layouts of N GPUs for a global batch (see cluster.h). */
#include <stdlib.h>
#include <string.h>

#include "study/cluster.h"
#include "util/util.h"

static const int vpps[] = {1, 2, 4};
enum { N_VPP = 3 };
static const enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_UNIFIED_BALANCED};
enum { N_POL = 4 };

static int cmp_rows(const void *a, const void *b)
{
    const struct bm_cluster_row *x = a, *y = b;
    if (x->oom != y->oom) return x->oom - y->oom;
    if (x->samples_per_s != y->samples_per_s) return x->samples_per_s < y->samples_per_s ? 1 : -1;
    if (x->step_ms != y->step_ms) return x->step_ms < y->step_ms ? -1 : 1;
    if (x->pp != y->pp) return x->pp - y->pp;
    if (x->vpp != y->vpp) return x->vpp - y->vpp;
    if (x->policy != y->policy) return (int)x->policy - (int)y->policy;
    if (x->window != y->window) return x->window - y->window;
    return x->zero - y->zero;
}

/* The backbone of a configuration: interleaved (zb-interleaved for a zero-bubble schedule) at
 * vpp > 1; at vpp 1 the spec's, 1f1b (zb-h1) for an interleaved one. */
static enum bm_backbone backbone_for(enum bm_backbone base, int vpp)
{
    int zb = bm_backbone_splits(base);
    if (vpp > 1) return zb ? BM_BB_ZB_INTERLEAVED : BM_BB_INTERLEAVED;
    if (base == BM_BB_ZB_INTERLEAVED) return BM_BB_ZB_H1;
    if (base == BM_BB_INTERLEAVED) return BM_BB_1F1B;
    return base;
}

static void skip(struct bm_cluster *c, const char *what, const char *why)
{
    c->skipped++;
    if (!c->first_skip[0]) {
        char line[400];
        snprintf(line, sizeof line, "%s", why);
        line[strcspn(line, "\n")] = 0;
        snprintf(c->first_skip, sizeof c->first_skip, "%s: %s", what, line);
    }
}

static void add_row(struct bm_cluster *c, const struct bm_table *t, const struct bm_timeline *tl, int dp)
{
    struct bm_cluster_row *r = &c->rows[c->n_rows++];
    int spm = tl->samples_per_microbatch > 0 ? tl->samples_per_microbatch : 1;
    *r = (struct bm_cluster_row){
        .pp = t->pp, .dp = dp, .vpp = t->vpp, .microbatches = t->microbatches, .window = t->window,
        .zero = t->zero, .policy = t->policy, .backbone = t->backbone, .makespan_ms = tl->makespan_ms,
        .step_ms = tl->step_ms, .sync_exposed_ms = tl->sync_exposed_ms, .sync_total_ms = tl->sync_total_ms,
        .optimizer_ms = tl->optimizer_ms, .samples_per_s = tl->samples_per_s,
        .walk_samples_per_s = tl->makespan_ms > 0 ? (double)dp * t->microbatches * spm / (tl->makespan_ms / 1000) : 0,
        .peak_mib = tl->peak_mib, .oom = c->cap_mib > 0 && tl->peak_mib > c->cap_mib};
}

/* Pareto marks among the fitting rows (peak memory down, samples/s up). */
static void mark_pareto(struct bm_cluster *c)
{
    for (int i = 0; i < c->n_rows; i++) {
        struct bm_cluster_row *a = &c->rows[i];
        a->pareto = !a->oom;
        for (int j = 0; j < c->n_rows && a->pareto; j++) {
            const struct bm_cluster_row *b = &c->rows[j];
            if (j == i || b->oom) continue;
            if (b->peak_mib <= a->peak_mib && b->samples_per_s >= a->samples_per_s &&
                (b->peak_mib < a->peak_mib || b->samples_per_s > a->samples_per_s))
                a->pareto = 0;
        }
    }
}

int bm_cluster_sweep(const struct bm_spec *s, const struct bm_plan_opts *base, const struct bm_cluster_opts *o,
                     struct bm_cluster *out, struct bm_err *err)
{
    memset(out, 0, sizeof *out);
    int N = o->gpus, B = o->global_batch, spm = s->data.samples_per_microbatch > 0 ? s->data.samples_per_microbatch : 1;
    int layers = s->backbone_module >= 0 ? s->modules[s->backbone_module].layers : 0;
    out->cap_mib = s->device.memory_gib * 1024.0;
    if (o->mem_cap_mib > 0 && (out->cap_mib <= 0 || o->mem_cap_mib < out->cap_mib)) out->cap_mib = o->mem_cap_mib;
    /* the layouts: pp divides N and the backbone's layers, and dp * samples_per_microbatch B */
    int pps[64], n_pp = 0;
    size_t ll = 0;
    for (int pp = 1; pp <= N && n_pp < 64; pp++) {
        if (N % pp || (layers > 0 && layers % pp)) continue;
        int dp = N / pp;
        if (B % ((long)dp * spm)) continue;
        pps[n_pp++] = pp;
        if (ll + 40 < sizeof out->layouts)
            ll += (size_t)snprintf(out->layouts + ll, sizeof out->layouts - ll, "%spp %d x dp %d (M %d)",
                                   ll ? ", " : "", pp, dp, B / (dp * spm));
    }
    if (!n_pp)
        return bm_err_set(err, "sweep: no pp x dp = %d with pp dividing the backbone's %d layers and dp x %d "
                               "samples per microbatch dividing the global batch %d\nhint: choose --gpus and "
                               "--global-batch so that some dp divides both", N, layers, spm, B);
    int cap = n_pp * N_VPP * (N_POL + 1) * 2;
    out->rows = bm_calloc((size_t)cap, sizeof *out->rows);
    if (!out->rows) return bm_err_set(err, "sweep: out of memory");
    int done = 0;
    for (int a = 0; a < n_pp; a++) {
        int pp = pps[a], dp = N / pp, M = B / (dp * spm);
        for (int v = 0; v < N_VPP; v++) {
            int vpp = vpps[v];
            if (vpp > 1 && (pp == 1 || M % pp)) continue;       /* interleaving needs pp | M */
            if (layers > 0 && pp * vpp > layers) continue;      /* a chunk per layer at most */
            int auto_w[2] = {-1, -1}; /* bigmac's window at auto per ZeRO stage: fit's twin is dropped */
            for (int p = 0; p < N_POL; p++)
                for (int w = 0; w < (pols[p] == BM_POL_BIGMAC ? 2 : 1); w++) {
                    int window = w ? BM_WINDOW_FIT : BM_WINDOW_AUTO;
                    struct bm_table *t = NULL;
                    struct bm_costs *c = NULL;
                    for (int zero = 0; zero <= 1; zero++) {
                        struct bm_spec sc = *s; /* shallow: only dp and zero differ */
                        sc.dp = dp;
                        sc.train.zero = zero;
                        struct bm_plan_opts po = *base;
                        po.pp = pp, po.vpp = vpp, po.microbatches = M, po.unit = 0, po.policy = pols[p];
                        po.window = window;
                        po.backbone = backbone_for(base->backbone, vpp);
                        char what[160];
                        snprintf(what, sizeof what, "pp %d x dp %d vpp %d M %d %s%s zero %d", pp, dp, vpp, M,
                                 bm_policy_name(pols[p]), pols[p] != BM_POL_BIGMAC ? "" : w ? " window fit"
                                                                                              : " window auto",
                                 zero);
                        if (o->progress) fprintf(o->progress, "sweep: [%d] %s\n", ++done, what);
                        out->configs++;
                        struct bm_err e;
                        /* ZeRO changes the plan only through the memory the window fit sees */
                        if (zero && t && window != BM_WINDOW_FIT) {
                            t->zero = 1;
                        } else {
                            bm_table_free(t);
                            bm_costs_free(c);
                            t = NULL, c = NULL;
                            if (bm_plan_build_search(&sc, &po, o->search, &t, &c, NULL, &e)) {
                                skip(out, what, e.msg);
                                t = NULL;
                                continue;
                            }
                        }
                        struct bm_timeline *tl;
                        struct bm_sim_opts so = {0, 1, spm};
                        if (bm_simulate_summary(t, c, &so, &tl, &e)) {
                            skip(out, what, e.msg);
                            continue;
                        }
                        if (pols[p] == BM_POL_BIGMAC && !w) auto_w[zero] = t->window;
                        if (!w || t->window != auto_w[zero]) add_row(out, t, tl, dp);
                        else out->same++; /* fit chose auto's window: the same plan */
                        bm_timeline_free(tl);
                    }
                    bm_table_free(t);
                    bm_costs_free(c);
                }
        }
    }
    qsort(out->rows, (size_t)out->n_rows, sizeof *out->rows, cmp_rows);
    for (int i = 0; i < out->n_rows; i++) out->n_fit += !out->rows[i].oom;
    mark_pareto(out);
    return BM_OK;
}

void bm_cluster_free(struct bm_cluster *c)
{
    bm_free(c->rows);
    c->rows = NULL;
    c->n_rows = c->n_fit = 0;
}
