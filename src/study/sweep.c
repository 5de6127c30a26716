/* sweep.c — bm_sweep: every combination of pp x vpp x microbatches x policy (x window, for
 * bigmac, the one policy with a window) planned and simulated, the failures kept with their
 * reason, the rest ranked: the ones that fit the memory cap first, by samples/s, then by
 * makespan (`bigmac sweep`, include/bigmac.h). */
#include <stdlib.h>
#include <string.h>

#include "study/study.h"
#include "util/util.h"

static int cmp_rows(const void *a, const void *b)
{
    const struct bm_sweep_row *x = a, *y = b;
    if (x->oom != y->oom) return x->oom - y->oom;
    if (x->samples_per_s != y->samples_per_s) return x->samples_per_s < y->samples_per_s ? 1 : -1;
    return x->makespan_ms < y->makespan_ms ? -1 : x->makespan_ms > y->makespan_ms;
}

/* The backbone a configuration runs: a zero-bubble schedule stays zero-bubble
 * (zb-interleaved at vpp > 1, zb-h1 at 1); vpp > 1 is interleaved; vpp 1 turns an interleaved
 * base into 1f1b unless the caller fixed it; a V shape stays itself at vpp 2 (its only vpp). */
static enum bm_backbone backbone_for(enum bm_backbone base, int vpp, int fixed)
{
    if (bm_backbone_v_shaped(base) && vpp == 2) return base;
    int zb = bm_backbone_splits(base);
    if (vpp > 1) return zb ? BM_BB_ZB_INTERLEAVED : BM_BB_INTERLEAVED;
    if (base == BM_BB_ZB_INTERLEAVED) return BM_BB_ZB_H1;
    if (!fixed && base == BM_BB_INTERLEAVED) return BM_BB_1F1B;
    return base;
}

void bm_study_window_name(int w, char *buf, size_t n)
{
    if (w == BM_WINDOW_AUTO) snprintf(buf, n, "auto");
    else if (w == BM_WINDOW_FIT) snprintf(buf, n, "fit");
    else snprintf(buf, n, "%d", w);
}

/* Plan and simulate one configuration into a row or a skip of sw. */
static void run_one(const struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_sweep_opts *so,
                    struct bm_sweep *sw)
{
    struct bm_table *t = NULL;
    struct bm_costs *c = NULL;
    struct bm_timeline *tl = NULL;
    struct bm_err err;
    int rc = bm_plan_build(s, o, &t, &c, &err) || bm_simulate_summary(t, c, so->sim, &tl, &err);
    bm_costs_free(c);
    if (rc) {
        bm_table_free(t);
        struct bm_sweep_skip *k = &sw->skipped[sw->n_skipped++];
        *k = (struct bm_sweep_skip){.pp = o->pp, .vpp = o->vpp, .microbatches = o->microbatches,
                                    .window = o->window, .backbone = o->backbone, .policy = o->policy};
        char *nl = strchr(err.msg, '\n');
        if (nl) *nl = 0;
        snprintf(k->reason, sizeof k->reason, "%s", err.msg);
        return;
    }
    sw->rows[sw->n_rows++] = (struct bm_sweep_row){
        .pp = o->pp, .vpp = o->vpp, .microbatches = o->microbatches, .unit = t->unit, .window = t->window,
        .backbone = t->backbone, .policy = t->policy, .makespan_ms = tl->makespan_ms,
        .bubble_ratio = tl->bubble_ratio, .samples_per_s = tl->samples_per_s, .peak_mib = tl->peak_mib,
        .oom = sw->cap_mib > 0 && tl->peak_mib > sw->cap_mib, .step_ms = tl->step_ms,
        .sync_exposed_ms = tl->sync_exposed_ms, .optimizer_ms = tl->optimizer_ms};
    bm_timeline_free(tl);
    bm_table_free(t);
}

/* A list, or the base's one value when it is empty. */
static const int *values(const int *list, int n, const int *one, int *count)
{
    *count = n > 0 ? n : 1;
    return n > 0 ? list : one;
}

int bm_sweep(const struct bm_spec *s, const struct bm_plan_opts *base, const struct bm_sweep_opts *opts,
             struct bm_sweep *out, struct bm_err *err)
{
    static const struct bm_sweep_opts defaults = {0};
    const struct bm_sweep_opts *so = opts ? opts : &defaults;
    memset(out, 0, sizeof *out);
    int npp, nvpp, nmb, nwin;
    const int *pps = values(so->pp, so->n_pp, &base->pp, &npp);
    const int *vpps = values(so->vpp, so->n_vpp, &base->vpp, &nvpp);
    const int *mbs = values(so->microbatches, so->n_microbatches, &base->microbatches, &nmb);
    const int *wins = values(so->windows, so->n_windows, &base->window, &nwin);
    const enum bm_policy *pols = so->n_policies > 0 ? so->policies : &base->policy;
    int npol = so->n_policies > 0 ? so->n_policies : 1;
    if (npp > BM_SWEEP_MAX_VALUES || nvpp > BM_SWEEP_MAX_VALUES || nmb > BM_SWEEP_MAX_VALUES ||
        nwin > BM_SWEEP_MAX_VALUES || npol > BM_N_POLICIES)
        return bm_err_set(err, "sweep: at most %d values per list", BM_SWEEP_MAX_VALUES);
    int n_window_pols = 0; /* windows multiply only the policy that has one */
    for (int d = 0; d < npol; d++) n_window_pols += pols[d] == BM_POL_BIGMAC;
    out->cap_mib = s->device.memory_gib * 1024.0;
    if (so->mem_cap_mib > 0 && (out->cap_mib <= 0 || so->mem_cap_mib < out->cap_mib)) out->cap_mib = so->mem_cap_mib;
    out->configs = npp * nvpp * nmb * (npol + n_window_pols * (nwin - 1));
    out->best = -1;
    out->rows = bm_calloc((size_t)(out->configs > 0 ? out->configs : 1), sizeof *out->rows);
    out->skipped = bm_calloc((size_t)(out->configs > 0 ? out->configs : 1), sizeof *out->skipped);
    if (!out->rows || !out->skipped) {
        bm_sweep_free(out);
        return bm_err_set(err, "sweep: out of memory");
    }
    int done = 0;
    for (int a = 0; a < npp; a++)
        for (int b = 0; b < nvpp; b++)
            for (int c = 0; c < nmb; c++)
                for (int d = 0; d < npol; d++)
                    for (int w = 0; w < (pols[d] == BM_POL_BIGMAC ? nwin : 1); w++) {
                        struct bm_plan_opts o = *base;
                        o.pp = pps[a], o.vpp = vpps[b], o.microbatches = mbs[c], o.policy = pols[d];
                        o.window = wins[w];
                        o.backbone = backbone_for(base->backbone, o.vpp, so->backbone_fixed);
                        if (so->progress) {
                            char wname[16];
                            bm_study_window_name(o.window, wname, sizeof wname);
                            fprintf(so->progress, "sweep: [%d/%d] pp %d vpp %d microbatches %d %s%s%s\n", ++done,
                                    out->configs, o.pp, o.vpp, o.microbatches, bm_policy_name(o.policy),
                                    o.policy == BM_POL_BIGMAC ? " window " : "",
                                    o.policy == BM_POL_BIGMAC ? wname : "");
                        }
                        run_one(s, &o, so, out);
                    }
    qsort(out->rows, (size_t)out->n_rows, sizeof *out->rows, cmp_rows);
    out->best = out->n_rows > 0 && !out->rows[0].oom ? 0 : -1;
    return BM_OK;
}

void bm_sweep_free(struct bm_sweep *sw)
{
    bm_free(sw->rows);
    bm_free(sw->skipped);
    sw->rows = NULL, sw->skipped = NULL;
    sw->n_rows = sw->n_skipped = 0;
}
