/* svg.c — a standalone SVG timeline: one lane per rank ("rank N"), compute ops coloured by
 * module and pass (F lighter, B darker) on a grey idle background, the rank's live activation
 * memory as a step curve under its lane, a time axis with ticks, a legend.
 *
 * Size stays proportionate for big tables: consecutive ops narrower than a pixel with the same
 * colour merge into one rect, and per-op <title> tooltips are only written for small tables. */
#include <math.h>
#include <string.h>

#include "report/report.h"
#include "sim/expect.h"
#include "util/util.h"

#define SVG_W 1200.0
#define LEFT 70.0
#define RIGHT 60.0
#define BAR_H 18.0
#define MEM_H 26.0
#define LANE_H (BAR_H + MEM_H + 10.0)
#define TOP 78.0
#define TITLE_LIMIT 20000 /* ops: above this, no per-op <title> */

void bm_report_xml_escape(FILE *f, const char *s);

void bm_report_xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about n ticks over span. */
double bm_report_tick_step(double span, int n);
double bm_report_tick_step(double span, int n)
{
    if (span <= 0) return 1;
    double raw = span / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static double mem_total(const struct bm_mem_point *p)
{
    double s = 0;
    for (int k = 0; k < BM_N_ROLES; k++) s += p->act_mib[k];
    return s;
}

int bm_render_svg(const struct bm_table *t, const struct bm_timeline *tl, const char *title,
                  double span_ms, FILE *f)
{
    if (!bm_timeline_per_op(t, tl)) return BM_ERR; /* a summary has no op times to draw */
    double ms = tl->makespan_ms > 0 ? tl->makespan_ms : 1;
    if (span_ms > ms) ms = span_ms;
    double pw = SVG_W - LEFT - RIGHT, sx = pw / ms;
    double H = TOP + t->pp * LANE_H + 30;
    long n_ops = bm_table_n_ops(t);
    int titles = n_ops <= TITLE_LIMIT;
    double mem_max = 0;
    for (int r = 0; r < tl->pp; r++)
        for (int k = 0; k < tl->ranks[r].n_mem; k++)
            if (mem_total(&tl->ranks[r].mem[k]) > mem_max) mem_max = mem_total(&tl->ranks[r].mem[k]);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
            SVG_W, H, SVG_W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n<text x=\"%.0f\" y=\"18\" font-size=\"15\" font-weight=\"bold\">",
            LEFT);
    bm_report_xml_escape(f, title ? title : "bigmac schedule");
    fprintf(f, " — %s, %s, P=%d V=%d M=%d", bm_policy_name(t->policy), bm_backbone_name(t->backbone),
            t->pp, t->vpp, t->microbatches);
    if (t->window) fprintf(f, " W=%d", t->window);
    fprintf(f, "</text>\n<text x=\"%.0f\" y=\"36\">%s makespan %.3f ms, bubble ratio %.3f, peak memory %.2f GiB%s</text>\n",
            LEFT, tl->measured ? "measured" : "simulated", tl->makespan_ms, tl->bubble_ratio,
            tl->peak_mib / 1024.0, tl->oom ? " (OUT OF MEMORY)" : "");
    /* legend */
    fprintf(f, "<g class=\"legend\">\n");
    double lx = LEFT;
    char *split = bm_calloc((size_t)t->n_modules + 1, 1); /* NULL (out of memory): no W swatches */
    if (split) bm_table_split_flags(t, split);
    for (int m = 0; m < t->n_modules; m++)
        for (int p = 0; p < (split && split[m] ? 3 : 2); p++) {
            char col[8];
            bm_report_color(t, m, p, col);
            fprintf(f, "<rect x=\"%.1f\" y=\"44\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.1f\" y=\"54\">",
                    lx, col, lx + 15);
            bm_report_xml_escape(f, t->modules[m].name);
            fprintf(f, " %s</text>\n", bm_pass_name((enum bm_pass)p));
            lx += 30 + 7.0 * (double)strlen(t->modules[m].name);
        }
    bm_free(split);
    fprintf(f, "<rect x=\"%.1f\" y=\"44\" width=\"12\" height=\"12\" fill=\"#e8e8e8\"/><text x=\"%.1f\" y=\"54\">idle</text>\n",
            lx, lx + 15);
    lx += 50;
    fprintf(f, "<rect x=\"%.1f\" y=\"50\" width=\"12\" height=\"6\" fill=\"#9ecae1\"/><text x=\"%.1f\" y=\"54\">live activations (max %.1f MiB)</text>\n</g>\n",
            lx, lx + 15, mem_max);
    /* axis with ticks and grid */
    double step = bm_report_tick_step(ms, 10);
    fprintf(f, "<g class=\"axis\" stroke=\"#cccccc\">\n");
    for (double x = 0; x <= ms * 1.0000001; x += step)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\"/>\n", LEFT + x * sx, TOP - 6,
                LEFT + x * sx, TOP + t->pp * LANE_H);
    fprintf(f, "</g>\n<g class=\"ticks\" text-anchor=\"middle\" font-size=\"10\">\n");
    for (double x = 0; x <= ms * 1.0000001; x += step)
        fprintf(f, "<text x=\"%.2f\" y=\"%.0f\">%g ms</text>\n", LEFT + x * sx, TOP - 9, x);
    fprintf(f, "</g>\n");
    char buf[BM_MAX_NAME + 64];
    for (int r = 0; r < t->pp; r++) {
        double y = TOP + r * LANE_H;
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        fprintf(f, "<g class=\"lane\" data-rank=\"%d\">\n<text x=\"6\" y=\"%.1f\">rank %d</text>\n", r,
                y + BAR_H - 4, r);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"#e8e8e8\"/>\n",
                LEFT, y, tl->makespan_ms * sx, BAR_H);
        /* ops, merging sub-pixel runs of one colour */
        double run_x0 = -1, run_x1 = -1;
        char run_col[8] = "";
        for (int i = 0; i <= t->ranks[r].n_ops; i++) {
            const struct bm_op *op = i < t->ranks[r].n_ops ? &t->ranks[r].ops[i] : NULL;
            if (op && op->kind != BM_OP_COMPUTE) continue;
            double x0 = 0, x1 = 0;
            char col[8] = "";
            if (op) {
                x0 = LEFT + rt->ops[i].start_ms * sx;
                x1 = LEFT + rt->ops[i].end_ms * sx;
                bm_report_color(t, op->module, op->pass, col);
                if (!titles && run_x0 >= 0 && !strcmp(col, run_col) && x0 - run_x1 < 0.5 &&
                    (x1 - x0 < 1 || run_x1 - run_x0 < 1)) {
                    run_x1 = x1;
                    continue;
                }
            }
            if (run_x0 >= 0 && !titles) {
                fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"/>\n",
                        run_x0, y, run_x1 - run_x0 > 0.3 ? run_x1 - run_x0 : 0.3, BAR_H, run_col);
            }
            if (!op) break;
            if (titles) {
                const struct bm_op_time *ot = &rt->ops[i];
                bm_op_format(t, op, buf, sizeof buf);
                fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"0.4\"><title>",
                        x0, y, x1 - x0 > 0.3 ? x1 - x0 : 0.3, BAR_H, col);
                bm_report_xml_escape(f, buf);
                fprintf(f, " (%s): %.3f..%.3f ms</title></rect>\n",
                        t->modules[op->module].name, ot->start_ms, ot->end_ms);
                if (x1 - x0 > 7.0 * (double)strlen(buf) + 2) {
                    fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\" fill=\"%s\">",
                            (x0 + x1) / 2, y + BAR_H - 5, op->pass == BM_PASS_F ? "#222222" : "#ffffff");
                    bm_report_xml_escape(f, buf);
                    fprintf(f, "</text>\n");
                }
            }
            run_x0 = x0;
            run_x1 = x1;
            memcpy(run_col, col, sizeof run_col);
        }
        /* memory step curve (total live activations), scaled to the largest over ranks */
        double base = y + BAR_H + 2 + MEM_H;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"#f7fbff\"/>\n", LEFT,
                base - MEM_H, pw, MEM_H);
        if (rt->n_mem && mem_max > 0) {
            fprintf(f, "<path class=\"mem\" fill=\"#9ecae1\" stroke=\"#3182bd\" stroke-width=\"0.8\" d=\"M%.1f %.2f",
                    LEFT, base);
            double prev = 0, last_x = -1;
            for (int k = 0; k < rt->n_mem; k++) {
                double x = LEFT + rt->mem[k].t_ms * sx, v = mem_total(&rt->mem[k]);
                double yy = base - v / mem_max * MEM_H;
                if (x - last_x < 0.25 && k + 1 < rt->n_mem) {
                    /* sub-pixel: keep the envelope by emitting the higher of the two levels */
                    if (v < prev) continue;
                }
                fprintf(f, "H%.2fV%.2f", x, yy);
                prev = v;
                last_x = x;
            }
            fprintf(f, "H%.2fV%.2fZ\"/>\n", LEFT + tl->makespan_ms * sx, base);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" fill=\"#3182bd\">%.0f MiB</text>\n",
                LEFT + pw + 4, base - 2, rt->peak_act_mib[0] + rt->peak_act_mib[1] + rt->peak_act_mib[2] > 0
                    ? rt->peak_mib - rt->state_mib : 0.0);
        fprintf(f, "</g>\n");
    }
    if (ms > tl->makespan_ms)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>"
                   "<text x=\"%.2f\" y=\"%.0f\" font-size=\"10\" fill=\"#d62728\">makespan %.3g ms</text>\n",
                LEFT + tl->makespan_ms * sx, TOP - 4, LEFT + tl->makespan_ms * sx, TOP + t->pp * LANE_H,
                LEFT + tl->makespan_ms * sx + 4, TOP + t->pp * LANE_H + 8, tl->makespan_ms);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" fill=\"#666666\">time (ms) →; grey = idle (incl. blocked in recv); blue curve = live activation memory of the rank</text>\n",
            LEFT, H - 10);
    fprintf(f, "</svg>\n");
    return ferror(f) ? BM_ERR : BM_OK;
}
