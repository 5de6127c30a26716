/* ckpt.c — per-rank checkpoints (see ckpt.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/ckpt.h"
#include "util/util.h"

#define MAGIC "BMCKPT01"

struct hw {
    FILE *f;
    uint64_t h;
    int bad;
};

static void hw_put(struct hw *w, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) w->h = (w->h ^ b[i]) * 0x100000001B3ULL;
    if (n && fwrite(p, 1, n, w->f) != n) w->bad = 1;
}

static int hr_get(struct hw *w, void *p, size_t n)
{
    if (n && fread(p, 1, n, w->f) != n) return -1;
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) w->h = (w->h ^ b[i]) * 0x100000001B3ULL;
    return 0;
}

int bm_ckpt_save(struct bm_exec *x, const struct bm_table *t, int rank, const char *dir, long steps_done,
                 struct bm_err *err)
{
    char path[4096], tmp[4200];
    if (mkdir(dir, 0777) && errno != EEXIST) return bm_err_set(err, "%s: cannot create directory: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/rank-%d.ckpt", dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct hw w = {fopen(tmp, "wb"), 0xcbf29ce484222325ULL, 0};
    if (!w.f) return bm_err_set(err, "%s: cannot open for writing: %s", tmp, strerror(errno));
    int32_t hdr[4] = {rank, t->pp, t->vpp, bm_exec_n_inst(x)};
    int64_t sd = steps_done;
    hw_put(&w, MAGIC, 8);
    hw_put(&w, hdr, sizeof hdr);
    hw_put(&w, &sd, sizeof sd);
    for (int i = 0; i < bm_exec_n_inst(x); i++) {
        int module, chunk, rep;
        size_t n, n2;
        bm_exec_inst(x, i, &module, &chunk, &rep);
        float *p = bm_exec_inst_params(x, i, &n), *mv = bm_exec_inst_moments(x, i, &n2);
        int32_t id[2] = {module, chunk};
        uint64_t nn = n;
        hw_put(&w, id, sizeof id);
        hw_put(&w, &nn, sizeof nn);
        hw_put(&w, p, n * sizeof(float));
        hw_put(&w, mv, 2 * n * sizeof(float));
    }
    uint64_t h = w.h;
    hw_put(&w, &h, sizeof h);
    if (fflush(w.f) || fsync(fileno(w.f))) w.bad = 1;
    if (fclose(w.f)) w.bad = 1;
    if (w.bad) {
        unlink(tmp);
        return bm_err_set(err, "%s: write failed", tmp);
    }
    if (rename(tmp, path)) return bm_err_set(err, "%s: rename failed: %s", path, strerror(errno));
    int dfd = open(dir, O_RDONLY);
    if (dfd >= 0) fsync(dfd), close(dfd);
    return BM_OK;
}

int bm_ckpt_load(struct bm_exec *x, const struct bm_table *t, int rank, const char *dir, long *steps_done,
                 struct bm_err *err)
{
    char path[4096], magic[8];
    snprintf(path, sizeof path, "%s/rank-%d.ckpt", dir, rank);
    struct hw r = {fopen(path, "rb"), 0xcbf29ce484222325ULL, 0};
    if (!r.f) return bm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    int32_t hdr[4];
    int64_t sd;
    if (hr_get(&r, magic, 8) || memcmp(magic, MAGIC, 8) || hr_get(&r, hdr, sizeof hdr) || hr_get(&r, &sd, sizeof sd))
        goto bad;
    if (hdr[0] != rank || hdr[1] != t->pp || hdr[2] != t->vpp || hdr[3] != bm_exec_n_inst(x)) {
        fclose(r.f);
        return bm_err_set(err, "%s: written by rank %d of pp %d vpp %d (%d modules); this is rank %d of pp %d vpp %d",
                          path, hdr[0], hdr[1], hdr[2], hdr[3], rank, t->pp, t->vpp);
    }
    for (int i = 0; i < bm_exec_n_inst(x); i++) {
        int module, chunk, rep;
        size_t n, n2;
        bm_exec_inst(x, i, &module, &chunk, &rep);
        float *p = bm_exec_inst_params(x, i, &n), *mv = bm_exec_inst_moments(x, i, &n2);
        int32_t id[2];
        uint64_t nn;
        if (hr_get(&r, id, sizeof id) || hr_get(&r, &nn, sizeof nn)) goto bad;
        if (id[0] != module || id[1] != chunk || nn != n) {
            fclose(r.f);
            return bm_err_set(err, "%s: instance %d is module %d chunk %d of %llu floats; expected module %d chunk %d of %zu",
                              path, i, id[0], id[1], (unsigned long long)nn, module, chunk, n);
        }
        if (hr_get(&r, p, n * sizeof(float)) || hr_get(&r, mv, 2 * n * sizeof(float))) goto bad;
    }
    uint64_t want = r.h, got;
    if (fread(&got, 1, sizeof got, r.f) != sizeof got || got != want) goto bad;
    fclose(r.f);
    *steps_done = sd;
    return BM_OK;
bad:
    fclose(r.f);
    return bm_err_set(err, "%s: truncated or corrupt checkpoint", path);
}
