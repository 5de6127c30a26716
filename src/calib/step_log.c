/* step_log.c — device.optimizer_ms_per_gib from a step log (see calib.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "util/util.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int bm_calibrate_optimizer(const char *path, double *ms_per_gib, int *n, struct bm_err *err)
{
    *ms_per_gib = 0, *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return bm_err_set(err, "%s: cannot read the step log", path);
    double *v = NULL;
    int nv = 0, cap = 0, line = 0, steps = 0, rc = BM_OK;
    long *step_of = NULL; /* the step of each value, to leave the first step out */
    char buf[1 << 16];
    while (fgets(buf, sizeof buf, f)) {
        line++;
        if (buf[strspn(buf, " \t\r\n")] == 0) continue;
        json_error_t je;
        json_t *j = json_loads(buf, 0, &je);
        json_t *ranks = j ? json_object_get(j, "ranks") : NULL;
        json_t *st = j ? json_object_get(j, "step") : NULL;
        if (!j || !json_is_array(ranks) || !json_is_integer(st)) {
            json_decref(j);
            rc = bm_err_set(err, "%s:%d: not a step of `bigmac train --log` (an object with \"step\" and \"ranks\")",
                            path, line);
            break;
        }
        steps++;
        size_t i;
        json_t *r;
        json_array_foreach(ranks, i, r) {
            json_t *ms = json_object_get(r, "optimizer_ms"), *by = json_object_get(r, "optimizer_state_bytes");
            if (!json_is_number(ms) || !json_is_number(by)) continue;
            double b = json_number_value(by), t = json_number_value(ms);
            if (!(b > 0) || !(t >= 0)) continue;
            if (nv == cap) {
                int nc = cap ? 2 * cap : 64;
                double *nvp = bm_realloc(v, (size_t)nc * sizeof *v);
                long *nsp = nvp ? bm_realloc(step_of, (size_t)nc * sizeof *step_of) : NULL;
                if (nvp) v = nvp;
                if (!nsp) {
                    json_decref(j);
                    rc = bm_err_set(err, "out of memory");
                    goto done;
                }
                step_of = nsp, cap = nc;
            }
            step_of[nv] = (long)json_integer_value(st);
            v[nv++] = t / (b / 1073741824.0);
        }
        json_decref(j);
    }
    if (rc == BM_OK && nv == 0)
        rc = bm_err_set(err, "%s: no rank has \"optimizer_ms\" and \"optimizer_state_bytes\"\nhint: a log of "
                             "`bigmac train --log` from this version records them", path);
    if (rc == BM_OK) {
        int k = 0; /* the first step warms the optimizer's memory up: leave it out when there are more */
        for (int i = 0; i < nv; i++)
            if (steps < 2 || step_of[i] != 1) v[k++] = v[i];
        if (k == 0) k = nv;
        qsort(v, (size_t)k, sizeof *v, cmp_double);
        *ms_per_gib = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
        *n = k;
    }
done:
    fclose(f);
    bm_free(v);
    bm_free(step_of);
    return rc;
}

/* ---------------------------------------------------------------- collectives */

/* One collective's members as read: key (step, group id, module, chunk, of), the last member to
 * start and its own duration (it waited for no one). */
struct coll_rec {
    int run;            /* the run, in a log of several runs one after another (its steps restart) */
    long step;
    char key[160];
    int inter;
    double x1, x2;      /* the ring's bytes term f(n-1)/n * bytes and latency term f(n-1) */
    double start, dur;  /* the latest start among the members so far, and that member's duration */
    int approx;         /* that member started it inside its walk ("in_walk"): its end is when the
                         * rank saw it done, after an op, so dur only bounds the collective's time */
};

static int find_rec(struct coll_rec *v, int n, int run, long step, const char *key)
{
    for (int i = n - 1; i >= 0; i--)
        if (v[i].run == run && v[i].step == step && !strcmp(v[i].key, key)) return i;
    return -1;
}

/* Least squares through the origin of t = x1 * a + x2 * b over the (median) records of one link
 * class: a = 1 / bytes-per-ms, b = latency in ms. Writes gbps and lat_us; 0 when not fitted. */
static void fit_ring(const double *x1, const double *x2, const double *t, int n, double *gbps, double *lat_us,
                     int *ok_bw)
{
    double s11 = 0, s12 = 0, s22 = 0, s1t = 0, s2t = 0;
    for (int i = 0; i < n; i++)
        s11 += x1[i] * x1[i], s12 += x1[i] * x2[i], s22 += x2[i] * x2[i], s1t += x1[i] * t[i], s2t += x2[i] * t[i];
    double det = s11 * s22 - s12 * s12, a = 0, b = 0;
    *ok_bw = 0;
    if (n >= 2 && det > 1e-12 * s11 * s22) { /* two unknowns: the sizes differ in their bytes-per-hop ratio */
        a = (s1t * s22 - s2t * s12) / det;
        b = (s2t * s11 - s1t * s12) / det;
    }
    if (!(a > 0) || b < 0) { /* one size, or a fit outside the physical: latency alone (the bytes free) */
        a = 0;
        b = s22 > 0 ? s2t / s22 : 0;
        if (b < 0) b = 0;
    } else {
        *ok_bw = 1;
    }
    *gbps = a > 0 ? 1.0 / a / 1e9 * 1e3 : 0; /* a: ms per byte */
    *lat_us = b * 1e3;
}

static int cmp_key(const void *a, const void *b)
{
    const struct coll_rec *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->inter - y->inter;
}

int bm_calibrate_collectives(const char *path, struct bm_coll_fit *out, struct bm_err *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return bm_err_set(err, "%s: cannot read the step log", path);
    struct coll_rec *v = NULL;
    int nv = 0, cap = 0, line = 0, steps = 0, rc = BM_OK, seen_key = 0, run = 0;
    long last_step = -1;
    char buf[1 << 16];
    double *x1 = NULL, *x2 = NULL, *tt = NULL, *med = NULL;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        if (buf[strspn(buf, " \t\r\n")] == 0) continue;
        json_error_t je;
        json_t *j = json_loads(buf, 0, &je);
        json_t *ranks = j ? json_object_get(j, "ranks") : NULL, *st = j ? json_object_get(j, "step") : NULL;
        if (!j || !json_is_array(ranks) || !json_is_integer(st)) {
            json_decref(j);
            rc = bm_err_set(err, "%s:%d: not a step of `bigmac train --log` (an object with \"step\" and \"ranks\")",
                            path, line);
            goto done;
        }
        steps++;
        long step = (long)json_integer_value(st);
        if (step <= last_step) run++; /* the steps start again: the next run's log, appended */
        last_step = step;
        size_t i, k;
        json_t *r, *c;
        json_array_foreach(ranks, i, r) {
            json_t *cs = json_object_get(r, "collectives");
            if (!json_is_array(cs)) continue;
            seen_key = 1;
            json_t *pp = json_object_get(r, "pp");
            long p = json_is_integer(pp) ? (long)json_integer_value(pp) : (long)i;
            /* the rank's time before each collective since its walk, or its previous collective,
             * ended is charged to the collective: the executor's own work to issue it (torch:
             * ~0.45 ms after the walk and ~0.3 ms between its all-reduces; the C executor
             * ~0.005 ms), which the step pays and the ring's latency then carries. After the
             * gradients' sync (ZeRO-1's all-gathers) the optimizer's end is the origin. */
            json_t *wk = json_object_get(r, "walk_ms"), *se = json_object_get(r, "sync_end_ms");
            json_t *om = json_object_get(r, "optimizer_ms");
            int charge = json_is_number(wk); /* without the walk's end: each collective's own span */
            double prev = charge ? json_number_value(wk) : 0;
            double opt_end = json_is_number(se) && json_is_number(om) ? json_number_value(se) + json_number_value(om) : -1;
            json_array_foreach(cs, k, c) {
                json_t *op = json_object_get(c, "op"), *grp = json_object_get(c, "group"), *n = json_object_get(c, "ranks");
                json_t *by = json_object_get(c, "bytes"), *s0 = json_object_get(c, "start_ms"), *s1 = json_object_get(c, "end_ms");
                json_t *mod = json_object_get(c, "module"), *ch = json_object_get(c, "chunk"), *of = json_object_get(c, "of");
                json_t *lk = json_object_get(c, "link"), *iw = json_object_get(c, "in_walk");
                int in_walk = json_is_true(iw);
                if (!json_is_string(op) || !json_is_string(grp) || !json_is_integer(n) || !json_is_number(by) ||
                    !json_is_number(s0) || !json_is_number(s1) || !json_is_string(mod)) {
                    json_decref(j);
                    rc = bm_err_set(err, "%s:%d: rank %zu's collective %zu lacks op, group, ranks, bytes, start_ms, "
                                         "end_ms or module", path, line, i, k);
                    goto done;
                }
                const char *ops = json_string_value(op);
                double fct = !strcmp(ops, "all_reduce") ? 2 : (!strcmp(ops, "reduce_scatter") || !strcmp(ops, "all_gather")) ? 1 : 0;
                int nn = (int)json_integer_value(n);
                double a = json_number_value(s0), e = json_number_value(s1);
                double issue = a; /* from when this rank's time goes to this collective */
                if (charge) {
                    double from = opt_end >= 0 && a >= opt_end && prev < opt_end ? opt_end : prev;
                    if (from < issue) issue = from;
                    /* a collective overlapped with the walk (it ended before the walk did) leaves
                     * the walk's end as the next one's origin */
                    if (e > prev) prev = e;
                }
                if (fct == 0 || nn < 2) continue; /* an unknown op, or a group of one: nothing to fit */
                char key[160];
                int world = !strcmp(json_string_value(grp), "world");
                snprintf(key, sizeof key, "%s|%ld|%s|%lld|%s|%s", world ? "world" : "dp", world ? -1L : p,
                         json_string_value(mod), json_is_integer(ch) ? (long long)json_integer_value(ch) : -1LL,
                         json_is_string(of) ? json_string_value(of) : "", ops);
                double d = e - issue;
                int at = find_rec(v, nv, run, step, key);
                if (at < 0) {
                    if (bm_grow(&v, &cap, nv + 1, sizeof *v)) {
                        json_decref(j);
                        rc = bm_err_set(err, "out of memory");
                        goto done;
                    }
                    at = nv++;
                    v[at] = (struct coll_rec){run, step, "", json_is_string(lk) && !strcmp(json_string_value(lk), "inter"),
                                              fct * (nn - 1) / nn * json_number_value(by), fct * (nn - 1), a, d,
                                              in_walk};
                    snprintf(v[at].key, sizeof v[at].key, "%s", key);
                } else if (a > v[at].start) { /* a later member: its duration is the collective's */
                    v[at].start = a, v[at].dur = d, v[at].approx = in_walk;
                }
            }
        }
        json_decref(j);
    }
    if (!seen_key) {
        rc = bm_err_set(err, "%s: no rank has \"collectives\"\nhint: a log of `bigmac train --log` (or bigmac.torch's "
                             "log) from this version records them", path);
        goto done;
    }
    /* the first step warms the buffers up: left out when there are more */
    int k = 0;
    for (int i = 0; i < nv; i++)
        if (steps < 2 || v[i].step != 1) v[k++] = v[i];
    if (k == 0) k = nv;
    nv = k;
    qsort(v, (size_t)nv, sizeof *v, cmp_key);
    x1 = bm_calloc((size_t)nv + 1, sizeof *x1), x2 = bm_calloc((size_t)nv + 1, sizeof *x2);
    tt = bm_calloc((size_t)nv + 1, sizeof *tt), med = bm_calloc((size_t)nv + 1, sizeof *med);
    if (!x1 || !x2 || !tt || !med) {
        rc = bm_err_set(err, "out of memory");
        goto done;
    }
    for (int inter = 0; inter < 2; inter++) { /* per link class: each collective's median over the steps */
        /* collectives overlapped with the walk (the executors start a gradient's right after its
         * last backward) end when the rank saw them done: only an upper bound. Fitted from the
         * ones whose last member started after its walk (a blocking wait saw their end) when the
         * class has any, else from all. */
        int exact = 0, n = 0;
        for (int i = 0; i < nv; i++) exact |= v[i].inter == inter && !v[i].approx;
        for (int i = 0; i < nv;) {
            int e = i, m = 0;
            for (; e < nv && !strcmp(v[e].key, v[i].key) && v[e].inter == v[i].inter; e++)
                if (!exact || !v[e].approx) med[m++] = v[e].dur;
            if (v[i].inter == inter && m > 0) {
                qsort(med, (size_t)m, sizeof *med, cmp_double);
                x1[n] = v[i].x1, x2[n] = v[i].x2, tt[n] = m % 2 ? med[m / 2] : (med[m / 2 - 1] + med[m / 2]) / 2;
                n++;
            }
            i = e;
        }
        struct bm_coll_link *L = inter ? &out->inter : &out->intra;
        L->n = n;
        if (n) fit_ring(x1, x2, tt, n, &L->gbytes_per_s, &L->latency_us, &L->have_bw);
    }
    if (!out->intra.n && !out->inter.n)
        rc = bm_err_set(err, "%s: no collective over more than one rank (a run with dp 1 and pp 1?)", path);
done:
    fclose(f);
    bm_free(v), bm_free(x1), bm_free(x2), bm_free(tt), bm_free(med);
    return rc;
}

/* ---------------------------------------------------------------- the model's sizes */

int bm_calibrate_param_sizes(const char *path, int n_modules, const char *const *names, double *param_mib,
                             struct bm_err *err)
{
    for (int m = 0; m < n_modules; m++) param_mib[m] = -1;
    FILE *f = fopen(path, "r");
    if (!f) return bm_err_set(err, "%s: cannot read the step log", path);
    char buf[1 << 16];
    int rc = BM_OK, line = 0, found = 0;
    /* the first step: every rank's instances; a chunk counted once (its replicas hold the same) */
    long *seen = bm_calloc((size_t)n_modules * 4096 + 1, sizeof *seen);
    if (!seen) {
        fclose(f);
        return bm_err_set(err, "out of memory");
    }
    while (!found && fgets(buf, sizeof buf, f)) {
        line++;
        if (buf[strspn(buf, " \t\r\n")] == 0) continue;
        json_error_t je;
        json_t *j = json_loads(buf, 0, &je), *ranks = j ? json_object_get(j, "ranks") : NULL;
        if (!json_is_array(ranks)) {
            json_decref(j);
            rc = bm_err_set(err, "%s:%d: not a step of `bigmac train --log` (an object with \"step\" and \"ranks\")",
                            path, line);
            break;
        }
        size_t i, k;
        json_t *r, *e;
        json_array_foreach(ranks, i, r) {
            json_t *ps = json_object_get(r, "params");
            if (!json_is_array(ps)) continue;
            found = 1;
            json_array_foreach(ps, k, e) {
                json_t *mod = json_object_get(e, "module"), *ch = json_object_get(e, "chunk"), *by = json_object_get(e, "bytes");
                if (!json_is_string(mod) || !json_is_number(by)) continue;
                int m = 0;
                while (m < n_modules && strcmp(names[m], json_string_value(mod))) m++;
                if (m == n_modules) continue; /* a module the trace's table does not have */
                long c = json_is_integer(ch) ? (long)json_integer_value(ch) : -1;
                if (c >= 4095 || c < -1) continue;
                long *s = &seen[(size_t)m * 4096 + (size_t)(c + 1)];
                if (*s) continue;
                *s = 1;
                if (param_mib[m] < 0) param_mib[m] = 0;
                param_mib[m] += json_number_value(by) / 1048576.0;
                if (c < 0) seen[(size_t)m * 4096] = 1; /* a replica: once */
            }
        }
        json_decref(j);
    }
    fclose(f);
    bm_free(seen);
    if (rc == BM_OK && !found)
        rc = bm_err_set(err, "%s: no rank has \"params\"\nhint: a log of `bigmac train --log` (or bigmac.torch's log) "
                             "from this version records them", path);
    return rc;
}
