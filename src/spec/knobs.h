/* knobs.h — every device-level and module-cost knob described once (issue 26, item 3).
 *
 * One row per key of the spec's "device" object and of a module's "cost" object: its key, unit,
 * default, limits, where it lives, when an operator table (JSON, CSV "# device" line) writes it,
 * and what the docs say of it. The spec loader takes its known-key lists, range checks and
 * defaults from here; the table's JSON and CSV readers and writers their device and cost fields
 * (bm_table_device_fields, bm_table_cost_fields); calibrate's check of the figures it writes
 * their limits; and docs/spec.md's key tables are written from the list (knobs_doc.c, `make
 * docs`; tests/test_knobs.c fails when the file differs). Adding a device knob: a row in
 * knobs.c, the field in struct bm_device (bigmac.h), its use; then `make docs`.
 *
 * Messages stay those of the loaders: the rows only say what to check. */
#ifndef BM_KNOBS_H
#define BM_KNOBS_H

#include <stddef.h>
#include <stdio.h>

#include "bigmac_cost.h"

enum bm_knob_home {
    BM_KNOB_DEVICE,   /* a field of struct bm_device at off (double, or int when integer) */
    BM_KNOB_OVERHEAD, /* the spec's us at off in struct bm_spec; the cost model's ms at
                       * costs_off in struct bm_costs */
    BM_KNOB_COST,     /* a double of struct bm_cost at off (module cost.<key>) */
    BM_KNOB_SPREAD,   /* cost.spread: the module's spread (bm_spec_module, bm_costs.spread) */
    BM_KNOB_LIST,     /* device.rank_time_scale: one number per rank, read by its own code */
};

/* How the spec loader reads it. */
enum bm_knob_parse {
    BM_KNOB_PLAIN, /* a number (integer) in the limits, in the list's order */
    BM_KNOB_HOSTS, /* the placement over hosts: read after the others (needs ranks_per_host) */
    BM_KNOB_OWN,   /* its own code (a list) */
};

/* When a table writes it. */
enum bm_knob_when {
    BM_KNOB_NEVER,
    BM_KNOB_ALWAYS,
    BM_KNOB_IF_HOSTS,    /* only a table placed over hosts (ranks_per_host > 0) */
    BM_KNOB_IF_POSITIVE, /* only when > 0 (absent = 0) */
    BM_KNOB_IF_SPLIT,    /* only tables with a split backward or a frozen module */
    BM_KNOB_BY_OWN_CODE, /* written by its own code (cost.spread, cost.param_mib, lists) */
};

struct bm_knob {
    const char *section; /* "device" or "cost" */
    const char *key;
    const char *unit;    /* "" for a plain ratio; the unit docs/spec.md names */
    double dflt;         /* the spec's default */
    int integer;         /* an integer (int field) */
    double lo;           /* spec limits: x > lo (lo_open) or x >= lo, and x <= hi */
    int lo_open;
    double hi;
    int home;            /* enum bm_knob_home */
    size_t off;          /* see enum bm_knob_home */
    size_t costs_off;    /* BM_KNOB_OVERHEAD: the ms field of struct bm_costs */
    int parse;           /* enum bm_knob_parse */
    int json, csv;       /* enum bm_knob_when: table JSON ("device" object, or the top level for
                          * BM_KNOB_OVERHEAD, in us), CSV ("# device" line) */
    /* docs/spec.md's key tables (bm_knob_docs): the default cell (NULL: the default, or "absent"
     * when it lies outside the limits; "%g" in it stands for the default) and the meaning after
     * the limits (NULL: none) */
    const char *dflt_doc, *doc;
};

extern const struct bm_knob bm_knobs[];
extern const int bm_n_knobs;

/* The knob named key of section, or NULL. */
const struct bm_knob *bm_knob_find(const char *section, const char *key);
/* The keys of section, in the list's order, NULL-terminated, into names (n entries at most,
 * the terminator included). Returns the count. */
int bm_knob_keys(const char *section, const char **names, int n);
/* The spec's default device (every BM_KNOB_DEVICE row's default). */
void bm_knob_device_defaults(struct bm_device *d);
/* The spec's default module cost (every BM_KNOB_COST row's default). */
void bm_knob_cost_defaults(struct bm_cost *k);
/* Where knob k's value is in struct bm_device d (k->home BM_KNOB_DEVICE): a double, or an int
 * when k->integer. */
void *bm_knob_device_field(const struct bm_knob *k, struct bm_device *d);
/* Knob k's value in device d as a double. */
double bm_knob_device_value(const struct bm_knob *k, const struct bm_device *d);
/* Whether a table writes device knob k (rule 'when', k->json or k->csv) of device d placed
 * with ranks_per_host. */
int bm_knob_written(int when, const struct bm_knob *k, const struct bm_device *d);

/* 1 when v is inside knob k's limits (x > lo when lo_open, else x >= lo, and x <= hi); NaN: 0. */
int bm_knob_in_range(const struct bm_knob *k, double v);
/* k's limits as an interval, "(0, 1e9]", into buf (n bytes); returns buf. */
const char *bm_knob_range(const struct bm_knob *k, char *buf, size_t n);
/* v as %g writes it without an exponent's leading zeros ("1e-6", "1e12"), into buf; returns buf. */
const char *bm_knob_num(double v, char *buf, size_t n);

/* docs/spec.md's key tables (knobs_doc.c; `make docs` runs scripts/knob_docs.c, and
 * tests/test_knobs.c checks the file against it). */
/* The markdown table of section's knobs ("device", "cost"), in the list's order, into f. */
void bm_knob_docs(const char *section, FILE *f);
/* doc with every generated block replaced by the table of its section: a block is the lines
 * between "<!-- knobs: SECTION ... -->" and "<!-- /knobs -->". *out is malloc'd (the caller
 * frees it); returns the number of blocks, or -1 (why in err: an unknown section, an unclosed
 * block, out of memory). */
int bm_knob_docs_splice(const char *doc, char **out, struct bm_err *err);

#endif
