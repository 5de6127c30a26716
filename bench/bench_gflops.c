/* bench_gflops.c — achieved GFLOP/s of a reference training step next to a plain cblas_sgemm
 * of the step's typical GEMM shape, measured in the same run.
 *
 *   build/bench/bench_gflops [SPEC] [STEPS]      (default examples/tiny-mllm.json, 20)
 *
 * Step FLOPs are analytic: every module's flops() (matmul FLOPs of forward + backward: linears,
 * attention scores and mixing, LM head). The sgemm reference multiplies [T, d] x [d, 4d] (the
 * backbone's MLP up-projection for one microbatch of T tokens) over and over. Printed, never
 * asserted (wall clock depends on the machine). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/train.h"
#include "util/util.h"

static double sgemm_gflops(int M, int N, int K, double seconds)
{
    float *a = bm_malloc((size_t)M * K * sizeof(float)), *b = bm_malloc((size_t)K * N * sizeof(float));
    float *c = bm_calloc((size_t)M * N, sizeof(float));
    for (long i = 0; i < (long)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)K * N; i++) b[i] = (float)(i % 5) * 0.1f;
    long reps = 0;
    double t0 = bm_now(), t;
    do {
        for (int k = 0; k < 16; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        reps += 16;
    } while ((t = bm_now() - t0) < seconds);
    bm_free(a), bm_free(b), bm_free(c);
    return 2.0 * M * N * K * reps / t / 1e9;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "examples/tiny-mllm.json";
    int steps = argc > 2 ? atoi(argv[2]) : 20;
    struct bm_err err;
    struct bm_spec *s;
    struct bm_ref *r;
    if (bm_spec_load(path, &s, &err) || bm_ref_new(s, &r, &err)) {
        fprintf(stderr, "bench_gflops: %s\n", err.msg);
        return 1;
    }
    struct bm_step_stats st;
    for (int k = 0; k < 2; k++) /* warm-up */
        if (bm_ref_step(r, k, &st, &err)) goto fail;
    const struct bm_arch *bb = &s->modules[s->backbone_module].arch;
    struct bm_data_cfg dc;
    if (bm_train_data_cfg(s, &dc, &err)) goto fail;
    int img_tok = 0;
    for (int i = 0; i < s->n_modules; i++)
        if (s->modules[i].role == BM_ROLE_ENCODER)
            img_tok = (s->modules[i].arch.image / s->modules[i].arch.patch) * (s->modules[i].arch.image / s->modules[i].arch.patch);
    int T = dc.samples * (int)((1 + dc.max_images) / 2.0 * img_tok + dc.seq);
    int d = bb->hidden, F = bb->ffn > 0 ? bb->ffn : 4 * d;
    /* Rounds alternate training steps and sgemm so both see the same machine load; each
     * side's best round is reported (interference only ever slows a round down). */
    double flops = 0, ms = 0, best_step = 0, best_ref = 0, sum_ref = 0;
    long step = 2;
    for (int round = 0; round < steps; round++) {
        if (bm_ref_step(r, step++, &st, &err)) goto fail;
        flops += st.flops, ms += st.ms;
        if (st.flops / st.ms / 1e6 > best_step) best_step = st.flops / st.ms / 1e6;
        double g = sgemm_gflops(T, F, d, 0.05);
        sum_ref += g;
        if (g > best_ref) best_ref = g;
    }
    double big = sgemm_gflops(512, 512, 512, 0.3);
    printf("spec %s, %d steps of %d microbatches (%.3f GFLOP/step, analytic)\n", path, steps,
           s->microbatches, flops / steps / 1e9);
    printf("training step        best %7.2f  mean %7.2f GFLOP/s  (%.1f ms/step mean)\n", best_step,
           flops / (ms * 1e6), ms / steps);
    printf("sgemm %4dx%4dx%-4d  best %7.2f  mean %7.2f GFLOP/s  (the backbone MLP GEMM of one microbatch)\n",
           T, F, d, best_ref, sum_ref / steps);
    printf("sgemm  512x 512x512        %7.2f GFLOP/s  (large GEMM, for scale)\n", big);
    printf("ratio step / same-size sgemm: best %.0f%%, mean %.0f%%  (target >= 50%%)\n",
           100.0 * best_step / best_ref, 100.0 * (flops / (ms * 1e6)) / (sum_ref / steps));
    bm_ref_free(r);
    bm_spec_free(s);
    return 0;
fail:
    fprintf(stderr, "bench_gflops: %s\n", err.msg);
    return 1;
}
