/* test_calibrate_step.c — src/sim/calibrate_step.c's fit of the collectives' ring on synthetic
 * step logs whose times are computed here by hand from a known bandwidth and latency:
 *   intra-host  all-reduce, 2 GB/s, 30 us:   t = 2(n-1)/n * B / 2e6 ms + 2(n-1) * 0.030 ms
 *     n = 2, B = 1e6: 0.5 + 0.06 = 0.56 ms;  n = 2, B = 4e6: 2.0 + 0.06 = 2.06 ms;
 *     n = 4, B = 2e6: 1.5 + 0.18 = 1.68 ms
 *   inter-host  all-gather, 0.5 GB/s, 100 us: t = (n-1)/n * B / 5e5 ms + (n-1) * 0.1 ms
 *     n = 2, B = 1e6: 1.0 + 0.1 = 1.1 ms;    n = 2, B = 3e6: 3.0 + 0.1 = 3.1 ms
 * Each collective's members start at different times; the first-started members' durations
 * include their wait (+0.5 ms), the last-started one's is the figure above, which is what the fit
 * must take. Step 1 carries absurd times: left out. Also: one size only (latency alone), a log
 * without collectives, a line that is not a step. */
#include <math.h>

#include "test.h"
#include "calib/calib.h"
#include "util/util.h"

static const char *tmp(const char *name)
{
    static char buf[4][512];
    static int k;
    const char *dir = getenv("TEST_TMP");
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/calibrate_step_%s", dir && *dir ? dir : "/tmp", name);
    return b;
}

/* One member's record of a collective: ", "-separated JSON into f. */
static void coll(FILE *f, int first, const char *op, const char *group, int n, const char *mod, int chunk,
                 const char *link, double bytes, double start, double dur)
{
    fprintf(f, "%s{\"op\": \"%s\", \"of\": \"grads\", \"module\": \"%s\"", first ? "" : ", ", op, mod);
    if (chunk >= 0) fprintf(f, ", \"chunk\": %d", chunk);
    fprintf(f, ", \"group\": \"%s\", \"ranks\": %d, \"link\": \"%s\", \"bytes\": %.0f, \"start_ms\": %.6f, "
               "\"end_ms\": %.6f}", group, n, link, bytes, start, start + dur);
}

/* A 4-rank log (pp 2 x dp 2, rank = p*2 + d): a world all-reduce of "vit" (B = 2e6), each
 * pipeline rank's dp all-reduce of its chunk (rank 0's chunk B = 1e6, rank 1's B = 4e6), and, when
 * inter, a dp all-gather across hosts of "dit" per pipeline rank (B = 1e6 on p 0, 3e6 on p 1). */
static void write_log(const char *path, int inter, int one_size)
{
    FILE *f = fopen(path, "w");
    for (int step = 1; step <= 3; step++) {
        double junk = step == 1 ? 50 : 0; /* step 1: left out by the fit */
        fprintf(f, "{\"step\": %d, \"loss\": 1, \"ms\": 10, \"layout\": {\"pp\": 2, \"dp\": 2}, \"ranks\": [", step);
        for (int g = 0; g < 4; g++) {
            int p = g / 2, d = g % 2;
            fprintf(f, "%s{\"rank\": %d, \"pp\": %d, \"dp\": %d, \"collectives\": [", g ? ", " : "", g, p, d);
            /* world: rank 3 starts last; the others waited 0.5 ms more */
            double B = one_size ? 1e6 : 2e6, t = one_size ? 0.5 * 3 / 2 + 0.18 : 1.68;
            coll(f, 1, "all_reduce", "world", 4, "vit", -1, "intra", B, 10 + 0.1 * g, t + 0.1 * (3 - g) + junk);
            double Bc = one_size ? 1e6 : (p ? 4e6 : 1e6), tc = one_size ? 0.56 : (p ? 2.06 : 0.56);
            coll(f, 0, "all_reduce", "dp", 2, "gpt", p, "intra", Bc, 20 + 0.5 * d, tc + 0.5 * (1 - d) + junk);
            if (inter) {
                double Bi = p ? 3e6 : 1e6, ti = p ? 3.1 : 1.1;
                coll(f, 0, "all_gather", "dp", 2, "dit", -1, "inter", Bi, 30 + 0.5 * (1 - d), ti + 0.5 * d + junk);
            }
            fprintf(f, "]}");
        }
        fprintf(f, "]}\n");
    }
    fclose(f);
}

/* With the ranks' walk_ms (as both executors log it), each collective's time runs from the end
 * of its last-started member's walk or previous collective (its work to issue it) to its end.
 * pp 1 x dp 2, two all-reduces of one size (1e6 B) per step:
 *   rank 0: walk 10.0, vit 10.5 .. 11.0, dit 11.3 .. 11.6
 *   rank 1: walk 10.1, vit 10.6 .. 11.0, dit 11.2 .. 11.6
 * vit: rank 1 started last: 11.0 - 10.1 = 0.9 ms (its own span 0.4); dit: rank 0 started last:
 * 11.6 - 11.0 = 0.6 ms (its span 0.3). One size: latency alone, least squares of t = 2 * lat
 * over the two points: lat = (0.9 + 0.6) / 4 = 0.375 ms (from the spans alone: 0.175 ms). */
TEST(collectives_charge_the_issue_time)
{
    const char *path = tmp("issue.log");
    FILE *f = fopen(path, "w");
    for (int step = 1; step <= 3; step++) {
        double junk = step == 1 ? 50 : 0;
        fprintf(f, "{\"step\": %d, \"loss\": 1, \"ms\": 12, \"ranks\": [", step);
        for (int d = 0; d < 2; d++) {
            fprintf(f, "%s{\"rank\": %d, \"pp\": 0, \"dp\": %d, \"walk_ms\": %.1f, \"sync_end_ms\": 11.6, "
                       "\"optimizer_ms\": 1, \"collectives\": [", d ? ", " : "", d, d, d ? 10.1 : 10.0);
            coll(f, 1, "all_reduce", "world", 2, "vit", -1, "intra", 1e6, d ? 10.6 : 10.5, (d ? 0.4 : 0.5) + junk);
            coll(f, 0, "all_reduce", "world", 2, "dit", -1, "intra", 1e6, (d ? 11.2 : 11.3) + junk,
                 d ? 0.4 : 0.3);
            fprintf(f, "]}");
        }
        fprintf(f, "]}\n");
    }
    fclose(f);
    struct bm_coll_fit cf;
    struct bm_err err;
    CHECKF(bm_calibrate_collectives(path, &cf, &err) == BM_OK, "%s", err.msg);
    CHECK(cf.intra.n == 2 && !cf.intra.have_bw && cf.inter.n == 0);
    CHECK_NEAR(cf.intra.latency_us, 375.0, 1e-6);
    remove(path);
}

/* Collectives overlapped with the walk ("in_walk": the executors start a chunk's right after its
 * last backward; its end is when the rank saw it done, after an op) are left out of the fit
 * when the log has any that is not, and do not move the next one's origin before the walk's end.
 * pp 1 x dp 2, walks end at 10.0 and 10.1: chunk 0's all-reduce started at 5.0 / 5.1 and seen
 * done at 9.9 / 9.95 (inside the walk; 4.85 ms, far more than it took); vit's all-reduce started
 * after the walks at 10.0 / 10.1 and ended at 10.3 on both. Its last member (rank 1) waited from
 * its walk's end, 10.1 (not chunk 0's seen end, 9.95): 0.2 ms = 2(n-1) x latency, 100 us. */
TEST(collectives_overlapped_left_out)
{
    const char *path = tmp("overlap.log");
    FILE *f = fopen(path, "w");
    for (int step = 1; step <= 3; step++) {
        fprintf(f, "{\"step\": %d, \"loss\": 1, \"ms\": 12, \"ranks\": [", step);
        for (int d = 0; d < 2; d++) {
            fprintf(f, "%s{\"rank\": %d, \"pp\": 0, \"dp\": %d, \"walk_ms\": %.1f, \"sync_end_ms\": 10.3, "
                       "\"optimizer_ms\": 1, \"collectives\": [", d ? ", " : "", d, d, d ? 10.1 : 10.0);
            fprintf(f, "{\"op\": \"all_reduce\", \"of\": \"grads\", \"module\": \"gpt\", \"chunk\": 0, "
                       "\"group\": \"dp\", \"ranks\": 2, \"link\": \"intra\", \"bytes\": 4000000, "
                       "\"start_ms\": %.2f, \"end_ms\": %.2f, \"in_walk\": true}", d ? 5.1 : 5.0, d ? 9.95 : 9.9);
            coll(f, 0, "all_reduce", "world", 2, "vit", -1, "intra", 1e6, d ? 10.1 : 10.0, d ? 0.2 : 0.3);
            fprintf(f, "]}");
        }
        fprintf(f, "]}\n");
    }
    fclose(f);
    struct bm_coll_fit cf;
    struct bm_err err;
    CHECKF(bm_calibrate_collectives(path, &cf, &err) == BM_OK, "%s", err.msg);
    CHECK(cf.intra.n == 1 && !cf.intra.have_bw && cf.inter.n == 0);
    CHECK_NEAR(cf.intra.latency_us, 100.0, 1e-6);
    remove(path);
}

/* Two runs' logs appended (the steps start again at 1): each run's collectives are its own. Run
 * A's vit all-reduce, last member started at 10.1, takes 0.2 ms; run B's, started at 20.1 on its
 * own clock, 0.4 ms. Steps 2 and 3 of each: median of {0.2, 0.2, 0.4, 0.4} = 0.3 ms = 2(n-1) x
 * latency, 150 us (merged by step number, run B's later start would stand for both: 200 us). */
TEST(collectives_runs_appended)
{
    const char *path = tmp("runs.log");
    FILE *f = fopen(path, "w");
    for (int run = 0; run < 2; run++)
        for (int step = 1; step <= 3; step++) {
            double at = run ? 20 : 10, dur = run ? 0.4 : 0.2;
            fprintf(f, "{\"step\": %d, \"loss\": 1, \"ms\": 12, \"ranks\": [", step);
            for (int d = 0; d < 2; d++) {
                fprintf(f, "%s{\"rank\": %d, \"pp\": 0, \"dp\": %d, \"walk_ms\": %.1f, \"collectives\": [",
                        d ? ", " : "", d, d, at + (d ? 0.1 : 0.0));
                coll(f, 1, "all_reduce", "world", 2, "vit", -1, "intra", 1e6, at + (d ? 0.1 : 0.0), dur + (d ? 0 : 0.1));
                fprintf(f, "]}");
            }
            fprintf(f, "]}\n");
        }
    fclose(f);
    struct bm_coll_fit cf;
    struct bm_err err;
    CHECKF(bm_calibrate_collectives(path, &cf, &err) == BM_OK, "%s", err.msg);
    CHECK(cf.intra.n == 1 && !cf.intra.have_bw);
    CHECK_NEAR(cf.intra.latency_us, 150.0, 1e-6);
    remove(path);
}

TEST(collectives_fit_by_hand_intra_and_inter)
{
    const char *path = tmp("both.log");
    write_log(path, 1, 0);
    struct bm_coll_fit cf;
    struct bm_err err;
    CHECKF(bm_calibrate_collectives(path, &cf, &err) == BM_OK, "%s", err.msg);
    CHECK(cf.intra.n == 3 && cf.inter.n == 2); /* world vit; dp gpt on p 0 and p 1 / dit on p 0 and p 1 */
    CHECK(cf.intra.have_bw && cf.inter.have_bw);
    CHECK_NEAR(cf.intra.gbytes_per_s, 2.0, 1e-6);
    CHECK_NEAR(cf.intra.latency_us, 30.0, 1e-4);
    CHECK_NEAR(cf.inter.gbytes_per_s, 0.5, 1e-6);
    CHECK_NEAR(cf.inter.latency_us, 100.0, 1e-4);
}

TEST(collectives_fit_intra_only)
{
    const char *path = tmp("intra.log");
    write_log(path, 0, 0);
    struct bm_coll_fit cf;
    struct bm_err err;
    CHECKF(bm_calibrate_collectives(path, &cf, &err) == BM_OK, "%s", err.msg);
    CHECK(cf.intra.n == 3 && cf.inter.n == 0);
    CHECK_NEAR(cf.intra.gbytes_per_s, 2.0, 1e-6);
    CHECK_NEAR(cf.intra.latency_us, 30.0, 1e-4);
    CHECK(cf.inter.gbytes_per_s == 0 && cf.inter.latency_us == 0);
}

/* every collective of the same bytes per hop: x1 / x2 is the same for all (B = 1e6 over n = 2 and
 * n = 4: (n-1)/n * B / (n-1) = B / n differs... so one size over n = 2 only is used below) */
TEST(collectives_one_size_fits_latency_alone)
{
    const char *path = tmp("one.log");
    FILE *f = fopen(path, "w");
    for (int step = 1; step <= 3; step++) { /* two ranks, one 1e6-byte all-reduce a step: 0.56 ms */
        fprintf(f, "{\"step\": %d, \"ranks\": [", step);
        for (int g = 0; g < 2; g++) {
            fprintf(f, "%s{\"rank\": %d, \"collectives\": [", g ? ", " : "", g);
            coll(f, 1, "all_reduce", "world", 2, "vit", -1, "intra", 1e6, 5 + g, 0.56 + (1 - g));
            fprintf(f, "]}");
        }
        fprintf(f, "]}\n");
    }
    fclose(f);
    struct bm_coll_fit cf;
    struct bm_err err;
    CHECKF(bm_calibrate_collectives(path, &cf, &err) == BM_OK, "%s", err.msg);
    CHECK(cf.intra.n == 1 && !cf.intra.have_bw);
    CHECK_NEAR(cf.intra.latency_us, 0.56 / 2 * 1e3, 1e-6); /* all of it as latency: x2 = 2(n-1) = 2 */
}

TEST(collectives_log_without_them_fails)
{
    const char *path = tmp("none.log");
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"step\": 1, \"ranks\": [{\"rank\": 0, \"optimizer_ms\": 1}]}\n");
    fclose(f);
    struct bm_coll_fit cf;
    struct bm_err err;
    CHECK(bm_calibrate_collectives(path, &cf, &err) == BM_ERR);
    CHECK(strstr(err.msg, "no rank has \"collectives\"") != NULL);
    f = fopen(path, "w");
    fprintf(f, "{\"step\": 1, \"ranks\": []}\n[1, 2]\n");
    fclose(f);
    CHECK(bm_calibrate_collectives(path, &cf, &err) == BM_ERR);
    CHECKF(strstr(err.msg, "none.log:2: not a step") != NULL, "%s", err.msg);
    CHECK(bm_calibrate_collectives(tmp("missing.log"), &cf, &err) == BM_ERR);
    CHECK(strstr(err.msg, "cannot read the step log") != NULL);
}

int main(void)
{
    RUN(collectives_fit_by_hand_intra_and_inter);
    RUN(collectives_charge_the_issue_time);
    RUN(collectives_overlapped_left_out);
    RUN(collectives_runs_appended);
    RUN(collectives_fit_intra_only);
    RUN(collectives_one_size_fits_latency_alone);
    RUN(collectives_log_without_them_fails);
    return test_summary();
}
