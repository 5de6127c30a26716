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

int bm_csv_write(const struct bm_table *t, FILE *f)
{
    if (bm_csv_check_names(t, NULL)) return BM_ERR;
    fprintf(f, "# bigmac-table version=1 pp=%d vpp=%d microbatches=%d unit=%d window=%d "
               "backbone=%s policy=%s warmup_extra=%d\n",
            t->pp, t->vpp, t->microbatches, t->unit, t->window, bm_backbone_name(t->backbone),
            bm_policy_name(t->policy), t->warmup_extra);
    struct bm_field fields[8];
    fprintf(f, "# device");
    put_fields(f, fields, bm_table_device_fields(&t->device, fields));
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
        put_fields(f, fields, bm_table_cost_fields(m, split, fields));
        fprintf(f, "\n");
    }
    int C = t->pp * t->vpp;
    fprintf(f, "# chunk_weights");
    for (int c = 0; c < C; c++) {
        fputc(' ', f);
        bm_put_num(f, t->chunk_weights ? t->chunk_weights[c] : 1.0 / C);
    }
    fprintf(f, "\n");
    if (t->chunk_layers) {
        fprintf(f, "# chunk_layers");
        for (int c = 0; c < C; c++) fprintf(f, " %d", t->chunk_layers[c]);
        fprintf(f, "\n");
    }
    fprintf(f, "# mb_scale");
    for (int m = 0; m < t->microbatches; m++) {
        fputc(' ', f);
        bm_put_num(f, t->mb_scale ? t->mb_scale[m] : 1.0);
    }
    fprintf(f, "\n");
    if (t->rank_time_scale) {
        fprintf(f, "# rank_time_scale");
        for (int r = 0; r < t->pp; r++) {
            fputc(' ', f);
            bm_put_num(f, t->rank_time_scale[r]);
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
    char text[1024];
    int col;
};

/* Split line L (after '#') into tokens; returns count (at most max). */
static int tokens(const struct line *L, struct tok *tk, int max)
{
    int n = 0, i = 1;
    while (i < L->len && n < max) {
        while (i < L->len && isspace((unsigned char)L->s[i])) i++;
        if (i >= L->len) break;
        int j = i;
        while (j < L->len && !isspace((unsigned char)L->s[j])) j++;
        int k = j - i < (int)sizeof tk[n].text - 1 ? j - i : (int)sizeof tk[n].text - 1;
        memcpy(tk[n].text, L->s + i, (size_t)k);
        tk[n].text[k] = 0;
        tk[n].col = i + 1;
        n++;
        i = j;
    }
    return n;
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
    int n = tokens(L, tk, 32);
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
                return at(P, L->no, tk[i].col, "unknown backbone schedule \"%s\" (gpipe, 1f1b, interleaved, zb-h1, zb-interleaved)", v);
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
    struct tok tk[16];
    int n = tokens(L, tk, 16);
    for (int i = 1; i < n; i++) {
        char *eq = strchr(tk[i].text, '=');
        if (!eq) return at(P, L->no, tk[i].col, "\"%s\": expected key=value", tk[i].text);
        *eq = 0;
        const char *k = tk[i].text;
        double *dst = !strcmp(k, "memory_gib") ? &d->memory_gib
                      : !strcmp(k, "peak_tflops") ? &d->peak_tflops
                      : !strcmp(k, "efficiency") ? &d->efficiency
                      : !strcmp(k, "link_gbytes_per_s") ? &d->link_gbytes_per_s
                      : !strcmp(k, "link_latency_us") ? &d->link_latency_us
                      : !strcmp(k, "inter_host_gbytes_per_s") ? &d->inter_host_gbytes_per_s
                      : !strcmp(k, "inter_host_latency_us") ? &d->inter_host_latency_us : NULL;
        if (!strcmp(k, "ranks_per_host")) {
            double h;
            if (parse_dbl(P, L->no, &tk[i], eq + 1, &h)) return BM_ERR;
            if (h != (int)h || h > 4096)
                return at(P, L->no, tk[i].col, "ranks_per_host must be an integer in 0..4096, got %s", eq + 1);
            d->ranks_per_host = (int)h;
            continue;
        }
        if (!dst) return at(P, L->no, tk[i].col, "unknown device key \"%s\"", k);
        if (parse_dbl(P, L->no, &tk[i], eq + 1, dst)) return BM_ERR;
    }
    return BM_OK;
}

static int parse_module(struct cp *P, const struct line *L, struct bm_table *t)
{
    struct tok tk[16];
    int n = tokens(L, tk, 16);
    if (bm_grow(&t->modules, &(int){t->n_modules}, t->n_modules + 1, sizeof *t->modules))
        return bm_err_set(P->err, "%s: out of memory", P->name);
    struct bm_table_module *m = &t->modules[t->n_modules];
    memset(m, 0, sizeof *m);
    m->cost = (struct bm_cost){1, 2, 0, 0, 0, 0, 0, 0};
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
        } else {
            double *dst = !strcmp(k, "fwd_ms") ? &m->cost.fwd_ms
                          : !strcmp(k, "bwd_ms") ? &m->cost.bwd_ms
                          : !strcmp(k, "act_mib") ? &m->cost.act_mib
                          : !strcmp(k, "state_mib") ? &m->cost.state_mib
                          : !strcmp(k, "out_mib") ? &m->cost.out_mib
                          : !strcmp(k, "w_ms") ? &m->cost.w_ms
                          : !strcmp(k, "act_w_mib") ? &m->cost.act_w_mib : NULL;
            if (!dst) return at(P, L->no, tk[i].col, "unknown module key \"%s\" (name, role, consumes, produces, grad_to_backbone, recompute, fwd_ms, bwd_ms, act_mib, state_mib, out_mib, w_ms, act_w_mib)", k);
            if (parse_dbl(P, L->no, &tk[i], v, dst)) return BM_ERR;
        }
    }
    m->cost.param_mib = m->cost.state_mib / 4; /* not in the CSV: the JSON table's default */
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
    t->device = (struct bm_device){80, 989, 0.4, 25, 10, 0, 12.5, 20, 0};
    if (dev_line && parse_device(P, dev_line, &t->device)) return BM_ERR;
    for (int i = 0; i < P->n_lines; i++)
        if (P->lines[i].len && P->lines[i].s[0] == '#' && first_word(&P->lines[i], "module") &&
            parse_module(P, &P->lines[i], t))
            return BM_ERR;
    if (t->backbone_module < 0) return at(P, 1, 1, "no \"# module\" line has role=backbone");
    t->chunk_weights = bm_malloc((size_t)C * sizeof(double));
    t->mb_scale = bm_malloc((size_t)M * sizeof(double));
    if (!t->chunk_weights || !t->mb_scale) return bm_err_set(P->err, "out of memory");
    for (int c = 0; c < C; c++) t->chunk_weights[c] = 1.0 / C;
    for (int m = 0; m < M; m++) t->mb_scale[m] = 1.0;
    if (cw_line && parse_numbers(P, cw_line, C, t->chunk_weights)) return BM_ERR;
    if (ms_line && parse_numbers(P, ms_line, M, t->mb_scale)) return BM_ERR;
    if (rs_line) {
        if (!(t->rank_time_scale = bm_malloc((size_t)pp * sizeof(double))))
            return bm_err_set(P->err, "out of memory");
        if (parse_numbers(P, rs_line, pp, t->rank_time_scale)) return BM_ERR;
        for (int r = 0; r < pp; r++)
            if (!(t->rank_time_scale[r] > 0))
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

static int build(struct cp *P, const struct bm_spec *spec, const struct bm_csv_opts *o,
                 struct bm_table **out)
{
    struct hdr h = {0};
    int n_rows = 0, last_row_line = 0;
    const struct line *dev_line = NULL, *cw_line = NULL, *cl_line = NULL, *ms_line = NULL, *rs_line = NULL;
    int n_mod_lines = 0;
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
            else if (first_word(L, "mb_scale")) ms_line = L;
            else if (first_word(L, "rank_time_scale")) rs_line = L;
            continue;
        }
        if (is_blank(L)) continue;
        n_rows++;
        last_row_line = L->no;
    }
    /* resolve the header: flags > "# bigmac-table" > spec > defaults */
    int pp = o && o->pp ? o->pp : h.pp ? h.pp : spec ? spec->pp : n_rows;
    int vpp = o && o->vpp ? o->vpp : h.vpp ? h.vpp : spec ? spec->vpp : 1;
    int M = o && o->microbatches ? o->microbatches : h.microbatches ? h.microbatches : spec ? spec->microbatches : 0;
    if (M < 1)
        return at(P, 1, 1, "how many microbatches? the CSV has no \"# bigmac-table ... microbatches=N\" line\nhint: add that line, pass --microbatches N, or give the SPEC");
    if (pp < 1) return at(P, 1, 1, "the CSV has no rank rows");
    if (pp > 4096) return at(P, 1, 1, "pp = %d: must be in 1..4096", pp);
    if (n_rows != pp)
        return at(P, last_row_line ? last_row_line : 1, 1, "expected %d rank rows (pp = %d), found %d",
                  pp, pp, n_rows);
    struct bm_plan_opts shape = {
        pp, vpp, M, o && o->unit ? o->unit : h.unit ? h.unit : spec && spec->unit ? spec->unit : pp, 0,
        o && o->backbone_set ? o->backbone : h.has_backbone ? h.backbone
        : spec ? spec->backbone : vpp > 1 ? BM_BB_INTERLEAVED : BM_BB_1F1B,
        o && o->policy_set ? o->policy : h.has_policy ? h.policy : spec ? spec->policy : BM_POL_BIGMAC};
    int C = pp * vpp;
    if ((long)C * M > BM_MAX_BACKBONE_OPS)
        return at(P, 1, 1, "table too large (pp*vpp*microbatches = %ld, the limit is %ld)",
                  (long)C * M, BM_MAX_BACKBONE_OPS);
    struct bm_table *t;
    if (spec) { /* modules, costs, device, chunks, scales, warm-up: as the planner would */
        if (bm_table_skeleton(spec, &shape, out, P->err)) return BM_ERR;
        t = *out;
    } else {
        if (!n_mod_lines)
            return at(P, 1, 1, "the CSV has no \"# module\" lines, so its modules are unknown\nhint: give the SPEC (bigmac plan --from-csv FILE SPEC), or write the CSV with `bigmac plan --csv`");
        if (!(t = *out = bm_table_new(pp))) return bm_err_set(P->err, "%s: out of memory", P->name);
        t->vpp = vpp;
        t->microbatches = M;
        t->unit = shape.unit;
        t->backbone = shape.backbone;
        t->policy = shape.policy;
        if (parse_shell(P, t, dev_line, cw_line, ms_line, rs_line, cl_line)) return BM_ERR;
        if ((t->warmup_extra = bm_table_default_warmup(t)) < 0) return bm_err_set(P->err, "out of memory");
        if (bm_table_finish(t, P->err)) return BM_ERR;
    }
    t->window = o && o->window ? (o->window < 0 ? 0 : o->window) : h.has_window ? h.window : spec ? spec->window : 0;
    if (h.has_warmup && !(o && (o->policy_set || o->unit))) t->warmup_extra = h.warmup_extra;
    int r = 0;
    for (int i = 0; i < P->n_lines; i++) {
        const struct line *L = &P->lines[i];
        if ((L->len && L->s[0] == '#') || is_blank(L)) continue;
        int k = 0;
        while (k <= L->len) {
            int e = k;
            while (e < L->len && L->s[e] != ',') e++;
            int a = k, b = e;
            while (a < b && isspace((unsigned char)L->s[a])) a++;
            while (b > a && isspace((unsigned char)L->s[b - 1])) b--;
            if (b > a) {
                struct bm_op op;
                if (parse_cell(P, t, r, L->s + a, b - a, L->no, a + 1, &op) ||
                    bm_table_push(t, r, op, P->err))
                    return BM_ERR;
            }
            k = e + 1;
        }
        r++;
    }
    return BM_OK;
}

int bm_csv_parse(const char *text, const char *name, const struct bm_spec *spec,
                 const struct bm_csv_opts *o, struct bm_table **out, struct bm_err *err)
{
    *out = NULL;
    struct cp P = {name, err, NULL, 0};
    int cap = 0;
    const char *s = text;
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
        return BM_ERR;
    }
    *out = t;
    return BM_OK;
}

int bm_csv_load(const char *path, const struct bm_spec *spec, const struct bm_csv_opts *o,
                struct bm_table **out, struct bm_err *err)
{
    *out = NULL;
    size_t len;
    char *text = bm_read_file_max(path, (size_t)BM_MAX_TABLE_TEXT, &len, err);
    if (!text) return BM_ERR;
    if (strlen(text) != len) {
        bm_free(text);
        return bm_err_set(err, "%s: not a text file (contains a NUL byte)", path);
    }
    int rc = bm_csv_parse(text, path, spec, o, out, err);
    bm_free(text);
    return rc;
}
