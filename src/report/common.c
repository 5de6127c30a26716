/* common.c — helpers shared by the renderers: module colours, op counts, JSON strings. */
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

long bm_report_compute_ops(const struct bm_table *t)
{
    long n = 0;
    for (int r = 0; r < t->pp; r++)
        for (int i = 0; i < t->ranks[r].n_ops; i++) n += t->ranks[r].ops[i].kind == BM_OP_COMPUTE;
    return n;
}
