/* knobs.c — the list of device and module-cost knobs (knobs.h): one row per key, in the order
 * the spec's known-key lists name them (their "hint: ... accepts" lines print this order). */
#include <stdio.h>
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

/* section, key, unit, default, integer, lo, lo_open, hi, home, parse, JSON, CSV, then what
 * docs/spec.md's key tables say (`make docs` writes them from these rows): the default cell (NULL:
 * the default, or "absent" when it lies outside the limits; "%g" stands for the default) and the
 * meaning that follows the limits in the constraint cell (NULL: the limits alone). */
const struct bm_knob bm_knobs[] = {
    {"device", "memory_gib", "GiB", 80, 0, 0, 1, MAX_RATE, DEV(memory_gib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS,
     NULL, "one accelerator's memory; a rank whose peak exceeds it is OOM"},
    {"device", "peak_tflops", "TFLOP/s", 989, 0, 0, 1, MAX_RATE, DEV(peak_tflops), BM_KNOB_PLAIN, BM_KNOB_ALWAYS,
     BM_KNOB_ALWAYS, NULL, "dense bf16 peak of one accelerator"},
    {"device", "efficiency", "", 0.4, 0, 0, 1, 1, DEV(efficiency), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS, NULL,
     "achieved fraction of peak"},
    {"device", "link_gbytes_per_s", "GB/s", 25, 0, 0, 1, MAX_RATE, DEV(link_gbytes_per_s), BM_KNOB_PLAIN,
     BM_KNOB_ALWAYS, BM_KNOB_ALWAYS, NULL, "bandwidth of the link between two ranks"},
    {"device", "link_latency_us", "us", 10, 0, 0, 0, MAX_US, DEV(link_latency_us), BM_KNOB_PLAIN, BM_KNOB_ALWAYS,
     BM_KNOB_ALWAYS, NULL, "latency of that link; 0 = ideal links"},
    {"device", "rank_time_scale", "", 1, 0, 0, 1, 1000, BM_KNOB_LIST, 0, 0, BM_KNOB_OWN, BM_KNOB_BY_OWN_CODE,
     BM_KNOB_BY_OWN_CODE, "absent (1 on every rank)",
     "one per pipeline rank: every compute op on rank r takes `rank_time_scale[r]` × its cost (measured by "
     "`bigmac calibrate --rank-scale`); planning at another `pp` is an error"},
    {"device", "ranks_per_host", "ranks", 0, 1, 1, 0, 4096, DEV(ranks_per_host), BM_KNOB_HOSTS, BM_KNOB_IF_HOSTS,
     BM_KNOB_IF_HOSTS, "absent (every rank on one host)",
     "pipeline rank r runs on host r / N for N ranks per host (`mpirun --map-by slot`, N slots per host); "
     "transfers between ranks "
     "on different hosts take the inter-host link below; the flag `--ranks-per-host N` sets it (plan, simulate, "
     "sweep, render, train). [docs/multihost.md](multihost.md)"},
    {"device", "inter_host_gbytes_per_s", "GB/s", 12.5, 0, MIN_LINK, 0, MAX_RATE, DEV(inter_host_gbytes_per_s),
     BM_KNOB_HOSTS, BM_KNOB_IF_HOSTS, BM_KNOB_IF_HOSTS, "%g (a 100 Gb/s NIC)",
     "bandwidth of the link between hosts; needs `ranks_per_host` (given alone it is an error, not ignored)"},
    {"device", "inter_host_latency_us", "us", 20, 0, 0, 0, MAX_US, DEV(inter_host_latency_us), BM_KNOB_HOSTS,
     BM_KNOB_IF_HOSTS, BM_KNOB_IF_HOSTS, NULL, "latency of the link between hosts; needs `ranks_per_host`"},
    {"device", "op_overhead_us", "us", 0, 0, 0, 0, MAX_US, OVH(op_overhead_us, op_overhead_ms), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "time every op (compute, send, recv) occupies its rank before it starts — the executor's per-op dispatch, "
     "measured by `bigmac calibrate` (docs/simulator.md)"},
    {"device", "op_overhead_sd_us", "us", 0, 0, 0, 0, MAX_US, OVH(op_overhead_sd_us, op_overhead_sd_ms),
     BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "standard deviation of that dispatch time; only the expected makespan draws it (a gamma distribution of "
     "mean `op_overhead_us`), measured by `bigmac calibrate --spread` (docs/simulator.md)"},
    {"device", "recv_overhead_us", "us", 0, 0, 0, 0, MAX_US, OVH(recv_overhead_us, recv_overhead_ms), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "time a recv takes to complete a message that has already arrived, measured by `bigmac calibrate`"},
    {"device", "step_lead_us", "us", 0, 0, 0, 0, MAX_US, OVH(step_lead_us, step_lead_ms), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "time from a step's start to each rank's first op (the executor's start broadcast and step setup), "
     "measured by `bigmac calibrate`"},
    {"device", "optimizer_ms_per_gib", "ms/GiB", 0, 0, 0, 0, MAX_MS, DEV(optimizer_ms_per_gib), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "the optimizer step's time per GiB of optimizer state a rank updates (its shard under ZeRO-1); 0 = the "
     "optimizer takes no time (docs/simulator.md \"The step\")"},
    {"device", "coll_gbytes_per_s", "GB/s", 0, 0, 0, 0, MAX_RATE, DEV(coll_gbytes_per_s), BM_KNOB_PLAIN,
     BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "bandwidth of the gradient collectives' ring within a host; 0 = `link_gbytes_per_s` (docs/simulator.md "
     "\"The step\"; `calibrate --step-log` fits it)"},
    {"device", "coll_latency_us", "us", 0, 0, 0, 0, MAX_US, DEV(coll_latency_us), BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE,
     BM_KNOB_IF_POSITIVE, NULL, "per-hop latency of that ring; 0 = `link_latency_us` (`calibrate --step-log` fits it)"},
    {"device", "inter_host_coll_gbytes_per_s", "GB/s", 0, 0, 0, 0, MAX_RATE, DEV(inter_host_coll_gbytes_per_s),
     BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "the same bandwidth for a group that spans hosts; 0 = `inter_host_gbytes_per_s`"},
    {"device", "inter_host_coll_latency_us", "us", 0, 0, 0, 0, MAX_US, DEV(inter_host_coll_latency_us),
     BM_KNOB_PLAIN, BM_KNOB_IF_POSITIVE, BM_KNOB_IF_POSITIVE, NULL,
     "the same latency for a group that spans hosts; 0 = `inter_host_latency_us`"},

    {"cost", "fwd_ms", "ms", 1, 0, 0, 1, MAX_MS, COST(fwd_ms), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS, NULL,
     "forward time of one microbatch"},
    {"cost", "bwd_ms", "ms", 2, 0, 0, 1, MAX_MS, COST(bwd_ms), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS, NULL,
     "backward time of one microbatch (input and weight gradient)"},
    {"cost", "act_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(act_mib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS, NULL,
     "activation memory one microbatch keeps between F and B"},
    {"cost", "state_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(state_mib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS,
     NULL, "parameters + gradients + optimizer state per hosting rank"},
    {"cost", "out_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(out_mib), BM_KNOB_PLAIN, BM_KNOB_ALWAYS, BM_KNOB_ALWAYS, NULL,
     "what one microbatch sends downstream"},
    {"cost", "spread", "", 0, 0, 0, 0, 10, BM_KNOB_SPREAD, 0, 0, BM_KNOB_PLAIN, BM_KNOB_BY_OWN_CODE, BM_KNOB_NEVER,
     NULL,
     "the standard deviation of log op time around these costs (measured by `bigmac calibrate --spread`; "
     "`simulate` then also reports the expected makespan, docs/simulator.md)"},
    {"cost", "w_ms", "ms", 0, 0, 0, 1, MAX_MS, COST(w_ms), BM_KNOB_PLAIN, BM_KNOB_IF_SPLIT, BM_KNOB_IF_SPLIT,
     "derived (\"Split backward\" below)",
     "and < `bwd_ms`: the part of `bwd_ms` that is weight-gradient work; only matters where a backward is split"},
    {"cost", "act_w_mib", "MiB", 0, 0, 0, 1, MAX_MIB, COST(act_w_mib), BM_KNOB_PLAIN, BM_KNOB_IF_SPLIT,
     BM_KNOB_IF_SPLIT, "derived (\"Split backward\" below)",
     "and ≤ `act_mib`: what one microbatch keeps alive from its B to its W; only matters where a backward is "
     "split"},
    {"cost", "param_mib", "MiB", 0, 0, 0, 0, MAX_MIB, COST(param_mib), BM_KNOB_PLAIN, BM_KNOB_BY_OWN_CODE,
     BM_KNOB_NEVER, "`arch.params` at 4 bytes when given, else `state_mib` / 4",
     "the module's weights per copy, also the bytes of its gradients that the step synchronises: the state "
     "splits into weights `param_mib`, gradients `param_mib` and optimizer state `state_mib − 2·param_mib` "
     "(docs/simulator.md \"The step\"; a table writes `param_mib` only when it differs from `state_mib` / 4)"},
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

int bm_knob_in_range(const struct bm_knob *k, double v)
{
    return (k->lo_open ? v > k->lo : v >= k->lo) && v <= k->hi;
}

const char *bm_knob_num(double v, char *buf, size_t n)
{
    snprintf(buf, n, "%g", v);
    char *e = strstr(buf, "e-0");
    if (!e) e = strstr(buf, "e+");
    if (e) { /* "1e-06" -> "1e-6", "1e+12" -> "1e12" */
        char *d = e + 1 + (e[1] == '-'), *q = e + 2;
        while (*q == '0' && q[1]) q++;
        memmove(d, q, strlen(q) + 1);
    }
    return buf;
}

const char *bm_knob_range(const struct bm_knob *k, char *buf, size_t n)
{
    char lo[32], hi[32];
    snprintf(buf, n, "%c%s, %s]", k->lo_open ? '(' : '[', bm_knob_num(k->lo, lo, sizeof lo),
             bm_knob_num(k->hi, hi, sizeof hi));
    return buf;
}
