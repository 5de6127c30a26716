/* html.c — the self-contained HTML report (no network): a canvas timeline drawn from compact
 * arrays embedded as JSON (so 64 ranks x 1024 microbatches stay usable), hover tooltips with
 * each op's times and what it waited for, zoom/pan (wheel, drag, buttons), per-rank memory
 * curves stacked by role, a metrics table and, for a spec, the policy comparison.
 *
 * Embedded data (const D): per rank, parallel arrays over the rank's ops in program order:
 *   k kind (module*3+pass for compute; K = send, K+1 = recv, K = number of compute kinds)
 *   m microbatch, x chunk (backbone) or tensor index (comm) or 0, p peer (comm) or 0,
 *   s start in ns as a delta from the previous op's start, d duration in ns,
 *   wr/wo the op waited for (-1 = none), rd how long (ns) the op's inputs were ready before it
 *   started (the rank was busy)
 *   c the indices of the rank's ops on the critical path (src/report/critical.h), ascending
 * and the memory trace: mt time in ns (delta), me/mb/mg encoder/backbone/generator MiB x 100,
 * at most MEM_POINTS points per rank (an upper envelope when the trace is longer).
 * The script and style are files, src/report/assets/report.js and report.css, embedded at build
 * time as C string literals (the Makefile, $(BUILD)/gen/assets/NAME.inc; tests/test_assets.sh checks
 * them with node --check). */
#include <math.h>
#include <string.h>

#include "report/html_views.h"
#include "report/report.h"
#include "sim/expect.h"
#include "sim/hosts.h"
#include "sim/step.h"
#include "util/util.h"

#define MEM_POINTS 3000

void bm_report_xml_escape(FILE *f, const char *s);

static const char *const report_css[] = {
#include "assets/report.css.inc"
    NULL};

static const char *const report_js[] = {
#include "assets/report.js.inc"
    NULL};

/* A JSON string safe inside <script>: '<', '>' and '&' as \u escapes. */
void bm_report_js_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&') fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static long long ns(double ms)
{
    return (long long)llround(ms * 1e6);
}

static long long centi(double mib)
{
    return (long long)llround(mib * 100);
}

/* Per-rank data arrays (see the file comment). */
static void put_rank(FILE *f, const struct bm_table *t, const struct bm_timeline *tl, int r, int K,
                     const uint8_t *crit)
{
    const struct bm_rank_ops *ro = &t->ranks[r];
    const struct bm_rank_timeline *rt = &tl->ranks[r];
    int n = ro->n_ops;
    fprintf(f, "{\"k\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op *op = &ro->ops[i];
        int k = op->kind == BM_OP_COMPUTE ? op->module * 3 + op->pass : op->kind == BM_OP_SEND ? K : K + 1;
        fprintf(f, "%s%d", i ? "," : "", k);
    }
    fprintf(f, "],\n\"m\":[");
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ro->ops[i].mb);
    fprintf(f, "],\n\"x\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op *op = &ro->ops[i];
        fprintf(f, "%s%d", i ? "," : "", op->kind == BM_OP_COMPUTE ? (op->chunk >= 0 ? op->chunk : 0) : op->tensor);
    }
    fprintf(f, "],\n\"p\":[");
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ro->ops[i].peer >= 0 ? ro->ops[i].peer : 0);
    fprintf(f, "],\n\"s\":[");
    long long prev = 0;
    for (int i = 0; i < n; i++) {
        long long s = ns(rt->ops[i].start_ms);
        fprintf(f, "%s%lld", i ? "," : "", s - prev);
        prev = s;
    }
    fprintf(f, "],\n\"d\":[");
    for (int i = 0; i < n; i++) {
        long long d = ns(rt->ops[i].end_ms) - ns(rt->ops[i].start_ms);
        fprintf(f, "%s%lld", i ? "," : "", d > 0 ? d : 0);
    }
    fprintf(f, "],\n\"wr\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op_time *ot = &rt->ops[i];
        int ok = ot->wait_rank >= 0 && ot->wait_rank < t->pp && ot->wait_op >= 0 &&
                 ot->wait_op < t->ranks[ot->wait_rank].n_ops;
        fprintf(f, "%s%d", i ? "," : "", ok ? ot->wait_rank : -1);
    }
    fprintf(f, "],\n\"wo\":[");
    for (int i = 0; i < n; i++) {
        const struct bm_op_time *ot = &rt->ops[i];
        int ok = ot->wait_rank >= 0 && ot->wait_rank < t->pp && ot->wait_op >= 0 &&
                 ot->wait_op < t->ranks[ot->wait_rank].n_ops;
        fprintf(f, "%s%d", i ? "," : "", ok ? ot->wait_op : -1);
    }
    fprintf(f, "],\n\"rd\":[");
    for (int i = 0; i < n; i++) {
        long long rd = ns(rt->ops[i].start_ms) - ns(rt->ops[i].ready_ms);
        fprintf(f, "%s%lld", i ? "," : "", rd > 0 ? rd : 0);
    }
    fprintf(f, "],\n\"c\":[");
    for (int i = 0, k = 0; i < n; i++)
        if (crit && crit[i]) fprintf(f, "%s%d", k++ ? "," : "", i);
    /* memory: all points, or the per-bucket maximum when there are too many */
    fprintf(f, "],\n");
    int nm = rt->n_mem, buckets = nm > MEM_POINTS ? MEM_POINTS : 0;
    double ms = tl->makespan_ms > 0 ? tl->makespan_ms : 1;
    const char *keys[4] = {"mt", "me", "mb", "mg"};
    for (int q = 0; q < 4; q++) {
        fprintf(f, "\"%s\":[", keys[q]);
        long long prevt = 0;
        int out = 0, k = 0;
        while (k < nm) {
            /* one point, or (too many points) the maximum over one time bucket, placed at the
             * bucket's first point: an upper envelope of the curve */
            double v[BM_N_ROLES];
            memcpy(v, rt->mem[k].act_mib, sizeof v);
            int k2 = k + 1;
            if (buckets) {
                int b = (int)(rt->mem[k].t_ms / ms * buckets);
                while (k2 < nm && (int)(rt->mem[k2].t_ms / ms * buckets) == b) {
                    for (int j = 0; j < BM_N_ROLES; j++)
                        if (rt->mem[k2].act_mib[j] > v[j]) v[j] = rt->mem[k2].act_mib[j];
                    k2++;
                }
            }
            long long tt = ns(rt->mem[k].t_ms);
            fprintf(f, "%s%lld", out++ ? "," : "", q == 0 ? tt - prevt : centi(v[q - 1]));
            prevt = tt;
            if (k2 == nm && k2 - 1 > k) {  /* end on the trace's final level */
                long long t2 = ns(rt->mem[nm - 1].t_ms);
                fprintf(f, ",%lld", q == 0 ? t2 - prevt : centi(rt->mem[nm - 1].act_mib[q - 1]));
            }
            k = k2;
        }
        fprintf(f, "]%s", q < 3 ? "," : "");
    }
    fprintf(f, "}");
}

static void put_td_mib(FILE *f, double v)
{
    fprintf(f, "<td>%.1f</td>", v);
}

/* The step after the walk (src/sim/step.h): a bar walk | exposed sync | optimizer and the state
 * parts; nothing for a measured trace or when the step is the walk. */
static void put_step(FILE *f, const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl)
{
    if (!(tl->step_ms > 0) || (tl->step_ms <= tl->makespan_ms && t->dp <= 1 && !t->zero)) return;
    double w = 100 * tl->makespan_ms / tl->step_ms, s = 100 * tl->sync_exposed_ms / tl->step_ms;
    double o = 100 * tl->optimizer_ms / tl->step_ms;
    fprintf(f, "<h2>Step</h2>\n<p>step <b>%.3f ms</b> = walk %.3f + exposed sync %.3f + optimizer %.3f ms "
               "(sync %.3f ms in all on the busiest rank; %s; %d replica%s, %.3f samples/s)</p>\n",
            tl->step_ms, tl->makespan_ms, tl->sync_exposed_ms, tl->optimizer_ms, tl->sync_total_ms,
            t->zero ? "ZeRO-1" : "gradients all-reduced", t->dp > 1 ? t->dp : 1, t->dp > 1 ? "s" : "",
            tl->samples_per_s);
    fprintf(f, "<div id=\"stepbar\" style=\"display:flex;height:18px;max-width:900px;border:1px solid #999\">"
               "<div title=\"walk\" style=\"width:%.4f%%;background:#9ecae1\"></div>"
               "<div title=\"exposed sync\" style=\"width:%.4f%%;background:#d62728\"></div>"
               "<div title=\"optimizer\" style=\"width:%.4f%%;background:#74c476\"></div></div>\n"
               "<div class=\"legend\"><span class=\"sw\" style=\"background:#9ecae1\"></span>walk"
               "<span class=\"sw\" style=\"background:#d62728\"></span>exposed sync"
               "<span class=\"sw\" style=\"background:#74c476\"></span>optimizer</div>\n", w, s, o);
    struct bm_step_mem *parts = c ? bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *parts) : NULL;
    if (!parts) return;
    bm_step_state(t, c, parts);
    fprintf(f, "<table id=\"state\"><tr><th>rank</th><th>weights (MiB)</th><th>gradients (MiB)</th><th>optimizer state (MiB)%s</th>"
               "</tr>\n", t->zero ? ", sharded" : "");
    for (int r = 0; r < t->pp; r++)
        fprintf(f, "<tr><td>rank %d</td><td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>\n", r, parts[r].weights_mib,
                parts[r].grads_mib, parts[r].optim_mib);
    fprintf(f, "</table>\n");
    bm_free(parts);
}

/* A table placed over hosts (sim/hosts.h): which ranks share a host and what crosses. */
static void put_hosts(FILE *f, const struct bm_table *t, const struct bm_costs *c)
{
    if (t->ranks_per_host <= 0 || !c) return;
    struct bm_host_traffic h;
    bm_cost_host_traffic(t, c, &h);
    fprintf(f, "<h2>Hosts</h2>\n<p id=\"hosts\">%d host%s of %d ranks (rank r on host r / %d); between hosts %g GB/s, "
               "%g us: %ld of %ld transfers cross hosts, %.3f MiB, %.3f ms in flight (%.3f ms on the intra-host "
               "link)</p>\n",
            h.hosts, h.hosts == 1 ? "" : "s", t->ranks_per_host, t->ranks_per_host,
            c->device.inter_host_gbytes_per_s,
            c->device.inter_host_latency_us, h.cross, h.sends, h.cross_mib, h.cross_ms, h.cross_intra_ms);
}
static int render_html(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                       const struct bm_report_compare *cmp, const struct bm_timeline *sim, const char *title, FILE *f);

int bm_render_html(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                   const struct bm_report_compare *cmp, const char *title, FILE *f)
{
    return render_html(t, c, tl, cmp, NULL, title, f);
}

int bm_render_html_vs(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                      const struct bm_timeline *sim, const char *title, FILE *f)
{
    return render_html(t, c, tl, NULL, sim, title, f);
}

static int render_html(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                       const struct bm_report_compare *cmp,
                       const struct bm_timeline *sim, const char *title, FILE *f)
{
    static const char *const roles[BM_N_ROLES] = {"encoder", "backbone", "generator"};
    if (!bm_timeline_per_op(t, tl)) return BM_ERR; /* a summary has no op times to draw */
    if (!title) title = "bigmac schedule";
    int K = t->n_modules * 3;
    struct bm_critical crit;
    struct bm_err cerr;
    if (bm_critical_path(t, tl, &crit, &cerr)) return BM_ERR;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    bm_report_xml_escape(f, title);
    fprintf(f, " — bigmac</title>\n<style>\n");
    for (int i = 0; report_css[i]; i++) fputs(report_css[i], f);
    bm_html_views_css(f);
    fprintf(f, "</style></head>\n<body>\n<h1>");
    bm_report_xml_escape(f, title);
    fprintf(f, "</h1>\n<p class=\"sub\">%s timeline · policy <b>%s</b> · backbone %s · P=%d V=%d M=%d U=%d",
            tl->measured ? "measured" : "simulated", bm_policy_name(t->policy),
            bm_backbone_name(t->backbone), t->pp, t->vpp, t->microbatches, t->unit);
    if (t->window) fprintf(f, " W=%d", t->window);
    fprintf(f, " · makespan <b>%.3f ms</b> · bubble ratio %.3f · peak memory %.2f GiB%s</p>\n",
            tl->makespan_ms, tl->bubble_ratio, tl->peak_mib / 1024.0,
            tl->oom ? " <b style=\"color:#c00\">OUT OF MEMORY</b>" : "");
    fprintf(f, "<div id=\"controls\"><button id=\"zin\" title=\"zoom in\">+</button>"
               "<button id=\"zout\" title=\"zoom out\">&#8722;</button>"
               "<button id=\"left\" title=\"pan left\">&#8592;</button>"
               "<button id=\"right\" title=\"pan right\">&#8594;</button>"
               "<button id=\"reset\">reset</button>"
               "<button id=\"crit\" title=\"outline the critical path\" aria-pressed=\"true\">critical path</button>"
               "<span id=\"range\"></span>"
               "<span>wheel: zoom · drag or shift+wheel: pan · hover: op, times, what it waited for</span></div>\n");
    fprintf(f, "<div id=\"legend\">");
    for (int m = 0; m < t->n_modules; m++)
        for (int p = 0; p < 2; p++) {
            if (p && !bm_table_has_pass(t, m, BM_PASS_B)) continue; /* frozen: no backward */
            char col[8];
            bm_report_color(t, m, p, col);
            fprintf(f, "<span class=\"sw\" style=\"background:%s\"></span>", col);
            bm_report_xml_escape(f, t->modules[m].name);
            fprintf(f, " %s%s", p ? "backward" : "forward", t->modules[m].frozen ? " (frozen)" : "");
        }
    fprintf(f, "<span class=\"sw\" style=\"background:#e6e6e6\"></span>idle"
               "<span class=\"sw\" style=\"background:#d62728;height:4px\"></span>blocked in recv"
               "<span class=\"sw\" style=\"background:#fff;border-top:3px solid #111;border-bottom:3px solid #111;height:6px\"></span>critical path"
               "<span class=\"sw\" style=\"background:#a1d99b\"></span>encoder"
               "<span class=\"sw\" style=\"background:#9ecae1\"></span>backbone"
               "<span class=\"sw\" style=\"background:#fdae6b\"></span>generator activations (MiB, curve under each lane)</div>\n");
    fprintf(f, "<div id=\"tl\"><div id=\"labels\"></div><canvas id=\"cv\"></canvas><div id=\"tip\"></div></div>\n");
    /* metrics */
    fprintf(f, "<h2>Metrics</h2>\n<table><tr><th>makespan</th><th>bubble ratio</th><th>samples/s</th>"
               "<th>peak memory (GiB)</th>");
    for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<th>peak %s act. (MiB)</th>", roles[k]);
    fprintf(f, "<th>memory cap (GiB)</th><th>OOM</th></tr>\n<tr><td>%.3f ms</td><td>%.4f</td><td>%.3f</td><td>%.3f</td>",
            tl->makespan_ms, tl->bubble_ratio, tl->samples_per_s, tl->peak_mib / 1024.0);
    for (int k = 0; k < BM_N_ROLES; k++) put_td_mib(f, tl->peak_act_mib[k]);
    fprintf(f, "<td>%.2f</td><td%s>%s</td></tr></table>\n", tl->memory_cap_mib / 1024.0,
            tl->oom ? " class=\"oom\"" : "", tl->oom ? "yes" : "no");
    put_hosts(f, t, c);
    put_step(f, t, c, tl);
    bm_html_critical_section(f, &crit);
    fprintf(f, "<h2>Per rank</h2>\n<table><tr><th>rank</th><th>busy (ms)</th>");
    for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<th>%s busy</th>", roles[k]);
    fprintf(f, "<th>idle lead</th><th>idle mid</th><th>idle tail</th><th>state (MiB)</th>");
    for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<th>peak %s act.</th>", roles[k]);
    fprintf(f, "<th>peak total (MiB)</th><th>OOM</th></tr>\n");
    for (int r = 0; r < tl->pp; r++) {
        const struct bm_rank_timeline *rt = &tl->ranks[r];
        fprintf(f, "<tr><td>rank %d</td><td>%.3f</td>", r, rt->busy_ms);
        for (int k = 0; k < BM_N_ROLES; k++) fprintf(f, "<td>%.3f</td>", rt->busy_role_ms[k]);
        fprintf(f, "<td>%.3f</td><td>%.3f</td><td>%.3f</td>", rt->idle_lead_ms, rt->idle_mid_ms, rt->idle_tail_ms);
        put_td_mib(f, rt->state_mib);
        for (int k = 0; k < BM_N_ROLES; k++) put_td_mib(f, rt->peak_act_mib[k]);
        put_td_mib(f, rt->peak_mib);
        fprintf(f, "<td%s>%s</td></tr>\n", rt->oom ? " class=\"oom\"" : "", rt->oom ? "yes" : "no");
    }
    fprintf(f, "</table>\n");
    if (cmp) {
        double ref = -1;
        const struct bm_compare *c = &cmp->c;
        for (int i = 0; i < c->n_rows; i++)
            if (c->rows[i].policy == BM_POL_BIGMAC && c->rows[i].ok) ref = c->rows[i].makespan_ms;
        fprintf(f, "<h2>Policy comparison</h2>\n<table id=\"compare\"><tr><th>policy</th><th>makespan (ms)</th>"
                   "<th>ratio to bigmac</th><th>bubble ratio</th><th>peak encoder act. (MiB)</th>"
                   "<th>peak generator act. (MiB)</th><th>peak memory (GiB)</th><th>window</th><th>OOM</th></tr>\n");
        for (int i = 0; i < c->n_rows; i++) {
            const struct bm_compare_row *row = &c->rows[i];
            fprintf(f, "<tr%s><td>%s</td>", row->policy == t->policy && !row->recompute ? " class=\"best\"" : "",
                    bm_compare_row_name(row));
            if (!row->ok) {
                char first[256]; /* the message's first line */
                snprintf(first, sizeof first, "%s", row->error);
                first[strcspn(first, "\n")] = 0;
                fprintf(f, "<td colspan=\"8\">cannot plan: ");
                bm_report_xml_escape(f, first);
                fprintf(f, "</td></tr>\n");
                continue;
            }
            fprintf(f, "<td>%.3f</td>", row->makespan_ms);
            if (ref > 0) fprintf(f, "<td>%.3f</td>", row->makespan_ms / ref);
            else fprintf(f, "<td>n/a</td>");
            fprintf(f, "<td>%.4f</td>", row->bubble_ratio);
            put_td_mib(f, row->peak_act_mib[BM_ROLE_ENCODER]);
            put_td_mib(f, row->peak_act_mib[BM_ROLE_GENERATOR]);
            char win[24] = "&#8212;";
            if (row->window) snprintf(win, sizeof win, "%d", row->window);
            fprintf(f, "<td>%.3f</td><td>%s</td><td%s>%s</td></tr>\n", row->peak_mib / 1024.0, win,
                    row->oom ? " class=\"oom\"" : "", row->oom ? "yes" : "no");
        }
        char ratio[32] = "n/a";
        if (ref > 0) snprintf(ratio, sizeof ratio, "%.3f", c->bound_ms / ref);
        if (c->bound_ms >= 0)
            fprintf(f, "<tr><td>zero-added-bubble bound</td><td>%.3f</td><td>%s</td><td colspan=\"7\">none's makespan + the largest per-rank nested (encoder + generator) busy time of the bigmac table</td></tr>\n",
                    c->bound_ms, ratio);
        if (c->lower_ms > 0) {
            if (ref > 0) snprintf(ratio, sizeof ratio, "%.3f", c->lower_ms / ref);
            fprintf(f, "<tr><td>lower bound</td><td>%.3f</td><td>%s</td><td colspan=\"7\">no order of this work that keeps the backbone order is faster, for any policy's placement (docs/simulator.md)</td></tr>\n",
                    c->lower_ms, ratio);
        }
        fprintf(f, "</table>\n<p class=\"note\">Every policy is planned and simulated with the same parallel settings. "
                   "bigmac and ideal differ only in the encoder window (ideal: unlimited memory); optimus hoists "
                   "encoder forwards and defers backwards, so its encoder memory grows with M; unified runs "
                   "encoders on rank 0 and generators on rank P-1; optimus+recompute (shown when optimus does not "
                   "fit) recomputes every encoder and generator, the memory-equal compute-first baseline.</p>\n");
    }
    bm_html_views_body(f, cmp);
    if (sim) bm_html_vs_body(f, t, tl, sim);
    /* data + script */
    fprintf(f, "<script>\nconst D = {\"P\":%d,\"ms\":%.9g,\n\"kinds\":[", t->pp, tl->makespan_ms);
    for (int m = 0; m < t->n_modules; m++)
        for (int p = 0; p < 3; p++) {
            char col[8];
            bm_report_color(t, m, p, col);
            fprintf(f, "%s{\"mod\":", m || p ? "," : "");
            bm_report_js_str(f, t->modules[m].name);
            fprintf(f, ",\"role\":\"%s\",\"pass\":\"%s\",\"bb\":%d,\"color\":\"%s\"}",
                    roles[t->modules[m].role], bm_pass_name((enum bm_pass)p),
                    m == t->backbone_module, col);
        }
    fprintf(f, "],\n\"tensors\":[");
    for (int i = 0; i < t->n_tensors; i++) {
        if (i) fputc(',', f);
        bm_report_js_str(f, t->tensors[i].name);
    }
    fprintf(f, "],\n\"tgrad\":[");
    for (int i = 0; i < t->n_tensors; i++) fprintf(f, "%s%d", i ? "," : "", t->tensors[i].grad);
    fprintf(f, "],\n\"ranks\":[\n");
    for (int r = 0; r < t->pp; r++) {
        if (r) fprintf(f, ",\n");
        put_rank(f, t, tl, r, K, crit.on ? crit.on[r] : NULL);
    }
    fprintf(f, "]};\n</script>\n<script>\n");
    for (int i = 0; report_js[i]; i++) fputs(report_js[i], f);
    fprintf(f, "</script>\n");
    bm_html_views_script(f, cmp);
    if (sim) bm_html_vs_script(f, t, tl, sim);
    fprintf(f, "</body></html>\n");
    bm_critical_free(t, &crit);
    return ferror(f) ? BM_ERR : BM_OK;
}
