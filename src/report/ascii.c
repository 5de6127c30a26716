/* ascii.c — the timeline in a terminal: one line per rank, time scaled to a width.
 *
 *   rank 0 |F0 F1 F2 F3 f0 f1 [vF4 ][vB0 ]....B3 |
 *
 * Backbone ops show their pass letter and microbatch, upper case for even local chunks and
 * lower case for odd ones (docs/design.md §5's golden examples); nested (encoder/generator) ops are
 * bracketed and start with their module's letter ("[vF4]"; one column: the letter, lower case
 * for F and upper case for B); '.' is idle (including time blocked in a recv). Ops narrower
 * than a column are dropped when the column is already taken. */
#include <ctype.h>
#include <string.h>

#include "report/report.h"
#include "sim/expect.h"
#include "util/util.h"

/* Pick one letter per nested module: its first letter not yet used and not f/b/w (the
 * backbone's passes); 'letters' gets one char per module (backbone: '-'). */
static void module_letters(const struct bm_table *t, char *letters)
{
    char used[128] = {0};
    used['f'] = used['b'] = used['w'] = 1;
    for (int m = 0; m < t->n_modules; m++) {
        letters[m] = '-';
        if (m == t->backbone_module) continue;
        const char *n = t->modules[m].name;
        char pick = 0;
        for (const char *p = n; *p && !pick; p++) {
            int c = tolower((unsigned char)*p);
            if (c >= 'a' && c <= 'z' && !used[c]) pick = (char)c;
        }
        for (int c = 'a'; c <= 'z' && !pick; c++)
            if (!used[c]) pick = (char)c;
        if (!pick) pick = '?';
        else used[(int)pick] = 1;
        letters[m] = pick;
    }
}

/* Write an op over columns [c0, c1): the full label when it fits, else a short form. */
static void put_span(char *line, int c0, int c1, const char *label, char one)
{
    int span = c1 - c0, n = (int)strlen(label);
    for (int c = c0; c < c1; c++) line[c] = ' ';
    if (span == 1) {
        line[c0] = one;
    } else if (label[0] == '[') {
        if (span >= n) {
            memcpy(line + c0, label, (size_t)n);
        } else if (span == 2) {
            line[c0] = line[c0 + 1] = one;  /* "vv" */
        } else {
            line[c0] = '[';                 /* "[v]", "[V] " */
            line[c0 + 1] = one;
            line[c0 + 2] = ']';
        }
    } else if (span >= n) {
        memcpy(line + c0, label, (size_t)n);
    } else {
        line[c0] = one;                     /* "F " */
    }
}

int bm_render_ascii(const struct bm_table *t, const struct bm_timeline *tl, int width, FILE *f)
{
    if (!bm_timeline_per_op(t, tl)) return BM_ERR; /* a summary has no op times to draw */
    if (width <= 0) width = 120;
    if (width < 8) width = 8;
    char *letters = bm_malloc((size_t)t->n_modules + 1);
    if (!letters) return BM_ERR;
    module_letters(t, letters);
    char *line = bm_malloc((size_t)width + 1);
    if (!line) {
        bm_free(letters);
        return BM_ERR;
    }
    double ms = tl->makespan_ms > 0 ? tl->makespan_ms : 1;
    int rw = 1;
    for (int p = t->pp - 1; p >= 10; p /= 10) rw++;
    fprintf(f, "%s timeline: policy %s, backbone %s, P=%d V=%d M=%d U=%d", tl->measured ? "measured" : "simulated",
            bm_policy_name(t->policy), bm_backbone_name(t->backbone), t->pp, t->vpp, t->microbatches,
            t->unit);
    if (t->window) fprintf(f, " W=%d", t->window);
    fprintf(f, "\n");
    /* time axis: ticks every ~width/6 columns */
    int pre = 5 + rw + 2;
    memset(line, ' ', (size_t)width);
    line[width] = 0;
    int step = width / 6 > 0 ? width / 6 : 1;
    for (int c = 0; c < width; c += step) line[c] = '|';
    fprintf(f, "%*s%s\n", pre, "", line);
    memset(line, ' ', (size_t)width);
    for (int c = 0; c < width; c += step) {
        char lab[32];
        int n = snprintf(lab, sizeof lab, "%.4gms", ms * c / width);
        if (c + n <= width) memcpy(line + c, lab, (size_t)n);
    }
    fprintf(f, "%*s%s\n", pre, "", line);
    for (int r = 0; r < t->pp; r++) {
        memset(line, '.', (size_t)width);
        line[width] = 0;
        int last = 0;
        const struct bm_rank_ops *ro = &t->ranks[r];
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            if (op->kind != BM_OP_COMPUTE) continue;
            const struct bm_op_time *ot = &tl->ranks[r].ops[i];
            int c0 = (int)(ot->start_ms / ms * width + 0.5), c1 = (int)(ot->end_ms / ms * width + 0.5);
            if (c0 < last) c0 = last;
            if (c1 > width) c1 = width;
            if (c1 <= c0) {
                if (c0 >= last && c0 < width) c1 = c0 + 1;
                else continue;
            }
            char label[64], one;
            const char *pass = bm_pass_name((enum bm_pass)op->pass);
            if (op->module == t->backbone_module) {
                int lower = bm_report_local_chunk(t, op->chunk) % 2;
                one = lower ? (char)tolower((unsigned char)pass[0]) : pass[0];
                snprintf(label, sizeof label, "%c%d", one, op->mb);
            } else {
                char l = op->module >= 0 && op->module < t->n_modules ? letters[op->module] : '?';
                one = op->pass == BM_PASS_F ? l : (char)toupper((unsigned char)l);
                snprintf(label, sizeof label, "[%c%s%d]", l, pass, op->mb);
            }
            put_span(line, c0, c1, label, one);
            last = c1;
        }
        fprintf(f, "rank %*d |%s|\n", rw, r, line);
    }
    fprintf(f, "legend: F/B/W backbone forward/backward/weight-grad + microbatch (upper case: even local chunk, lower case: odd)");
    for (int m = 0; m < t->n_modules; m++)
        if (m != t->backbone_module)
            fprintf(f, "; [%cF3] %s (%s) forward of microbatch 3 (narrow: %c/[%c] forward, %c/[%c] backward)", letters[m],
                    t->modules[m].name, bm_role_name(t->modules[m].role), letters[m], letters[m],
                    toupper((unsigned char)letters[m]), toupper((unsigned char)letters[m]));
    fprintf(f, "; . idle\n");
    fprintf(f, "makespan %.3f ms, bubble ratio %.3f, peak memory %.2f GiB%s; 1 column = %.4g ms\n",
            tl->makespan_ms, tl->bubble_ratio, tl->peak_mib / 1024.0,
            tl->oom ? " (OUT OF MEMORY)" : "", ms / width);
    bm_free(line);
    bm_free(letters);
    return ferror(f) ? BM_ERR : BM_OK;
}
