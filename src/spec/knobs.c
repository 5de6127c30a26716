/* knobs.c — the list of device and module-cost knobs (knobs.h): one row per key, in the order
 * the spec's known-key lists name them (their "hint: ... accepts" lines print this order). */
#include <string.h>

#include "spec/knobs.h"

#define MAX_RATE 1e9     /* memory_gib, peak_tflops, a link's GB/s */
#define MAX_MS   1e9     /* any duration in ms (spec.c) */
#define MAX_US   1e12    /* the same in us */
#define MAX_MIB  1e12    /* any memory size in MiB */
#define MIN_LINK 1e-6    /* a link's GB/s: slower links make transfer times overflow */

#define DEV(f) BM_KNOB_DEVICE, offsetof(struct bm_device, f), 0
#define OVH(us, ms) BM_KNOB_OVERHEAD, offsetof(struct bm_spec, us), offsetof(struct bm_costs, ms)
#define COST(f) BM_KNOB_COST, offsetof(struct bm_cost, f), 0

/* section, key, unit, default, integer, lo, lo_open, hi, home, parse, JSON, CSV */
const struct bm_knob bm_knobs[] = {
    {"device", "memory_gib", "GiB", 80, 0, 0, 1, MAX_RATE, DEV(memory_gib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"device", "peak_tflops", "TFLOP/s", 989, 0, 0, 1, MAX_RATE, DEV(peak_tflops), BM_KNOB_PLAIN, BM_KNOB_ALWAYS,
     BM_KNOB_ALWAYS},
    {"device", "efficiency", "", 0.4, 0, 0, 1, 1, DEV(efficiency), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"device", "link_gbytes_per_s", "GB/s", 25, 0, 0, 1, MAX_RATE, DEV(link_gbytes_per_s), BM_KNOB_PLAIN,
     BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"device", "link_latency_us", "us", 10, 0, 0, 0, MAX_US, DEV(link_latency_us), BM_KNOB_PLAIN, BM_KNOB_ALWAYS,
     BM_KNOB_ALWAYS},
    {"device", "rank_time_scale", "", 1, 0, 0, 1, 1000, BM_KNOB_LIST, 0, 0, BM_KNOB_OWN, BM_KNOB_BY_OWN_CODE,
     BM_KNOB_BY_OWN_CODE},
    {"device", "ranks_per_host", "ranks", 0, 1, 1, 0, 4096, DEV(ranks_per_host), BM_KNOB_HOSTS, BM_KNOB_IF_HOSTS,
     BM_KNOB_IF_HOSTS},
    {"device", "inter_host_gbytes_per_s", "GB/s", 12.5, 0, MIN_LINK, 0, MAX_RATE, DEV(inter_host_gbytes_per_s),
     BM_KNOB_HOSTS, BM_KNOB_IF_HOSTS, BM_KNOB_IF_HOSTS},
    {"device", "inter_host_latency_us", "us", 20, 0, 0, 0, MAX_US, DEV(inter_host_latency_us), BM_KNOB_HOSTS,
     BM_KNOB_IF_HOSTS, BM_KNOB_IF_HOSTS},
    {"device", "op_overhead_us", "us", 0, 0, 0, 0, MAX_US, OVH(op_overhead_us, op_overhead_ms), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},
    {"device", "op_overhead_sd_us", "us", 0, 0, 0, 0, MAX_US, OVH(op_overhead_sd_us, op_overhead_sd_ms),
     BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},
    {"device", "recv_overhead_us", "us", 0, 0, 0, 0, MAX_US, OVH(recv_overhead_us, recv_overhead_ms), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},
    {"device", "step_lead_us", "us", 0, 0, 0, 0, MAX_US, OVH(step_lead_us, step_lead_ms), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},
    {"device", "optimizer_ms_per_gib", "ms/GiB", 0, 0, 0, 0, MAX_MS, DEV(optimizer_ms_per_gib), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},
    {"device", "coll_gbytes_per_s", "GB/s", 0, 0, 0, 0, MAX_RATE, DEV(coll_gbytes_per_s), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},
    {"device", "coll_latency_us", "us", 0, 0, 0, 0, MAX_US, DEV(coll_latency_us), BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE,
     BM_KNOB_NEVER},
    {"device", "inter_host_coll_gbytes_per_s", "GB/s", 0, 0, 0, 0, MAX_RATE, DEV(inter_host_coll_gbytes_per_s),
     BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},
    {"device", "inter_host_coll_latency_us", "us", 0, 0, 0, 0, MAX_US, DEV(inter_host_coll_latency_us),
     BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE, BM_KNOB_NEVER},

    {"cost", "fwd_ms", "ms", 1, 0, 0, 1, MAX_MS, COST(fwd_ms), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"cost", "bwd_ms", "ms", 2, 0, 0, 1, MAX_MS, COST(bwd_ms), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"cost", "act_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(act_mib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"cost", "state_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(state_mib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"cost", "out_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(out_mib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS},
    {"cost", "spread", "", 0, 0, 0, 0, 10, BM_KNOB_SPREAD, 0, 0, BM_KNOB_PLAIN, BM_KNOB_BY_OWN_CODE, BM_KNOB_NEVER},
    {"cost", "w_ms", "ms", 0, 0, 0, 1, MAX_MS, COST(w_ms), BM_KNOB_PLAIN, BM_KNOB_IF_SPLIT, BM_KNOB_IF_SPLIT},
    {"cost", "act_w_mib", "MiB", 0, 0, 0, 1, MAX_MIB, COST(act_w_mib), BM_KNOB_PLAIN, BM_KNOB_IF_SPLIT,
     BM_KNOB_IF_SPLIT},
    {"cost", "param_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(param_mib), BM_KNOB_PLAIN, BM_KNOB_BY_OWN_CODE,
     BM_KNOB_NEVER},
};
const int bm_n_knobs = (int)(sizeof bm_knobs / sizeof bm_knobs[0]);

const struct bm_knob *bm_knob_find(const char *section, const char *key)
{
    for (int i = 0; i < bm_n_knobs; i++)
        if (!strcmp(bm_knobs[i].section, section) && !strcmp(bm_knobs[i].key, key)) return &bm_knobs[i];
    return NULL;
}

int bm_knob_keys(const char *section, const char **names, int n)
{
    int k = 0;
    for (int i = 0; i < bm_n_knobs && k + 1 < n; i++)
        if (!strcmp(bm_knobs[i].section, section)) names[k++] = bm_knobs[i].key;
    names[k] = NULL;
    return k;
}

void *bm_knob_device_field(const struct bm_knob *k, struct bm_device *d)
{
    return (char *)d + k->off;
}

double bm_knob_device_value(const struct bm_knob *k, const struct bm_device *d)
{
    const char *p = (const char *)d + k->off;
    return k->integer ? *(const int *)(const void *)p : *(const double *)(const void *)p;
}

void bm_knob_device_defaults(struct bm_device *d)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < bm_n_knobs; i++) {
        const struct bm_knob *k = &bm_knobs[i];
        if (k->home != BM_KNOB_DEVICE) continue;
        void *p = bm_knob_device_field(k, d);
        if (k->integer) *(int *)p = (int)k->dflt;
        else *(double *)p = k->dflt;
    }
}

void bm_knob_cost_defaults(struct bm_cost *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < bm_n_knobs; i++)
        if (bm_knobs[i].home == BM_KNOB_COST) *(double *)(void *)((char *)c + bm_knobs[i].off) = bm_knobs[i].dflt;
}

int bm_knob_written(int when, const struct bm_knob *k, const struct bm_device *d)
{
    switch (when) {
    case BM_KNOB_ALWAYS: return 1;
    case BM_KNOB_IF_HOSTS: return d->ranks_per_host > 0;
    case BM_KNOB_IF_POSITIVE: return bm_knob_device_value(k, d) > 0;
    default: return 0;
    }
}
