/* csv.c — the operator table as CSV, PyTorch-pipelining style (docs/csv.md): one row per rank
 * in rank order, one cell per op, cells are bm_op_format's action strings ("0F3", "vit:F3",
 * "SEND_F:vis_emb:3>1", "RECV_B:grad:llm.c0.out:3<1"). '#' lines before the rows carry the
 * table's header so a CSV alone is reloadable:
 *
 *   # bigmac-table version=1 pp=4 vpp=1 microbatches=8 unit=4 window=2 backbone=1f1b policy=bigmac warmup_extra=3
 *   # device memory_gib=80 peak_tflops=989 efficiency=0.4 link_gbytes_per_s=25 link_latency_us=10
 *   # module name=vit role=encoder consumes=image produces=vis_emb fwd_ms=4 bwd_ms=8 act_mib=300 state_mib=2600 out_mib=16
 *   # chunk_weights 0.25 0.25 0.25 0.25
 *   # chunk_layers 12 12 12 12
 *   # mb_scale 1 1 1 1 1 1 1 1
 *   0F0,0F1,...
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "table/flow.h"
#include "bigmac_cost.h"
#include "spec/knobs.h"
#include "table/table.h"
#include "util/util.h"

/* ---------------------------------------------------------------- writer */

static void put_list(FILE *f, const char *key, char **v, int n)
{
    fprintf(f, " %s=", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? "," : "", v[i]);
}

/* A name is CSV-safe when it has no separator of the grammar (docs/csv.md). */
static const char *bad_char(const char *name, int is_module)
{
    for (const char *p = name; *p; p++)
        if (*p == ',' || *p == '=' || *p == '"' || isspace((unsigned char)*p) || (is_module && *p == ':'))
            return p;
    return *name ? NULL : name;
}

/* The longest field ("key=value") of a '#' line the reader takes. */
#define CSV_FIELD_MAX 1023

int bm_csv_check_names(const struct bm_table *t, struct bm_err *err)
{
    for (int m = 0; m < t->n_modules; m++) {
        const struct bm_table_module *mod = &t->modules[m];
        if (bad_char(mod->name, 1))
            return bm_err_set(err, "module name \"%s\" cannot be written as CSV (no spaces, ',', '=', '\"' or ':' in names)", mod->name);
        for (int k = 0; k < mod->n_consumes + mod->n_produces; k++) {
            const char *n = k < mod->n_consumes ? mod->consumes[k] : mod->produces[k - mod->n_consumes];
            if (bad_char(n, 0))
                return bm_err_set(err, "tensor name \"%s\" of module \"%s\" cannot be written as CSV (no spaces, ',', '=' or '\"' in names)", n, mod->name);
        }
        /* the reader's field room (CSV_FIELD_MAX): a list that does not fit is not written */
        size_t len[2] = {strlen("consumes="), strlen("produces=")};
        for (int k = 0; k < mod->n_consumes + mod->n_produces; k++)
            len[k >= mod->n_consumes] += strlen(k < mod->n_consumes ? mod->consumes[k] : mod->produces[k - mod->n_consumes]) + 1;
        if (strlen(mod->name) + 5 > CSV_FIELD_MAX || len[0] > CSV_FIELD_MAX || len[1] > CSV_FIELD_MAX)
            return bm_err_set(err, "module \"%s\" cannot be written as CSV: its name or a tensor list is longer than a CSV field (%d characters)",
                              mod->name, CSV_FIELD_MAX);
    }
    return BM_OK;
}

/* fields[0..n) as " key=value". */
static void put_fields(FILE *f, const struct bm_field *fields, int n)
{
    for (int j = 0; j < n; j++) {
        fprintf(f, " %s=", fields[j].key);
        bm_put_num(f, fields[j].val);
    }
}

int bm_csv_write(const struct bm_table *t, const struct bm_costs *costs, FILE *f)
{
    if (bm_csv_check_names(t, NULL)) return BM_ERR;
    struct bm_costs none = {0};
    const struct bm_costs *km = costs ? costs : &none; /* none: every cost 0 */
    fprintf(f, "# bigmac-table version=1 pp=%d vpp=%d microbatches=%d unit=%d window=%d "
               "backbone=%s policy=%s warmup_extra=%d\n",
            t->pp, t->vpp, t->microbatches, t->unit, t->window, bm_backbone_name(t->backbone),
            bm_policy_name(t->policy), t->warmup_extra);
    struct bm_field fields[64];
    fprintf(f, "# device");
    put_fields(f, fields, bm_table_device_fields(&km->device, t->ranks_per_host, 1, fields, 64));
    put_fields(f, fields, bm_table_overhead_fields(km, 1, fields, 64)); /* as JSON's top level has them */
    fprintf(f, "\n");
    int split = bm_table_splits(t, -1);
    for (int i = 0; i < t->n_modules; i++) {
        const struct bm_table_module *m = &t->modules[i];
        fprintf(f, "# module name=%s role=%s", m->name, bm_role_name(m->role));
        put_list(f, "consumes", m->consumes, m->n_consumes);
        put_list(f, "produces", m->produces, m->n_produces);
        if (m->role == BM_ROLE_GENERATOR)
            fprintf(f, " grad_to_backbone=%s", m->grad_to_backbone ? "true" : "false");
        if (m->recompute) fprintf(f, " recompute=full");
        if (m->frozen) fprintf(f, " trainable=false");
        static const struct bm_cost zero_cost;
        put_fields(f, fields, bm_table_cost_fields(i < km->n_modules ? &km->modules[i] : &zero_cost, 0, m->frozen, split,
                                                   1, fields, (int)(sizeof fields / sizeof fields[0])));
        fprintf(f, "\n");
    }
    int C = t->pp * t->vpp;
    fprintf(f, "# chunk_weights");
    for (int c = 0; c < C; c++) {
        fputc(' ', f);
        bm_put_num(f, km->chunk_weights ? km->chunk_weights[c] : 1.0 / C);
    }
    fprintf(f, "\n");
    if (t->chunk_layers) {
        fprintf(f, "# chunk_layers");
        for (int c = 0; c < C; c++) fprintf(f, " %d", t->chunk_layers[c]);
        fprintf(f, "\n");
    }
    int moved = 0; /* the chunk -> rank map, only when some chunk is not on rank c mod P */
    for (int c = 0; c < C; c++) moved |= bm_table_chunk_rank(t, c) != c % t->pp;
    if (moved) {
        fprintf(f, "# chunk_rank");
        for (int c = 0; c < C; c++) fprintf(f, " %d", bm_table_chunk_rank(t, c));
        fprintf(f, "\n");
    }
    fprintf(f, "# mb_scale");
    for (int m = 0; m < t->microbatches; m++) {
        fputc(' ', f);
        bm_put_num(f, km->mb_scale ? km->mb_scale[m] : 1.0);
    }
    fprintf(f, "\n");
    if (km->rank_time_scale) {
        fprintf(f, "# rank_time_scale");
        for (int r = 0; r < t->pp; r++) {
            fputc(' ', f);
            bm_put_num(f, km->rank_time_scale[r]);
        }
        fprintf(f, "\n");
    }
    char buf[BM_MAX_NAME + 64];
    for (int r = 0; r < t->pp; r++) {
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            bm_op_format(t, &t->ranks[r].ops[i], buf, sizeof buf);
            fprintf(f, "%s%s", i ? "," : "", buf);
        }
        fprintf(f, "\n");
    }
    return ferror(f) ? BM_ERR : BM_OK;
}

/* ---------------------------------------------------------------- PyTorch's grammar */

/* One backbone cell of a rank's row in PyTorch's grammar. */
struct tcell {
    char s[32];
    int fwd, stage, mb;
};

/* Write rows cells[r][0 .. n[r]) of a zb-interleaved table with the idle steps PyTorch's
 * ScheduleInterleavedZeroBubble puts in its pipeline order (what its _dump_csv writes): rank r
 * starts with r idle steps and idles P-1-r steps after its warm-up forwards; then, stepping all
 * ranks together, a forward of stage s > 0 whose stage s-1 forward has not run in an earlier
 * step waits one idle step (its _add_bubbles_to_actions). */
static int torch_zb_grid(const struct bm_table *t, struct tcell **cells, const int *n, FILE *f)
{
    int P = t->pp;
    long C = (long)P * t->vpp, M = t->microbatches, total = 0;
    for (int r = 0; r < P; r++) total += n[r] + 2 * P;
    int *len = bm_calloc((size_t)P, sizeof(int)), *ptr = bm_calloc((size_t)P, sizeof(int));
    int *n_out = bm_calloc((size_t)P, sizeof(int));
    int **seq = bm_calloc((size_t)P, sizeof *seq);  /* cell index, -1 = an idle step */
    int **out = bm_calloc((size_t)P, sizeof *out);  /* the rank's cell at each step, -1 = idle */
    unsigned char *seen = bm_calloc((size_t)(C * M / 8 + 1), 1), *now = bm_calloc((size_t)(C * M / 8 + 1), 1);
    int rc = len && ptr && n_out && seq && out && seen && now ? BM_OK : BM_ERR;
    for (int r = 0; r < P && !rc; r++) {
        int w = bm_backbone_warmup(t->backbone, P, t->vpp, t->microbatches, r, t->warmup_extra);
        if (!(seq[r] = bm_malloc((size_t)(n[r] + 2 * P + 1) * sizeof(int))) ||
            !(out[r] = bm_malloc((size_t)(total + 1) * sizeof(int)))) {
            rc = BM_ERR;
            break;
        }
        for (int k = 0; k < r; k++) seq[r][len[r]++] = -1;
        for (int i = 0; i < n[r]; i++) {
            seq[r][len[r]++] = i;
            if (w > 0 && i == w - 1)
                for (int k = 0; k < P - 1 - r; k++) seq[r][len[r]++] = -1;
        }
    }
#define BIT(set_, s_, m_) (set_[((long)(s_) * M + (m_)) >> 3] & (1u << (((long)(s_) * M + (m_)) & 7)))
#define SET(set_, s_, m_) (set_[((long)(s_) * M + (m_)) >> 3] |= (unsigned char)(1u << (((long)(s_) * M + (m_)) & 7)))
    int grid = !rc;
    for (int busy = 1; busy && grid;) {
        busy = 0;
        int moved = 0;
        for (int r = 0; r < P; r++) {
            if (ptr[r] >= len[r]) continue;
            busy = 1;
            int i = seq[r][ptr[r]], cell = -1;
            if (i < 0) {
                ptr[r]++;
                moved = 1;
            } else {
                const struct tcell *x = &cells[r][i];
                if (!x->fwd || x->stage == 0 || (x->stage - 1 < C && x->mb < M && BIT(seen, x->stage - 1, x->mb))) {
                    cell = i;
                    if (x->fwd && x->stage < C && x->mb < M) SET(now, x->stage, x->mb);
                    ptr[r]++;
                    moved = 1;
                }
            }
            if (n_out[r] >= total) grid = 0;
            else out[r][n_out[r]++] = cell;
        }
        if (busy && !moved) grid = 0;  /* a forward whose input never runs: no grid, plain rows */
        for (long b = 0; b <= C * M / 8; b++) seen[b] |= now[b];
    }
#undef BIT
#undef SET
    for (int r = 0; r < P && !rc; r++) {
        if (grid)
            for (int k = 0; k < n_out[r]; k++) fprintf(f, "%s%s", k ? "," : "", out[r][k] < 0 ? "" : cells[r][out[r][k]].s);
        else
            for (int k = 0; k < n[r]; k++) fprintf(f, "%s%s", k ? "," : "", cells[r][k].s);
        fprintf(f, "\n");
    }
    for (int r = 0; r < P; r++) {
        if (seq) bm_free(seq[r]);
        if (out) bm_free(out[r]);
    }
    bm_free(seq), bm_free(out), bm_free(len), bm_free(ptr), bm_free(n_out), bm_free(seen), bm_free(now);
    return rc;
}

/* A send/recv of t as a PyTorch cell (0 = not a backbone stage-to-stage transfer): the forward
 * activation between chunks b and b+1 is "<b>SEND_F<m>" on b's rank and "<b+1>RECV_F<m>" on
 * b+1's; its gradient "<b+1>SEND_B<m>" and "<b>RECV_B<m>". */
static int torch_comm_cell(const struct bm_table *t, const struct bm_flow *fl, const struct bm_op *op, char *buf,
                           size_t n)
{
    int pm, pc, pp;
    if (bm_flow_producer(fl, op->tensor, &pm, &pc, &pp) || pm != t->backbone_module) return 0;
    int C = t->pp * t->vpp, send = op->kind == BM_OP_SEND;
    if (pp == BM_PASS_F && pc >= 0 && pc < C - 1) {
        snprintf(buf, n, "%d%s%d", send ? pc : pc + 1, send ? "SEND_F" : "RECV_F", op->mb);
        return 1;
    }
    if (pp == BM_PASS_B && pc >= 1 && pc < C) {
        snprintf(buf, n, "%d%s%d", send ? pc : pc - 1, send ? "SEND_B" : "RECV_B", op->mb);
        return 1;
    }
    return 0;
}

int bm_csv_write_torch(const struct bm_table *t, int comms, FILE *f, char *note, size_t note_n)
{
    if (note_n) note[0] = 0;
    if (t->backbone_module < 0 || t->backbone_module >= t->n_modules) return BM_ERR;
    const struct bm_flow *fl = bm_table_flow(t);
    struct bm_flow *own = NULL;
    struct bm_err err;
    if (!fl) {
        if (bm_flow_build(t, &own, &err)) return BM_ERR;
        fl = own;
    }
    long C = (long)t->pp * t->vpp, M = t->microbatches;
    unsigned char *has_w = bm_calloc((size_t)(C * M / 8 + 1), 1);
    if (!has_w) {
        bm_flow_free(own);
        return BM_ERR;
    }
    int bb = t->backbone_module;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            if (op->kind == BM_OP_COMPUTE && op->module == bb && op->pass == BM_PASS_W && op->chunk >= 0 &&
                op->chunk < C && op->mb >= 0 && op->mb < M) {
                long bit = op->chunk * M + op->mb;
                has_w[bit >> 3] |= (unsigned char)(1u << (bit & 7));
            }
        }
#define HAS_W(c_, m_) (has_w[((long)(c_) * M + (m_)) >> 3] & (1u << (((long)(c_) * M + (m_)) & 7)))
    long left_ops = 0, left_comms = 0;
    int *left_mod = bm_calloc((size_t)t->n_modules + 1, sizeof(int));
    if (!left_mod) {
        bm_free(has_w);
        bm_flow_free(own);
        return BM_ERR;
    }
    struct tcell **cells = bm_calloc((size_t)t->pp, sizeof *cells);
    int *n_cells = bm_calloc((size_t)t->pp, sizeof(int));
    int rc = cells && n_cells ? BM_OK : BM_ERR;
    char cell[96];
    /* how PyTorch writes each backbone step (dualpipe-v: whole backwards, overlapped pairs),
     * followed while the rank's backbone ops are the schedule's */
    int n_steps = bm_backbone_n_steps(t->backbone, t->vpp, t->microbatches);
    struct bm_bb_step *steps = bm_malloc((size_t)(n_steps > 0 ? n_steps : 1) * sizeof *steps);
    if (!steps) rc = BM_ERR;
    for (int r = 0; r < t->pp && !rc; r++) {
        const struct bm_rank_ops *ro = &t->ranks[r];
        if (!(cells[r] = bm_malloc((size_t)(ro->n_ops + 1) * sizeof **cells))) {
            rc = BM_ERR;
            break;
        }
        int follow = !bm_backbone_order(t->backbone, t->pp, t->vpp, t->microbatches, r, t->warmup_extra, steps, NULL);
        int k_step = 0;
        long skip_w = -1; /* the W already written inside a merged B */
        long skip_b = -1; /* the B already written inside an OVERLAP_F_B */
        for (int i = 0; i < ro->n_ops; i++) {
            const struct bm_op *op = &ro->ops[i];
            cell[0] = 0;
            int flags = 0;
            if (op->kind == BM_OP_COMPUTE && op->module == bb) {
                follow = follow && k_step < n_steps && steps[k_step].chunk == op->chunk && steps[k_step].mb == op->mb &&
                         steps[k_step].pass == op->pass;
                if (follow) flags = steps[k_step++].flags;
            }
            if (op->kind == BM_OP_COMPUTE && op->module != bb) {
                left_ops++;
                if (op->module >= 0 && op->module < t->n_modules) left_mod[op->module] = 1;
            } else if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_B && skip_b == (long)op->chunk * M + op->mb) {
                skip_b = -1;
                continue;
            } else if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_F && (flags & BM_STEP_OVERLAP)) {
                /* (F;B)OVERLAP_F_B when the pair's B is the rank's next backbone op and no
                 * cell is written between them */
                int j = i + 1, ok = 1;
                for (; j < ro->n_ops; j++) {
                    const struct bm_op *nx = &ro->ops[j];
                    if (nx->kind == BM_OP_COMPUTE && nx->module == bb) break;
                    if (comms && nx->kind != BM_OP_COMPUTE && torch_comm_cell(t, fl, nx, cell, sizeof cell)) ok = 0;
                }
                const struct bm_op *b2 = j < ro->n_ops ? &ro->ops[j] : NULL;
                ok = ok && b2 && b2->pass == BM_PASS_B && k_step < n_steps && steps[k_step].chunk == b2->chunk &&
                     steps[k_step].mb == b2->mb && steps[k_step].pass == BM_PASS_B;
                if (ok) {
                    int whole = steps[k_step].flags & BM_STEP_WHOLE || !HAS_W(b2->chunk, b2->mb);
                    snprintf(cell, sizeof cell, "(%dF%d;%d%c%d)OVERLAP_F_B", op->chunk, op->mb, b2->chunk,
                             whole ? 'B' : 'I', b2->mb);
                    skip_b = (long)b2->chunk * M + b2->mb;
                    if (whole && HAS_W(b2->chunk, b2->mb)) skip_w = skip_b;
                } else {
                    snprintf(cell, sizeof cell, "%dF%d", op->chunk, op->mb);
                }
            } else if (op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_B && (flags & BM_STEP_WHOLE) &&
                       HAS_W(op->chunk, op->mb)) {
                snprintf(cell, sizeof cell, "%dB%d", op->chunk, op->mb); /* a whole backward: B and its W */
                skip_w = (long)op->chunk * M + op->mb;
            } else if (op->kind == BM_OP_COMPUTE) {
                if (op->pass == BM_PASS_W) {
                    if (skip_w == (long)op->chunk * M + op->mb) {
                        skip_w = -1;
                        continue;
                    }
                    snprintf(cell, sizeof cell, "%dW%d", op->chunk, op->mb);
                } else if (op->pass == BM_PASS_B && HAS_W(op->chunk, op->mb)) {
                    /* a split backward is PyTorch's I; with --comms, an I whose W is the rank's
                     * next compute op is written B, as PyTorch's lowering merges them (_merge_bw) */
                    int merged = 0;
                    if (comms)
                        for (int j = i + 1; j < ro->n_ops; j++) {
                            const struct bm_op *nx = &ro->ops[j];
                            if (nx->kind != BM_OP_COMPUTE) continue;
                            merged = nx->module == bb && nx->pass == BM_PASS_W && nx->chunk == op->chunk && nx->mb == op->mb;
                            break;
                        }
                    if (merged) skip_w = (long)op->chunk * M + op->mb;
                    snprintf(cell, sizeof cell, "%d%c%d", op->chunk, merged ? 'B' : 'I', op->mb);
                } else {
                    snprintf(cell, sizeof cell, "%d%c%d", op->chunk, op->pass == BM_PASS_F ? 'F' : 'B', op->mb);
                }
            } else if (!torch_comm_cell(t, fl, op, cell, sizeof cell)) {
                if (comms) {
                    left_comms++;
                    if (op->module >= 0 && op->module < t->n_modules) left_mod[op->module] = 1;
                }
                continue;
            } else if (!comms) {
                continue;
            }
            if (!cell[0]) continue;
            struct tcell *x = &cells[r][n_cells[r]++];
            snprintf(x->s, sizeof x->s, "%s", cell);
            x->fwd = op->kind == BM_OP_COMPUTE && op->pass == BM_PASS_F;
            x->stage = op->chunk;
            x->mb = op->mb;
        }
    }
    /* zb-interleaved, compute only: PyTorch's ScheduleInterleavedZeroBubble writes idle steps */
    if (!rc && !comms && t->backbone == BM_BB_ZB_INTERLEAVED) rc = torch_zb_grid(t, cells, n_cells, f);
    else
        for (int r = 0; r < t->pp && !rc; r++) {
            for (int i = 0; i < n_cells[r]; i++) fprintf(f, "%s%s", i ? "," : "", cells[r][i].s);
            fprintf(f, "\n");
        }
    for (int r = 0; cells && r < t->pp; r++) bm_free(cells[r]);
    bm_free(cells);
    bm_free(steps);
    bm_free(n_cells);
#undef HAS_W
    if (note_n && (left_ops || left_comms)) {
        size_t len = (size_t)snprintf(note, note_n, "left out %ld encoder/generator op%s", left_ops, left_ops == 1 ? "" : "s");
        if (left_comms && len < note_n)
            len += (size_t)snprintf(note + len, note_n - len, " and %ld of their sends/receives", left_comms);
        for (int m = 0, k = 0; m < t->n_modules && len < note_n; m++)
            if (left_mod[m] && m != bb)
                len += (size_t)snprintf(note + len, note_n - len, "%s%s", k++ ? ", " : " (", t->modules[m].name);
        if (len < note_n)
            snprintf(note + len, note_n - len, "): PyTorch's grammar has cells for backbone stages only");
    }
    bm_free(left_mod);
    bm_free(has_w);
    bm_flow_free(own);
    return rc || ferror(f) ? BM_ERR : BM_OK;
}

/* ---------------------------------------------------------------- loader */

struct line {
    const char *s;  /* start (not NUL-terminated) */
    int len;
    int no;         /* 1-based line number */
};

struct cp {
    const char *name;
    struct bm_err *err;
    struct line *lines;
    int n_lines;
    int torch;  /* the file is in PyTorch's grammar (docs/csv.md "PyTorch's files") */
    int split;  /* ... and splits backwards (some I or W cell): its B is I and W back to back */
    struct bm_costs *c; /* the costs the '#' lines (or the spec) give, beside the table */
};

static int at(struct cp *P, int line, int col, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int at(struct cp *P, int line, int col, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bm_err_set(P->err, "%s:%d:%d: %s", P->name, line, col, msg);
}

/* A whitespace-separated token of a '#' line. */
struct tok {
    char text[CSV_FIELD_MAX + 1];
    int col;
};

/* Split line L (after '#') into tokens; returns count (at most max). */
static int tokens(struct cp *P, const struct line *L, struct tok *tk, int max, int *count)
{
    int n = 0, i = 1;
    *count = 0;
    while (i < L->len) {
        while (i < L->len && isspace((unsigned char)L->s[i])) i++;
        if (i >= L->len) break;
        int j = i;
        while (j < L->len && !isspace((unsigned char)L->s[j])) j++;
        /* a field beyond the line's room or longer than a token's is refused, never dropped */
        if (n == max)
            return at(P, L->no, i + 1, "more than %d fields on a '# %s' line (every key appears once)", max - 1, tk[0].text);
        if (j - i > (int)sizeof tk[n].text - 1)
            return at(P, L->no, i + 1, "a field of %d characters (at most %d)", j - i, (int)sizeof tk[n].text - 1);
        memcpy(tk[n].text, L->s + i, (size_t)(j - i));
        tk[n].text[j - i] = 0;
        tk[n].col = i + 1;
        n++;
        i = j;
    }
    *count = n;
    return BM_OK;
}

static int parse_int(struct cp *P, int line, const struct tok *tk, const char *v, long lo, long hi,
                     int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        return at(P, line, tk->col, "\"%s\": expected an integer in %ld..%ld", tk->text, lo, hi);
    *out = (int)x;
    return BM_OK;
}

static int parse_dbl(struct cp *P, int line, const struct tok *tk, const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !isfinite(x) || x < 0)
        return at(P, line, tk->col, "\"%s\": expected a number >= 0", tk->text);
    *out = x;
    return BM_OK;
}

static char **split_list(const char *v, int *n)
{
    *n = 0;
    int cnt = *v ? 1 : 0;
    for (const char *p = v; *p; p++) cnt += *p == ',';
    char **out = bm_calloc((size_t)(cnt ? cnt : 1), sizeof *out);
    if (!out) return NULL;
    const char *p = v;
    for (int i = 0; i < cnt; i++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        out[i] = bm_malloc(len + 1);
        if (!out[i]) {
            for (int j = 0; j < i; j++) bm_free(out[j]);
            bm_free(out);
            *n = 0;
            return NULL;
        }
        memcpy(out[i], p, len);
        out[i][len] = 0;
        p = e ? e + 1 : p + len;
        (*n)++;
    }
    return out;
}

/* Header values collected from the "# bigmac-table" line. */
struct hdr {
    int pp, vpp, microbatches, unit, window, warmup_extra;
    int has_window, has_warmup, has_backbone, has_policy, line;
    enum bm_backbone backbone;
    enum bm_policy policy;
};

static int parse_header(struct cp *P, const struct line *L, struct hdr *h)
{
    struct tok tk[32];
    int n;
    if (tokens(P, L, tk, 32, &n)) return BM_ERR;
    h->line = L->no;
    for (int i = 1; i < n; i++) {
        char *eq = strchr(tk[i].text, '=');
        if (!eq) return at(P, L->no, tk[i].col, "\"%s\": expected key=value", tk[i].text);
        *eq = 0;
        const char *k = tk[i].text, *v = eq + 1;
        int rc = BM_OK, dummy;
        if (!strcmp(k, "version")) rc = parse_int(P, L->no, &tk[i], v, 1, 1, &dummy);
        else if (!strcmp(k, "pp")) rc = parse_int(P, L->no, &tk[i], v, 1, 4096, &h->pp);
        else if (!strcmp(k, "vpp")) rc = parse_int(P, L->no, &tk[i], v, 1, 64, &h->vpp);
        else if (!strcmp(k, "microbatches")) rc = parse_int(P, L->no, &tk[i], v, 1, 1000000, &h->microbatches);
        else if (!strcmp(k, "unit")) rc = parse_int(P, L->no, &tk[i], v, 1, 1000000, &h->unit);
        else if (!strcmp(k, "window")) {
            rc = parse_int(P, L->no, &tk[i], v, 0, 1000000, &h->window);
            h->has_window = 1;
        } else if (!strcmp(k, "warmup_extra")) {
            rc = parse_int(P, L->no, &tk[i], v, 0, 1000000, &h->warmup_extra);
            h->has_warmup = 1;
        } else if (!strcmp(k, "backbone")) {
            if (bm_backbone_parse(v, &h->backbone))
                return at(P, L->no, tk[i].col, "unknown backbone schedule \"%s\" (gpipe, 1f1b, interleaved, zb-h1, zb-interleaved, zb-v, dualpipe-v)", v);
            h->has_backbone = 1;
        } else if (!strcmp(k, "policy")) {
            if (bm_policy_parse(v, &h->policy))
                return at(P, L->no, tk[i].col, "unknown policy \"%s\" (bigmac, optimus, unified, unified-balanced, ideal, none)", v);
            h->has_policy = 1;
        } else {
            return at(P, L->no, tk[i].col, "unknown key \"%s\" in the bigmac-table line (version, pp, vpp, microbatches, unit, window, backbone, policy, warmup_extra)", k);
        }
        if (rc) {
            /* restore the token for the message */
            return BM_ERR;
        }
    }
    return BM_OK;
}

static int parse_device(struct cp *P, const struct line *L, struct bm_device *d)
{
    struct tok tk[32];
    int n;
    if (tokens(P, L, tk, 32, &n)) return BM_ERR;
    for (int i = 1; i < n; i++) {
        char *eq = strchr(tk[i].text, '=');
        if (!eq) return at(P, L->no, tk[i].col, "\"%s\": expected key=value", tk[i].text);
        *eq = 0;
        const char *k = tk[i].text;
        const struct bm_knob *kn = bm_knob_find("device", k); /* the keys the line carries */
        if (!kn || (kn->home != BM_KNOB_DEVICE && kn->home != BM_KNOB_OVERHEAD) || kn->csv == BM_KNOB_NEVER)
            return at(P, L->no, tk[i].col, "unknown device key \"%s\"", k);
        if (kn->home == BM_KNOB_OVERHEAD) { /* us here, ms in the cost model */
            double us;
            if (parse_dbl(P, L->no, &tk[i], eq + 1, &us)) return BM_ERR;
            if (us > kn->hi) return at(P, L->no, tk[i].col, "%s must be at most %g, got %s", k, kn->hi, eq + 1);
            *(double *)(void *)((char *)P->c + kn->costs_off) = us / 1000.0;
            continue;
        }
        void *dst = bm_knob_device_field(kn, d);
        if (kn->integer) {
            double h;
            if (parse_dbl(P, L->no, &tk[i], eq + 1, &h)) return BM_ERR;
            if (h != (int)h || h > kn->hi)
                return at(P, L->no, tk[i].col, "%s must be an integer in 0..%d, got %s", k, (int)kn->hi, eq + 1);
            *(int *)dst = (int)h;
            continue;
        }
        if (parse_dbl(P, L->no, &tk[i], eq + 1, (double *)dst)) return BM_ERR;
    }
    return BM_OK;
}

static int parse_module(struct cp *P, const struct line *L, struct bm_table *t)
{
    struct tok tk[16];
    int n;
    if (tokens(P, L, tk, 16, &n)) return BM_ERR;
    struct bm_costs *kc = P->c;
    if (bm_grow(&t->modules, &(int){t->n_modules}, t->n_modules + 1, sizeof *t->modules) ||
        bm_grow(&kc->modules, &(int){kc->n_modules}, kc->n_modules + 1, sizeof *kc->modules) ||
        bm_grow(&kc->spread, &(int){kc->n_modules}, kc->n_modules + 1, sizeof *kc->spread))
        return bm_err_set(P->err, "%s: out of memory", P->name);
    struct bm_table_module *m = &t->modules[t->n_modules];
    memset(m, 0, sizeof *m);
    struct bm_cost *mc = &kc->modules[kc->n_modules];
    bm_knob_cost_defaults(mc); /* the spec's (knobs.h) */
    kc->spread[kc->n_modules++] = 0;
    m->grad_to_backbone = 1;
    m->role = BM_ROLE_ENCODER;
    t->n_modules++;
    int has_role = 0;
    for (int i = 1; i < n; i++) {
        char *eq = strchr(tk[i].text, '=');
        if (!eq) return at(P, L->no, tk[i].col, "\"%s\": expected key=value", tk[i].text);
        *eq = 0;
        const char *k = tk[i].text, *v = eq + 1;
        if (!strcmp(k, "name")) {
            if (!*v) return at(P, L->no, tk[i].col, "empty module name");
            for (int j = 0; j + 1 < t->n_modules; j++)
                if (!strcmp(t->modules[j].name, v))
                    return at(P, L->no, tk[i].col, "duplicate module name \"%s\"", v);
            bm_free(m->name);
            if (!(m->name = bm_strdup(v))) return bm_err_set(P->err, "%s: out of memory", P->name);
        } else if (!strcmp(k, "role")) {
            if (bm_role_parse(v, &m->role))
                return at(P, L->no, tk[i].col, "unknown role \"%s\" (encoder, backbone, generator)", v);
            has_role = 1;
        } else if (!strcmp(k, "consumes") || !strcmp(k, "produces")) {
            char ***lst = k[0] == 'c' ? &m->consumes : &m->produces;
            int *cnt = k[0] == 'c' ? &m->n_consumes : &m->n_produces;
            for (int j = 0; j < *cnt; j++) bm_free((*lst)[j]);
            bm_free(*lst);
            *cnt = 0;
            if (!(*lst = split_list(v, cnt))) return bm_err_set(P->err, "%s: out of memory", P->name);
        } else if (!strcmp(k, "grad_to_backbone")) {
            if (strcmp(v, "true") && strcmp(v, "false"))
                return at(P, L->no, tk[i].col, "grad_to_backbone must be true or false");
            m->grad_to_backbone = v[0] == 't';
        } else if (!strcmp(k, "recompute")) {
            if (strcmp(v, "none") && strcmp(v, "full"))
                return at(P, L->no, tk[i].col, "recompute must be none or full");
            m->recompute = v[0] == 'f';
        } else if (!strcmp(k, "trainable")) {
            if (strcmp(v, "true") && strcmp(v, "false"))
                return at(P, L->no, tk[i].col, "trainable must be true or false");
            m->frozen = v[0] == 'f';
        } else {
            const struct bm_knob *kn = bm_knob_find("cost", k); /* the figures the line carries */
            if (!kn || kn->home != BM_KNOB_COST || kn->csv == BM_KNOB_NEVER) {
                char known[512] = "name, role, consumes, produces, grad_to_backbone, recompute, trainable";
                for (int j = 0; j < bm_n_knobs; j++)
                    if (bm_knobs[j].home == BM_KNOB_COST && bm_knobs[j].csv != BM_KNOB_NEVER)
                        snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", bm_knobs[j].key);
                return at(P, L->no, tk[i].col, "unknown module key \"%s\" (%s)", k, known);
            }
            double *dst = (double *)(void *)((char *)mc + kn->off);
            if (parse_dbl(P, L->no, &tk[i], v, dst)) return BM_ERR;
        }
    }
    mc->param_mib = mc->state_mib / 4; /* not in the CSV: the JSON table's default */
    if (!m->name) return at(P, L->no, 1, "module line without name=");
    if (!has_role) return at(P, L->no, 1, "module \"%s\" without role=", m->name);
    if (m->role == BM_ROLE_BACKBONE) {
        if (t->backbone_module >= 0)
            return at(P, L->no, 1, "a second backbone module \"%s\"", m->name);
        t->backbone_module = t->n_modules - 1;
    }
    return BM_OK;
}

/* "# chunk_weights 0.5 0.5": exactly n numbers into out. */
static int parse_numbers(struct cp *P, const struct line *L, int n, double *out)
{
    struct tok tk[1];
    int i = 1, k = 0;
    /* skip the keyword */
    while (i < L->len && isspace((unsigned char)L->s[i])) i++;
    while (i < L->len && !isspace((unsigned char)L->s[i])) i++;
    for (;;) {
        while (i < L->len && isspace((unsigned char)L->s[i])) i++;
        if (i >= L->len) break;
        int j = i;
        while (j < L->len && !isspace((unsigned char)L->s[j])) j++;
        int len = j - i < (int)sizeof tk[0].text - 1 ? j - i : (int)sizeof tk[0].text - 1;
        memcpy(tk[0].text, L->s + i, (size_t)len);
        tk[0].text[len] = 0;
        tk[0].col = i + 1;
        if (k >= n) return at(P, L->no, i + 1, "more than %d numbers", n);
        if (parse_dbl(P, L->no, &tk[0], tk[0].text, &out[k])) return BM_ERR;
        k++;
        i = j;
    }
    if (k != n) return at(P, L->no, 1, "expected %d numbers, found %d", n, k);
    return BM_OK;
}

static int all_digits(const char *s, int n)
{
    if (n <= 0 || n > 9) return 0;
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

static int pass_of(char c)
{
    /* PyTorch's grammar: B a full backward, I its input-gradient half (the B of a split
     * backward, whose W is a separate op); both are the table's B */
    return c == 'F' ? BM_PASS_F : c == 'B' || c == 'I' ? BM_PASS_B : c == 'W' ? BM_PASS_W : -1;
}

/* Parse one cell (cell[0..n), at line/col) of rank r into op. */
static int parse_cell(struct cp *P, struct bm_table *t, int r, const char *cell, int n, int line,
                      int col, struct bm_op *op)
{
    char c[1024];
    if (n >= (int)sizeof c) return at(P, line, col, "cell longer than %d characters", (int)sizeof c - 1);
    memcpy(c, cell, (size_t)n);
    c[n] = 0;
    *op = (struct bm_op){BM_OP_COMPUTE, 0, -1, -1, 0, -1, -1};
    int M = t->microbatches, C = t->pp * t->vpp;
    /* backbone: <chunk><pass><mb> */
    int i = 0;
    while (i < n && isdigit((unsigned char)c[i])) i++;
    if (i > 0 && i < n && pass_of(c[i]) >= 0 && all_digits(c + i + 1, n - i - 1) && all_digits(c, i)) {
        long chunk = strtol(c, NULL, 10), mb = strtol(c + i + 1, NULL, 10);
        if (chunk >= C)
            return at(P, line, col, "backbone chunk %ld out of range (pp*vpp = %d chunks) in cell \"%s\"", chunk, C, c);
        if (mb >= M)
            return at(P, line, col, "microbatch %ld out of range (microbatches = %d) in cell \"%s\"", mb, M, c);
        op->module = (int16_t)t->backbone_module;
        op->pass = (uint8_t)pass_of(c[i]);
        op->chunk = (int32_t)chunk;
        op->mb = (int32_t)mb;
        return BM_OK;
    }
    int is_send = !strncmp(c, "SEND_", 5), is_recv = !strncmp(c, "RECV_", 5);
    if (is_send || is_recv) {
        /* SEND_F:<tensor>:<mb>><peer> / RECV_B:<tensor>:<mb><<peer> */
        char *first = strchr(c, ':'), *last = strrchr(c, ':');
        if (n < 7 || (c[5] != 'F' && c[5] != 'B') || first != c + 6 || last == first)
            return at(P, line, col, "malformed comm cell \"%s\" (expected SEND_F:<tensor>:<mb>><peer> or RECV_B:<tensor>:<mb><<peer>)", c);
        char arrow = is_send ? '>' : '<';
        char *a = strchr(last + 1, arrow);
        if (!a || !all_digits(last + 1, (int)(a - last - 1)) || !all_digits(a + 1, (int)strlen(a + 1)))
            return at(P, line, col, "malformed comm cell \"%s\": expected \":<mb>%c<peer>\" at the end", c, arrow);
        long mb = strtol(last + 1, NULL, 10), peer = strtol(a + 1, NULL, 10);
        *last = 0;
        const char *tensor = first + 1;
        int ti = bm_table_find_tensor(t, tensor);
        if (ti < 0) {
            *last = ':';
            return at(P, line, col + (int)(first + 1 - c), "unknown tensor \"%.*s\" in cell \"%s\" (tensors are module outputs, \"<backbone>.c<N>.out\" and \"grad:<tensor>\")",
                      (int)(last - first - 1), first + 1, c);
        }
        *last = ':';
        if (mb >= M)
            return at(P, line, col, "microbatch %ld out of range (microbatches = %d) in cell \"%s\"", mb, M, c);
        if (peer >= t->pp)
            return at(P, line, col, "peer rank %ld out of range (pp = %d) in cell \"%s\"", peer, t->pp, c);
        if (peer == r) return at(P, line, col, "rank %d %ss to itself in cell \"%s\"", r, is_send ? "send" : "recv", c);
        if ((c[5] == 'B') != (t->tensors[ti].grad != 0))
            return at(P, line, col, "cell \"%s\": %s moves a %s (write %s_%c)", c, t->tensors[ti].name,
                      t->tensors[ti].grad ? "gradient" : "forward activation", is_send ? "SEND" : "RECV",
                      t->tensors[ti].grad ? 'B' : 'F');
        op->kind = is_send ? BM_OP_SEND : BM_OP_RECV;
        op->tensor = ti;
        op->module = (int16_t)t->tensors[ti].module;
        op->peer = (int32_t)peer;
        op->mb = (int32_t)mb;
        return BM_OK;
    }
    /* nested: <module>:<pass><mb> */
    char *colon = strrchr(c, ':');
    if (!colon)
        return at(P, line, col, "cannot read cell \"%s\" (expected <chunk><F|B|W><mb> like 0F3, <module>:<F|B><mb> like vit:F3, SEND_F:<tensor>:<mb>><peer> or RECV_F:<tensor>:<mb><<peer>)", c);
    *colon = 0;
    int m = bm_table_find_module(t, c);
    if (m < 0) {
        char known[512] = "";
        for (int k = 0; k < t->n_modules; k++) {
            size_t len = strlen(known);
            snprintf(known + len, sizeof known - len, "%s%s", k ? ", " : "", t->modules[k].name);
        }
        *colon = ':';
        return at(P, line, col, "unknown module \"%.*s\" in cell \"%s\" (modules: %s)",
                  (int)(colon - c), c, c, known);
    }
    *colon = ':';
    if (m == t->backbone_module)
        return at(P, line, col, "cell \"%s\": backbone ops are written <chunk><pass><mb> (like 0F3)", c);
    if (pass_of(colon[1]) < 0 || !all_digits(colon + 2, (int)strlen(colon + 2)))
        return at(P, line, col + (int)(colon + 1 - c), "cell \"%s\": expected <F|B|W><mb> after \"%.*s:\"", c,
                  (int)(colon - c), c);
    long mb = strtol(colon + 2, NULL, 10);
    if (mb >= M)
        return at(P, line, col, "microbatch %ld out of range (microbatches = %d) in cell \"%s\"", mb, M, c);
    op->module = (int16_t)m;
    op->pass = (uint8_t)pass_of(colon[1]);
    op->mb = (int32_t)mb;
    return BM_OK;
}


/* ---------------------------------------------------------------- PyTorch's cells */

/* PyTorch's action types besides the compute passes (torch/distributed/pipelining/schedules.py,
 * `[stage][TYPE][microbatch]`). */
enum { TK_NONE, TK_SEND_F, TK_RECV_F, TK_SEND_B, TK_RECV_B, TK_UNSHARD, TK_RESHARD, TK_REDUCE_GRAD, TK_N };
static const char *const torch_kind[TK_N] = {"", "SEND_F", "RECV_F", "SEND_B", "RECV_B",
                                              "UNSHARD", "RESHARD", "REDUCE_GRAD"};

/* The PyTorch action type right after a cell's stage digits (c[i..n)), TK_NONE if none. */
static int torch_kind_at(const char *c, int i, int n)
{
    for (int k = 1; k < TK_N; k++) {
        int len = (int)strlen(torch_kind[k]);
        if (n - i >= len && !strncmp(c + i, torch_kind[k], (size_t)len)) return k;
    }
    return TK_NONE;
}

/* Which grammar a cell is written in: 1 bigmac's only (it has a ':': "vit:F3",
 * "SEND_F:vis_emb:3>1"), 2 PyTorch's only ("0SEND_F3", "0UNSHARD", "(0F7;7B3)OVERLAP_F_B"),
 * 0 both or neither (a compute cell "0F3", or garbage the parser names later). */
static int cell_flavor(const char *c, int n)
{
    if (memchr(c, ':', (size_t)n)) return 1;
    if (n > 0 && c[0] == '(') return 2;
    int i = 0;
    while (i < n && isdigit((unsigned char)c[i])) i++;
    return i > 0 && torch_kind_at(c, i, n) != TK_NONE ? 2 : 0;
}

/* Largest stage and microbatch a PyTorch cell names (for the shape of a file without a header);
 * unreadable cells are left to the parser. */
static void torch_extent(const char *c, int n, long *max_stage, long *max_mb)
{
    int a = 0;
    if (n > 0 && c[0] == '(') a = 1;
    while (a < n && c[a] != ')') {
        int e = a;
        while (e < n && c[e] != ';' && c[e] != ')') e++;
        int i = a;
        while (i < e && isdigit((unsigned char)c[i])) i++;
        if (i > a && i - a <= 9) {
            long st = strtol(c + a, NULL, 10);
            if (st > *max_stage) *max_stage = st;
            int j = e;
            while (j > i && isdigit((unsigned char)c[j - 1])) j--;
            if (j < e && e - j <= 9 && j > i) {
                long mb = strtol(c + j, NULL, 10);
                if (mb > *max_mb) *max_mb = mb;
            }
        }
        if (c[0] != '(') break;
        a = e + 1;
    }
}

/* Record in row[] (n entries) the row of each stage a PyTorch cell's compute actions name, for
 * stages not seen before. */
static void torch_stage_rows(const char *c, int n, int r, int *row, int n_row)
{
    int a = n > 0 && c[0] == '(' ? 1 : 0;
    for (;;) {
        int e = a;
        while (e < n && c[e] != ';' && c[e] != ')') e++;
        int i = a;
        while (i < e && isdigit((unsigned char)c[i])) i++;
        if (i > a && i - a <= 6 && i < e && pass_of(c[i]) >= 0 && torch_kind_at(c, i, e) == TK_NONE) {
            long st = strtol(c + a, NULL, 10);
            if (st < n_row && row[st] < 0) row[st] = r;
        }
        if (c[0] != '(' || e >= n || c[e] == ')') break;
        a = e + 1;
    }
}

/* The rank that runs backbone chunk c (PyTorch's stage c) of t. */
static int chunk_rank(const struct bm_table *t, int c)
{
    return bm_table_chunk_rank(t, c);
}

/* One PyTorch compute cell "<stage><F|I|B|W><mb>" (c NUL-terminated, n chars) of rank r. */
static int parse_torch_compute(struct cp *P, struct bm_table *t, int r, const char *c, int n, int line, int col,
                               const char *whole, struct bm_op *ops, int max_ops, int *n_ops)
{
    int i = 0;
    while (i < n && isdigit((unsigned char)c[i])) i++;
    if (!(i > 0 && i < n && pass_of(c[i]) >= 0 && all_digits(c + i + 1, n - i - 1) && all_digits(c, i)))
        return at(P, line, col, "cannot read \"%.*s\" in cell \"%s\" (PyTorch's compute actions are <stage><F|I|B|W><microbatch>, like 0F3)",
                  n, c, whole);
    long chunk = strtol(c, NULL, 10), mb = strtol(c + i + 1, NULL, 10);
    int C = t->pp * t->vpp;
    if (chunk >= C)
        return at(P, line, col, "stage %ld out of range (pp*vpp = %d stages) in cell \"%s\"", chunk, C, whole);
    if (mb >= t->microbatches)
        return at(P, line, col, "microbatch %ld out of range (microbatches = %d) in cell \"%s\"", mb, t->microbatches, whole);
    if (chunk_rank(t, (int)chunk) != r)
        return at(P, line, col, "stage %ld is in rank %d's row, but it runs on rank %d (a stage runs on one rank: the row of its first compute cell) in cell \"%s\"",
                  chunk, r, chunk_rank(t, (int)chunk), whole);
    /* in a file that splits backwards, PyTorch's B (a whole backward, what its _merge_bw makes
     * of an I right before its W) is the table's B and W back to back */
    int two = c[i] == 'B' && P->split;
    if (*n_ops + 1 + two > max_ops) return at(P, line, col, "more than %d actions in cell \"%s\"", max_ops, whole);
    ops[(*n_ops)++] = (struct bm_op){BM_OP_COMPUTE, (uint8_t)pass_of(c[i]), (int16_t)t->backbone_module,
                                     (int32_t)chunk, (int32_t)mb, -1, -1};
    if (two)
        ops[(*n_ops)++] = (struct bm_op){BM_OP_COMPUTE, BM_PASS_W, (int16_t)t->backbone_module, (int32_t)chunk,
                                         (int32_t)mb, -1, -1};
    return BM_OK;
}

/* A cell of a PyTorch file (c NUL-terminated, n chars) of rank r into ops[0 .. *n_ops) (an
 * OVERLAP_F_B gives its sub-actions, run back to back in the order written). */
static int parse_torch_cell(struct cp *P, struct bm_table *t, int r, const char *c, int n, int line, int col,
                            struct bm_op *ops, int max_ops, int *n_ops)
{
    *n_ops = 0;
    if (c[0] == '(') {
        const char *close = strchr(c, ')');
        if (!close || strcmp(close + 1, "OVERLAP_F_B"))
            return at(P, line, col, "cannot read cell \"%s\" (PyTorch's composite action is (<action>;<action>)OVERLAP_F_B)", c);
        const char *a = c + 1;
        while (a < close) {
            const char *e = a;
            while (e < close && *e != ';') e++;
            const char *a2 = a, *e2 = e;
            while (a2 < e2 && isspace((unsigned char)*a2)) a2++;
            while (e2 > a2 && isspace((unsigned char)e2[-1])) e2--;
            char sub[64];
            if (e2 - a2 >= (long)sizeof sub || e2 == a2)
                return at(P, line, col + (int)(a - c), "cannot read \"%.*s\" in cell \"%s\" (an OVERLAP_F_B holds compute actions like 0F3)",
                          (int)(e - a), a, c);
            memcpy(sub, a2, (size_t)(e2 - a2));
            sub[e2 - a2] = 0;
            if (parse_torch_compute(P, t, r, sub, (int)(e2 - a2), line, col + (int)(a2 - c), c, ops, max_ops, n_ops))
                return BM_ERR;
            a = e + 1;
        }
        if (!*n_ops) return at(P, line, col, "empty OVERLAP_F_B in cell \"%s\"", c);
        return BM_OK;
    }
    int i = 0;
    while (i < n && isdigit((unsigned char)c[i])) i++;
    int k = i > 0 ? torch_kind_at(c, i, n) : TK_NONE;
    if (k == TK_NONE) return parse_torch_compute(P, t, r, c, n, line, col, c, ops, max_ops, n_ops);
    if (k == TK_UNSHARD || k == TK_RESHARD || k == TK_REDUCE_GRAD)
        return at(P, line, col,
                  "cell \"%s\": %s is %s; bigmac's table has no such op (it does not shard parameters or "
                  "model data-parallel gradient reduction), so it cannot honour it\n"
                  "hint: load PyTorch's compute-only file (_dump_csv(format=\"compute_only\")): bigmac adds the sends and receives itself",
                  c, torch_kind[k],
                  k == TK_UNSHARD ? "FSDP's all-gather of a stage's parameters"
                  : k == TK_RESHARD ? "FSDP's release of a stage's gathered parameters"
                                    : "the stage's gradient reduction across data-parallel replicas");
    int len = (int)strlen(torch_kind[k]);
    if (!all_digits(c, i) || !all_digits(c + i + len, n - i - len))
        return at(P, line, col, "cannot read cell \"%s\" (expected <stage>%s<microbatch>, like 0%s3)", c, torch_kind[k], torch_kind[k]);
    long st = strtol(c, NULL, 10), mb = strtol(c + i + len, NULL, 10);
    int C = t->pp * t->vpp;
    if (st >= C) return at(P, line, col, "stage %ld out of range (pp*vpp = %d stages) in cell \"%s\"", st, C, c);
    if (mb >= t->microbatches)
        return at(P, line, col, "microbatch %ld out of range (microbatches = %d) in cell \"%s\"", mb, t->microbatches, c);
    /* SEND_F: stage s sends its output to s+1; RECV_F: s receives s-1's output; SEND_B: s sends
     * the gradient of its input to s-1; RECV_B: s receives the gradient of its output from s+1 */
    int fwd = k == TK_SEND_F || k == TK_RECV_F, send = k == TK_SEND_F || k == TK_SEND_B;
    int peer_stage = (k == TK_SEND_F || k == TK_RECV_B) ? (int)st + 1 : (int)st - 1;
    if (peer_stage < 0 || peer_stage >= C)
        return at(P, line, col, "cell \"%s\": stage %ld is the %s stage, it has no %s to %s", c, st,
                  peer_stage < 0 ? "first" : "last", fwd ? "activation" : "gradient", send ? "send" : "receive");
    if (chunk_rank(t, (int)st) != r)
        return at(P, line, col, "stage %ld is in rank %d's row, but it runs on rank %d (a stage runs on one rank: the row of its first compute cell) in cell \"%s\"",
                  st, r, chunk_rank(t, (int)st), c);
    int peer = chunk_rank(t, peer_stage);
    if (peer == r)
        return at(P, line, col, "cell \"%s\": stages %ld and %d are both on rank %d, nothing travels between them", c,
                  st, peer_stage, r);
    int boundary = (k == TK_SEND_F || k == TK_RECV_B) ? (int)st : peer_stage;  /* tensor between boundary and boundary+1 */
    char name[BM_MAX_NAME + 32];
    snprintf(name, sizeof name, "%s%s.c%d.out", fwd ? "" : "grad:", t->modules[t->backbone_module].name, boundary);
    int ti = bm_table_find_tensor(t, name);
    if (ti < 0) return at(P, line, col, "cell \"%s\": the table has no tensor \"%s\"", c, name);
    *ops = (struct bm_op){(uint8_t)(send ? BM_OP_SEND : BM_OP_RECV), 0, (int16_t)t->backbone_module, -1, (int32_t)mb,
                          (int32_t)peer, ti};
    *n_ops = 1;
    return BM_OK;
}

static int is_blank(const struct line *L)
{
    for (int i = 0; i < L->len; i++)
        if (!isspace((unsigned char)L->s[i])) return 0;
    return 1;
}

static int first_word(const struct line *L, const char *w)
{
    int i = 1;
    while (i < L->len && isspace((unsigned char)L->s[i])) i++;
    size_t n = strlen(w);
    return L->len - i >= (int)n && !strncmp(L->s + i, w, n) &&
           (i + (int)n == L->len || isspace((unsigned char)L->s[i + n]));
}

/* The table's shell from the CSV's own '#' lines (no spec): device, modules, chunk weights,
 * microbatch and rank scales, chunk layers. */
static int parse_shell(struct cp *P, struct bm_table *t, const struct line *dev_line, const struct line *cw_line,
                       const struct line *ms_line, const struct line *rs_line, const struct line *cl_line)
{
    int pp = t->pp, C = t->pp * t->vpp, M = t->microbatches;
    bm_knob_device_defaults(&P->c->device);
    if (dev_line && parse_device(P, dev_line, &P->c->device)) return BM_ERR;
    t->ranks_per_host = P->c->device.ranks_per_host; /* the placement is the table's */
    for (int i = 0; i < P->n_lines; i++)
        if (P->lines[i].len && P->lines[i].s[0] == '#' && first_word(&P->lines[i], "module") &&
            parse_module(P, &P->lines[i], t))
            return BM_ERR;
    if (t->backbone_module < 0) return at(P, 1, 1, "no \"# module\" line has role=backbone");
    P->c->chunk_weights = bm_malloc((size_t)C * sizeof(double));
    P->c->mb_scale = bm_malloc((size_t)M * sizeof(double));
    if (!P->c->chunk_weights || !P->c->mb_scale) return bm_err_set(P->err, "out of memory");
    for (int c = 0; c < C; c++) P->c->chunk_weights[c] = 1.0 / C;
    for (int m = 0; m < M; m++) P->c->mb_scale[m] = 1.0;
    if (cw_line && parse_numbers(P, cw_line, C, P->c->chunk_weights)) return BM_ERR;
    if (ms_line && parse_numbers(P, ms_line, M, P->c->mb_scale)) return BM_ERR;
    if (rs_line) {
        if (!(P->c->rank_time_scale = bm_malloc((size_t)pp * sizeof(double))))
            return bm_err_set(P->err, "out of memory");
        if (parse_numbers(P, rs_line, pp, P->c->rank_time_scale)) return BM_ERR;
        for (int r = 0; r < pp; r++)
            if (!(P->c->rank_time_scale[r] > 0))
                return at(P, rs_line->no, 1, "rank_time_scale: entry %d must be > 0", r + 1);
    }
    if (cl_line) {
        double *tmp = bm_malloc((size_t)C * sizeof(double));
        t->chunk_layers = bm_malloc((size_t)C * sizeof(int));
        if (!tmp || !t->chunk_layers) {
            bm_free(tmp);
            return bm_err_set(P->err, "out of memory");
        }
        int rc = parse_numbers(P, cl_line, C, tmp);
        for (int c = 0; c < C && !rc; c++) {
            if (!(tmp[c] >= 0 && tmp[c] <= 1e6 && tmp[c] == (double)(int)tmp[c])) {
                /* checked before the cast: (int)3e84 is undefined behaviour */
                rc = at(P, cl_line->no, 1, "chunk_layers entries must be integers in 0..1000000");
                break;
            }
            t->chunk_layers[c] = (int)tmp[c];
        }
        bm_free(tmp);
        if (rc) return BM_ERR;
    }
    return BM_OK;
}

/* The next cell of row L from *k: its trimmed extent [*a, *b) (may be empty); 0 past the end. */
static int next_cell(const struct line *L, int *k, int *a, int *b)
{
    if (*k > L->len) return 0;
    int e = *k;
    while (e < L->len && L->s[e] != ',') e++;
    *a = *k;
    *b = e;
    while (*a < *b && isspace((unsigned char)L->s[*a])) (*a)++;
    while (*b > *a && isspace((unsigned char)L->s[*b - 1])) (*b)--;
    *k = e + 1;
    return 1;
}

/* Which backbone schedule t's backbone ops follow on every rank (warm-up extension 0), tried in
 * a fixed order; -1 when none does. */
static int infer_backbone(const struct bm_table *t)
{
    static const enum bm_backbone cand[] = {BM_BB_1F1B, BM_BB_GPIPE, BM_BB_ZB_H1, BM_BB_INTERLEAVED,
                                            BM_BB_ZB_INTERLEAVED, BM_BB_ZB_V, BM_BB_DUALPIPE_V};
    int V = t->vpp, M = t->microbatches;
    for (size_t k = 0; k < sizeof cand / sizeof cand[0]; k++) {
        int placed = 1; /* the file's placement is the schedule's */
        for (int c = 0; c < t->pp * V; c++) placed &= bm_table_chunk_rank(t, c) == bm_backbone_chunk_rank(cand[k], t->pp, c);
        if (!placed) continue;
        int n = bm_backbone_n_steps(cand[k], V, M);
        struct bm_bb_step *st = bm_malloc((size_t)n * sizeof *st);
        if (!st) return -1;
        int ok = 1;
        for (int r = 0; r < t->pp && ok; r++) {
            if (bm_backbone_order(cand[k], t->pp, V, M, r, 0, st, NULL)) {
                ok = 0;
                break;
            }
            int j = 0;
            for (int i = 0; i < t->ranks[r].n_ops && ok; i++) {
                const struct bm_op *op = &t->ranks[r].ops[i];
                if (op->kind != BM_OP_COMPUTE || op->module != t->backbone_module) continue;
                ok = j < n && st[j].chunk == op->chunk && st[j].mb == op->mb && (int)st[j].pass == op->pass;
                j++;
            }
            ok = ok && j == n;
        }
        bm_free(st);
        if (ok) return (int)cand[k];
    }
    return -1;
}

/* A field the plan flags o give (o may be NULL). */
#define SET(o, field) ((o) && (int)(o)->field != BM_UNSET)

static int build(struct cp *P, const struct bm_spec *spec, const struct bm_plan_opts *o,
                 struct bm_table **out)
{
    struct hdr h = {0};
    int n_rows = 0, last_row_line = 0;
    const struct line *dev_line = NULL, *cw_line = NULL, *cl_line = NULL, *ms_line = NULL, *rs_line = NULL;
    const struct line *cr_line = NULL;
    int n_mod_lines = 0;
    /* the stage -> row map a PyTorch file gives (the row of each stage's first compute cell) */
    int stage_row[4096];
    for (int k = 0; k < 4096; k++) stage_row[k] = -1;
    /* the grammar: the first cell only bigmac's and the first only PyTorch's grammar has */
    int fl_line[3] = {0}, fl_col[3] = {0}, fl_len[3] = {0}, has_w = 0;
    const char *fl_cell[3] = {NULL};
    long max_stage = -1, max_mb = -1;
    for (int i = 0; i < P->n_lines; i++) {
        const struct line *L = &P->lines[i];
        if (L->len && L->s[0] == '#') {
            if (first_word(L, "bigmac-table")) {
                if (h.line) return at(P, L->no, 1, "a second \"# bigmac-table\" line (the first is line %d)", h.line);
                if (parse_header(P, L, &h)) return BM_ERR;
            } else if (first_word(L, "device")) dev_line = L;
            else if (first_word(L, "module")) n_mod_lines++;
            else if (first_word(L, "chunk_weights")) cw_line = L;
            else if (first_word(L, "chunk_layers")) cl_line = L;
            else if (first_word(L, "chunk_rank")) cr_line = L;
            else if (first_word(L, "mb_scale")) ms_line = L;
            else if (first_word(L, "rank_time_scale")) rs_line = L;
            continue;
        }
        if (is_blank(L)) continue;
        n_rows++;
        last_row_line = L->no;
        int k = 0, a, b;
        while (next_cell(L, &k, &a, &b)) {
            if (b == a) continue;
            int f = cell_flavor(L->s + a, b - a);
            if (f && !fl_cell[f]) {
                fl_cell[f] = L->s + a;
                fl_len[f] = b - a;
                fl_line[f] = L->no;
                fl_col[f] = a + 1;
            }
            if (f != 1) {
                torch_extent(L->s + a, b - a, &max_stage, &max_mb);
                torch_stage_rows(L->s + a, b - a, n_rows - 1, stage_row, 4096);
            }
            for (int j = a + 1; j < b; j++)
                has_w |= (L->s[j] == 'W' || L->s[j] == 'I') && isdigit((unsigned char)L->s[j - 1]);
        }
    }
    if (fl_cell[1] && fl_cell[2]) {
        int later = fl_line[2] > fl_line[1] || (fl_line[2] == fl_line[1] && fl_col[2] > fl_col[1]) ? 2 : 1;
        int first = 3 - later;
        return at(P, fl_line[later], fl_col[later],
                  "cell \"%.*s\" is written in %s grammar, but cell \"%.*s\" (line %d, column %d) in %s: "
                  "a file uses one of them (docs/csv.md)",
                  fl_len[later], fl_cell[later], later == 2 ? "PyTorch's" : "bigmac's", fl_len[first], fl_cell[first],
                  fl_line[first], fl_col[first], first == 2 ? "PyTorch's" : "bigmac's");
    }
    /* PyTorch's grammar: a PyTorch-only cell, or only compute cells and no "# bigmac-table" line
     * (what PyTorch's _dump_csv writes); such a file holds the backbone alone */
    P->torch = fl_cell[2] || (!fl_cell[1] && !h.line);
    P->split = P->torch && has_w;
    if (P->torch && SET(o, policy) && o->policy != BM_POL_NONE)
        return at(P, fl_cell[2] ? fl_line[2] : 1, fl_cell[2] ? fl_col[2] : 1,
                  "a PyTorch schedule file holds backbone work only; it is read as policy none (got --policy %s)",
                  bm_policy_name(o->policy));
    /* resolve the header: flags > "# bigmac-table" > spec > defaults; a PyTorch file's own
     * stages and microbatches come before the spec's */
    int pp = SET(o, pp) ? o->pp : h.pp ? h.pp : spec && !P->torch ? spec->pp : n_rows;
    int vpp = SET(o, vpp) ? o->vpp : h.vpp ? h.vpp : spec && !P->torch ? spec->vpp : 1;
    int M = SET(o, microbatches) ? o->microbatches : h.microbatches ? h.microbatches : spec && !P->torch ? spec->microbatches : 0;
    if (P->torch && pp >= 1 && !SET(o, vpp) && !h.vpp && max_stage >= 0) {
        if ((max_stage + 1) % pp)
            return at(P, 1, 1, "%ld stages over %d ranks: bigmac places the same number of stages on every rank\nhint: pass --pp and --vpp",
                      max_stage + 1, pp);
        vpp = (int)BM_MIN((max_stage + 1) / pp, 1000000L);
    }
    if (P->torch && !SET(o, microbatches) && !h.microbatches && max_mb >= 0) M = (int)BM_MIN(max_mb + 1, 2000000L);
    if (M < 1)
        return at(P, 1, 1, "how many microbatches? the CSV has no \"# bigmac-table ... microbatches=N\" line\nhint: add that line, pass --microbatches N, or give the SPEC");
    if (pp < 1) return at(P, 1, 1, "the CSV has no rank rows");
    if (pp > 4096) return at(P, 1, 1, "pp = %d: must be in 1..4096", pp);
    if (vpp > 64) return at(P, 1, 1, "vpp = %d: must be in 1..64", vpp);
    if (M > 1000000) return at(P, 1, 1, "microbatches = %d: must be in 1..1000000", M);
    if (n_rows != pp)
        return at(P, last_row_line ? last_row_line : 1, 1, "expected %d rank rows (pp = %d), found %d",
                  pp, pp, n_rows);
    int bb_given = SET(o, backbone) || h.has_backbone || (spec && !P->torch);
    struct bm_plan_opts shape = {
        .pp = pp, .vpp = vpp, .microbatches = M,
        .unit = SET(o, unit) ? o->unit : h.unit ? h.unit : spec && spec->unit ? spec->unit : pp,
        .backbone = SET(o, backbone) ? o->backbone : h.has_backbone ? h.backbone
                    : spec && !P->torch ? spec->backbone
                    : vpp > 1 ? (P->torch && has_w ? BM_BB_ZB_INTERLEAVED : BM_BB_INTERLEAVED)
                              : (P->torch && has_w ? BM_BB_ZB_H1 : BM_BB_1F1B),
        .policy = P->torch ? BM_POL_NONE : SET(o, policy) ? o->policy : h.has_policy ? h.policy
                  : spec ? spec->policy : BM_POL_BIGMAC};
    int C = pp * vpp;
    if ((long)C * M > BM_MAX_BACKBONE_OPS)
        return at(P, 1, 1, "table too large (pp*vpp*microbatches = %ld, the limit is %ld)",
                  (long)C * M, BM_MAX_BACKBONE_OPS);
    struct bm_table *t;
    if (spec) { /* modules, costs, device, chunks, scales, warm-up: as the planner would */
        if (bm_table_skeleton(spec, &shape, out, &P->c, P->err)) return BM_ERR;
        t = *out;
    } else {
        if (!n_mod_lines && !P->torch)
            return at(P, 1, 1, "the CSV has no \"# module\" lines, so its modules are unknown\nhint: give the SPEC (bigmac plan --from-csv FILE SPEC), or write the CSV with `bigmac plan --csv`");
        if (!(t = *out = bm_table_new(pp)) || !(P->c = bm_calloc(1, sizeof *P->c)))
            return bm_err_set(P->err, "%s: out of memory", P->name);
        t->vpp = vpp;
        t->microbatches = M;
        t->unit = shape.unit;
        t->backbone = shape.backbone;
        t->policy = shape.policy;
        if (n_mod_lines) {
            if (parse_shell(P, t, dev_line, cw_line, ms_line, rs_line, cl_line)) return BM_ERR;
        } else {
            /* a PyTorch file alone: one backbone module whose every action takes one unit
             * (F = I = W = 1 ms per stage, B = 2), as in PyTorch's own step simulation */
            if (!(t->modules = bm_calloc(1, sizeof *t->modules)) || !(t->modules[0].name = bm_strdup("backbone")) ||
                !(P->c->modules = bm_calloc(1, sizeof *P->c->modules)) || !(P->c->spread = bm_calloc(1, sizeof(double))))
                return bm_err_set(P->err, "%s: out of memory", P->name);
            t->n_modules = P->c->n_modules = 1;
            t->backbone_module = 0;
            t->modules[0].role = BM_ROLE_BACKBONE;
            t->modules[0].grad_to_backbone = 1;
            P->c->modules[0] = (struct bm_cost){.fwd_ms = C, .bwd_ms = 2.0 * C, .w_ms = has_w ? (double)C : 0};
            if (parse_shell(P, t, dev_line, NULL, NULL, NULL, NULL)) return BM_ERR;
        }
        if (P->torch) {
            /* only the backbone: a module line of another role has no cells in this grammar */
            for (int m = 0; m < t->n_modules; m++)
                if (t->modules[m].role != BM_ROLE_BACKBONE)
                    return at(P, 1, 1, "module \"%s\" (%s): a PyTorch schedule file holds the backbone only", t->modules[m].name,
                              bm_role_name(t->modules[m].role));
        }
        if ((t->warmup_extra = bm_table_default_warmup(t)) < 0) return bm_err_set(P->err, "out of memory");
        if (bm_table_finish(t, P->err)) return BM_ERR;
    }
    t->window = o && o->window >= 1 ? o->window : h.has_window ? h.window : spec ? spec->window : 0;
    if (P->torch) t->window = 0;
    if (cr_line) { /* "# chunk_rank": bigmac's own map */
        double *tmp = bm_malloc((size_t)C * sizeof(double));
        if (!tmp || !(t->chunk_rank = bm_malloc((size_t)C * sizeof(int)))) {
            bm_free(tmp);
            return bm_err_set(P->err, "out of memory");
        }
        int rc = parse_numbers(P, cr_line, C, tmp);
        for (int c = 0; c < C && !rc; c++) {
            if (!(tmp[c] >= 0 && tmp[c] < pp && tmp[c] == (double)(int)tmp[c]))
                rc = at(P, cr_line->no, 1, "chunk_rank entries must be ranks 0..%d", pp - 1);
            else t->chunk_rank[c] = (int)tmp[c];
        }
        bm_free(tmp);
        if (rc) return BM_ERR;
    } else if (P->torch) { /* a stage's rank is the row it appears in */
        int moved = 0;
        for (int c = 0; c < C && c < 4096; c++) moved |= stage_row[c] >= 0 && stage_row[c] != c % pp;
        if (moved) {
            if (!(t->chunk_rank = bm_malloc((size_t)C * sizeof(int)))) return bm_err_set(P->err, "out of memory");
            /* stages no cell names keep the placement a V (when the file has one) or c mod P gives */
            int v = vpp == 2;
            for (int c = 0; c < C && c < 4096; c++)
                v &= stage_row[c] < 0 || stage_row[c] == bm_backbone_chunk_rank(BM_BB_ZB_V, pp, c);
            for (int c = 0; c < C; c++)
                t->chunk_rank[c] = c < 4096 && stage_row[c] >= 0 ? stage_row[c]
                                   : v ? bm_backbone_chunk_rank(BM_BB_ZB_V, pp, c) : c % pp;
        }
    }
    if (h.has_warmup && !SET(o, policy) && !SET(o, unit)) t->warmup_extra = h.warmup_extra;
    int r = 0;
    for (int i = 0; i < P->n_lines; i++) {
        const struct line *L = &P->lines[i];
        if ((L->len && L->s[0] == '#') || is_blank(L)) continue;
        int k = 0, a, b;
        while (next_cell(L, &k, &a, &b)) {
            if (b == a) continue;
            struct bm_op ops[16];
            int n_ops = 1;
            if (P->torch) {
                char c[1024];
                if (b - a >= (int)sizeof c)
                    return at(P, L->no, a + 1, "cell longer than %d characters", (int)sizeof c - 1);
                memcpy(c, L->s + a, (size_t)(b - a));
                c[b - a] = 0;
                if (parse_torch_cell(P, t, r, c, b - a, L->no, a + 1, ops, 16, &n_ops)) return BM_ERR;
            } else if (parse_cell(P, t, r, L->s + a, b - a, L->no, a + 1, &ops[0])) {
                return BM_ERR;
            }
            for (int j = 0; j < n_ops; j++)
                if (bm_table_push(t, r, ops[j], P->err)) return BM_ERR;
        }
        r++;
    }
    if (P->torch && !bb_given) {
        int bb = infer_backbone(t);
        if (bb >= 0) t->backbone = (enum bm_backbone)bb;
    }
    return BM_OK;
}

int bm_csv_parse(const char *text, const char *name, const struct bm_spec *spec,
                 const struct bm_plan_opts *o, struct bm_table **out, struct bm_costs **costs, struct bm_err *err)
{
    *out = NULL;
    if (costs) *costs = NULL;
    struct cp P = {name, err, NULL, 0, 0, 0, NULL};
    int cap = 0;
    const char *s = text;
    if (!strncmp(s, "\xef\xbb\xbf", 3)) s += 3; /* a UTF-8 byte-order mark, as spreadsheets write one */
    int no = 1;
    while (*s) {
        const char *e = strchr(s, '\n');
        int len = e ? (int)(e - s) : (int)strlen(s);
        int l2 = len;
        if (l2 > 0 && s[l2 - 1] == '\r') l2--;
        if (bm_grow(&P.lines, &cap, P.n_lines + 1, sizeof *P.lines)) {
            bm_free(P.lines);
            return bm_err_set(err, "%s: out of memory", name);
        }
        P.lines[P.n_lines++] = (struct line){s, l2, no++};
        s += len;
        if (*s == '\n') s++;
    }
    struct bm_table *t = NULL;
    int rc = build(&P, spec, o, &t);
    bm_free(P.lines);
    if (rc) {
        bm_table_free(t);
        bm_costs_free(P.c);
        return BM_ERR;
    }
    *out = t;
    if (costs) *costs = P.c;
    else bm_costs_free(P.c);
    return BM_OK;
}

int bm_csv_load(const char *path, const struct bm_spec *spec, const struct bm_plan_opts *o,
                struct bm_table **out, struct bm_costs **costs, struct bm_err *err)
{
    *out = NULL;
    if (costs) *costs = NULL;
    size_t len;
    char *text = bm_read_file_max(path, (size_t)BM_MAX_TABLE_TEXT, &len, err);
    if (!text) return BM_ERR;
    if (strlen(text) != len) {
        bm_free(text);
        return bm_err_set(err, "%s: not a text file (contains a NUL byte)", path);
    }
    int rc = bm_csv_parse(text, path, spec, o, out, costs, err);
    bm_free(text);
    return rc;
}
