/* html_views.c — policy timelines on one scale, the frontier chart and the critical path's
 * summary in the HTML report (see html_views.h).
 *
 * Embedded data (const V): minis[], one compact timeline per drawn configuration, compute ops
 * only: label, ms (makespan), P, kinds[] ({n: "vit:F", c: colour}, index module*3+pass of that
 * configuration's own table), ranks[] with parallel arrays k (kind), m (microbatch), s (start
 * in ns as a delta from the previous op's start), d (duration in ns); pol[] the minis of the
 * comparison rows in order; front {cap (GiB, 0 = none), pts[]: policy, window, rc, mem (GiB),
 * ms, sps, oom, pareto, mi (its mini, -1 when over the size budget)}. Minis stop at MINI_BUDGET
 * compute ops in all (the policy rows first), so a big run's report stays openable. */
#include <math.h>
#include <string.h>

#include "report/html_views.h"
#include "util/util.h"

#define MINI_BUDGET BM_REPORT_MINI_BUDGET

void bm_report_xml_escape(FILE *f, const char *s);

static const char *pol_color(enum bm_policy p)
{
    static const char *const c[BM_N_POLICIES] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f"};
    return (unsigned)p < BM_N_POLICIES ? c[p] : "#333";
}

void bm_html_views_css(FILE *f)
{
    fputs("#critical td.part { text-align: right; }\n"
          "#pwrap, #fwrap { position: relative; }\n"
          "#pcv, #fcv { display: block; width: 100%; }\n"
          "#ptip, #ftip { position: absolute; display: none; background: #fffff0; border: 1px solid #999; padding: 5px 8px; font-size: 12px; max-width: 360px; pointer-events: none; box-shadow: 1px 1px 4px rgba(0,0,0,.2); z-index: 3; }\n"
          "#frontier .fpt { cursor: pointer; }\n"
          "#frontier .fpt.sel { stroke: #000; stroke-width: 3; }\n"
          "#frontier text { font: 11px sans-serif; fill: #333; }\n"
          "#fsel { margin: 6px 0 2px; font-weight: bold; }\n",
          f);
}

static void pct(FILE *f, double v, double total)
{
    fprintf(f, "<td class=\"part\">%.3f ms (%.1f%%)</td>", v, total > 0 ? 100 * v / total : 0);
}

void bm_html_critical_section(FILE *f, const struct bm_critical *c)
{
    double T = c->makespan_ms;
    fprintf(f, "<h2>Critical path</h2>\n<table id=\"critical\"><tr><th>makespan</th><th>backbone compute</th>"
               "<th>nested compute (encoders, generators)</th><th>transfers</th><th>waiting</th><th>ops on it</th>"
               "<th>rank crossings</th></tr>\n<tr><td>%.3f ms</td>", T);
    pct(f, c->backbone_ms, T);
    pct(f, c->nested_ms, T);
    pct(f, c->transfer_ms, T);
    pct(f, c->waiting_ms, T);
    fprintf(f, "<td>%d</td><td>%d</td></tr></table>\n", c->n_ops, c->n_transfers);
    fprintf(f, "<p class=\"note\">The chain of ops and transfers that sets the makespan, walked back from the op that "
               "ends last: each op started when its rank became free or when its input arrived from another rank, "
               "whichever was later. Its ops are outlined in the timeline above (button <i>critical path</i>); "
               "waiting is time on the chain where nothing ran (dispatch, lead time).</p>\n");
}

/* ---------------------------------------------------------------- data */

static long long ns(double ms) { return (long long)llround(ms * 1e6); }

/* ref != NULL (a timeline of the same table): also the per-op deviation from it, pd (duration)
 * and ps (start), in ns. */
static void put_mini(FILE *f, const struct bm_table *t, const struct bm_timeline *tl, const char *label,
                     const struct bm_timeline *ref)
{
    fprintf(f, "{\"label\":");
    bm_report_js_str(f, label);
    fprintf(f, ",\"ms\":%.9g,\"oom\":%d,\"P\":%d,\"kinds\":[", tl->makespan_ms, tl->oom, t->pp);
    for (int m = 0; m < t->n_modules; m++)
        for (int p = 0; p < 3; p++) {
            char col[8], name[BM_MAX_NAME + 8];
            bm_report_color(t, m, p, col);
            snprintf(name, sizeof name, "%s:%s", m == t->backbone_module ? "" : t->modules[m].name,
                     bm_pass_name((enum bm_pass)p));
            fprintf(f, "%s{\"n\":", m || p ? "," : "");
            bm_report_js_str(f, name);
            fprintf(f, ",\"c\":\"%s\",\"bb\":%d}", col, m == t->backbone_module);
        }
    fprintf(f, "],\"ranks\":[");
    for (int r = 0; r < t->pp; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        static const char *const keys[6] = {"k", "m", "s", "d", "pd", "ps"};
        fprintf(f, "%s{", r ? "," : "");
        for (int q = 0; q < (ref ? 6 : 4); q++) {
            fprintf(f, "%s\"%s\":[", q ? "," : "", keys[q]);
            long long prev = 0;
            int out = 0;
            for (int i = 0; i < ro->n_ops; i++) {
                const struct bm_op *op = &ro->ops[i];
                if (op->kind != BM_OP_COMPUTE) continue;
                long long v;
                if (q == 0) v = op->module * 3 + op->pass;
                else if (q == 1) v = op->chunk >= 0 && op->module == t->backbone_module ? op->chunk * 100000LL + op->mb : op->mb;
                else if (q == 2) {
                    long long s = ns(rt->ops[i].start_ms);
                    v = s - prev;
                    prev = s;
                } else if (q == 3) {
                    v = ns(rt->ops[i].end_ms) - ns(rt->ops[i].start_ms);
                    if (v < 0) v = 0;
                } else if (q == 4) {
                    const struct bm_op_time *a = &rt->ops[i], *b = &ref->ranks[r].ops[i];
                    v = ns(a->end_ms - a->start_ms) - ns(b->end_ms - b->start_ms);
                } else {
                    v = ns(rt->ops[i].start_ms) - ns(ref->ranks[r].ops[i].start_ms);
                }
                fprintf(f, "%s%lld", out++ ? "," : "", v);
            }
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "]}");
}

/* ---------------------------------------------------------------- body */

static double nice_step(double span, int n)
{
    double raw = span / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

enum { FW = 760, FH = 380, FL = 64, FR = 24, FT = 18, FB = 46 };

static void frontier_svg(FILE *f, const struct bm_frontier *fr)
{
    double mmax = fr->cap_mib / 1024.0, tmin = 1e300, tmax = 0;
    for (int i = 0; i < fr->n; i++) {
        double g = fr->pts[i].peak_mib / 1024.0, t = fr->pts[i].makespan_ms;
        if (g > mmax) mmax = g;
        if (t < tmin) tmin = t;
        if (t > tmax) tmax = t;
    }
    if (mmax <= 0) mmax = 1;
    double xmax = mmax * 1.08, pad = (tmax - tmin) * 0.06 + tmax * 1e-3 + 1e-9;
    double y0 = tmin - pad, y1 = tmax + pad;
    if (y0 < 0) y0 = 0;
    double pw = FW - FL - FR, ph = FH - FT - FB;
#define X(g) (FL + (g) / xmax * pw)
#define Y(t) (FT + (y1 - (t)) / (y1 - y0) * ph)
    fprintf(f, "<svg id=\"frontier\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"compute/memory frontier\">\n", FW, FH, FW, FH);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", FL, FT, pw, ph);
    double sx = nice_step(xmax, 6), sy = nice_step(y1 - y0, 5);
    for (double g = 0; g <= xmax + 1e-9; g += sx)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e4e4e4\"/><text x=\"%.1f\" y=\"%.0f\" "
                   "text-anchor=\"middle\">%g</text>\n", X(g), FT, X(g), FT + ph, X(g), FT + ph + 14, g);
    for (double t = ceil(y0 / sy) * sy; t <= y1 + 1e-9; t += sy)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/><text x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\" dominant-baseline=\"middle\">%g</text>\n", FL, Y(t), FL + pw, Y(t), FL - 5, Y(t), t);
    fprintf(f, "<text x=\"%.0f\" y=\"%d\" text-anchor=\"middle\">peak memory per rank (GiB)</text>\n", FL + pw / 2, FH - 8);
    fprintf(f, "<text transform=\"translate(14 %.0f) rotate(-90)\" text-anchor=\"middle\">makespan (ms)</text>\n", FT + ph / 2);
    if (fr->cap_mib > 0)
        fprintf(f, "<line class=\"memline\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#c00\" stroke-dasharray=\"6 4\" "
                   "stroke-width=\"1.5\"/><text x=\"%.1f\" y=\"%d\" fill=\"#c00\" style=\"fill:#c00\" text-anchor=\"end\">"
                   "device memory %.3g GiB</text>\n",
                X(fr->cap_mib / 1024.0), FT, X(fr->cap_mib / 1024.0), FT + ph, X(fr->cap_mib / 1024.0) - 4, FT + 12,
                fr->cap_mib / 1024.0);
    /* the Pareto staircase, by memory */
    int *ord = bm_malloc((size_t)(fr->n > 0 ? fr->n : 1) * sizeof *ord), np = 0;
    if (ord) {
        for (int i = 0; i < fr->n; i++)
            if (fr->pts[i].pareto) ord[np++] = i;
        for (int i = 1; i < np; i++)
            for (int j = i; j > 0 && fr->pts[ord[j - 1]].peak_mib > fr->pts[ord[j]].peak_mib; j--) {
                int k = ord[j];
                ord[j] = ord[j - 1], ord[j - 1] = k;
            }
        fprintf(f, "<path class=\"pareto\" fill=\"none\" stroke=\"#444\" stroke-width=\"1.2\" d=\"");
        for (int i = 0; i < np; i++) {
            const struct bm_frontier_point *p = &fr->pts[ord[i]];
            if (i) fprintf(f, " H%.1f V%.1f", X(p->peak_mib / 1024.0), Y(p->makespan_ms));
            else fprintf(f, "M%.1f %.1f", X(p->peak_mib / 1024.0), Y(p->makespan_ms));
        }
        fprintf(f, "\"/>\n");
        bm_free(ord);
    }
    for (int i = 0; i < fr->n; i++) {
        const struct bm_frontier_point *p = &fr->pts[i];
        double x = X(p->peak_mib / 1024.0), y = Y(p->makespan_ms);
        const char *c = pol_color(p->policy);
        char style[160];
        snprintf(style, sizeof style, "fill=\"%s\" fill-opacity=\"%s\" stroke=\"%s\" stroke-width=\"%s\"",
                 p->recompute == BM_FRC_NESTED ? "#fff" : c, p->oom ? "0.35" : "0.9", p->pareto ? "#000" : c,
                 p->pareto ? "1.8" : "1.2");
        if (p->recompute == BM_FRC_ALL)
            fprintf(f, "<rect class=\"fpt\" data-i=\"%d\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" %s/>\n", i, x - 5,
                    y - 5, style);
        else if (p->recompute == BM_FRC_NESTED)
            fprintf(f, "<polygon class=\"fpt\" data-i=\"%d\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" %s/>\n", i,
                    x, y - 6.5, x + 6.5, y, x, y + 6.5, x - 6.5, y, style);
        else
            fprintf(f, "<circle class=\"fpt\" data-i=\"%d\" cx=\"%.1f\" cy=\"%.1f\" r=\"5.5\" %s/>\n", i, x, y, style);
    }
#undef X
#undef Y
    fprintf(f, "</svg>\n");
}

void bm_html_views_body(FILE *f, const struct bm_report_compare *cmp)
{
    if (!cmp) return;
    int drawn = 0;
    for (int i = 0; i < cmp->c.n_rows; i++) drawn += cmp->c.rows[i].t != NULL;
    if (!drawn)
        fprintf(f, "<h2>Policy timelines (one time scale)</h2>\n<p class=\"note\" id=\"pskip\">Not drawn: the "
                   "tables are too big to embed every policy's timeline (more than %ld compute ops in all); "
                   "`bigmac render SPEC --policy P --format svg --span MS` draws them on one scale.</p>\n",
                BM_REPORT_MINI_BUDGET);
    else
        fprintf(f, "<h2>Policy timelines (one time scale)</h2>\n<p class=\"note\">Every policy's simulated timeline, "
                   "stacked on the same time axis (compute ops only; a red line marks each one's makespan), so the "
                   "differences in placement show where one policy waits and another works. Hover: the op.</p>\n"
                   "<div id=\"pwrap\"><canvas id=\"pcv\"></canvas><div id=\"ptip\"></div></div>\n");
    const struct bm_frontier *fr = cmp->frontier;
    if (cmp->frontier_skipped_ops > 0)
        fprintf(f, "<h2>Compute/memory frontier</h2>\n<p class=\"note\" id=\"fskip\">Not drawn: the table has %ld ops, "
                   "more than %ld, and the frontier plans dozens of variants of it. `bigmac sweep SPEC --frontier` "
                   "prints it.</p>\n", cmp->frontier_skipped_ops, BM_REPORT_FRONTIER_MAX_OPS);
    if (!fr || fr->n == 0) return;
    fprintf(f, "<h2>Compute/memory frontier</h2>\n<p class=\"note\">Every policy &times; window (bigmac: while a larger "
               "window pays) &times; recompute choice at this parallel setting, as peak memory per rank against "
               "makespan (lower left is better). Colour: policy; shape: recompute (circle none, diamond encoders and "
               "generators, square all); black outline and the staircase: Pareto-optimal; pale: does not fit; the "
               "dashed line: device memory. Hover a point for its configuration, click it for its timeline "
               "(`bigmac sweep SPEC --frontier` prints the same).</p>\n<div id=\"flegend\" class=\"note\">");
    static const enum bm_policy pols[] = {BM_POL_BIGMAC, BM_POL_OPTIMUS, BM_POL_UNIFIED, BM_POL_UNIFIED_BALANCED, BM_POL_IDEAL};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++)
        fprintf(f, "<span class=\"sw\" style=\"display:inline-block;width:10px;height:10px;margin:0 4px 0 12px;"
                   "background:%s\"></span>%s", pol_color(pols[i]), bm_policy_name(pols[i]));
    fprintf(f, "</div>\n<div id=\"fwrap\">");
    frontier_svg(f, fr);
    fprintf(f, "<div id=\"ftip\"></div></div>\n<div id=\"fsel\"></div>\n<canvas id=\"fcv\"></canvas>\n");
}

/* ---------------------------------------------------------------- script (src/report/assets/views.js) */

static const char *const views_js[] = {
#include "assets/views.js.inc"
    NULL};

void bm_html_views_script(FILE *f, const struct bm_report_compare *cmp)
{
    if (!cmp) return;
    long budget = MINI_BUDGET;
    int n_minis = 0;
    fprintf(f, "<script>\nconst V = {\"minis\":[\n");
    int pol_mi[BM_N_POLICIES + 1];
    for (int i = 0; i < cmp->c.n_rows; i++) {
        const struct bm_compare_row *row = &cmp->c.rows[i];
        pol_mi[i] = -1;
        if (!row->ok || !row->t || !row->tl) continue;
        long n = bm_report_compute_ops(row->t);
        if (n > budget) continue;
        budget -= n;
        if (n_minis) fprintf(f, ",\n");
        put_mini(f, row->t, row->tl, bm_compare_row_name(row), NULL);
        pol_mi[i] = n_minis++;
    }
    const struct bm_frontier *fr = cmp->frontier;
    int *fmi = fr && fr->n ? bm_malloc((size_t)fr->n * sizeof *fmi) : NULL;
    for (int i = 0; fmi && i < fr->n; i++) {
        fmi[i] = -1;
        if (!fr->tables || !fr->tables[i] || !fr->tls[i]) continue;
        long n = bm_report_compute_ops(fr->tables[i]);
        if (n > budget) continue;
        budget -= n;
        char label[96];
        snprintf(label, sizeof label, "%s w%d rc %s", bm_policy_name(fr->pts[i].policy), fr->pts[i].window,
                 bm_frontier_rc_name(fr->pts[i].recompute));
        if (n_minis) fprintf(f, ",\n");
        put_mini(f, fr->tables[i], fr->tls[i], label, NULL);
        fmi[i] = n_minis++;
    }
    fprintf(f, "],\n\"pol\":[");
    for (int i = 0, k = 0; i < cmp->c.n_rows; i++)
        if (pol_mi[i] >= 0) fprintf(f, "%s%d", k++ ? "," : "", pol_mi[i]);
    fprintf(f, "],\n\"front\":{\"cap\":%.9g,\"pts\":[", fr ? fr->cap_mib / 1024.0 : 0);
    for (int i = 0; fmi && i < fr->n; i++) {
        const struct bm_frontier_point *p = &fr->pts[i];
        fprintf(f, "%s{\"policy\":\"%s\",\"window\":%d,\"rc\":\"%s\",\"mem\":%.9g,\"ms\":%.9g,\"sps\":%.9g,\"oom\":%d,"
                   "\"pareto\":%d,\"mi\":%d}",
                i ? ",\n" : "", bm_policy_name(p->policy), p->window, bm_frontier_rc_name(p->recompute),
                p->peak_mib / 1024.0, p->makespan_ms, p->samples_per_s, p->oom, p->pareto, fmi[i]);
    }
    bm_free(fmi);
    fprintf(f, "]}};\n</script>\n<script>\n");
    for (int i = 0; views_js[i]; i++) fputs(views_js[i], f);
    fprintf(f, "</script>\n");
}

/* ---------------------------------------------------------------- measured against simulated */

struct dev_row {
    int module, pass, n;
    double meas, sim, abs_dev;
};

void bm_html_vs_body(FILE *f, const struct bm_table *t, const struct bm_timeline *meas, const struct bm_timeline *sim)
{
    double dm = meas->makespan_ms, ds = sim->makespan_ms;
    fprintf(f, "<h2>Simulated against measured</h2>\n<p class=\"note\">The same table simulated with the costs "
               "calibrated from this trace (medians per module and pass, each rank's speed, each microbatch's encoder "
               "multiplier: `bigmac calibrate --rank-scale`), drawn under the measured run on one time scale. Hover "
               "an op of the simulated lane for its deviation from the measured op.</p>\n");
    fprintf(f, "<table id=\"vs\"><tr><th>makespan measured</th><th>simulated</th><th>deviation</th></tr>\n"
               "<tr><td>%.3f ms</td><td>%.3f ms</td><td>%+.1f%%</td></tr></table>\n",
            dm, ds, dm > 0 ? 100 * (ds - dm) / dm : 0);
    int nm = t->n_modules;
    struct dev_row *rows = bm_calloc((size_t)(nm > 0 ? nm : 1) * 3, sizeof *rows);
    if (rows) {
        for (int r = 0; r < t->pp; r++)
            for (int i = 0; i < t->ranks[r].n_ops; i++) {
                const struct bm_op *op = &t->ranks[r].ops[i];
                if (op->kind != BM_OP_COMPUTE || op->module < 0 || op->module >= nm || op->pass > BM_PASS_W) continue;
                struct dev_row *d = &rows[op->module * 3 + op->pass];
                double a = meas->ranks[r].ops[i].end_ms - meas->ranks[r].ops[i].start_ms;
                double b = sim->ranks[r].ops[i].end_ms - sim->ranks[r].ops[i].start_ms;
                d->module = op->module, d->pass = op->pass, d->n++;
                d->meas += a, d->sim += b, d->abs_dev += fabs(b - a);
            }
        fprintf(f, "<table id=\"vsops\"><tr><th>module</th><th>pass</th><th>ops</th><th>measured (ms, mean)</th>"
                   "<th>simulated (ms, mean)</th><th>mean |deviation| (ms)</th><th>sum of deviations (ms)</th></tr>\n");
        for (int k = 0; k < nm * 3; k++) {
            const struct dev_row *d = &rows[k];
            if (!d->n) continue;
            fprintf(f, "<tr><td>");
            bm_report_xml_escape(f, t->modules[d->module].name);
            fprintf(f, "</td><td>%s</td><td>%d</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%+.3f</td></tr>\n",
                    bm_pass_name((enum bm_pass)d->pass), d->n, d->meas / d->n, d->sim / d->n, d->abs_dev / d->n,
                    d->sim - d->meas);
        }
        fprintf(f, "</table>\n");
        bm_free(rows);
    }
    fprintf(f, "<div id=\"pwrap\"><canvas id=\"pcv\"></canvas><div id=\"ptip\"></div></div>\n");
}

void bm_html_vs_script(FILE *f, const struct bm_table *t, const struct bm_timeline *meas, const struct bm_timeline *sim)
{
    fprintf(f, "<script>\nconst V = {\"minis\":[\n");
    put_mini(f, t, meas, "measured", NULL);
    fprintf(f, ",\n");
    put_mini(f, t, sim, "simulated (calibrated)", meas);
    fprintf(f, "],\n\"pol\":[0,1],\n\"front\":{\"cap\":0,\"pts\":[]}};\n</script>\n<script>\n");
    for (int i = 0; views_js[i]; i++) fputs(views_js[i], f);
    fprintf(f, "</script>\n");
}
