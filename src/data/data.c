/* data.c — procedural shapes-and-captions dataset (see data.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "util/util.h"

/* ================================================================ vocabulary */

static const char *const words[BM_DATA_VOCAB] = {
    "<pad>", "<bos>", "<eos>", "a", "and", "above", "below", "left", "right", "of", "draw",
    "red", "green", "blue", "yellow", "magenta", "cyan", "white", "circle", "square", "triangle",
};
enum { W_A = 3, W_AND, W_ABOVE, W_BELOW, W_LEFT, W_RIGHT, W_OF, W_DRAW, W_COLOR0, W_SHAPE0 = W_COLOR0 + BM_N_COLORS };

const char *bm_vocab_word(int id) { return id >= 0 && id < BM_DATA_VOCAB ? words[id] : NULL; }

int bm_vocab_id(const char *word)
{
    for (int i = 0; i < BM_DATA_VOCAB; i++)
        if (!strcmp(words[i], word)) return i;
    return -1;
}

int bm_vocab_encode(const char *text, int *ids, int max)
{
    int n = 0;
    char w[32];
    while (*text) {
        while (*text == ' ') text++;
        if (!*text) break;
        size_t k = 0;
        while (text[k] && text[k] != ' ') k++;
        if (k >= sizeof w) return -1;
        memcpy(w, text, k);
        w[k] = 0;
        text += k;
        int id = bm_vocab_id(w);
        if (id < 0) return -1;
        if (n < max) ids[n] = id;
        n++;
    }
    return n < max ? n : max;
}

char *bm_vocab_decode(const int *ids, int n, char *buf, size_t size)
{
    size_t at = 0;
    if (size) buf[0] = 0;
    for (int i = 0; i < n && ids[i] != BM_TOK_PAD; i++) {
        const char *w = bm_vocab_word(ids[i]);
        int k = snprintf(buf + at, at < size ? size - at : 0, "%s%s", i ? " " : "", w ? w : "<?>");
        if (k < 0) break;
        at += (size_t)k;
        if (at >= size) break;
    }
    return buf;
}

/* ================================================================ drawing */

void bm_color_rgb(int color, float rgb[3])
{
    static const float t[BM_N_COLORS][3] = {
        {1, -1, -1}, {-1, 1, -1}, {-1, -1, 1}, {1, 1, -1}, {1, -1, 1}, {-1, 1, 1}, {1, 1, 1},
    };
    memcpy(rgb, t[color], sizeof t[0]);
}

static int radius(int S) { return BM_MAX(2, S / 6); }

static int inside(int kind, int x, int y, int cx, int cy, int r)
{
    int dx = x - cx, dy = y - cy;
    switch (kind) {
    case BM_SHAPE_CIRCLE: return dx * dx + dy * dy <= r * r;
    case BM_SHAPE_SQUARE: return abs(dx) * 5 <= r * 4 && abs(dy) * 5 <= r * 4;
    default: /* triangle pointing up: apex at cy - r, base at cy + r */
        return dy >= -r && dy <= r && 2 * abs(dx) <= dy + r;
    }
}

void bm_scene_draw(const struct bm_scene *sc, float *img, int S)
{
    int r = radius(S);
    for (size_t i = 0; i < 3 * (size_t)S * S; i++) img[i] = -1.0f;
    for (int k = 0; k < sc->n; k++) {
        float rgb[3];
        bm_color_rgb(sc->color[k], rgb);
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                if (inside(sc->kind[k], x, y, sc->cx[k], sc->cy[k], r))
                    for (int c = 0; c < 3; c++) img[((size_t)c * S + y) * S + x] = rgb[c];
    }
}

static int uniform_int(struct bm_rng *r, int lo, int hi) /* lo..hi inclusive */
{
    return lo + (int)(bm_rng_uniform(r) * (hi - lo + 1));
}

static void scene_random(struct bm_scene *sc, int S, struct bm_rng *r)
{
    int rad = radius(S), lo0 = rad, hi1 = S - 1 - rad;
    memset(sc, 0, sizeof *sc);
    sc->n = 1 + (bm_rng_uniform(r) < 0.5);
    for (int k = 0; k < sc->n; k++) sc->kind[k] = uniform_int(r, 0, BM_N_SHAPES - 1);
    sc->color[0] = uniform_int(r, 0, BM_N_COLORS - 1);
    sc->color[1] = (sc->color[0] + uniform_int(r, 1, BM_N_COLORS - 1)) % BM_N_COLORS;
    if (sc->n == 1) {
        sc->cx[0] = uniform_int(r, lo0, hi1);
        sc->cy[0] = uniform_int(r, lo0, hi1);
        return;
    }
    /* two shapes in opposite halves along the relation's axis: 2*rad apart at least */
    sc->rel = uniform_int(r, 0, 3);
    int a_lo = uniform_int(r, lo0, S / 2 - rad), b_hi = uniform_int(r, S / 2 + rad, hi1);
    int free0 = uniform_int(r, lo0, hi1), free1 = uniform_int(r, lo0, hi1);
    switch (sc->rel) {
    case BM_ABOVE: sc->cy[0] = a_lo, sc->cy[1] = b_hi, sc->cx[0] = free0, sc->cx[1] = free1; break;
    case BM_BELOW: sc->cy[0] = b_hi, sc->cy[1] = a_lo, sc->cx[0] = free0, sc->cx[1] = free1; break;
    case BM_LEFT_OF: sc->cx[0] = a_lo, sc->cx[1] = b_hi, sc->cy[0] = free0, sc->cy[1] = free1; break;
    default: sc->cx[0] = b_hi, sc->cx[1] = a_lo, sc->cy[0] = free0, sc->cy[1] = free1; break;
    }
}

/* Append the words of sc to ids[*n..] (up to max). */
static void scene_words(const struct bm_scene *sc, int *ids, int *n, int max)
{
    int w[9], k = 0;
    for (int s = 0; s < sc->n; s++) {
        if (s == 1) {
            switch (sc->rel) {
            case BM_ABOVE: w[k++] = W_ABOVE; break;
            case BM_BELOW: w[k++] = W_BELOW; break;
            case BM_LEFT_OF: w[k++] = W_LEFT, w[k++] = W_OF; break;
            default: w[k++] = W_RIGHT, w[k++] = W_OF; break;
            }
        }
        w[k++] = W_A;
        w[k++] = W_COLOR0 + sc->color[s];
        w[k++] = W_SHAPE0 + sc->kind[s];
    }
    for (int i = 0; i < k; i++)
        if (*n < max) ids[(*n)++] = w[i];
}

/* ================================================================ batches */

void bm_data_batch_free(struct bm_data_batch *d)
{
    if (!d) return;
    bm_free(d->b.n_images);
    bm_free(d->b.images);
    bm_free(d->b.text);
    bm_free(d->b.target);
    bm_free(d->b.noise);
    bm_free(d->b.timestep);
    bm_free(d->scenes);
    bm_free(d->targets);
    bm_free(d);
}

int bm_data_batch(const struct bm_data_cfg *cfg, long step, int mb, struct bm_data_batch **out,
                  struct bm_err *err)
{
    *out = NULL;
    if (cfg->samples < 1 || cfg->max_images < 1 || cfg->image < 8 || cfg->channels != 3 || cfg->seq < 2)
        return bm_err_set(err, "data: need samples >= 1, max_images >= 1, image >= 8, 3 channels, "
                               "seq >= 2 (got %d, %d, %d, %d, %d)", cfg->samples, cfg->max_images,
                          cfg->image, cfg->channels, cfg->seq);
    struct bm_rng r;
    bm_rng_seed(&r, cfg->seed * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)step * 0xD1B54A32D192ED03ULL) ^
                        ((uint64_t)mb * 0xABC98388FB8FAC03ULL + 0x8CB92BA72F3D8DD7ULL));
    struct bm_data_batch *d = bm_calloc(1, sizeof *d);
    if (!d) return bm_err_set(err, "out of memory");
    struct bm_batch *b = &d->b;
    int S = cfg->samples, px = cfg->image;
    size_t img = 3 * (size_t)px * px;
    b->n_samples = S, b->channels = 3, b->image = px, b->seq = cfg->seq;
    b->n_images = bm_calloc((size_t)S, sizeof(int));
    if (!b->n_images) goto oom;
    for (int i = 0; i < S; i++) {
        b->n_images[i] = uniform_int(&r, 1, cfg->max_images);
        b->n_images_total += b->n_images[i];
    }
    b->images = bm_malloc(img * b->n_images_total * sizeof(float));
    b->text = bm_calloc((size_t)S * cfg->seq, sizeof(int));
    b->target = bm_malloc(img * S * sizeof(float));
    b->noise = bm_malloc(img * S * sizeof(float));
    b->timestep = bm_malloc((size_t)S * sizeof(float));
    d->scenes = bm_calloc((size_t)b->n_images_total, sizeof *d->scenes);
    d->targets = bm_calloc((size_t)S, sizeof *d->targets);
    if (!b->images || !b->text || !b->target || !b->noise || !b->timestep || !d->scenes || !d->targets)
        goto oom;
    int im = 0;
    for (int i = 0; i < S; i++) {
        int *txt = b->text + (size_t)i * cfg->seq, n = 0, max = cfg->seq;
        txt[n++] = BM_TOK_BOS;
        for (int k = 0; k < b->n_images[i]; k++, im++) {
            scene_random(&d->scenes[im], px, &r);
            bm_scene_draw(&d->scenes[im], b->images + img * im, px);
            if (k && n < max) txt[n++] = W_AND;
            scene_words(&d->scenes[im], txt, &n, max);
        }
        scene_random(&d->targets[i], px, &r);
        bm_scene_draw(&d->targets[i], b->target + img * i, px);
        if (n < max) txt[n++] = W_DRAW;
        scene_words(&d->targets[i], txt, &n, max);
        if (n < max) txt[n++] = BM_TOK_EOS;
        for (size_t k = 0; k < img; k++) b->noise[img * i + k] = (float)bm_rng_normal(&r);
        b->timestep[i] = (float)bm_rng_uniform(&r);
    }
    *out = d;
    return BM_OK;
oom:
    bm_data_batch_free(d);
    return bm_err_set(err, "out of memory drawing a microbatch");
}
