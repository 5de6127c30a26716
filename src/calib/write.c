/* write.c — the calibrated spec and the cost fragment (calib.h). Numbers are written
 * with 6 significant digits, keys in the order they were read or set. */
#include <jansson.h>
#include <string.h>

#include "calib/calib.h"
#include "spec/jpos.h"
#include "spec/knobs.h"
#include "util/util.h"

#define MAX_DEPTH 64                  /* JSON nesting, as the spec loader */
#define MAX_TEXT  (8L << 20)      /* bytes of spec text, as the spec loader */

static json_t *cost_json(const struct bm_cost *c, double spread)
{
    json_t *o = json_object();
    json_object_set_new(o, "fwd_ms", json_real(c->fwd_ms));
    json_object_set_new(o, "bwd_ms", json_real(c->bwd_ms));
    json_object_set_new(o, "act_mib", json_real(c->act_mib));
    json_object_set_new(o, "state_mib", json_real(c->state_mib));
    json_object_set_new(o, "out_mib", json_real(c->out_mib));
    if (spread > 0) json_object_set_new(o, "spread", json_real(spread));
    if (c->w_ms > 0 && c->w_ms < c->bwd_ms) /* a split backward was measured: its W part */
        json_object_set_new(o, "w_ms", json_real(c->w_ms));
    if (c->param_mib != c->state_mib / 4) /* the weights, when not the default (sim/step.h) */
        json_object_set_new(o, "param_mib", json_real(c->param_mib));
    return o;
}

static json_t *reals(const double *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

static int module_index(const struct bm_spec_calibration *c, const char *name)
{
    for (int k = 0; name && k < c->n_modules; k++)
        if (!strcmp(c->names[k], name)) return k;
    return -1;
}

/* Dump root to out ("-": stdout and a newline) and release it. */
static int write_json(json_t *root, const char *out, struct bm_err *err)
{
    size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6);
    int wr = !strcmp(out, "-") ? json_dumpf(root, stdout, flags) : json_dump_file(root, out, flags);
    if (!strcmp(out, "-")) printf("\n");
    json_decref(root);
    return wr ? bm_err_set(err, "%s: write failed", out) : BM_OK;
}

/* The measured device numbers into o (the spec's "device", or the fragment's top level). */
static void set_measured_device(json_t *o, const struct bm_spec_calibration *c)
{
    json_object_set_new(o, "op_overhead_us", json_real(c->op_overhead_us));
    if (c->spread) json_object_set_new(o, "op_overhead_sd_us", json_real(c->op_overhead_sd_us));
    else json_object_del(o, "op_overhead_sd_us"); /* an earlier calibration's, without its module spreads */
    json_object_set_new(o, "recv_overhead_us", json_real(c->recv_overhead_us));
    json_object_set_new(o, "step_lead_us", json_real(c->step_lead_us));
    if (c->have_link_latency) json_object_set_new(o, "link_latency_us", json_real(c->link_latency_us));
    if (c->rank_scale) json_object_set_new(o, "rank_time_scale", reals(c->rank_scale, c->pp));
    if (c->have_optimizer) json_object_set_new(o, "optimizer_ms_per_gib", json_real(c->optimizer_ms_per_gib));
    static const char *const bw[2] = {"coll_gbytes_per_s", "inter_host_coll_gbytes_per_s"};
    static const char *const lat[2] = {"coll_latency_us", "inter_host_coll_latency_us"};
    for (int k = 0; k < 2; k++) { /* the collectives' ring (calibrate --step-log) */
        if (c->have_coll_bw[k]) json_object_set_new(o, bw[k], json_real(c->coll_gbytes_per_s[k]));
        if (c->have_coll_lat[k]) json_object_set_new(o, lat[k], json_real(c->coll_latency_us[k]));
    }
}

/* Whether the measured v of knob key (section "cost" or "device") is in the knob list's limits,
 * which the spec loader applies: BM_ERR naming it (what: "module \"vit\": " or "") otherwise. */
static int check_knob(const char *section, const char *key, const char *what, double v, const char *why,
                      struct bm_err *err)
{
    const struct bm_knob *k = bm_knob_find(section, key);
    if (!k || bm_knob_in_range(k, v)) return BM_OK;
    char range[80];
    return bm_err_set(err, "calibrate: %sthe measured %s.%s is %g, outside %s%s%s, which a spec needs%s", what,
                      section, key, v, bm_knob_range(k, range, sizeof range), *k->unit ? " " : "", k->unit, why);
}

/* The figures a spec takes, as the spec loader bounds them (the knob list's limits: fwd_ms and
 * bwd_ms in (0, 1e9] ms, memory in [0, 1e12] MiB, spread in [0, 10], dispatch times in [0, 1e12]
 * us; encoder scales in (0, 1e6], rank scales in (0, 1000]): BM_ERR naming the first figure
 * outside, so calibrate never writes a spec or a cost fragment that `simulate` refuses (all-zero
 * or absurd durations in a trace). */
static int check_figures(const struct bm_spec_calibration *c, struct bm_err *err)
{
    static const char *const why = "\nhint: the trace's op times are not a run's (all zero, or absurd); "
                                   "nothing was written";
    for (int k = 0; k < c->n_modules; k++) {
        char what[BM_MAX_NAME + 32];
        snprintf(what, sizeof what, "module \"%s\": ", c->names[k]);
        for (int i = 0; i < bm_n_knobs; i++) { /* the costs a calibrated spec always has */
            const struct bm_knob *kn = &bm_knobs[i];
            if (kn->home != BM_KNOB_COST || kn->json != BM_KNOB_ALWAYS) continue;
            double v = *(const double *)(const void *)((const char *)&c->costs[k] + kn->off);
            if (check_knob("cost", kn->key, what, v, why, err)) return BM_ERR;
        }
        if (c->spread && check_knob("cost", "spread", what, c->spread[k], why, err)) return BM_ERR;
    }
    for (int m = 0; c->mb_scale && m < c->microbatches; m++)
        if (!(c->mb_scale[m] > 0 && c->mb_scale[m] <= 1e6))
            return bm_err_set(err, "calibrate: the measured data.encoder_cost_scale.values[%d] is %g, outside (0, 1e6]%s", m,
                              c->mb_scale[m], why);
    const struct bm_knob *rs = bm_knob_find("device", "rank_time_scale");
    char range[80];
    for (int r = 0; c->rank_scale && r < c->pp; r++)
        if (!bm_knob_in_range(rs, c->rank_scale[r]))
            return bm_err_set(err, "calibrate: the measured device.rank_time_scale[%d] is %g, outside %s%s", r,
                              c->rank_scale[r], bm_knob_range(rs, range, sizeof range), why);
    const double us[5] = {c->op_overhead_us, c->op_overhead_sd_us, c->recv_overhead_us, c->step_lead_us,
                          c->have_link_latency ? c->link_latency_us : 0};
    static const char *const us_keys[5] = {"op_overhead_us", "op_overhead_sd_us", "recv_overhead_us", "step_lead_us",
                                           "link_latency_us"};
    for (int j = 0; j < 5; j++)
        if (check_knob("device", us_keys[j], "", us[j], why, err)) return BM_ERR;
    return BM_OK;
}

int bm_spec_write_calibrated(const char *spec_path, const struct bm_spec_calibration *c, const char *out,
                             struct bm_err *err)
{
    if (check_figures(c, err)) return BM_ERR;
    size_t len;
    char *text = bm_read_file_max(spec_path, (size_t)MAX_TEXT, &len, err);
    if (!text) return BM_ERR;
    json_t *root = bm_json_parse(text, spec_path, MAX_DEPTH, 0, err);
    struct bm_spec *sp = NULL;
    struct bm_err e;
    int in_ok = root && bm_spec_parse(text, spec_path, &sp, &e) == BM_OK; /* is it a spec at all? */
    bm_spec_free(sp);
    sp = NULL;
    bm_free(text);
    if (!root) return BM_ERR;
    json_t *mods = json_object_get(root, "modules");
    size_t i;
    json_t *m;
    json_array_foreach(mods, i, m)
    {
        int k = module_index(c, json_string_value(json_object_get(m, "name")));
        if (k >= 0) json_object_set_new(m, "cost", cost_json(&c->costs[k], c->spread ? c->spread[k] : 0));
    }
    json_t *data = json_object_get(root, "data");
    if (data) json_object_del(data, "encoder_cost_scale");
    if (c->mb_scale) {
        if (!json_is_object(data)) json_object_set_new(root, "data", data = json_object());
        json_object_set_new(data, "encoder_cost_scale",
                            json_pack("{s:o}", "values", reals(c->mb_scale, c->microbatches)));
    }
    json_t *dev = json_object_get(root, "device");
    if (!json_is_object(dev)) json_object_set_new(root, "device", dev = json_object());
    set_measured_device(dev, c);
    if (!in_ok) return write_json(root, out, err); /* not a spec before: calibrate does not judge it */
    /* the last word: a spec that loaded must still load as written (what `simulate` says of it) */
    char *s = json_dumps(root, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    if (!s) {
        json_decref(root);
        return bm_err_set(err, "%s: out of memory", spec_path);
    }
    int bad = bm_spec_parse(s, "the calibrated spec", &sp, &e);
    bm_free(s); /* jansson allocates through bm_malloc (bm_json_parse set the hooks) */
    bm_spec_free(sp);
    if (bad) {
        json_decref(root);
        return bm_err_set(err, "calibrate: %s with the measured figures would not load, so nothing was written: %s",
                          spec_path, e.msg);
    }
    return write_json(root, out, err);
}

int bm_spec_write_costs(const struct bm_spec_calibration *c, const char *const *traces, int n_traces,
                        const char *out, struct bm_err *err)
{
    if (check_figures(c, err)) return BM_ERR;
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("bigmac-costs"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "trace", json_string(traces[0]));
    json_t *all = json_array();
    for (int i = 0; i < n_traces; i++) json_array_append_new(all, json_string(traces[i]));
    json_object_set_new(root, "traces", all);
    json_t *mods = json_array();
    for (int k = 0; k < c->n_modules; k++) {
        json_t *m = json_object();
        json_object_set_new(m, "name", json_string(c->names[k]));
        json_object_set_new(m, "cost", cost_json(&c->costs[k], c->spread ? c->spread[k] : 0));
        json_array_append_new(mods, m);
    }
    json_object_set_new(root, "modules", mods);
    set_measured_device(root, c);
    if (c->mb_scale)
        json_object_set_new(root, "encoder_cost_scale", json_pack("{s:o}", "values", reals(c->mb_scale, c->microbatches)));
    return write_json(root, out, err);
}
