/* ckpt.c — checkpoint sets: rank files, the commit marker, resume's choice (see ckpt.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/ckpt.h"
#include "util/util.h"

#define MAGIC "BMCKPT03"
#define MAGIC_02 "BMCKPT02" /* before the shards: every instance's moments whole; still read */
#define MARKER "COMPLETE"
#define MARKER_HEAD "bigmac-checkpoint 2"

/* DIR/step-<N> (8 digits: the names sort by step). */
static void set_dir(char *out, size_t n, const char *dir, long step)
{
    snprintf(out, n, "%s/step-%08ld", dir, step);
}

/* The rank file's name in a set directory: rank-<R>.ckpt, or under ZeRO-1 with replica >= 0
 * (every replica keeps another shard) rank-<R>.dp-<d>.ckpt. */
static void rank_file(char *out, size_t n, const char *sdir, int rank, int replica)
{
    if (replica >= 0) snprintf(out, n, "%s/rank-%d.dp-%d.ckpt", sdir, rank, replica);
    else snprintf(out, n, "%s/rank-%d.ckpt", sdir, rank);
}

/* fsync a directory, so that a rename or unlink in it is on disk. */
static void sync_dir(const char *path)
{
    int dfd = open(path, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) fsync(dfd), close(dfd);
}

/* ------------------------------------------------------------------ metadata */

void bm_ckpt_meta_of(const struct bm_spec *s, const struct bm_table *t, int dp, long step, struct bm_ckpt_meta *m)
{
    memset(m, 0, sizeof *m);
    m->step = step;
    m->pp = t->pp, m->vpp = t->vpp, m->microbatches = t->microbatches * (dp > 1 ? dp : 1), m->files = t->pp;
    m->zero = t->zero, m->dp = dp > 1 ? dp : 1;
    if (t->zero && dp > 1) m->files = t->pp * dp; /* every replica keeps its own shard */
    m->train = s->train;
    m->train.steps = 0;
    m->data_seed = s->data.seed;
    m->samples_per_microbatch = s->data.samples_per_microbatch;
    m->max_images = s->data.max_images;
}

int bm_ckpt_meta_diff(const struct bm_ckpt_meta *a, const struct bm_ckpt_meta *b, char *out, size_t n)
{
    int k = 0;
    size_t at = 0;
    out[0] = 0;
#define DIFF(name, fmt, x, y)                                                                                \
    if ((x) != (y)) {                                                                                         \
        int w = snprintf(out + at, at < n ? n - at : 0, "%s" name " " fmt " (this run: " fmt ")", k ? "; " : "", \
                         x, y);                                                                                 \
        if (w > 0) at = at + (size_t)w < n ? at + (size_t)w : n;                                               \
        k++;                                                                                                  \
    }
    DIFF("microbatches per step", "%d", a->microbatches, b->microbatches)
    DIFF("train.lr", "%g", a->train.lr, b->train.lr)
    DIFF("train.weight_decay", "%g", a->train.weight_decay, b->train.weight_decay)
    DIFF("train.beta1", "%g", a->train.beta1, b->train.beta1)
    DIFF("train.beta2", "%g", a->train.beta2, b->train.beta2)
    DIFF("train.eps", "%g", a->train.eps, b->train.eps)
    DIFF("train.seed", "%" PRIu64, a->train.seed, b->train.seed)
    DIFF("data.seed", "%" PRIu64, a->data_seed, b->data_seed)
    DIFF("data.samples_per_microbatch", "%d", a->samples_per_microbatch, b->samples_per_microbatch)
    DIFF("data.max_images", "%d", a->max_images, b->max_images)
#undef DIFF
    return k;
}

/* Write text to path atomically: path.tmp, fsync, rename, fsync the directory. */
static int write_atomic(const char *path, const char *dir, const char *text, struct bm_err *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return bm_err_set(err, "%s: cannot open for writing: %s", tmp, strerror(errno));
    size_t len = strlen(text);
    int bad = fwrite(text, 1, len, f) != len;
    if (fflush(f) || fsync(fileno(f))) bad = 1;
    if (fclose(f)) bad = 1;
    if (bad) {
        unlink(tmp);
        return bm_err_set(err, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (rename(tmp, path)) return bm_err_set(err, "%s: rename failed: %s", path, strerror(errno));
    sync_dir(dir);
    return BM_OK;
}

int bm_ckpt_commit(const char *dir, const struct bm_ckpt_meta *m, struct bm_err *err)
{
    char sdir[4096], path[4200], text[2048];
    set_dir(sdir, sizeof sdir, dir, m->step);
    snprintf(path, sizeof path, "%s/" MARKER, sdir);
    snprintf(text, sizeof text,
             MARKER_HEAD "\nstep %ld\npp %d\nvpp %d\nmicrobatches %d\nfiles %d\n"
             "train.lr %.17g\ntrain.weight_decay %.17g\ntrain.beta1 %.17g\ntrain.beta2 %.17g\ntrain.eps %.17g\n"
             "train.seed %" PRIu64 "\ndata.seed %" PRIu64 "\ndata.samples_per_microbatch %d\ndata.max_images %d\n",
             m->step, m->pp, m->vpp, m->microbatches, m->files, m->train.lr, m->train.weight_decay, m->train.beta1,
             m->train.beta2, m->train.eps, m->train.seed, m->data_seed, m->samples_per_microbatch, m->max_images);
    if (m->zero) { /* written only under ZeRO-1, so a ZeRO-0 marker reads as before */
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, "zero %d\ndp %d\n", m->zero, m->dp);
    }
    if (write_atomic(path, sdir, text, err)) return BM_ERR;
    sync_dir(dir);
    return BM_OK;
}

/* Read a COMPLETE marker. */
static int read_marker(const char *path, struct bm_ckpt_meta *m, struct bm_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return bm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    char line[512];
    int seen = 0, head = 0;
    memset(m, 0, sizeof *m);
    m->step = -1, m->dp = 1;
    while (fgets(line, sizeof line, f)) {
        char key[64];
        int off = 0;
        if (!head) {
            head = !strcmp(line, MARKER_HEAD "\n");
            if (!head) break;
            continue;
        }
        if (sscanf(line, "%63s %n", key, &off) != 1) continue;
        const char *v = line + off;
        int ok = 1;
        if (!strcmp(key, "step")) ok = sscanf(v, "%ld", &m->step) == 1, seen |= 1;
        else if (!strcmp(key, "pp")) ok = sscanf(v, "%d", &m->pp) == 1, seen |= 2;
        else if (!strcmp(key, "vpp")) ok = sscanf(v, "%d", &m->vpp) == 1, seen |= 4;
        else if (!strcmp(key, "microbatches")) ok = sscanf(v, "%d", &m->microbatches) == 1, seen |= 8;
        else if (!strcmp(key, "files")) ok = sscanf(v, "%d", &m->files) == 1, seen |= 16;
        else if (!strcmp(key, "train.lr")) ok = sscanf(v, "%lf", &m->train.lr) == 1;
        else if (!strcmp(key, "train.weight_decay")) ok = sscanf(v, "%lf", &m->train.weight_decay) == 1;
        else if (!strcmp(key, "train.beta1")) ok = sscanf(v, "%lf", &m->train.beta1) == 1;
        else if (!strcmp(key, "train.beta2")) ok = sscanf(v, "%lf", &m->train.beta2) == 1;
        else if (!strcmp(key, "train.eps")) ok = sscanf(v, "%lf", &m->train.eps) == 1;
        else if (!strcmp(key, "train.seed")) ok = sscanf(v, "%" SCNu64, &m->train.seed) == 1;
        else if (!strcmp(key, "data.seed")) ok = sscanf(v, "%" SCNu64, &m->data_seed) == 1;
        else if (!strcmp(key, "data.samples_per_microbatch")) ok = sscanf(v, "%d", &m->samples_per_microbatch) == 1;
        else if (!strcmp(key, "data.max_images")) ok = sscanf(v, "%d", &m->max_images) == 1;
        else if (!strcmp(key, "zero")) ok = sscanf(v, "%d", &m->zero) == 1 && (m->zero == 0 || m->zero == 1);
        else if (!strcmp(key, "dp")) ok = sscanf(v, "%d", &m->dp) == 1 && m->dp >= 1;
        if (!ok) {
            fclose(f);
            return bm_err_set(err, "%s: bad value of %s", path, key);
        }
    }
    fclose(f);
    if (!head || seen != 31 || m->step < 0)
        return bm_err_set(err, "%s: not a bigmac checkpoint marker (or written by another version)", path);
    return BM_OK;
}

/* The steps of dir's set directories (step-<8 digits>), in *steps (bm_malloc'ed, caller frees),
 * newest first. -1 when dir cannot be read (errno set). */
static int list_sets(const char *dir, long **steps)
{
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s;
        char tail;
        if (strncmp(e->d_name, "step-", 5) || strlen(e->d_name) != 13 || sscanf(e->d_name + 5, "%ld%c", &s, &tail) != 1)
            continue;
        if (bm_grow(steps, &cap, n + 1, sizeof **steps)) break;
        (*steps)[n++] = s;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort, descending: a handful of sets */
        for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
            long tmp = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1], (*steps)[j - 1] = tmp;
        }
    return n;
}

int bm_ckpt_newest(const char *dir, int missing_ok, struct bm_ckpt_meta *m, int *found, struct bm_err *err)
{
    long *steps;
    *found = 0;
    int n = list_sets(dir, &steps);
    if (n < 0) {
        if (missing_ok && errno == ENOENT) return BM_OK;
        return bm_err_set(err, "%s: cannot read the checkpoint directory: %s", dir, strerror(errno));
    }
    int rc = BM_OK;
    for (int i = 0; i < n && !*found; i++) {
        char sdir[4096], path[4200];
        set_dir(sdir, sizeof sdir, dir, steps[i]);
        snprintf(path, sizeof path, "%s/" MARKER, sdir);
        if (access(path, F_OK)) continue; /* a set that was never committed: a crash while it was written */
        if ((rc = read_marker(path, m, err))) break;
        if (m->step != steps[i]) {
            rc = bm_err_set(err, "%s: says step %ld, its directory step %ld", path, m->step, steps[i]);
            break;
        }
        *found = 1;
    }
    bm_free(steps);
    if (rc == BM_OK && !*found && !missing_ok) {
        char legacy[4200];
        snprintf(legacy, sizeof legacy, "%s/rank-0.ckpt", dir);
        if (!access(legacy, F_OK))
            return bm_err_set(err, "%s: no complete checkpoint set (step-<N>/" MARKER "); %s is of an older "
                                   "format, written one file per rank without a commit, which this version does not "
                                   "resume", dir, legacy);
        return bm_err_set(err, "%s: no complete checkpoint set (a step-<N> directory with a " MARKER " marker)%s",
                          dir, n ? "; the sets there were never completed" : "");
    }
    return rc;
}

void bm_ckpt_prune(const char *dir, int rank, int replica, long keep)
{
    long *steps;
    int n = list_sets(dir, &steps);
    for (int i = 0; i < n; i++) {
        if (steps[i] == keep) continue;
        char sdir[4096], path[4200];
        set_dir(sdir, sizeof sdir, dir, steps[i]);
        if (rank == 0) { /* the marker first: a set is never complete with files missing */
            snprintf(path, sizeof path, "%s/" MARKER, sdir);
            if (!unlink(path)) sync_dir(sdir);
            snprintf(path, sizeof path, "%s/" MARKER ".tmp", sdir);
            unlink(path);
        }
        rank_file(path, sizeof path, sdir, rank, replica);
        unlink(path);
        strcat(path, ".tmp");
        unlink(path);
        rmdir(sdir); /* the last rank to leave it removes it; the others fail quietly */
    }
    bm_free(steps);
    sync_dir(dir);
}

int bm_ckpt_check_dir(const char *dir, int rank, struct bm_err *err)
{
    struct stat st;
    if (mkdir(dir, 0777) && errno != EEXIST)
        return bm_err_set(err, "--checkpoint %s: cannot create the directory: %s", dir, strerror(errno));
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return bm_err_set(err, "--checkpoint %s: not a directory", dir);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.probe-rank-%d", dir, rank);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) return bm_err_set(err, "--checkpoint %s: cannot write there: %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return BM_OK;
}

/* ------------------------------------------------------------------ rank files */

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

int bm_ckpt_save(struct bm_exec *x, const struct bm_table *t, int rank, int replica, const char *dir, long steps_done,
                 void (*midway)(void *ctx), void *ctx, struct bm_err *err)
{
    char sdir[4096], path[4200], tmp[4300];
    if (mkdir(dir, 0777) && errno != EEXIST) return bm_err_set(err, "%s: cannot create directory: %s", dir, strerror(errno));
    set_dir(sdir, sizeof sdir, dir, steps_done);
    if (mkdir(sdir, 0777) && errno != EEXIST)
        return bm_err_set(err, "%s: cannot create directory: %s", sdir, strerror(errno));
    rank_file(path, sizeof path, sdir, rank, replica);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct hw w = {fopen(tmp, "wb"), 0xcbf29ce484222325ULL, 0};
    if (!w.f) return bm_err_set(err, "%s: cannot open for writing: %s", tmp, strerror(errno));
    int n_inst = bm_exec_n_inst(x);
    int32_t hdr[4] = {rank, t->pp, t->vpp, n_inst};
    int64_t sd = steps_done;
    hw_put(&w, MAGIC, 8);
    hw_put(&w, hdr, sizeof hdr);
    hw_put(&w, &sd, sizeof sd);
    for (int i = 0; i < n_inst; i++) {
        int module, chunk, rep;
        size_t n, n2, lo, hi;
        bm_exec_inst(x, i, &module, &chunk, &rep);
        bm_exec_inst_shard(x, i, &lo, &hi);
        float *p = bm_exec_inst_params(x, i, &n), *mv = bm_exec_inst_moments(x, i, &n2);
        int32_t id[2] = {module, chunk};
        uint64_t nn[3] = {n, lo, hi};
        hw_put(&w, id, sizeof id);
        hw_put(&w, nn, sizeof nn);
        hw_put(&w, p, n * sizeof(float));
        hw_put(&w, mv, 2 * n2 * sizeof(float));
        if (midway && i == n_inst / 2) fflush(w.f), midway(ctx);
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
    sync_dir(sdir);
    sync_dir(dir);
    return BM_OK;
}

/* Read k floats of the file into out[0 .. k) keeping only those of [want_lo, want_hi) shifted
 * to want_lo = out[0] (the file holds [lo, lo + k)); the rest is read and dropped. */
static int read_part(struct hw *r, size_t lo, size_t k, float *out, size_t want_lo, size_t want_hi)
{
    float buf[1024];
    for (size_t at = 0; at < k;) {
        size_t step = k - at < 1024 ? k - at : 1024;
        if (hr_get(r, buf, step * sizeof(float))) return -1;
        for (size_t j = 0; j < step; j++) {
            size_t e = lo + at + j;
            if (e >= want_lo && e < want_hi) out[e - want_lo] = buf[j];
        }
        at += step;
    }
    return 0;
}

int bm_ckpt_load(struct bm_exec *x, const struct bm_table *t, int rank, int replica, const char *dir, long step,
                 struct bm_err *err)
{
    char sdir[4096], path[4200], magic[8];
    set_dir(sdir, sizeof sdir, dir, step);
    rank_file(path, sizeof path, sdir, rank, replica);
    struct hw r = {fopen(path, "rb"), 0xcbf29ce484222325ULL, 0};
    if (!r.f) return bm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    int32_t hdr[4];
    int64_t sd;
    if (hr_get(&r, magic, 8) || (memcmp(magic, MAGIC, 8) && memcmp(magic, MAGIC_02, 8)) ||
        hr_get(&r, hdr, sizeof hdr) || hr_get(&r, &sd, sizeof sd))
        goto bad;
    int v2 = !memcmp(magic, MAGIC_02, 8);
    if (hdr[0] != rank || hdr[1] != t->pp || hdr[2] != t->vpp || hdr[3] != bm_exec_n_inst(x)) {
        fclose(r.f);
        return bm_err_set(err, "%s: written by rank %d of pp %d vpp %d (%d modules); this is rank %d of pp %d vpp %d",
                          path, hdr[0], hdr[1], hdr[2], hdr[3], rank, t->pp, t->vpp);
    }
    if (sd != step) {
        fclose(r.f);
        return bm_err_set(err, "%s: holds step %lld, its set step %ld", path, (long long)sd, step);
    }
    for (int i = 0; i < bm_exec_n_inst(x); i++) {
        int module, chunk, rep;
        size_t n, n2, lo, hi;
        bm_exec_inst(x, i, &module, &chunk, &rep);
        bm_exec_inst_shard(x, i, &lo, &hi);
        float *p = bm_exec_inst_params(x, i, &n), *mv = bm_exec_inst_moments(x, i, &n2);
        int32_t id[2];
        uint64_t nn[3];
        if (hr_get(&r, id, sizeof id) || hr_get(&r, nn, (v2 ? 1 : 3) * sizeof(uint64_t))) goto bad;
        if (v2) nn[1] = 0, nn[2] = nn[0]; /* every moment whole */
        if (id[0] != module || id[1] != chunk || nn[0] != n || nn[1] > nn[2] || nn[2] > n) {
            fclose(r.f);
            return bm_err_set(err, "%s: instance %d is module %d chunk %d of %llu floats; expected module %d chunk %d of %zu",
                              path, i, id[0], id[1], (unsigned long long)nn[0], module, chunk, n);
        }
        /* the moments this rank keeps must be in the file's part (a whole instance holds every
         * shard; a frozen module keeps none) */
        if (hi > lo && (lo < nn[1] || hi > nn[2])) {
            fclose(r.f);
            return bm_err_set(err, "%s: instance %d (module %d chunk %d) holds the optimizer state of elements "
                                   "[%llu, %llu); this rank keeps [%zu, %zu)", path, i, module, chunk,
                              (unsigned long long)nn[1], (unsigned long long)nn[2], lo, hi);
        }
        size_t k = (size_t)(nn[2] - nn[1]);
        if (hr_get(&r, p, n * sizeof(float)) || read_part(&r, nn[1], k, mv, lo, hi) ||
            read_part(&r, nn[1], k, mv ? mv + n2 : NULL, lo, hi))
            goto bad;
    }
    uint64_t want = r.h, got;
    if (fread(&got, 1, sizeof got, r.f) != sizeof got || got != want) goto bad;
    fclose(r.f);
    return BM_OK;
bad:
    fclose(r.f);
    return bm_err_set(err, "%s: truncated or corrupt checkpoint", path);
}
