/* model.h — shared pieces of the built-in models (vit, gpt, dit): a stack of pre-LN
 * transformer layers over packed sequences, the geometry the three models agree on, and
 * seeded init helpers. Public interface: include/bigmac_module.h. */
#ifndef BM_MODEL_H
#define BM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "bigmac.h"
#include "bigmac_module.h"
#include "util/util.h"

#define BM_MAX_SEGS 1024 /* packed sequences per call (images in a microbatch, samples) */

/* ---------------------------------------------------------------- geometry */

#define BM_MAX_ENCODERS 16 /* encoders the built-in models and the trainers take */

/* What the encoders, backbone and generator must agree on, derived from the spec. Encoders
 * are numbered in spec module order; all of them read the same images (image, channels). */
struct bm_geom {
    int img_tokens;  /* image tokens per image over all encoders: sum of enc_tokens */
    int n_enc;       /* encoders */
    int enc_tokens[BM_MAX_ENCODERS]; /* tokens encoder e emits per image ((image/patch)^2) */
    int enc_module[BM_MAX_ENCODERS]; /* spec module index of encoder e */
    int image, channels;
    int d;           /* backbone width */
    int seq;         /* text tokens per sample */
    int vocab;
    int max_images;
    int max_pos;     /* longest sample: max_images * img_tokens + seq */
};

/* Fill g from s (every encoder's and the backbone's "arch", data.max_images). BM_ERR (with a
 * message naming the module and field) when something needed is missing or inconsistent:
 * encoders that disagree on image or channels, an encoder that reads another module's output,
 * more than BM_MAX_ENCODERS encoders. */
int bm_geom_from_spec(const struct bm_spec *s, struct bm_geom *g, struct bm_err *err);

/* Packed layout of mb: sample i occupies tokens off[i] .. off[i]+len[i]-1, of which the first
 * n_images[i]*img_tokens are image tokens (encoder 0's for all its images, then encoder 1's,
 * ...; img_tokens is the sum over encoders). off/len may be NULL. Returns T (total tokens). */
int bm_layout(const struct bm_batch *mb, int img_tokens, int *off, int *len);

/* ---------------------------------------------------------------- transformer layers */

/* L pre-LN layers of width C, NH heads, MLP width F:
 *   x -> x + proj(attn(qkv(ln1(x)))) -> r + fcproj(gelu(fc(ln2(r))))
 * Attention runs separately inside each packed sequence (causal or bidirectional). */
struct bm_blocks {
    int L, C, NH, F, causal;
};

/* Parameters of one layer, pointing into the flat buffer. */
struct bm_layer {
    float *ln1w, *ln1b;      /* [C] */
    float *qkvw, *qkvb;      /* [3C, C], [3C] */
    float *attprojw, *attprojb; /* [C, C], [C] */
    float *ln2w, *ln2b;      /* [C] */
    float *fcw, *fcb;        /* [F, C], [F] */
    float *fcprojw, *fcprojb;/* [C, F], [C] */
};

/* Floats of parameters of one layer / of the stack (layers are contiguous, layer-major). */
size_t bm_blocks_layer_params(const struct bm_blocks *b);
size_t bm_blocks_params(const struct bm_blocks *b);
/* Pointers of layer l inside base (base = the stack's first float). */
struct bm_layer bm_blocks_layer(const struct bm_blocks *b, float *base, int l);
/* Initialise: weights N(0, 0.02) (residual projections scaled by 1/sqrt(2*L_total)), LN
 * weights 1, biases 0. Layer l draws from a stream seeded by (seed, first_layer + l), so the
 * values of a global layer do not depend on how the stack is split. */
void bm_blocks_init(const struct bm_blocks *b, float *params, uint64_t seed, int first_layer,
                    int L_total);

/* Floats of saved activations for T tokens in sequences seg_len[0..nseg-1]. */
size_t bm_blocks_acts(const struct bm_blocks *b, int T, int nseg, const int *seg_len);
/* Where the caller writes the stack's input [T, C] inside acts before forward. */
float *bm_blocks_input(const struct bm_blocks *b, float *acts);
/* Run the stack: input already at bm_blocks_input(acts); out[T, C] written. */
void bm_blocks_forward(const struct bm_blocks *b, const float *params, float *acts, float *out,
                       int T, int nseg, const int *seg_len);
/* Backward: dout[T, C] -> dinp[T, C] (overwritten); parameter grads accumulate into grads
 * (same layout as params). Allocates and frees its own scratch; BM_ERR on OOM. */
int bm_blocks_backward(const struct bm_blocks *b, const float *params, float *grads,
                       const float *acts, const float *dout, float *dinp, int T, int nseg,
                       const int *seg_len, struct bm_err *err);
/* Split backward (zero-bubble schedules): the B half computes dinp exactly as
 * bm_blocks_backward does and copies into keep[bm_blocks_keep_floats(b, T)] what the W half
 * needs (per layer: each linear layer's input and the gradient at its output, each layernorm's
 * input, mean, rstd and output gradient); the W half accumulates every parameter gradient from
 * keep. B allocates and frees its own scratch; BM_ERR on OOM. */
size_t bm_blocks_keep_floats(const struct bm_blocks *b, int T);
int bm_blocks_backward_input(const struct bm_blocks *b, const float *params, const float *acts,
                             const float *dout, float *dinp, float *keep, int T, int nseg,
                             const int *seg_len, struct bm_err *err);
void bm_blocks_backward_weight(const struct bm_blocks *b, float *grads, const float *keep, int T);
/* Matmul FLOPs of forward + backward (backward = 2x forward). */
double bm_blocks_flops(const struct bm_blocks *b, int T, int nseg, const int *seg_len);

/* ---------------------------------------------------------------- helpers */

/* Fill p[n] with N(0, std) from r. */
void bm_init_normal(float *p, size_t n, float std, struct bm_rng *r);
/* A stream for (seed, tag): the same (seed, tag) always gives the same values. */
void bm_rng_for(struct bm_rng *r, uint64_t seed, uint64_t tag);

/* Built-in ops tables (registered by bm_module_find on first use). */
extern const struct bm_module_ops bm_vit_ops, bm_gpt_ops, bm_dit_ops;

#endif
