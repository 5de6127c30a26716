/* data.h — a procedural multimodal dataset, deterministic by (seed, step, microbatch).
 *
 * Each sample has 1..max_images small RGB images (side `image`, values in [-1, 1], black
 * background) showing one or two coloured shapes (circle, square, triangle), a caption that
 * describes them, and a generation target: one more drawn scene that the caption asks for.
 *
 *   text = BOS <scene 1> [and <scene 2> ...] draw <target scene> EOS PAD ...
 *   scene = "a red circle" | "a red circle above a blue square" (above, below, left of, right of)
 *
 * Understanding task: LM loss on the caption given the images. Generation task: noise
 * prediction on the target image given the backbone's reading of the caption (noise and
 * timestep are drawn here too, so every rank sees identical data).
 * Words are ids into a built-in vocabulary (BM_DATA_VOCAB words; PAD/BOS/EOS are 0/1/2). */
#ifndef BM_DATA_H
#define BM_DATA_H

#include <stdint.h>

#include "bigmac_module.h"

#define BM_DATA_VOCAB 21

enum bm_shape_kind { BM_SHAPE_CIRCLE = 0, BM_SHAPE_SQUARE, BM_SHAPE_TRIANGLE, BM_N_SHAPES };
enum bm_color { BM_RED = 0, BM_GREEN, BM_BLUE, BM_YELLOW, BM_MAGENTA, BM_CYAN, BM_WHITE, BM_N_COLORS };
enum bm_relation { BM_ABOVE = 0, BM_BELOW, BM_LEFT_OF, BM_RIGHT_OF };

/* What one image shows: n shapes (1 or 2); with 2, shape 0 is `rel` shape 1. */
struct bm_scene {
    int n;
    int kind[2], color[2], cx[2], cy[2]; /* centre pixel (column, row) */
    int rel;
};

struct bm_data_cfg {
    uint64_t seed;
    int samples;      /* samples per microbatch */
    int max_images;   /* images per sample drawn uniformly from 1..max_images */
    int image;        /* side in pixels (>= 8) */
    int channels;     /* must be 3 */
    int seq;          /* text tokens per sample (captions longer than this are cut) */
};

/* A drawn microbatch: the batch the models read, plus what was drawn (for tests). */
struct bm_data_batch {
    struct bm_batch b;
    struct bm_scene *scenes;   /* [b.n_images_total] what each input image shows */
    struct bm_scene *targets;  /* [b.n_samples] what each target image shows */
};

/* Draw microbatch `mb` of training step `step`. The same (cfg, step, mb) always gives the same
 * bytes. Caller owns *out (bm_data_batch_free). BM_ERR on a bad cfg or OOM. */
int bm_data_batch(const struct bm_data_cfg *cfg, long step, int mb, struct bm_data_batch **out,
                  struct bm_err *err);
void bm_data_batch_free(struct bm_data_batch *d);

/* Vocabulary: bm_vocab_word (id -> word) is public (include/bigmac_module.h). */
/* word -> id, or -1. */
int bm_vocab_id(const char *word);
/* Space-separated words -> ids[0..max-1]; returns the count, or -1 on an unknown word. */
int bm_vocab_encode(const char *text, int *ids, int max);
/* ids -> space-separated words in buf (PAD ends the text). Returns buf. */
char *bm_vocab_decode(const int *ids, int n, char *buf, size_t size);

/* Render scene into img[3, S, S] (background -1). */
void bm_scene_draw(const struct bm_scene *sc, float *img, int S);
/* The RGB of a colour in [-1, 1]. */
void bm_color_rgb(int color, float rgb[3]);

#endif
