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
