/* reference.c — single-process training of a spec's model (see train.h). */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "nn/nn.h"
#include "train/train.h"
#include "util/util.h"

struct bm_ref {
    const struct bm_spec *s;
    struct bm_data_cfg data;
    int n;                                   /* modules (spec order) */
    const struct bm_module_ops **ops;        /* [n] */
    void **self;                             /* [n] */
    float **opt;                             /* [n] AdamW state: m then v, 2 * params floats */
    int bb;                                  /* the backbone's module index */
    int n_enc, *enc;                         /* [n_enc] encoders' module indices, spec order */
    int n_gen, *gen;                         /* [n_gen] generators' module indices, spec order */
    void **ectx;                             /* [n_enc] a microbatch's encoder contexts */
};

int bm_train_data_cfg(const struct bm_spec *s, struct bm_data_cfg *cfg, struct bm_err *err)
{
    struct bm_geom g;
    if (bm_geom_from_spec(s, &g, err)) return BM_ERR;
    if (!g.image) return bm_err_set(err, "the built-in dataset needs an image encoder (arch image, patch)");
    *cfg = (struct bm_data_cfg){.seed = s->data.seed,
                                .samples = s->data.samples_per_microbatch > 0 ? s->data.samples_per_microbatch : 1,
                                .max_images = g.max_images, .image = g.image, .channels = g.channels,
                                .seq = g.seq};
    return BM_OK;
}

uint64_t bm_train_module_seed(const struct bm_spec *s, int module)
{
    return s->train.seed * 0x100000001B3ULL + (uint64_t)(module + 1) * 0x9E3779B97F4A7C15ULL;
}

/* ---------------------------------------------------------------- the public dataset handle */

struct bm_dataset {
    struct bm_data_cfg cfg;
};

int bm_dataset_new(const struct bm_spec *s, struct bm_dataset **out, struct bm_err *err)
{
    *out = NULL;
    struct bm_dataset *d = bm_malloc(sizeof *d);
    if (!d) return bm_err_set(err, "out of memory");
    if (bm_train_data_cfg(s, &d->cfg, err)) {
        bm_free(d);
        return BM_ERR;
    }
    *out = d;
    return BM_OK;
}

void bm_dataset_free(struct bm_dataset *d) { bm_free(d); }

int bm_dataset_batch(const struct bm_dataset *d, long step, int mb, struct bm_batch **out, struct bm_err *err)
{
    *out = NULL;
    if (step < 0 || mb < 0) return bm_err_set(err, "dataset: step %ld, microbatch %d: both must be >= 0", step, mb);
    struct bm_data_batch *b;
    if (bm_data_batch(&d->cfg, step, mb, &b, err)) return BM_ERR;
    *out = &b->b; /* the first member: bm_batch_free finds the whole draw from it */
    return BM_OK;
}

void bm_batch_free(struct bm_batch *b)
{
    bm_data_batch_free((struct bm_data_batch *)(void *)b);
}

void bm_ref_free(struct bm_ref *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        if (r->self && r->self[i]) r->ops[i]->free(r->self[i]);
        if (r->opt) bm_free(r->opt[i]);
    }
    bm_free(r->ops), bm_free(r->self), bm_free(r->opt), bm_free(r->enc), bm_free(r->gen), bm_free(r->ectx);
    bm_free(r);
}

int bm_ref_new(const struct bm_spec *s, struct bm_ref **out, struct bm_err *err)
{
    *out = NULL;
    struct bm_ref *r = bm_calloc(1, sizeof *r);
    if (!r) return bm_err_set(err, "out of memory");
    r->s = s, r->n = s->n_modules, r->bb = -1;
    r->ops = bm_calloc((size_t)r->n, sizeof *r->ops);
    r->self = bm_calloc((size_t)r->n, sizeof *r->self);
    r->opt = bm_calloc((size_t)r->n, sizeof *r->opt);
    r->enc = bm_calloc((size_t)r->n + 1, sizeof *r->enc);
    r->gen = bm_calloc((size_t)r->n + 1, sizeof *r->gen);
    r->ectx = bm_calloc((size_t)r->n + 1, sizeof *r->ectx);
    if (!r->ops || !r->self || !r->opt || !r->enc || !r->gen || !r->ectx) {
        bm_err_set(err, "out of memory");
        goto fail;
    }
    for (int i = 0; i < r->n; i++) {
        const struct bm_module *m = &s->modules[i];
        if (m->role == BM_ROLE_ENCODER) r->enc[r->n_enc++] = i;
        else if (m->role == BM_ROLE_GENERATOR) r->gen[r->n_gen++] = i;
        else r->bb = i; /* the spec loader admits exactly one backbone */
        if (!m->impl) {
            bm_err_set(err, "module \"%s\" has no \"impl\": nothing to train\n"
                            "hint: add \"impl\": \"vit\" / \"gpt\" / \"dit\" and an \"arch\" to it", m->name);
            goto fail;
        }
        r->ops[i] = bm_module_find(m->impl);
        if (!r->ops[i]) {
            bm_err_set(err, "module \"%s\": unknown impl \"%s\"\nhint: built-in: vit, gpt, dit",
                       m->name, m->impl);
            goto fail;
        }
        if (r->ops[i]->role != m->role) {
            bm_err_set(err, "module \"%s\": impl \"%s\" is a %s, the module a %s", m->name, m->impl,
                       bm_role_name(r->ops[i]->role), bm_role_name(m->role));
            goto fail;
        }
        int L = m->role == BM_ROLE_BACKBONE ? m->arch.layers : 0;
        if (r->ops[i]->create(m, s, 0, L, bm_train_module_seed(s, i), &r->self[i], err)) goto fail;
        size_t np;
        r->ops[i]->params(r->self[i], &np);
        r->opt[i] = bm_calloc(2 * np + 1, sizeof(float));
        if (!r->opt[i]) {
            bm_err_set(err, "out of memory for optimizer state of \"%s\"", m->name);
            goto fail;
        }
    }
    if (r->bb < 0 || !r->n_enc) {
        bm_err_set(err, "the reference trainer needs an encoder and a backbone");
        goto fail;
    }
    if (bm_train_data_cfg(s, &r->data, err)) goto fail;
    *out = r;
    return BM_OK;
fail:
    bm_ref_free(r);
    return BM_ERR;
}

float *bm_ref_params(struct bm_ref *r, int module, size_t *n)
{
    if (module < 0 || module >= r->n) return NULL;
    return r->ops[module]->params(r->self[module], n);
}

float *bm_ref_grads(struct bm_ref *r, int module, size_t *n)
{
    if (module < 0 || module >= r->n) return NULL;
    return r->ops[module]->grads(r->self[module], n);
}

/* Live context bytes per role, and their peaks. */
struct live {
    size_t now[BM_N_ROLES], peak[BM_N_ROLES];
};

static void live_add(struct live *l, int role, size_t bytes)
{
    l->now[role] += bytes;
    if (l->now[role] > l->peak[role]) l->peak[role] = l->now[role];
}

/* Forward of every encoder into its slice of vis (chunk 0's input: the encoders' outputs one
 * after another in spec module order), contexts into r->ectx. */
static int encoders_forward(struct bm_ref *r, const struct bm_batch *mb, float *vis, size_t n_vis,
                            struct live *live, struct bm_err *err)
{
    size_t at = 0;
    for (int k = 0; k < r->n_enc; k++) {
        int i = r->enc[k];
        size_t n = r->ops[i]->out_count(r->self[i], mb);
        float l0;
        if (at + n > n_vis) break;
        if (r->ops[i]->forward(r->self[i], mb, NULL, vis + at, &l0, &r->ectx[k], err)) return BM_ERR;
        live_add(live, BM_ROLE_ENCODER, r->ops[i]->ctx_bytes(r->ectx[k]));
        at += n;
    }
    if (at != n_vis) {
        size_t total = 0;
        for (int k = 0; k < r->n_enc; k++) total += r->ops[r->enc[k]]->out_count(r->self[r->enc[k]], mb);
        return bm_err_set(err, "backbone \"%s\" takes %zu input floats, its %d encoder(s) make %zu\n"
                               "hint: every encoder emits (image/patch)^2 tokens per image of the backbone "
                               "width", r->s->modules[r->bb].name, n_vis, r->n_enc, total);
    }
    return BM_OK;
}

/* Backward of every encoder from its slice of dvis (consumes r->ectx). */
static int encoders_backward(struct bm_ref *r, const struct bm_batch *mb, const float *dvis, float scale,
                             struct live *live, struct bm_err *err)
{
    size_t at = 0;
    for (int k = 0; k < r->n_enc; k++) {
        int i = r->enc[k];
        void *c = r->ectx[k];
        r->ectx[k] = NULL;
        live->now[BM_ROLE_ENCODER] -= r->ops[i]->ctx_bytes(c);
        if (r->ops[i]->backward(r->self[i], c, mb, dvis + at, scale, NULL, err)) return BM_ERR;
        at += r->ops[i]->out_count(r->self[i], mb);
    }
    return BM_OK;
}

/* The first non-finite float of p[0..n-1]: its index, or -1 when all are finite. */
static long first_nonfinite(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return (long)i;
    return -1;
}

/* A module's forward or backward made a non-finite number: the message names the step (1-based,
 * as the progress lines count), the one rank of this trainer, the module, the pass and the
 * microbatch, as the pipelined executor's do. */
static int not_finite(const struct bm_ref *r, long step, int module, const char *pass, int mb, const char *what,
                      struct bm_err *err)
{
    char where[48] = "";
    if (mb >= 0) snprintf(where, sizeof where, " mb %d", mb);
    return bm_err_set(err, "step %ld: rank 0 (reference): module \"%s\" %s%s: %s is not finite (NaN or Inf)"
                           "\nhint: a smaller train.lr, or check the data and the module",
                      step + 1, r->s->modules[module].name, pass, where, what);
}

/* Every output of the microbatch's module ops finite, else the message above. */
static int check_finite(const struct bm_ref *r, long step, int module, const char *pass, int mb, float loss,
                        const float *out, size_t n, const char *what, struct bm_err *err)
{
    if (!isfinite(loss)) return not_finite(r, step, module, pass, mb, "loss", err);
    if (out && first_nonfinite(out, n) >= 0) return not_finite(r, step, module, pass, mb, what, err);
    return BM_OK;
}

int bm_ref_step(struct bm_ref *r, long step, struct bm_step_stats *st, struct bm_err *err)
{
    const struct bm_spec *s = r->s;
    int M = s->microbatches > 0 ? s->microbatches : 1, rc = BM_OK;
    double t0 = bm_now();
    memset(st, 0, sizeof *st);
    struct live live = {{0}, {0}};
    for (int i = 0; i < r->n; i++) {
        size_t np;
        float *g = r->ops[i]->grads(r->self[i], &np);
        memset(g, 0, np * sizeof(float));
    }
    const struct bm_module_ops *B = r->ops[r->bb];
    void *b = r->self[r->bb];
    float scale = 1.0f / (float)M;
    for (int m = 0; m < M && rc == BM_OK; m++) {
        struct bm_data_batch *d = NULL;
        float *vis = NULL, *hid = NULL, *dhid = NULL, *dgen = NULL, *dvis = NULL, lm = 0, gl = 0;
        void *cb = NULL, *cg = NULL;
        int g2b = 0, gk = -1; /* any generator's gradient reaches the backbone; the one running */
        if ((rc = bm_data_batch(&r->data, step, m, &d, err))) break;
        const struct bm_batch *mb = &d->b;
        size_t n_vis = B->in_count(b, mb), n_hid = B->out_count(b, mb);
        vis = bm_malloc(n_vis * sizeof(float) + 1);
        hid = bm_malloc(n_hid * sizeof(float) + 1);
        dvis = bm_malloc(n_vis * sizeof(float) + 1);
        dhid = bm_calloc(n_hid + 1, sizeof(float));
        dgen = bm_malloc(n_hid * sizeof(float) + 1);
        if (!vis || !hid || !dvis || !dhid || !dgen) {
            rc = bm_err_set(err, "out of memory for microbatch tensors");
            goto next;
        }
        if ((rc = encoders_forward(r, mb, vis, n_vis, &live, err))) goto next;
        for (size_t k = 0, at = 0; k < (size_t)r->n_enc; k++) { /* each encoder's slice of vis */
            size_t n = r->ops[r->enc[k]]->out_count(r->self[r->enc[k]], mb);
            if ((rc = check_finite(r, step, r->enc[k], "forward", m, 0, vis + at, n, "output", err))) goto next;
            at += n;
        }
        if ((rc = B->forward(b, mb, vis, hid, &lm, &cb, err))) goto next;
        if ((rc = check_finite(r, step, r->bb, "forward", m, lm, hid, n_hid, "output", err))) goto next;
        live_add(&live, BM_ROLE_BACKBONE, B->ctx_bytes(cb));
        /* every generator in spec order; the backbone's output gradient is the sum of theirs
         * (the executor sums its per-generator gradient tensors in the same order) */
        for (int k = 0; k < r->n_gen; k++) {
            const struct bm_module_ops *G = r->ops[r->gen[k]];
            void *g = r->self[r->gen[k]];
            int to_bb = s->modules[r->gen[k]].grad_to_backbone;
            float l = 0;
            gk = k;
            if ((rc = G->forward(g, mb, hid, NULL, &l, &cg, err))) goto next;
            if ((rc = check_finite(r, step, r->gen[k], "forward", m, l, NULL, 0, "output", err))) goto next;
            live_add(&live, BM_ROLE_GENERATOR, G->ctx_bytes(cg));
            live.now[BM_ROLE_GENERATOR] -= G->ctx_bytes(cg);
            rc = G->backward(g, cg, mb, NULL, scale, to_bb ? dgen : NULL, err);
            cg = NULL;
            if (rc) goto next;
            if (to_bb && (rc = check_finite(r, step, r->gen[k], "backward", m, 0, dgen, n_hid, "gradient", err)))
                goto next;
            if (to_bb)
                for (size_t j = 0; j < n_hid; j++) dhid[j] += dgen[j];
            g2b |= to_bb;
            gl += l;
            st->flops += G->flops(g, mb);
        }
        live.now[BM_ROLE_BACKBONE] -= B->ctx_bytes(cb);
        rc = B->backward(b, cb, mb, g2b ? dhid : NULL, scale, dvis, err);
        cb = NULL;
        if (rc) goto next;
        if ((rc = check_finite(r, step, r->bb, "backward", m, 0, dvis, n_vis, "gradient", err))) goto next;
        if ((rc = encoders_backward(r, mb, dvis, scale, &live, err))) goto next;
        st->lm += lm / M;
        st->gen += gl / M;
        for (int k = 0; k < r->n_enc; k++) st->flops += r->ops[r->enc[k]]->flops(r->self[r->enc[k]], mb);
        st->flops += B->flops(b, mb);
    next:
        for (int k = 0; k < r->n_enc; k++)
            if (r->ectx[k]) {
                r->ops[r->enc[k]]->ctx_free(r->ectx[k]);
                r->ectx[k] = NULL;
            }
        if (cb) B->ctx_free(cb);
        if (cg) r->ops[r->gen[gk]]->ctx_free(cg);
        bm_free(vis), bm_free(hid), bm_free(dvis), bm_free(dhid), bm_free(dgen);
        bm_data_batch_free(d);
    }
    if (rc) return rc;
    const struct bm_train *t = &s->train;
    for (int i = 0; i < r->n; i++) { /* the encoders' gradients stay inside their modules */
        size_t np;
        const float *gr = r->ops[i]->grads(r->self[i], &np);
        if (first_nonfinite(gr, np) >= 0)
            return not_finite(r, step, i, "backward", -1, "parameter gradient (summed over the microbatches)", err);
    }
    for (int i = 0; i < r->n; i++) {
        if (s->modules[i].frozen) continue; /* "trainable": false: its parameters stay */
        size_t np;
        float *p = r->ops[i]->params(r->self[i], &np), *gr = r->ops[i]->grads(r->self[i], &np);
        bm_adamw_update(p, gr, r->opt[i], r->opt[i] + np, np, (float)t->lr, (float)t->beta1,
                        (float)t->beta2, (float)t->eps, (float)t->weight_decay, (int)step + 1);
    }
    st->loss = st->lm + st->gen;
    if (!isfinite(st->loss))
        return bm_err_set(err, "step %ld: rank 0 (reference): the loss summed over the microbatches is not finite",
                          step + 1);
    memcpy(st->peak_act, live.peak, sizeof live.peak);
    st->ms = (bm_now() - t0) * 1e3;
    return BM_OK;
}

/* Its parameters in spec module order, raw floats, to path. */
static int dump_params(struct bm_ref *r, const char *path, struct bm_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f) return bm_err_set(err, "%s: cannot open for writing", path);
    for (int i = 0; i < r->n; i++) {
        size_t n;
        float *p = bm_ref_params(r, i, &n);
        fwrite(p, sizeof(float), n, f);
    }
    if (fclose(f)) return bm_err_set(err, "%s: write failed", path);
    return BM_OK;
}

int bm_ref_train(const struct bm_spec *s, const struct bm_train_opts *o, struct bm_err *err)
{
    int steps = o->steps ? o->steps : s->train.steps;
    /* progress lines: the parameter counts, then each step with its GFLOP/s; under --dump-params
     * (the runs compared with the pipelined ones) the short step lines only, always */
    FILE *progress = o->quiet || o->dump_params ? NULL : stdout, *log = NULL;
    if (o->log_path && !(log = fopen(o->log_path, "w"))) return bm_err_set(err, "%s: cannot open for writing", o->log_path);
    struct bm_ref *r;
    if (bm_ref_new(s, &r, err)) {
        if (log) fclose(log);
        return BM_ERR;
    }
    if (progress) {
        size_t total = 0, np;
        for (int i = 0; i < r->n; i++) {
            r->ops[i]->params(r->self[i], &np);
            fprintf(progress, "%s%s %s %.2fM params", i ? ", " : "", bm_role_name(s->modules[i].role),
                    s->modules[i].name, np / 1e6);
            total += np;
        }
        fprintf(progress, " (%.2fM total); %d microbatches/step, reference (single process)\n",
                total / 1e6, s->microbatches > 0 ? s->microbatches : 1);
    }
    int rc = BM_OK;
    for (long k = 0; k < steps; k++) {
        struct bm_step_stats st;
        if ((rc = bm_ref_step(r, k, &st, err))) break;
        if (o->loss_out) o->loss_out[k] = st.loss;
        if (o->ms_out) o->ms_out[k] = st.ms;
        if (progress) {
            fprintf(progress, "step %4ld/%d  loss %.4f  (lm %.4f  gen %.4f)  %7.1f ms  %.2f GFLOP/s\n",
                    k + 1, steps, st.loss, st.lm, st.gen, st.ms, st.flops / (st.ms * 1e6));
            fflush(progress);
        } else if (o->dump_params) {
            printf("step %4ld/%d  loss %.4f  (lm %.4f  gen %.4f)  %7.1f ms\n", k + 1, steps, st.loss, st.lm, st.gen,
                   st.ms);
        }
        if (log) {
            fprintf(log, "{\"step\": %ld, \"loss\": %.6f, \"lm\": %.6f, \"gen\": %.6f, \"ms\": %.3f, "
                         "\"ranks\": [{\"rank\": 0, \"peak_act_bytes\": {\"encoder\": %zu, "
                         "\"backbone\": %zu, \"generator\": %zu}}]}\n",
                    k + 1, st.loss, st.lm, st.gen, st.ms, st.peak_act[BM_ROLE_ENCODER],
                    st.peak_act[BM_ROLE_BACKBONE], st.peak_act[BM_ROLE_GENERATOR]);
            fflush(log);
        }
    }
    if (rc == BM_OK && o->dump_params) rc = dump_params(r, o->dump_params, err);
    bm_ref_free(r);
    if (log) fclose(log);
    return rc;
}
