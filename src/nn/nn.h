/* nn.h — fp32 kernels, forward and backward side by side (karpathy/llm.c style).
 *
 * Conventions
 *  - Row-major. A "[N, C]" argument is N rows of C contiguous floats.
 *  - Linear weights are [OC, C] (out-features major, like PyTorch / llm.c): out = inp @ w^T + b.
 *  - Every backward ACCUMULATES (+=) into its gradient outputs, so callers zero grads once
 *    (one memset of the flat gradient buffer) and contributions from several microbatches add.
 *  - Kernels never allocate; scratch space is passed in with its size documented.
 *  - The fast kernels call cblas_sgemm; bm_matmul_naive and bm_attention_forward_naive are the
 *    plain-loop references the tests compare against.
 */
#ifndef BM_NN_H
#define BM_NN_H

#include <stddef.h>

/* ---------------------------------------------------------------- linear */

/* Reference: out[N,OC] = inp[N,C] @ w[OC,C]^T + b[OC] (b may be NULL). Plain loops. */
void bm_matmul_naive(float *out, const float *inp, const float *w, const float *b, int N, int C,
                     int OC);
/* Same result through cblas_sgemm. */
void bm_linear_forward(float *out, const float *inp, const float *w, const float *b, int N, int C,
                       int OC);
/* dinp[N,C] += dout[N,OC] @ w[OC,C]. The "B" half of a split backward. */
void bm_linear_backward_input(float *dinp, const float *dout, const float *w, int N, int C, int OC);
/* dw[OC,C] += dout[N,OC]^T @ inp[N,C]; db[OC] += sum_n dout[n,:] (db may be NULL).
 * The "W" half of a split backward. */
void bm_linear_backward_weight(float *dw, float *db, const float *dout, const float *inp, int N,
                               int C, int OC);

/* ---------------------------------------------------------------- layernorm */

/* out[N,C] = (inp - mean) * rstd * w[C] + b[C]; saves mean[N], rstd[N] for the backward. eps 1e-5. */
void bm_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C);
/* dinp[N,C], dw[C], db[C] += ... given dout[N,C] and the forward's inp, w, mean, rstd. */
void bm_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                           const float *w, const float *mean, const float *rstd, int N, int C);

/* The two halves of bm_layernorm_backward for a split backward, each computing exactly its
 * terms: dinp[N,C] += ... (the "B" half) and dw[C], db[C] += ... (the "W" half). */
void bm_layernorm_backward_input(float *dinp, const float *dout, const float *inp, const float *w,
                                 const float *mean, const float *rstd, int N, int C);
void bm_layernorm_backward_weight(float *dw, float *db, const float *dout, const float *inp,
                                  const float *mean, const float *rstd, int N, int C);

/* ---------------------------------------------------------------- GELU (tanh approximation) */

/* out[n] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void bm_gelu_forward(float *out, const float *inp, long n);
/* dinp[n] += gelu'(inp) * dout */
void bm_gelu_backward(float *dinp, const float *inp, const float *dout, long n);

/* ---------------------------------------------------------------- residual */

/* out[n] = a[n] + b[n] */
void bm_residual_forward(float *out, const float *a, const float *b, long n);
/* da[n] += dout; db[n] += dout (either may be NULL) */
void bm_residual_backward(float *da, float *db, const float *dout, long n);

/* ---------------------------------------------------------------- attention */

/* Multi-head softmax attention over ONE sequence of T tokens (callers loop over packed
 * sequences). qkv[T,3C] holds q | k | v per token, each C = NH*hs wide; head h uses columns
 * h*hs .. h*hs+hs-1 of each. att[NH,T,T] receives the softmax probabilities (saved for the
 * backward; masked entries are 0). out[T,C]. causal != 0: token t attends to 0..t only;
 * causal == 0: bidirectional. Scale 1/sqrt(hs). */
void bm_attention_forward(float *out, float *att, const float *qkv, int T, int C, int NH,
                          int causal);
/* Plain-loop reference of bm_attention_forward (same outputs). */
void bm_attention_forward_naive(float *out, float *att, const float *qkv, int T, int C, int NH,
                                int causal);
/* dqkv[T,3C] += d/dqkv given dout[T,C], the forward's qkv and att[NH,T,T].
 * scratch: T*T floats. */
void bm_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                           int T, int C, int NH, float *scratch);

/* ---------------------------------------------------------------- embeddings */

/* out[N,C] (=, or += when accumulate) table[ids[n], :]; table [V,C]. ids must be in 0..V-1. */
void bm_embedding_forward(float *out, const int *ids, const float *table, int N, int C,
                          int accumulate);
/* dtable[ids[n], :] += dout[n, :] */
void bm_embedding_backward(float *dtable, const int *ids, const float *dout, int N, int C);

/* Image patches: img[n_img, ch, H, W] -> patches[n_img * (H/p) * (W/p), ch*p*p].
 * Patches in raster order (py, px); inside a patch the order is (c, dy, dx). H, W % p == 0. */
void bm_patchify(float *patches, const float *img, int n_img, int ch, int H, int W, int p);
/* Inverse of bm_patchify: img[n_img, ch, H, W] (=, or += when accumulate) from patches. */
void bm_unpatchify(float *img, const float *patches, int n_img, int ch, int H, int W, int p,
                   int accumulate);
/* Patch embedding = patchify + linear. patches[Np_total, K] (K = ch*p*p) is written (saved for
 * the backward); out[Np_total, C] = patches @ w[C,K]^T + b[C]. */
void bm_patch_embed_forward(float *out, float *patches, const float *img, const float *w,
                            const float *b, int n_img, int ch, int H, int W, int p, int C);
/* dw[C,K], db[C] += ...; dimg[n_img,ch,H,W] += ... when dimg != NULL, then scratch must hold
 * Np_total*K floats. */
void bm_patch_embed_backward(float *dimg, float *dw, float *db, const float *dout,
                             const float *patches, const float *w, int n_img, int ch, int H, int W,
                             int p, int C, float *scratch);

/* ---------------------------------------------------------------- losses */

/* Softmax cross-entropy over N rows of V logits. probs[N,V] receives softmax(logits) (saved for
 * the backward). Rows whose target is ignore_index (or outside 0..V-1) contribute nothing.
 * Returns the SUM of -log p[target] over counted rows (double-accumulated); *n_valid gets how
 * many rows counted. */
double bm_softmax_ce_forward(float *probs, const float *logits, const int *targets, int N, int V,
                             int ignore_index, int *n_valid);
/* dlogits[N,V] += scale * (probs - onehot(target)) on counted rows. For mean loss times g,
 * pass scale = g / n_valid. */
void bm_softmax_ce_backward(float *dlogits, const float *probs, const int *targets, int N, int V,
                            int ignore_index, float scale);

/* Mean squared error over n elements: returns mean((pred - target)^2) (double-accumulated). */
double bm_mse_forward(const float *pred, const float *target, long n);
/* dpred[n] += scale * 2 (pred - target) / n  (scale = dL/dmse) */
void bm_mse_backward(float *dpred, const float *pred, const float *target, long n, float scale);

/* ---------------------------------------------------------------- optimizer */

/* AdamW over flat buffers of n floats: m, v are the moment buffers (start zeroed); t is the
 * 1-based step (bias correction 1 - beta^t); weight decay is decoupled: p -= lr * wd * p. */
void bm_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int t);

#endif
