/* misc.c — errors, enum names, file reading, clock. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/util.h"

const char *bm_version(void) { return BM_VERSION; }

int bm_err_set(struct bm_err *err, const char *fmt, ...)
{
    if (!err) return BM_ERR;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return BM_ERR;
}

static const char *const role_names[] = {"encoder", "backbone", "generator"};
static const char *const pass_names[] = {"F", "B", "W"};
static const char *const backbone_names[] = {"gpipe", "1f1b", "interleaved", "zb-h1",
                                             "zb-interleaved", "zb-v", "dualpipe-v"};
static const char *const policy_names[] = {"bigmac", "optimus", "unified",
                                           "unified-balanced", "ideal", "none"};

const char *bm_role_name(enum bm_role r) { return (unsigned)r < 3 ? role_names[r] : "?"; }
const char *bm_pass_name(enum bm_pass p) { return (unsigned)p < 3 ? pass_names[p] : "?"; }
const char *bm_backbone_name(enum bm_backbone b)
{
    return (unsigned)b < BM_N_BACKBONES ? backbone_names[b] : "?";
}
const char *bm_policy_name(enum bm_policy p)
{
    return (unsigned)p < BM_N_POLICIES ? policy_names[p] : "?";
}

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

int bm_role_parse(const char *s, enum bm_role *out)
{
    int i = lookup(s, role_names, 3);
    if (i < 0) return BM_ERR;
    *out = (enum bm_role)i;
    return BM_OK;
}

int bm_backbone_parse(const char *s, enum bm_backbone *out)
{
    int i = lookup(s, backbone_names, BM_N_BACKBONES);
    if (i < 0) return BM_ERR;
    *out = (enum bm_backbone)i;
    return BM_OK;
}

int bm_policy_parse(const char *s, enum bm_policy *out)
{
    int i = lookup(s, policy_names, BM_N_POLICIES);
    if (i < 0) return BM_ERR;
    *out = (enum bm_policy)i;
    return BM_OK;
}

char *bm_read_file(const char *path, size_t *len, struct bm_err *err)
{
    return bm_read_file_max(path, (size_t)-1 / 4, len, err);
}

char *bm_read_file_max(const char *path, size_t max, size_t *len, struct bm_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        bm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
        /* a regular file: refuse one over the limit before reading a byte, and read the rest
         * into one buffer of its size (doubling would hold up to 1.5 times the file) */
        if ((unsigned long long)st.st_size > (unsigned long long)max) {
            bm_err_set(err, "%s: the file is %lld bytes (%lld MiB); the limit here is %zu MiB", path,
                       (long long)st.st_size, (long long)(st.st_size >> 20), max >> 20);
            fclose(f);
            return NULL;
        }
        cap = (size_t)st.st_size + 2;
    }
    char *buf = bm_malloc(cap);
    if (!buf) goto oom;
    for (;;) {
        if (n + 1 >= cap) {
            /* grow by doubling, but never past max + 2 bytes: enough to see that the file is
             * longer than max, so an endless input costs max bytes, not twice that */
            size_t c2 = cap * 2;
            if (max < (size_t)-1 / 4 && c2 > max + 2) c2 = max + 2;
            char *b2 = bm_realloc(buf, c2);
            if (!b2) goto oom;
            buf = b2;
            cap = c2;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0) break;
        if (n > max) { /* a device or pipe that never ends, or just too big */
            bm_err_set(err, "%s: more than %zu bytes (%zu MiB); the limit here is %zu MiB", path,
                       max, max >> 20, max >> 20);
            bm_free(buf);
            fclose(f);
            return NULL;
        }
    }
    if (ferror(f)) {
        bm_err_set(err, "%s: read error: %s", path, strerror(errno));
        bm_free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
oom:
    bm_free(buf);
    fclose(f);
    bm_err_set(err, "%s: out of memory reading the file", path);
    return NULL;
}

double bm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bm_put_num(FILE *f, double x)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, sizeof buf, "%.17g", x);
    fputs(buf, f);
}

void bm_put_jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}
