/* common.c — helpers shared by the renderers: module colours, send/recv matching. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "util/util.h"

/* ---------------------------------------------------------------- colours */

static void hsl_hex(double h, double s, double l, char out[8])
{
    double c = (1 - fabs(2 * l - 1)) * s, hp = fmod(h, 360) / 60;
    double x = c * (1 - fabs(fmod(hp, 2) - 1)), m = l - c / 2, r = 0, g = 0, b = 0;
    if (hp < 1) r = c, g = x;
    else if (hp < 2) r = x, g = c;
    else if (hp < 3) g = c, b = x;
    else if (hp < 4) g = x, b = c;
    else if (hp < 5) r = x, b = c;
    else r = c, b = x;
    snprintf(out, 8, "#%02x%02x%02x", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
             (int)lround((b + m) * 255));
}

void bm_report_color(const struct bm_table *t, int module, int pass, char out[8])
{
    static const double enc_h[] = {140, 172, 95, 120, 190};
    static const double gen_h[] = {28, 285, 350, 50, 320};
    double hue = 212;
    if (module >= 0 && module < t->n_modules && t->modules[module].role != BM_ROLE_BACKBONE) {
        enum bm_role role = t->modules[module].role;
        int k = 0;
        for (int i = 0; i < module; i++) k += t->modules[i].role == role;
        hue = role == BM_ROLE_ENCODER ? enc_h[k % 5] : gen_h[k % 5];
    }
    if (pass == BM_PASS_W) { /* weight gradients in their own colour: the hue turned, greyer */
        hsl_hex(hue + 48, 0.38, 0.58, out);
        return;
    }
    double l = pass == BM_PASS_F ? 0.70 : 0.44;
    hsl_hex(hue, 0.62, l, out);
}

/* ---------------------------------------------------------------- send/recv matching */

struct comm_rec {
    int32_t src, dst, tensor, mb, idx;
};

static int rec_cmp(const void *a, const void *b)
{
    const struct comm_rec *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    if (x->mb != y->mb) return x->mb < y->mb ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

void bm_report_match_free(const struct bm_table *t, int **m)
{
    if (!m) return;
    for (int r = 0; r < t->pp; r++) bm_free(m[r]);
    bm_free(m);
}

int bm_report_match_sends(const struct bm_table *t, int ***out, struct bm_err *err)
{
    *out = NULL;
    long ns = 0, nr = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            ns += t->ranks[r].ops[i].kind == BM_OP_SEND;
            nr += t->ranks[r].ops[i].kind == BM_OP_RECV;
        }
    int **m = bm_calloc((size_t)(t->pp > 0 ? t->pp : 1), sizeof *m);
    struct comm_rec *s = bm_malloc((size_t)(ns ? ns : 1) * sizeof *s);
    struct comm_rec *v = bm_malloc((size_t)(nr ? nr : 1) * sizeof *v);
    if (!m || !s || !v) goto oom;
    for (int r = 0; r < t->pp; r++) {
        m[r] = bm_malloc((size_t)(t->ranks[r].n_ops ? t->ranks[r].n_ops : 1) * sizeof(int));
        if (!m[r]) goto oom;
    }
    long a = 0, b = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) {
            const struct bm_op *op = &t->ranks[r].ops[i];
            m[r][i] = -1;
            if (op->kind == BM_OP_SEND) s[a++] = (struct comm_rec){r, op->peer, op->tensor, op->mb, i};
            if (op->kind == BM_OP_RECV) v[b++] = (struct comm_rec){op->peer, r, op->tensor, op->mb, i};
        }
    qsort(s, (size_t)ns, sizeof *s, rec_cmp);
    qsort(v, (size_t)nr, sizeof *v, rec_cmp);
    for (long i = 0, j = 0; i < nr; i++) {
        struct comm_rec key = v[i];
        key.idx = -1;
        while (j < ns && rec_cmp(&s[j], &key) < 0) j++;
        if (j < ns && s[j].src == key.src && s[j].dst == key.dst && s[j].tensor == key.tensor &&
            s[j].mb == key.mb) {
            if (v[i].dst >= 0 && v[i].dst < t->pp) m[v[i].dst][v[i].idx] = s[j].idx;
            j++;
        }
    }
    bm_free(s);
    bm_free(v);
    *out = m;
    return BM_OK;
oom:
    bm_free(s);
    bm_free(v);
    if (m) bm_report_match_free(t, m);
    return bm_err_set(err, "out of memory matching sends to recvs");
}

long bm_report_compute_ops(const struct bm_table *t)
{
    long n = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) n += t->ranks[r].ops[i].kind == BM_OP_COMPUTE;
    return n;
}
