/* test_data.c — the procedural dataset: determinism, vocabulary round trip, captions that
 * match what was drawn, heterogeneity of image counts. */
#include "data/data.h"
#include "test.h"
#include "util/util.h"

static struct bm_data_cfg cfg(void)
{
    return (struct bm_data_cfg){.seed = 7, .samples = 4, .max_images = 3, .image = 16,
                                .channels = 3, .seq = 40};
}

static int same_batch(const struct bm_batch *a, const struct bm_batch *b)
{
    size_t img = 3 * (size_t)a->image * a->image;
    if (a->n_samples != b->n_samples || a->n_images_total != b->n_images_total) return 0;
    return !memcmp(a->n_images, b->n_images, a->n_samples * sizeof(int)) &&
           !memcmp(a->images, b->images, img * a->n_images_total * sizeof(float)) &&
           !memcmp(a->text, b->text, (size_t)a->n_samples * a->seq * sizeof(int)) &&
           !memcmp(a->target, b->target, img * a->n_samples * sizeof(float)) &&
           !memcmp(a->noise, b->noise, img * a->n_samples * sizeof(float)) &&
           !memcmp(a->timestep, b->timestep, a->n_samples * sizeof(float));
}

TEST(deterministic_by_seed_step_microbatch)
{
    struct bm_data_cfg c = cfg();
    struct bm_data_batch *a, *b, *x, *y;
    struct bm_err err;
    CHECK(bm_data_batch(&c, 3, 1, &a, &err) == BM_OK);
    CHECK(bm_data_batch(&c, 3, 1, &b, &err) == BM_OK);
    CHECK(bm_data_batch(&c, 3, 2, &x, &err) == BM_OK);
    CHECK(bm_data_batch(&c, 4, 1, &y, &err) == BM_OK);
    CHECK(same_batch(&a->b, &b->b));
    CHECK(!same_batch(&a->b, &x->b));
    CHECK(!same_batch(&a->b, &y->b));
    c.seed = 8;
    struct bm_data_batch *z;
    CHECK(bm_data_batch(&c, 3, 1, &z, &err) == BM_OK);
    CHECK(!same_batch(&a->b, &z->b));
    bm_data_batch_free(a), bm_data_batch_free(b), bm_data_batch_free(x);
    bm_data_batch_free(y), bm_data_batch_free(z);
}

TEST(vocabulary_round_trip)
{
    const char *s = "<bos> a red circle above a blue square and a white triangle draw a cyan "
                    "square right of a green circle <eos>";
    int ids[64];
    char buf[512];
    int n = bm_vocab_encode(s, ids, 64);
    CHECK(n == 22);
    CHECK_STR_CONTAINS(bm_vocab_decode(ids, n, buf, sizeof buf), s);
    CHECK(!strcmp(buf, s));
    CHECK(bm_vocab_encode("a purple circle", ids, 64) == -1);
    for (int i = 0; i < BM_DATA_VOCAB; i++) CHECK(bm_vocab_id(bm_vocab_word(i)) == i);
    CHECK(bm_vocab_word(BM_DATA_VOCAB) == NULL);
    CHECK(bm_vocab_id("<pad>") == BM_TOK_PAD && bm_vocab_id("<bos>") == BM_TOK_BOS &&
          bm_vocab_id("<eos>") == BM_TOK_EOS);
}

/* The caption a scene should produce, built independently of data.c's token tables. */
static void scene_text(const struct bm_scene *sc, char *buf, size_t n)
{
    static const char *col[] = {"red", "green", "blue", "yellow", "magenta", "cyan", "white"};
    static const char *shp[] = {"circle", "square", "triangle"};
    static const char *rel[] = {"above", "below", "left of", "right of"};
    if (sc->n == 1) snprintf(buf, n, "a %s %s", col[sc->color[0]], shp[sc->kind[0]]);
    else
        snprintf(buf, n, "a %s %s %s a %s %s", col[sc->color[0]], shp[sc->kind[0]], rel[sc->rel],
                 col[sc->color[1]], shp[sc->kind[1]]);
}

TEST(caption_matches_drawn_shapes)
{
    struct bm_data_cfg c = cfg();
    struct bm_err err;
    int seen_counts[4] = {0};
    for (int mb = 0; mb < 8; mb++) {
        struct bm_data_batch *d;
        CHECK(bm_data_batch(&c, 0, mb, &d, &err) == BM_OK);
        const struct bm_batch *b = &d->b;
        int im = 0;
        for (int i = 0; i < b->n_samples; i++) {
            CHECK(b->n_images[i] >= 1 && b->n_images[i] <= 3);
            seen_counts[b->n_images[i]]++;
            char want[512] = "<bos>", part[128], got[512];
            for (int k = 0; k < b->n_images[i]; k++, im++) {
                const struct bm_scene *sc = &d->scenes[im];
                scene_text(sc, part, sizeof part);
                strcat(want, k ? " and " : " ");
                strcat(want, part);
                /* the drawn image shows each shape's colour at its centre */
                for (int s = 0; s < sc->n; s++) {
                    float rgb[3];
                    bm_color_rgb(sc->color[s], rgb);
                    for (int ch = 0; ch < 3; ch++)
                        CHECK(b->images[(((size_t)im * 3 + ch) * 16 + sc->cy[s]) * 16 + sc->cx[s]] == rgb[ch]);
                }
                if (sc->n == 2) { /* the relation holds geometrically */
                    if (sc->rel == BM_ABOVE) CHECK(sc->cy[0] < sc->cy[1]);
                    if (sc->rel == BM_BELOW) CHECK(sc->cy[0] > sc->cy[1]);
                    if (sc->rel == BM_LEFT_OF) CHECK(sc->cx[0] < sc->cx[1]);
                    if (sc->rel == BM_RIGHT_OF) CHECK(sc->cx[0] > sc->cx[1]);
                }
            }
            scene_text(&d->targets[i], part, sizeof part);
            strcat(want, " draw ");
            strcat(want, part);
            strcat(want, " <eos>");
            bm_vocab_decode(b->text + (size_t)i * b->seq, b->seq, got, sizeof got);
            CHECKF(!strcmp(got, want), "got '%s' want '%s'", got, want);
            /* target image pixel at its shape centre */
            float rgb[3];
            bm_color_rgb(d->targets[i].color[0], rgb);
            CHECK(b->target[(((size_t)i * 3) * 16 + d->targets[i].cy[0]) * 16 + d->targets[i].cx[0]] == rgb[0]);
            CHECK(b->timestep[i] >= 0 && b->timestep[i] < 1);
        }
        bm_data_batch_free(d);
    }
    /* heterogeneity: every image count 1..3 occurs */
    CHECK(seen_counts[1] && seen_counts[2] && seen_counts[3]);
}

TEST(bad_config_is_an_error)
{
    struct bm_data_cfg c = cfg();
    c.channels = 1;
    struct bm_data_batch *d;
    struct bm_err err;
    CHECK(bm_data_batch(&c, 0, 0, &d, &err) == BM_ERR);
    CHECK(d == NULL);
    CHECK_STR_CONTAINS(err.msg, "3 channels");
}

int main(void)
{
    RUN(deterministic_by_seed_step_microbatch);
    RUN(vocabulary_round_trip);
    RUN(caption_matches_drawn_shapes);
    RUN(bad_config_is_an_error);
    return test_summary();
}
