/* bigmac_module.h — the interface every trainable module implements, built-in or custom.
 *
 * A module is a struct of callbacks registered under a name. The executor (and the
 * single-process reference trainer) only ever talks to modules through it, so a custom module
 * registered before training runs pipeline-transparently:
 *
 *     static const struct bm_module_ops my_ops = {
 *         .name = "myvit", .role = BM_ROLE_ENCODER,
 *         .create = my_create, .in_count = my_in, .out_count = my_out,
 *         .forward = my_fwd, .backward = my_bwd, .params = my_params, .grads = my_grads,
 *         .ctx_bytes = my_ctx_bytes, .ctx_free = my_ctx_free, .flops = my_flops,
 *         .free = my_free,
 *         // optional, for zero-bubble backbones (--backbone zb-h1 / zb-interleaved):
 *         // .backward_input = ..., .backward_weight = ..., .wctx_bytes = ..., .wctx_free = ...
 *     };
 *     bm_module_register(&my_ops, &err);   // then "impl": "myvit" in the spec
 *
 * Data conventions
 *  - A tensor that travels between modules (or ranks) is a flat float array whose element
 *    count the receiver computes with in_count / out_count from the microbatch alone, so a
 *    receiving rank can size its buffer before the message arrives.
 *  - Each module has ONE input tensor and ONE output tensor (count 0 = none):
 *      encoder      in: none                        out: embeddings [n_images_total * k, d]
 *                                                        (image-major: image 0's k tokens, ...)
 *      backbone     in: chunk 0: the encoders'      out: activation [T, d]; the last chunk
 *                       outputs (below)                  outputs the final (post-LN) hidden states
 *                       later chunks: [T, d]
 *      generator    in: hidden states [T, d]        out: none (it has a loss)
 *    d is the backbone width; k = (image/patch)^2 is the encoder's tokens per image.
 *  - Several encoders (e.g. vision towers at different patch sizes) are several modules, each
 *    reading spec inputs only; all read the same images (their arch image and channels must
 *    agree) and emit d-wide tokens. Backbone chunk 0 still takes ONE input tensor: encoder 0's
 *    output, then encoder 1's, ... (encoders numbered in spec module order, whatever order the
 *    backbone's "consumes" lists them in), so its in_count is the sum of the encoders'
 *    out_counts, and its backward writes din in that same layout. The trainers (executor and
 *    reference) concatenate the encoders' outputs and split din back: encoder e's backward
 *    gets as dout the slice of din where its output sat. An encoder never sees another's
 *    tensor, so one written for one-encoder models needs no change.
 *  - Several modules may consume one output (e.g. several generators on the backbone's hidden
 *    states): the producer's backward gets as dout the SUM of the gradients of those that send
 *    one back (added in spec module order). A module's backward never sees the split.
 *  - T is the microbatch's packed token count: samples one after another; each sample is its
 *    image tokens, encoder 0's for all its images, then encoder 1's, ... (n_images times the
 *    sum of the encoders' k), then its text (seq tokens). The backbone's activations and the
 *    generator's input use this layout.
 *  - Spec inputs (images, text, generation targets) are data present on every rank: every
 *    forward/backward receives the microbatch's struct bm_batch.
 *  - forward() returns a context holding the activations for backward(); its byte size
 *    (ctx_bytes) is exact: the bytes the context allocated. Several contexts of one module may
 *    be alive at once (pipelining); modules keep no per-microbatch state elsewhere.
 *  - backward() consumes (frees) the context, ACCUMULATES parameter gradients into the flat
 *    grads buffer, and OVERWRITES din with d(loss)/d(input).
 *  - Losses: a module with a loss (gpt's last chunk: LM loss; dit: MSE) reports the
 *    microbatch's mean loss in *loss from forward, and backward scales its gradient by
 *    loss_scale (the trainer passes 1/M so M microbatches' gradients sum to the gradient of
 *    the mean loss, in any order).
 */
#ifndef BIGMAC_MODULE_H
#define BIGMAC_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "bigmac.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Built-in word vocabulary ids every tokenizer shares. */
enum { BM_TOK_PAD = 0, BM_TOK_BOS = 1, BM_TOK_EOS = 2 };
#define BM_IGNORE (-1) /* target id that the LM loss skips */

/* One microbatch of multimodal data (see src/data/data.h for how it is drawn). */
struct bm_batch {
    int n_samples;
    int *n_images;        /* [n_samples] images of each sample (1..max_images) */
    int n_images_total;   /* sum of n_images */
    int channels, image;  /* image shape: channels x image x image */
    float *images;        /* [n_images_total, channels, image, image] in [-1, 1] */
    int seq;              /* text tokens per sample */
    int *text;            /* [n_samples, seq]: BOS w1 .. wn EOS PAD .. */
    float *target;        /* [n_samples, channels, image, image] generation target x0 */
    float *noise;         /* [n_samples, channels, image, image] eps ~ N(0, 1) */
    float *timestep;      /* [n_samples] diffusion time t in [0, 1) */
};

struct bm_module_ops {
    const char *name;   /* registry key, matched against the spec's "impl" */
    enum bm_role role;  /* the role this implementation plays */

    /* Build the module described by m (its "arch") within spec s. Backbones build the chunk
     * owning layers [layer_begin, layer_end) (chunk 0 also owns the embeddings, the chunk
     * ending at the last layer owns the final LN, LM head and loss); other roles get 0, 0.
     * Parameters are initialised from 'seed' such that a layer's initial values do not depend
     * on how the backbone is split. On success *out is owned by the caller (release: free). */
    int (*create)(const struct bm_module *m, const struct bm_spec *s, int layer_begin,
                  int layer_end, uint64_t seed, void **out, struct bm_err *err);
    /* Element counts of the input / output tensor for microbatch mb (0 = none). */
    size_t (*in_count)(const void *self, const struct bm_batch *mb);
    size_t (*out_count)(const void *self, const struct bm_batch *mb);
    /* in[in_count] (NULL when 0), out[out_count] written. *loss = this microbatch's mean loss
     * (0 for modules without one). *ctx: the saved activations, owned by the caller until
     * passed to backward (or ctx_free). */
    int (*forward)(void *self, const struct bm_batch *mb, const float *in, float *out,
                   float *loss, void **ctx, struct bm_err *err);
    /* dout[out_count] (NULL = zero gradient), din[in_count] overwritten (NULL = not needed).
     * Frees ctx whatever the outcome. */
    int (*backward)(void *self, void *ctx, const struct bm_batch *mb, const float *dout,
                    float loss_scale, float *din, struct bm_err *err);
    /* The flat parameter / gradient buffers (n floats each; same layout). Zero-grad is one
     * memset of grads. */
    float *(*params)(void *self, size_t *n);
    float *(*grads)(void *self, size_t *n);
    /* Exact bytes held by a context returned from forward. */
    size_t (*ctx_bytes)(const void *ctx);
    /* Drop a context without running backward. */
    void (*ctx_free)(void *ctx);
    /* Matrix-multiply FLOPs of forward + backward for microbatch mb (analytic). */
    double (*flops)(const void *self, const struct bm_batch *mb);
    void (*free)(void *self);

    /* Optional split backward for the zero-bubble schedules (B, then W; NULL = the module's
     * backward stays whole, and a table asking it for a W is refused before training).
     * Together the two calls do exactly what backward does:
     *  - backward_input (B): frees ctx whatever the outcome; OVERWRITES din with
     *    d(loss)/d(input) like backward; accumulates no parameter gradient; on success stores
     *    in *wctx what backward_weight needs (the linear layers' inputs and the gradients at
     *    their outputs, ...), owned by the caller until passed to backward_weight (or
     *    wctx_free);
     *  - backward_weight (W): ACCUMULATES every parameter gradient of the microbatch into the
     *    grads buffer and frees wctx whatever the outcome;
     *  - wctx_bytes: the exact bytes a wctx holds (what stays alive from B to W).
     * All four or none. */
    int (*backward_input)(void *self, void *ctx, const struct bm_batch *mb, const float *dout,
                          float loss_scale, float *din, void **wctx, struct bm_err *err);
    int (*backward_weight)(void *self, void *wctx, const struct bm_batch *mb, struct bm_err *err);
    size_t (*wctx_bytes)(const void *wctx);
    void (*wctx_free)(void *wctx);
};

/* Register ops under ops->name (the struct must outlive the registry; typically static).
 * BM_ERR when the name is taken or the registry is full. The built-ins "vit", "gpt", "dit"
 * are always present. */
BM_API int bm_module_register(const struct bm_module_ops *ops, struct bm_err *err);
/* The ops registered under 'name', or NULL. */
BM_API const struct bm_module_ops *bm_module_find(const char *name);

/* ---------------------------------------------------------------- the built-in dataset */

/* The dataset both trainers draw from (docs/executor.md "The data"): a program that trains the
 * same modules its own way (the torch binding) draws the same microbatches and starts from the
 * same parameters. */
struct bm_dataset; /* opaque */

/* The dataset spec s implies (data.seed, samples_per_microbatch, max_images; the image and
 * channels of its encoders, the seq of its backbone). BM_ERR when s has no image encoder. Caller
 * owns *out (bm_dataset_free). */
BM_API int bm_dataset_new(const struct bm_spec *s, struct bm_dataset **out, struct bm_err *err);
BM_API void bm_dataset_free(struct bm_dataset *d);
/* Draw microbatch mb (>= 0) of training step step (>= 0): the same (dataset, step, mb) always
 * gives the same bytes. Caller owns *out (bm_batch_free, which frees its arrays too). */
BM_API int bm_dataset_batch(const struct bm_dataset *d, long step, int mb, struct bm_batch **out,
                            struct bm_err *err);
BM_API void bm_batch_free(struct bm_batch *b);
/* Word of vocabulary id ("<pad>", "<bos>", "<eos>", "a", ...); NULL when out of range. */
BM_API const char *bm_vocab_word(int id);
/* The seed the trainers create module i of s with (ops->create's seed): train.seed mixed with i,
 * the same on every rank and chunk. */
BM_API uint64_t bm_train_module_seed(const struct bm_spec *s, int module);

#ifdef __cplusplus
}
#endif
#endif
