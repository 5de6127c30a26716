/* nn.c — fp32 kernels; see nn.h for conventions (shapes, accumulation, scratch). */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn/nn.h"

/* GCC: let the elementwise loops below vectorize (at -O2 GCC 12 only vectorizes loops whose
 * trip count is a known multiple of the vector width; the clamp in exp_fast needs
 * no-trapping-math to become a blend). Other compilers: plain loops. */
#if defined(__GNUC__) && !defined(__clang__)
#define BM_VECTORIZE __attribute__((optimize("O3", "no-trapping-math", "no-math-errno")))
#if defined(__x86_64__) && defined(__linux__)
/* the transcendental-heavy loops also get an AVX2 clone picked at load time (ifunc) */
#define BM_VECTORIZE_WIDE BM_VECTORIZE __attribute__((target_clones("avx2", "default")))
#else
#define BM_VECTORIZE_WIDE BM_VECTORIZE
#endif
#define BM_INLINE static inline __attribute__((always_inline))
#else
#define BM_VECTORIZE
#define BM_VECTORIZE_WIDE
#define BM_INLINE static inline
#endif

/* ================================================================ elementwise helpers */

/* Reductions in 8 independent lanes so they vectorize without reassociating the compiler's
 * way (-ffast-math); the summation order is fixed, so results stay deterministic. */
#define LANES 8
BM_INLINE float sum_lanes(const float *x, int n)
{
    float l[LANES] = {0}, s = 0.0f;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) l[k] += x[j + k];
    for (; j < n; j++) s += x[j];
    for (int k = 0; k < LANES; k++) s += l[k];
    return s;
}

BM_INLINE float sqdev_lanes(const float *x, float m, int n) /* sum (x - m)^2 */
{
    float l[LANES] = {0}, s = 0.0f;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) l[k] += (x[j + k] - m) * (x[j + k] - m);
    for (; j < n; j++) s += (x[j] - m) * (x[j] - m);
    for (int k = 0; k < LANES; k++) s += l[k];
    return s;
}

BM_INLINE float max_lanes(const float *x, int n) /* n >= 1 */
{
    float l[LANES], mx = x[0];
    for (int k = 0; k < LANES; k++) l[k] = x[0];
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) l[k] = x[j + k] > l[k] ? x[j + k] : l[k];
    for (; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    for (int k = 0; k < LANES; k++) mx = l[k] > mx ? l[k] : mx;
    return mx;
}

/* e^x as 2^n * e^f (n = round(x log2 e), |f| <= ln2/2) with a degree-6 Taylor polynomial:
 * relative error ~2e-7 for x in [-87, 88] (clamped outside). Branch-free, so loops over it
 * vectorize; libm's expf is a call per element and was half of a training step. */
BM_INLINE float exp_fast(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float t = x * 1.442695041f;
    float n = (t + 12582912.0f) - 12582912.0f; /* round to nearest via 1.5 * 2^23 */
    float f = (t - n) * 0.6931471806f;
    float p = 1.0f + f * (1.0f + f * (0.5f + f * (0.16666667f + f * (0.041666668f +
              f * (0.008333334f + f * 0.0013888889f)))));
    union { float f; int32_t i; } u;
    u.i = ((int32_t)n + 127) << 23;
    return p * u.f;
}

/* tanh(u) = 1 - 2 / (1 + e^{2u}); saturates cleanly to +-1. Absolute error ~2e-7. */
BM_INLINE float tanh_fast(float u) { return 1.0f - 2.0f / (1.0f + exp_fast(2.0f * u)); }

/* ================================================================ linear */

void bm_matmul_naive(float *out, const float *inp, const float *w, const float *b, int N, int C,
                     int OC)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const float *wr = w + (size_t)o * C;
            float acc = b ? b[o] : 0.0f;
            for (int c = 0; c < C; c++) acc += x[c] * wr[c];
            out[(size_t)n * OC + o] = acc;
        }
    }
}

void bm_linear_forward(float *out, const float *inp, const float *w, const float *b, int N, int C,
                       int OC)
{
    float beta = 0.0f;
    if (b) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, b, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    /* out[N,OC] = inp[N,C] @ w[OC,C]^T (+ out) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, beta, out,
                OC);
}

void bm_linear_backward_input(float *dinp, const float *dout, const float *w, int N, int C, int OC)
{
    /* dinp[N,C] += dout[N,OC] @ w[OC,C] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C, 1.0f,
                dinp, C);
}

BM_VECTORIZE void bm_linear_backward_weight(float *dw, float *db, const float *dout, const float *inp, int N,
                               int C, int OC)
{
    /* dw[OC,C] += dout[N,OC]^T @ inp[N,C] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                dw, C);
    if (db)
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++) db[o] += d[o];
        }
}

/* ================================================================ layernorm */

BM_VECTORIZE void bm_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C)
{
    const float eps = 1e-5f;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float m = sum_lanes(x, C) / C;
        float v = sqdev_lanes(x, m, C) / C;
        float s = 1.0f / sqrtf(v + eps);
        float *o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] = (x[i] - m) * s * w[i] + b[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

BM_VECTORIZE void bm_layernorm_backward_input(float *dinp, const float *dout, const float *inp, const float *w,
                                              const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            float dnorm = w[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            float dnorm = w[i] * d[i];
            dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

BM_VECTORIZE void bm_layernorm_backward_weight(float *dw, float *db, const float *dout, const float *inp,
                                               const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            db[i] += d[i];
            dw[i] += norm * d[i];
        }
    }
}

/* The whole backward is its two halves (the zero-bubble split computes them at B and at W):
 * the same operations in the same order, so the results are bit-identical either way. */
void bm_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                           const float *mean, const float *rstd, int N, int C)
{
    bm_layernorm_backward_input(dinp, dout, inp, w, mean, rstd, N, C);
    bm_layernorm_backward_weight(dw, db, dout, inp, mean, rstd, N, C);
}

/* ================================================================ GELU */

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */



BM_VECTORIZE_WIDE void bm_gelu_forward(float *restrict out, const float *restrict inp, long n)
{
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_fast(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

BM_VECTORIZE_WIDE void bm_gelu_backward(float *restrict dinp, const float *restrict inp,
                                   const float *restrict dout, long n)
{
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanh_fast(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

/* ================================================================ residual */

BM_VECTORIZE void bm_residual_forward(float *out, const float *a, const float *b, long n)
{
    for (long i = 0; i < n; i++) out[i] = a[i] + b[i];
}

BM_VECTORIZE void bm_residual_backward(float *da, float *db, const float *dout, long n)
{
    if (da)
        for (long i = 0; i < n; i++) da[i] += dout[i];
    if (db)
        for (long i = 0; i < n; i++) db[i] += dout[i];
}

/* ================================================================ attention */

/* Row-wise masked softmax of att[T,T] in place (scores already scaled). */
BM_VECTORIZE_WIDE static void softmax_rows(float *att, int T, int causal)
{
    for (int t = 0; t < T; t++) {
        float *row = att + (size_t)t * T;
        int n = causal ? t + 1 : T;
        float mx = max_lanes(row, n);
        for (int j = 0; j < n; j++) row[j] = exp_fast(row[j] - mx);
        float inv = 1.0f / sum_lanes(row, n);
        for (int j = 0; j < n; j++) row[j] *= inv;
        for (int j = n; j < T; j++) row[j] = 0.0f;
    }
}

void bm_attention_forward(float *out, float *att, const float *qkv, int T, int C, int NH,
                          int causal)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int h = 0; h < NH; h++) {
        const float *q = qkv + h * hs, *k = qkv + C + h * hs, *v = qkv + 2 * C + h * hs;
        float *a = att + (size_t)h * T * T;
        /* a[T,T] = scale * q[T,hs] @ k[T,hs]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f,
                    a, T);
        softmax_rows(a, T, causal);
        /* out_h[T,hs] = a[T,T] @ v[T,hs] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3, 0.0f,
                    out + h * hs, C);
    }
}

void bm_attention_forward_naive(float *out, float *att, const float *qkv, int T, int C, int NH,
                                int causal)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
            const float *q = qkv + (size_t)t * C3 + h * hs;
            float *a = att + ((size_t)h * T + t) * T;
            int n = causal ? t + 1 : T;
            float mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                const float *k = qkv + (size_t)j * C3 + C + h * hs;
                float s = 0.0f;
                for (int i = 0; i < hs; i++) s += q[i] * k[i];
                a[j] = s * scale;
                if (a[j] > mx) mx = a[j];
            }
            float sum = 0.0f;
            for (int j = 0; j < n; j++) {
                a[j] = expf(a[j] - mx);
                sum += a[j];
            }
            for (int j = 0; j < n; j++) a[j] /= sum;
            for (int j = n; j < T; j++) a[j] = 0.0f;
            float *o = out + (size_t)t * C + h * hs;
            for (int i = 0; i < hs; i++) o[i] = 0.0f;
            for (int j = 0; j < n; j++) {
                const float *v = qkv + (size_t)j * C3 + 2 * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] += a[j] * v[i];
            }
        }
}

BM_VECTORIZE void bm_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                           int T, int C, int NH, float *scratch)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    float *da = scratch; /* [T,T] */
    for (int h = 0; h < NH; h++) {
        const float *q = qkv + h * hs, *k = qkv + C + h * hs, *v = qkv + 2 * C + h * hs;
        float *dq = dqkv + h * hs, *dk = dqkv + C + h * hs, *dv = dqkv + 2 * C + h * hs;
        const float *a = att + (size_t)h * T * T;
        const float *dh = dout + h * hs;
        /* da[T,T] = dout_h[T,hs] @ v[T,hs]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dh, C, v, C3, 0.0f,
                    da, T);
        /* dv[T,hs] += a^T @ dout_h */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, dh, C, 1.0f, dv,
                    C3);
        /* softmax backward in place: ds = a * (da - sum_j a*da); masked a = 0 gives ds = 0 */
        for (int t = 0; t < T; t++) {
            const float *ar = a + (size_t)t * T;
            float *dr = da + (size_t)t * T;
            float dot = 0.0f;
            for (int j = 0; j < T; j++) dot += ar[j] * dr[j];
            for (int j = 0; j < T; j++) dr[j] = ar[j] * (dr[j] - dot);
        }
        /* dq[T,hs] += scale * ds @ k;  dk[T,hs] += scale * ds^T @ q */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, da, T, k, C3, 1.0f,
                    dq, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, da, T, q, C3, 1.0f,
                    dk, C3);
    }
}

/* ================================================================ embeddings */

void bm_embedding_forward(float *out, const int *ids, const float *table, int N, int C,
                          int accumulate)
{
    for (int n = 0; n < N; n++) {
        const float *row = table + (size_t)ids[n] * C;
        float *o = out + (size_t)n * C;
        if (accumulate)
            for (int i = 0; i < C; i++) o[i] += row[i];
        else
            memcpy(o, row, (size_t)C * sizeof(float));
    }
}

BM_VECTORIZE void bm_embedding_backward(float *dtable, const int *ids, const float *dout, int N, int C)
{
    for (int n = 0; n < N; n++) {
        float *row = dtable + (size_t)ids[n] * C;
        const float *d = dout + (size_t)n * C;
        for (int i = 0; i < C; i++) row[i] += d[i];
    }
}

void bm_patchify(float *patches, const float *img, int n_img, int ch, int H, int W, int p)
{
    int gy = H / p, gx = W / p, K = ch * p * p;
    for (int n = 0; n < n_img; n++)
        for (int py = 0; py < gy; py++)
            for (int px = 0; px < gx; px++) {
                float *row = patches + ((size_t)(n * gy + py) * gx + px) * K;
                for (int c = 0; c < ch; c++)
                    for (int dy = 0; dy < p; dy++)
                        for (int dx = 0; dx < p; dx++)
                            *row++ = img[(((size_t)n * ch + c) * H + py * p + dy) * W + px * p + dx];
            }
}

void bm_unpatchify(float *img, const float *patches, int n_img, int ch, int H, int W, int p,
                   int accumulate)
{
    int gy = H / p, gx = W / p, K = ch * p * p;
    for (int n = 0; n < n_img; n++)
        for (int py = 0; py < gy; py++)
            for (int px = 0; px < gx; px++) {
                const float *row = patches + ((size_t)(n * gy + py) * gx + px) * K;
                for (int c = 0; c < ch; c++)
                    for (int dy = 0; dy < p; dy++)
                        for (int dx = 0; dx < p; dx++) {
                            float *dst = &img[(((size_t)n * ch + c) * H + py * p + dy) * W + px * p + dx];
                            *dst = accumulate ? *dst + *row : *row;
                            row++;
                        }
            }
}

void bm_patch_embed_forward(float *out, float *patches, const float *img, const float *w,
                            const float *b, int n_img, int ch, int H, int W, int p, int C)
{
    int N = n_img * (H / p) * (W / p), K = ch * p * p;
    bm_patchify(patches, img, n_img, ch, H, W, p);
    bm_linear_forward(out, patches, w, b, N, K, C);
}

void bm_patch_embed_backward(float *dimg, float *dw, float *db, const float *dout,
                             const float *patches, const float *w, int n_img, int ch, int H, int W,
                             int p, int C, float *scratch)
{
    int N = n_img * (H / p) * (W / p), K = ch * p * p;
    bm_linear_backward_weight(dw, db, dout, patches, N, K, C);
    if (dimg) {
        memset(scratch, 0, (size_t)N * K * sizeof(float));
        bm_linear_backward_input(scratch, dout, w, N, K, C);
        bm_unpatchify(dimg, scratch, n_img, ch, H, W, p, 1);
    }
}

/* ================================================================ losses */

static int ce_counted(int tgt, int V, int ignore_index)
{
    return tgt != ignore_index && tgt >= 0 && tgt < V;
}

double bm_softmax_ce_forward(float *probs, const float *logits, const int *targets, int N, int V,
                             int ignore_index, int *n_valid)
{
    double sum = 0.0;
    int cnt = 0;
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *pr = probs + (size_t)n * V;
        float mx = -INFINITY;
        for (int i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;
        double z = 0.0;
        for (int i = 0; i < V; i++) {
            pr[i] = expf(l[i] - mx);
            z += pr[i];
        }
        float inv = (float)(1.0 / z);
        for (int i = 0; i < V; i++) pr[i] *= inv;
        if (ce_counted(targets[n], V, ignore_index)) {
            /* log-sum-exp form: stable even when p[target] underflows */
            sum += -(double)(l[targets[n]] - mx) + log(z);
            cnt++;
        }
    }
    if (n_valid) *n_valid = cnt;
    return sum;
}

void bm_softmax_ce_backward(float *dlogits, const float *probs, const int *targets, int N, int V,
                            int ignore_index, float scale)
{
    for (int n = 0; n < N; n++) {
        if (!ce_counted(targets[n], V, ignore_index)) continue;
        const float *pr = probs + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        for (int i = 0; i < V; i++) d[i] += scale * pr[i];
        d[targets[n]] -= scale;
    }
}

double bm_mse_forward(const float *pred, const float *target, long n)
{
    double s = 0.0;
    for (long i = 0; i < n; i++) {
        double d = (double)pred[i] - target[i];
        s += d * d;
    }
    return n ? s / n : 0.0;
}

BM_VECTORIZE void bm_mse_backward(float *dpred, const float *pred, const float *target, long n, float scale)
{
    float k = 2.0f * scale / (float)n;
    for (long i = 0; i < n; i++) dpred[i] += k * (pred[i] - target[i]);
}

/* ================================================================ optimizer */

BM_VECTORIZE_WIDE void bm_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int t)
{
    float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float mh = m[i] / c1, vh = v[i] / c2;
        params[i] -= lr * (mh / (sqrtf(vh) + eps) + weight_decay * params[i]);
    }
}
