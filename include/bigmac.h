/* bigmac.h — nested pipeline parallelism for multimodal LLM training.
 *
 * A runnable example (see examples/ and `bin/bigmac plan --help`):
 *
 *     struct bm_err err;
 *     struct bm_spec *spec;
 *     struct bm_table *table;
 *     struct bm_costs *costs;                    // the cost model beside the table (bigmac_cost.h)
 *     if (bm_spec_load("examples/tiny-mllm.json", &spec, &err) != BM_OK) { puts(err.msg); return 1; }
 *     struct bm_plan_opts o;
 *     bm_plan_opts_from_spec(&o, spec);          // bm_plan_opts_merge(&o, &flags) would lay flags over o
 *     o.policy = BM_POL_BIGMAC;
 *     if (bm_plan_build(spec, &o, &table, &costs, &err) != BM_OK) { puts(err.msg); return 1; }
 *     if (bm_verify(table, &err) != BM_OK) { puts(err.msg); return 1; }
 *     bm_table_write_json(table, costs, stdout);
 *     bm_table_free(table);
 *     bm_costs_free(costs);
 *     bm_spec_free(spec);
 *
 * Data flow: spec (modules, produces/consumes, costs) -> planner -> operator table
 * (per-rank ordered compute + send/recv ops) -> verifier / simulator / renderers / executor; the
 * table's cost model (struct bm_costs, bigmac_cost.h) goes beside it to the simulator, the
 * renderers of costs and calibration, never to the verifier or the executor.
 * The operator table is the single source of truth; nothing downstream re-derives a schedule.
 *
 * Conventions
 *  - P ranks (pp), V chunks per rank (vpp), M microbatches, unit U (default P), window W.
 *  - Backbone global chunk c lives on rank c % P; local chunk j of rank r is global j*P + r.
 *  - Nested (encoder/generator) work of microbatch m runs on rank m % P (owner) except in the
 *    `unified` policies, where encoders run on rank 0 and generators on rank P-1.
 *  - Every function returning int returns BM_OK (0) or BM_ERR (1); on BM_ERR the
 *    struct bm_err holds a message that reads like a compiler diagnostic.
 *  - Objects returned through `**out` are owned by the caller and released with the
 *    matching *_free.
 */
#ifndef BIGMAC_H
#define BIGMAC_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- exports */

/* Every function declared in the public headers (bigmac.h, bigmac_module.h, bigmac_report.h)
 * carries BM_API; the library is built with -fvisibility=hidden, so the shared library exports
 * exactly these and nothing of its packages' internals (tests/test_abi.sh counts them). */
#if defined(__GNUC__)
#define BM_API __attribute__((visibility("default")))
#else
#define BM_API
#endif

/* ---------------------------------------------------------------- version */

/* The library's version (the Makefile reads it from here for the soname and bigmac.pc) and the
 * versions of the file formats it reads and writes. A format's version changes only when an old
 * reader could misread a new file; new optional keys do not change it. */
/* The ABI rule (docs/design.md §12, tests/test_abi.sh): a change to the layout of a public struct
 * or a removed public function bumps BM_SOVERSION (and `make abi-baseline` records the new ABI).
 * 0.5.0 changed struct layouts under soname 0; 0.6.0 (soname 1) exports only the public
 * functions (BM_API) and adds bigmac_report.h. 0.7.0 (soname 2) takes the cost model out of
 * struct bm_table (struct bm_costs, bigmac_cost.h), gives struct bm_plan_opts its "unset"
 * (BM_UNSET) and the fields dp / ranks_per_host / zero, and struct bm_device the collectives.
 * 0.8.0 (soname 3) takes the private fields out of the public structs: struct bm_table keeps its
 * tensor index, dataflow and list rooms behind one opaque priv, struct bm_rank_ops has no cap,
 * and struct bm_compare's rows and struct bm_sweep_opts' policies are pointers with counts, so a
 * new policy moves no layout. */
#define BM_VERSION "0.8.0"
#define BM_SOVERSION 3
#define BM_SPEC_FORMAT "bigmac-spec"
#define BM_SPEC_VERSION 1
#define BM_TABLE_FORMAT "bigmac-table"
#define BM_TABLE_VERSION 1
#define BM_TRACE_FORMAT "bigmac-trace"
#define BM_TRACE_VERSION 1

/* BM_VERSION of the library actually linked (may differ from the header a program was built
 * with when it links the shared library). */
BM_API const char *bm_version(void);

/* ---------------------------------------------------------------- errors */

enum { BM_OK = 0, BM_ERR = 1, BM_USAGE = 2 };

struct bm_err {
    char msg[4096];  /* "file:line:col: what went wrong" (+ "\nhint: ..." lines) */
};

/* printf-style; overwrites err->msg. err may be NULL. Always returns BM_ERR. */
BM_API int bm_err_set(struct bm_err *err, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------- enums */

enum bm_role { BM_ROLE_ENCODER = 0, BM_ROLE_BACKBONE = 1, BM_ROLE_GENERATOR = 2 };
#define BM_N_ROLES 3
enum bm_pass { BM_PASS_F = 0, BM_PASS_B = 1, BM_PASS_W = 2 };
enum bm_backbone {
    BM_BB_GPIPE = 0,
    BM_BB_1F1B = 1,
    BM_BB_INTERLEAVED = 2,
    BM_BB_ZB_H1 = 3,          /* zero-bubble ZB-H1: 1F1B with each backward split into B and W */
    BM_BB_ZB_INTERLEAVED = 4, /* PyTorch's ScheduleInterleavedZeroBubble (vpp >= 2) */
    /* V-shaped (vpp = 2, chunk c on rank c for c < P, on rank 2P-1-c after: rank 0 holds the
     * first and the last chunk; docs/planner.md "V-shaped backbones") */
    BM_BB_ZB_V = 5,           /* PyTorch's ScheduleZBVZeroBubble (the paper's ZB-V) */
    BM_BB_DUALPIPE_V = 6      /* PyTorch's ScheduleDualPipeV (DeepSeek's DualPipe, V form) */
};
#define BM_N_BACKBONES 7
enum bm_policy {
    BM_POL_BIGMAC = 0,
    BM_POL_OPTIMUS,
    BM_POL_UNIFIED,
    BM_POL_UNIFIED_BALANCED,
    BM_POL_IDEAL,
    BM_POL_NONE
};
#define BM_N_POLICIES 6

/* Name <-> enum. The *_parse functions return BM_OK or BM_ERR (unknown name). */
BM_API const char *bm_role_name(enum bm_role r);
BM_API const char *bm_pass_name(enum bm_pass p);          /* "F", "B", "W" */
BM_API const char *bm_backbone_name(enum bm_backbone b);  /* "gpipe", "1f1b", "interleaved", "zb-h1",
                                                           * "zb-interleaved" */
BM_API const char *bm_policy_name(enum bm_policy p);      /* "bigmac", "optimus", ... */
BM_API int bm_role_parse(const char *s, enum bm_role *out);
BM_API int bm_backbone_parse(const char *s, enum bm_backbone *out);
BM_API int bm_policy_parse(const char *s, enum bm_policy *out);

/* ---------------------------------------------------------------- spec (docs/design.md §3) */

/* Per-microbatch numbers for the whole module. */
struct bm_cost {
    double fwd_ms;     /* forward time of one microbatch */
    double bwd_ms;     /* backward time (input + weight grad) */
    double act_mib;    /* activation memory kept alive between F and B */
    double state_mib;  /* resident params + grads + optimizer state per hosting rank */
    double out_mib;    /* what one microbatch sends downstream */
    /* Split backward (zero-bubble backbones, docs/spec.md "Split backward"): 0 = the default.
     * w_ms: the part of bwd_ms that is weight-gradient work (a split B costs bwd_ms - w_ms,
     * its W w_ms; default bwd_ms * 3h/(6h+s) with arch, else bwd_ms / 2, bm_cost_w_ms).
     * act_w_mib: what stays alive from B to W (default act_mib * 32h/(34h+5as) with arch,
     * else act_mib / 2, bm_cost_act_w_frac). */
    double w_ms;
    double act_w_mib;
    /* Weights of one copy of the module, MiB (per hosting rank; the backbone's whole, a chunk
     * holds its chunk weight's share): the bytes of its gradients too (docs/simulator.md "The
     * step"). Spec default: arch.params at 4 bytes, else state_mib / 4. The rest of state_mib
     * (state_mib - 2 * param_mib) is the optimizer state. */
    double param_mib;
};

/* Architecture of a built-in model ("impl"); also used to derive costs when "cost" is
 * absent. 0 means "not given". */
struct bm_arch {
    double params;    /* parameter count (for cost derivation) */
    int layers;       /* transformer blocks */
    int hidden;       /* model width */
    int heads;        /* attention heads */
    int ffn;          /* MLP inner width (0 = 4*hidden) */
    int vocab;        /* token vocabulary (gpt) */
    int seq;          /* text tokens per sample (gpt) */
    int tokens;       /* tokens processed per microbatch (cost derivation) */
    int image;        /* image side in pixels (vit, dit) */
    int patch;        /* patch side in pixels (vit, dit) */
    int channels;     /* image channels (vit, dit) */
    int cond;         /* conditioning width (dit; 0 = backbone hidden) */
};

struct bm_module {
    char *name;
    enum bm_role role;       /* derived from the graph; checked against a given one */
    int role_given;          /* 1 when the spec said "role" */
    char **consumes;  int n_consumes;
    char **produces;  int n_produces;
    int layers;              /* backbone: layer count for chunk splitting (0 = continuous) */
    struct bm_cost cost;     /* explicit, derived from arch, or defaults (1, 2, 0, 0, 0) */
    int cost_given;          /* 1 when the spec said "cost" */
    int grad_to_backbone;    /* generators: loss flows back into the backbone (default 1) */
    char *impl;              /* built-in model name ("vit", "gpt", "dit", or registered); NULL */
    struct bm_arch arch;
    int has_arch;
    int recompute;           /* "recompute": 1 = "full" (Megatron: keep the module's input only,
                              * rerun its forward at the start of its backward), 0 = "none" */
    double spread;           /* cost.spread: sigma of log op time around the cost (measured by
                              * `bigmac calibrate`; bm_simulate_expected); 0 = none */
    int frozen;              /* "trainable": false: no weight gradient, no optimizer state, no
                              * gradient sync (docs/spec.md "Frozen modules"); 0 = trains */
};

struct bm_device {
    double memory_gib;        /* default 80 */
    double peak_tflops;       /* default 989 */
    double efficiency;        /* default 0.4 */
    double link_gbytes_per_s; /* default 25 */
    double link_latency_us;   /* default 10 */
    /* Placement over hosts (docs/multihost.md): pipeline rank r runs on host r / ranks_per_host
     * (mpirun --map-by slot, slots = ranks_per_host); a transfer between ranks on different
     * hosts takes the inter-host link instead of the one above. 0 = every rank on one host. */
    int ranks_per_host;             /* default 0 */
    double inter_host_gbytes_per_s; /* default 12.5 (a 100 Gb/s NIC) */
    double inter_host_latency_us;   /* default 20 */
    /* device.optimizer_ms_per_gib: time of the optimizer step per GiB of optimizer state a rank
     * updates (src/sim/step.h); 0 = none (default) */
    double optimizer_ms_per_gib;
    /* The gradient collectives' ring (src/sim/step.h), when they differ from the point-to-point
     * links above (a library's all-reduce is not a send): device.coll_gbytes_per_s,
     * coll_latency_us within a host, inter_host_coll_* across hosts; 0 = the link's figure
     * (default). `bigmac calibrate --step-log` fits them from the executors' step logs. */
    double coll_gbytes_per_s, coll_latency_us;
    double inter_host_coll_gbytes_per_s, inter_host_coll_latency_us;
};

enum bm_dist { BM_DIST_NONE = 0, BM_DIST_UNIFORM, BM_DIST_LOGNORMAL };
struct bm_scale_dist {
    enum bm_dist dist;  /* NONE = every multiplier 1 */
    double min, max;    /* uniform: bounds; lognormal: clamp bounds (0 = none) */
    double sigma;       /* lognormal: sigma of log (mean of the multiplier is 1) */
    uint64_t seed;
};

struct bm_data {
    struct bm_scale_dist encoder_cost_scale;
    uint64_t seed;              /* dataset seed (default 1) */
    int samples_per_microbatch; /* default 1 */
    int max_images;             /* images per sample drawn from 1..max_images (default 1) */
    /* encoder_cost_scale {"values": [...]}: explicit multipliers, cycled over microbatches
     * (microbatch m gets encoder_cost_values[m % n]); NULL = drawn from encoder_cost_scale */
    double *encoder_cost_values;
    int n_encoder_cost_values;
};

struct bm_train {
    int steps;           /* default 20 */
    double lr;           /* default 1e-3 */
    double weight_decay; /* default 0 */
    double beta1, beta2; /* default 0.9, 0.999 */
    double eps;          /* default 1e-8 */
    uint64_t seed;       /* parameter init seed (default 1) */
    int zero;            /* train.zero: 0 (default) every copy keeps the whole optimizer state;
                          * 1 ZeRO-1, the optimizer state sharded over the ranks holding a copy
                          * of the module (src/sim/step.h) */
};

struct bm_spec {
    char *path;              /* file the spec came from (for messages) */
    char *name;
    char *doc;               /* free text; may be NULL */
    struct bm_device device;
    int pp, vpp, microbatches, unit;  /* unit 0 = default (pp) */
    enum bm_backbone backbone;
    enum bm_policy policy;
    int window;              /* 0 = "auto", BM_WINDOW_FIT = "fit" (see struct bm_plan_opts) */
    char **inputs; int n_inputs;
    struct bm_module *modules; int n_modules;
    int backbone_module;     /* index of the backbone module */
    struct bm_data data;
    struct bm_train train;
    /* device.rank_time_scale: compute-time multiplier per pipeline rank (measured ranks that run
     * slower or faster, e.g. from `bigmac calibrate`); NULL = 1 on every rank */
    double *rank_time_scale;
    int n_rank_time_scale;
    /* device.op_overhead_us: time every op (compute, send, recv) occupies its rank before it
     * starts: the executor's per-op dispatch (bookkeeping, MPI progress calls), measured by
     * `bigmac calibrate`; 0 = none */
    double op_overhead_us;
    /* device.op_overhead_sd_us: the standard deviation of that dispatch time (the executor's
     * gaps between ops are mostly short with rare long ones); only the expected makespan
     * (bm_simulate_expected) draws it; 0 = every op takes the mean */
    double op_overhead_sd_us;
    /* device.recv_overhead_us: time a recv takes to complete a message that is already there
     * (the MPI completion call and its bookkeeping); 0 = none */
    double recv_overhead_us;
    /* device.step_lead_us: time from a step's start to each rank's first op (the start
     * broadcast and the step's setup, e.g. zeroing the gradients); 0 = none */
    double step_lead_us;
    /* parallel.dp: data-parallel replicas D of the pipeline (default 1). Global rank of
     * pipeline rank p in replica d is p * D + d (docs/design.md §2); the table stays one
     * pipeline's (P ranks), every replica walks it. */
    int dp;
};

/* Parse and check the spec at 'path'. On success returns BM_OK and stores a new spec in *out,
 * owned by the caller (release with bm_spec_free). On failure *out is NULL and err->msg reads
 * "path:line:col: what went wrong". */
BM_API int bm_spec_load(const char *path, struct bm_spec **out, struct bm_err *err);
/* Same, from a string; 'name' is used in messages. */
BM_API int bm_spec_parse(const char *text, const char *name, struct bm_spec **out, struct bm_err *err);
BM_API void bm_spec_free(struct bm_spec *s);
/* Index of the module called 'name', or -1. */
BM_API int bm_spec_find_module(const struct bm_spec *s, const char *name);

/* Per-microbatch encoder cost multipliers for M microbatches, drawn from
 * data.encoder_cost_scale (xoshiro256** seeded by splitmix64(seed); see docs/spec.md).
 * Writes M values into out. */
BM_API void bm_spec_encoder_scales(const struct bm_spec *s, int M, double *out);

/* ---------------------------------------------------------------- operator table (docs/design.md §4) */

enum bm_op_kind { BM_OP_COMPUTE = 0, BM_OP_SEND = 1, BM_OP_RECV = 2 };

struct bm_op {
    uint8_t kind;    /* enum bm_op_kind */
    uint8_t pass;    /* compute: enum bm_pass */
    int16_t module;  /* compute: index into table->modules; comm: module whose tensor travels */
    int32_t chunk;   /* compute on the backbone: global chunk 0..P*V-1; otherwise -1 */
    int32_t mb;      /* microbatch */
    int32_t peer;    /* send/recv: the other rank; compute: -1 */
    int32_t tensor;  /* send/recv: index into table->tensors; compute: -1 */
};

struct bm_tensor {
    char *name;      /* "vis_emb", "llm.c0.out", "grad:vis_emb" */
    int module;      /* producing module (the backbone for chunk outputs) */
    int grad;        /* 1 for "grad:<tensor>" */
    /* its bytes per microbatch are the cost model's (bm_costs_tensor_mib, bigmac_cost.h) */
};

struct bm_table_module {
    char *name;
    enum bm_role role;
    char **consumes;  int n_consumes;
    char **produces;  int n_produces;
    int grad_to_backbone;
    /* its costs (JSON "cost") are the cost model's: struct bm_costs modules[i] (bigmac_cost.h) */
    int recompute;           /* 1 = full activation recomputation (src/sim/cost.h) */
    int frozen;              /* 1 = "trainable": false (JSON, written only when false) */
    /* derived by bm_table_finish from frozen and the graph (docs/spec.md "Frozen modules"):
     * BM_BACKWARD_FULL, BM_BACKWARD_INPUT (input gradient only: no W, no weight gradient) or
     * BM_BACKWARD_NONE (no B, no W, nothing kept after the forward) */
    int backward;
};
enum { BM_BACKWARD_FULL = 0, BM_BACKWARD_INPUT = 1, BM_BACKWARD_NONE = 2 };

/* What a table keeps for the library alone (its tensor index, how much its lists allocated, the
 * dataflow bm_table_finish computes): opaque, read through functions (bm_table_find_tensor,
 * bm_table_op_flow, ...). */
struct bm_table_private;

/* The cost model that goes beside a table (bigmac_cost.h): programs that only plan, verify or
 * run a schedule pass it along without looking inside. Frees every array it holds; NULL is a
 * no-op. */
struct bm_costs;
BM_API void bm_costs_free(struct bm_costs *c);

/* One rank's ops in program order. ops is malloc'd and owned by the table. A program may edit
 * ops in place, shorten n_ops and append with bm_table_push (which grows the list: the table
 * keeps how much it allocated, privately); one that gives a rank another list (malloc'd) sets
 * ops and n_ops and frees the old list only after the new one is allocated. */
struct bm_rank_ops {
    struct bm_op *ops;
    int n_ops;
};

/* The schedule: which ops run on which rank in which order, and what they exchange. What the
 * ops cost (module costs, chunk weights, microbatch and rank scales, the device, overheads,
 * measured bytes) is not here but in the cost model that goes beside a table (struct bm_costs,
 * bigmac_cost.h): the verifier and the executors read a table alone.
 *
 * Made by bm_table_new (never by a program's own allocation: priv must be the table's) and
 * released by bm_table_free. Every field is public to read. A program that builds or edits a
 * table sets the shape (pp is fixed at bm_table_new), modules, chunk_layers, chunk_rank and the
 * deployment fields directly, appends ops with bm_table_push and tensors with bm_table_tensor
 * (tensors is read-only otherwise: the table indexes their names), and calls bm_table_finish
 * after changing the modules. */
struct bm_table {
    int pp, vpp, microbatches, unit, window;  /* window 0 = policy uses none */
    enum bm_backbone backbone;
    enum bm_policy policy;
    int warmup_extra;         /* extra warm-up forwards per stage (docs/design.md §6 step 2) */
    int n_modules;
    struct bm_table_module *modules;
    int backbone_module;      /* index into modules */
    int n_tensors;
    struct bm_tensor *tensors;/* [n_tensors] read-only: added by bm_table_tensor */
    int *chunk_layers;        /* [pp*vpp] layers per chunk, or NULL when layers unknown */
    struct bm_rank_ops *ranks;/* [pp] */
    struct bm_table_private *priv; /* the library's (opaque; see above); programs never touch it */
    /* Data-parallel replicas D of this pipeline (JSON "dp", written only when > 1; 0 or 1 = one
     * pipeline). Every replica walks this table; pipeline rank p of replica d is global rank
     * p * D + d, which is what ranks_per_host places on hosts (src/sim/hosts.h). */
    int dp;
    /* [pp*vpp] the rank of each global backbone chunk, or NULL: the backbone's own placement
     * (bm_backbone_chunk_rank; c mod P but for the V shapes). JSON "chunk_rank" / CSV
     * "# chunk_rank", written only when some chunk is not on rank c mod P. Owned by the table.
     * Read it through bm_table_chunk_rank. */
    int *chunk_rank;
    /* train.zero of the spec (JSON "zero", written only when 1): 1 = ZeRO-1, the optimizer state
     * sharded over each module's copies (src/sim/step.h) */
    int zero;
    /* Placement over hosts, a deployment fact both the executor (which warns when the run's
     * hosts differ) and the simulator (inter-host links) read: global rank g runs on host
     * g / ranks_per_host; 0 = every rank on one host. Spec device.ranks_per_host; the table
     * files keep it in their "device" object (JSON "ranks_per_host", CSV "# device"). */
    int ranks_per_host;
};

/* The rank that runs t's backbone chunk c (t->chunk_rank, else the backbone's placement). */
BM_API int bm_table_chunk_rank(const struct bm_table *t, int c);

/* Backbone chunk tensor name: "<backbone>.c<chunk>.out". */
#define BM_MAX_NAME 256

/* Allocate an empty table for P ranks (fields zeroed, ranks allocated). NULL on OOM. */
BM_API struct bm_table *bm_table_new(int pp);
BM_API void bm_table_free(struct bm_table *t);
/* Finish a table whose modules (and pp, vpp, backbone_module) are set: compute its dataflow
 * once and keep it inside the table, adding every tensor the modules make to t->tensors (the
 * ones it already lists keep their indices). The planner and the loaders finish every table
 * they return; a program that builds a table by hand calls it after setting the modules, before
 * the executor runs it (the verifier and simulator also take unfinished tables). Call it again
 * after changing the modules. BM_ERR on allocation failure or a table without a backbone. */
BM_API int bm_table_finish(struct bm_table *t, struct bm_err *err);
/* Append op to rank's list. BM_ERR (with message) on allocation failure. */
BM_API int bm_table_push(struct bm_table *t, int rank, struct bm_op op, struct bm_err *err);
/* Index of tensor 'name', interning it (module, grad filled from the arguments) when new.
 * Returns -1 on allocation failure. */
BM_API int bm_table_tensor(struct bm_table *t, const char *name, int module, int grad);
/* Index of tensor 'name' or -1 when the table has none by that name. */
BM_API int bm_table_find_tensor(const struct bm_table *t, const char *name);
/* Total op count over all ranks. */
BM_API long bm_table_n_ops(const struct bm_table *t);
/* Index of the module called 'name', or -1. */
BM_API int bm_table_find_module(const struct bm_table *t, const char *name);

/* 1 when module's backward is split into B and W in t: the backbone under a zero-bubble
 * schedule (bm_backbone_splits), or any module with a W op in t. module -1: any module. */
BM_API int bm_table_splits(const struct bm_table *t, int module);
/* The same for every module at once, in one pass over the ops: out[0 .. n_modules-1] = 0 / 1. */
BM_API void bm_table_split_flags(const struct bm_table *t, char *out);
/* Frozen modules (docs/spec.md "Frozen modules"), after bm_table_finish: the module's
 * BM_BACKWARD_FULL / _INPUT / _NONE, and whether ops of that pass exist for it at all (F always;
 * B unless the backward is NONE; W only for a full backward, where the schedule splits it). */
BM_API int bm_table_backward(const struct bm_table *t, int module);
BM_API int bm_table_has_pass(const struct bm_table *t, int module, int pass);
/* The dataflow of t's compute op (module, chunk: a global backbone chunk, -1 for other modules,
 * pass) after bm_table_finish: *needs the tensors it needs on its rank, *makes the ones it
 * makes (indices into t->tensors, *n_needs and *n_makes of them; the arrays belong to t and last
 * until it changes or is freed). Backbone chunk 0's encoder parts come in spec module order, as
 * the executors concatenate several encoders' outputs (bigmac_module.h). Returns 1; 0 when t has
 * no such op; -1 when t has no dataflow (not finished). */
BM_API int bm_table_op_flow(const struct bm_table *t, int module, int chunk, int pass, const int **needs,
                            int *n_needs, const int **makes, int *n_makes);

/* PyTorch-pipelining style action string for an op: backbone "2F0" (global chunk, pass, mb),
 * nested "vit:F3", comm "SEND_F:vis_emb:3>1" / "RECV_B:grad:llm.c0.out:3<1". Writes at most n bytes. */
BM_API void bm_op_format(const struct bm_table *t, const struct bm_op *op, char *buf, size_t n);

/* Write the table as JSON (docs/design.md §4, plus the extension fields documented in docs/table.md)
 * with the costs c of its modules, chunks, microbatches and device (the file keeps both; c NULL:
 * every cost 0, uniform chunk weights, scales 1). */
BM_API int bm_table_write_json(const struct bm_table *t, const struct bm_costs *c, FILE *f);
/* Write to 'path' ("-" = stdout). */
BM_API int bm_table_save(const struct bm_table *t, const struct bm_costs *c, const char *path, struct bm_err *err);
/* Parse a table file into the schedule (*out) and the costs it carries (*costs; pass NULL when
 * not wanted); errors name path:line:col and the field. Caller owns both (bm_table_free,
 * bm_costs_free); both NULL on failure. */
BM_API int bm_table_load(const char *path, struct bm_table **out, struct bm_costs **costs, struct bm_err *err);
BM_API int bm_table_parse(const char *text, const char *name, struct bm_table **out, struct bm_costs **costs,
                          struct bm_err *err);

/* ---------------------------------------------------------------- backbone schedules (docs/design.md §5) */

struct bm_bb_step {
    uint8_t pass;   /* BM_PASS_F, BM_PASS_B, or BM_PASS_W (zero-bubble backbones) */
    uint8_t flags;  /* BM_STEP_WHOLE, BM_STEP_OVERLAP: how PyTorch writes the step (dualpipe-v) */
    int32_t chunk;  /* global chunk */
    int32_t mb;
};
/* A B whose W is the next step: PyTorch's whole backward B (I and W back to back). */
#define BM_STEP_WHOLE 1
/* An F that runs with the next step (a B) as one PyTorch (F;B)OVERLAP_F_B: back to back. */
#define BM_STEP_OVERLAP 2
/* The rank that runs global chunk c under backbone bb with P ranks: c mod P, or for the
 * V-shaped backbones c for c < P and 2P-1-c after. */
BM_API int bm_backbone_chunk_rank(enum bm_backbone bb, int P, int c);
/* 1 for the V-shaped backbones (zb-v, dualpipe-v: vpp = 2). */
BM_API int bm_backbone_v_shaped(enum bm_backbone bb);

/* Number of warm-up forwards of 'rank' (Megatron's rule plus 'warmup_extra', capped). */
BM_API int bm_backbone_warmup(enum bm_backbone bb, int P, int V, int M, int rank, int warmup_extra);
/* 1 when bb splits every backward into B (input gradient) and W (weight gradient). */
BM_API int bm_backbone_splits(enum bm_backbone bb);
/* Backbone ops per rank: 2*V*M, or 3*V*M for the zero-bubble schedules. */
BM_API int bm_backbone_n_steps(enum bm_backbone bb, int V, int M);
/* Fill out[0 .. bm_backbone_n_steps(bb, V, M)-1] with rank's backbone F/B(/W) order. Returns
 * BM_ERR for invalid parameters (e.g. interleaved with M % P != 0). */
BM_API int bm_backbone_order(enum bm_backbone bb, int P, int V, int M, int rank, int warmup_extra,
                             struct bm_bb_step *out, struct bm_err *err);

/* ---------------------------------------------------------------- planner (docs/design.md §6) */

/* Window modes besides a fixed W >= 1. */
#define BM_WINDOW_AUTO 0   /* the smallest deadlock-free window (least memory) */
#define BM_WINDOW_FIT (-1) /* the window with the smallest nominal makespan among those whose
                            * simulated peak memory fits device.memory_gib on every rank
                            * (ties: the smaller window); falls back to auto if none fits */
/* The relative gain a larger window must pay under a cap (W >= 1) and under fit: it is chosen
 * over the best smaller one only when its nominal makespan is shorter by more than this
 * fraction, so ties and noise-level gains keep the smaller window (less memory). 5e-4 = 0.05%,
 * 1.5 ms in a 3 s step; `ideal` (the unlimited-memory reference) keeps the strictly fastest. */
#define BM_WINDOW_GAIN 5e-4

/* A plan option that was not given: any field of struct bm_plan_opts may hold it
 * (bm_plan_opts_unset), and bm_plan_opts_merge then keeps the value underneath. */
#define BM_UNSET INT_MIN

/* Plan options: the one type for the spec's parallel/schedule settings, a file's header, the
 * command line's plan flags and the Python binding's keyword arguments. Layers of them are laid
 * over each other with bm_plan_opts_merge (spec defaults <- a file's header <- flags <- keyword
 * arguments); bm_plan_build takes the result, every plan field given. */
struct bm_plan_opts {
    int pp, vpp, microbatches;
    int unit;                 /* 0 = pp */
    int window;               /* >= 1 (a cap: the fastest plan at any safe window up to it, within
                               * BM_WINDOW_GAIN; the table records the one used), BM_WINDOW_AUTO
                               * or BM_WINDOW_FIT */
    enum bm_backbone backbone;
    enum bm_policy policy;
    /* Settings the spec keeps outside "parallel"/"schedule" that the plan flags also set (--dp,
     * --ranks-per-host, --zero): parallel.dp, device.ranks_per_host, train.zero. The planner
     * reads them from the spec: bm_plan_opts_to_spec writes the given ones there first. */
    int dp;                   /* data-parallel replicas (>= 1) */
    int ranks_per_host;       /* pipeline ranks per host (0 = one host) */
    int zero;                 /* 0, or 1 for ZeRO-1 */
};

/* Every field BM_UNSET: a layer that gives nothing yet. */
BM_API void bm_plan_opts_unset(struct bm_plan_opts *o);
/* Copy the spec's settings into o (every field; command-line flags then override). */
BM_API void bm_plan_opts_from_spec(struct bm_plan_opts *o, const struct bm_spec *s);
/* Lay 'over' on o: each field 'over' gives (not BM_UNSET) replaces o's; the others keep o's
 * value. One rule beside the fields: when 'over' gives pp but no unit, a unit of o's equal to
 * o's pp (a spec's default unit, written out) follows the new pp (o->unit becomes 0 = pp). */
BM_API void bm_plan_opts_merge(struct bm_plan_opts *o, const struct bm_plan_opts *over);
/* Write the spec settings o gives (dp, ranks_per_host, zero; not BM_UNSET) into s. */
BM_API void bm_plan_opts_to_spec(const struct bm_plan_opts *o, struct bm_spec *s);
/* Build the lowered operator table and the spec's cost model for it (*costs; pass NULL when
 * not wanted). Caller owns both. On failure (bad options, window too small, ...) both are NULL
 * and err says why. */
BM_API int bm_plan_build(const struct bm_spec *s, const struct bm_plan_opts *o, struct bm_table **out,
                         struct bm_costs **costs, struct bm_err *err);
/* A table read from a file that gave its compute ops only (a PyTorch compute-only CSV, or a
 * bigmac CSV without its send/recv cells; docs/csv.md): add the sends and receives the planner's
 * lowering would (a recv right before the first op on a rank that needs a tensor made elsewhere,
 * a send right after the op that makes it), each op staying on the rank and at the place the
 * file gave it. A table with any send or recv is taken as written (*lowered = 0). BM_ERR when
 * an op is not one of the iteration's or appears twice, or one is missing. */
BM_API int bm_plan_lower_loaded(struct bm_table *t, int *lowered, struct bm_err *err);
/* bm_plan_build with the placement search's budget (bigmac and ideal, docs/planner.md
 * "Placement search"): search = 0 the default (what bm_plan_build uses), BM_SEARCH_OFF none,
 * > 0 at most that many order timings per descent (two per window tried). Deterministic:
 * bounded by count, never by the clock, so the same inputs give the same table. When lower_bound_ms is not NULL it
 * receives a makespan lower bound for the work as this table places it, valid for every
 * order of it that keeps each rank's backbone order (docs/simulator.md "Lower bound"). */
#define BM_SEARCH_OFF (-1)
BM_API int bm_plan_build_search(const struct bm_spec *s, const struct bm_plan_opts *o, int search,
                                struct bm_table **out, struct bm_costs **costs, double *lower_bound_ms,
                                struct bm_err *err);

/* ---------------------------------------------------------------- verifier (docs/design.md §7) */

/* Check every invariant: 0 structure (indices in range; safe on hand-edited garbage),
 * 1 counts, 2 deadlock freedom, 3 backbone order, 4 dependencies, 5 residency (policy bigmac
 * with window > 0). BM_OK, or BM_ERR with the first violated invariant explained: the first
 * line reads "invariant N (name) violated: ...", indented lines name ranks and ops ("rank 1
 * blocked at op #5 RECV_F:llm.c0.out:3<0: waits for ..."), "hint:" lines say what to change.
 * t is not modified: the dataflow is built on a private copy of t's tensor list, so t's
 * tensors need not be interned beforehand. err may be NULL. O(ops) time. */
BM_API int bm_verify(const struct bm_table *t, struct bm_err *err);

/* Peak number of live microbatches (F done, B not yet; W not yet for a module whose backward the
 * table splits) per rank and module, computed from
 * program order: out[rank * t->n_modules + module]. For the backbone the count is summed over
 * the rank's chunks. */
BM_API void bm_table_peak_live(const struct bm_table *t, int *out);

/* ---------------------------------------------------------------- simulator (docs/design.md §8) */

/* A timeline: when every op of a table ran, what it waited for, and the memory it held.
 * The simulator produces one (bm_simulate); the executor's measured trace is loaded into the
 * same struct (bm_timeline_new, fill ops[] and push memory points, bm_timeline_summarize), so
 * renderers draw either. All times are milliseconds from the iteration's start; all memory is
 * MiB (1 MiB = 2^20 bytes).
 *
 * Op times (one struct bm_op_time per op, parallel to table->ranks[r].ops):
 *   compute  start_ms..end_ms is the rank's busy interval for it.
 *   send     non-blocking: start_ms == end_ms == issue time. The data arrives at the matching
 *            recv's ready_ms.
 *   recv     start_ms = when the rank reached it (began waiting); end_ms = when it completed
 *            = max(start_ms, ready_ms). end_ms - start_ms is idle time spent blocked on it.
 * ready_ms is when the op's inputs were available, ignoring whether the rank was busy:
 *   recv     the data's arrival (matching send's issue + transfer time);
 *   compute  the latest of: the arrival of every recv of the same microbatch since the rank's
 *            previous compute op of that microbatch, and that previous compute op's end (the
 *            local producer); 0 when neither exists;
 *   send     the end of the rank's previous compute op of the same microbatch (the producer),
 *            or start_ms when there is none.
 * wait_rank/wait_op name the op whose completion (for a send: whose data's arrival) set
 * ready_ms: for a recv its matching send; for a compute op either that send (seen through the
 * recv) or the local producer; -1/-1 when none. An op was delayed by its inputs, not by its
 * rank, when ready_ms > the end of the rank's previous op. */
struct bm_op_time {
    double start_ms;   /* see above */
    double end_ms;
    double ready_ms;
    int32_t wait_rank; /* rank of the op waited on, or -1 */
    int32_t wait_op;   /* index into table->ranks[wait_rank].ops, or -1 */
    double msg_bytes;  /* send/recv of a measured trace: the message's bytes; 0 = not measured */
};

/* One point of a rank's activation-memory trace: from t_ms on (until the next point) the rank
 * holds act_mib[role] MiB of live activations per role (enum bm_role). Points are appended only
 * where a value changes, in non-decreasing time; two points may share a time (a free followed
 * by an allocation). Before the first point every value is 0. */
struct bm_mem_point {
    double t_ms;
    double act_mib[BM_N_ROLES];
};

struct bm_rank_timeline {
    struct bm_op_time *ops;   /* [n_ops], parallel to table->ranks[r].ops */
    int n_ops;
    struct bm_mem_point *mem; /* [n_mem] activation trace (see struct bm_mem_point) */
    int n_mem, cap_mem;
    double state_mib;         /* resident params + grads + optimizer state */
    double peak_mib;          /* state_mib + peak of total live activations */
    double peak_act_mib[BM_N_ROLES]; /* each role's own peak (may occur at different times) */
    double busy_ms;           /* sum of compute op durations */
    double busy_role_ms[BM_N_ROLES]; /* busy_ms split by the role of the op's module */
    double idle_lead_ms;      /* before the first compute op starts (all of makespan if none) */
    double idle_mid_ms;       /* between the first compute start and the last compute end */
    double idle_tail_ms;      /* after the last compute op ends, up to makespan */
    /* busy + lead + mid + tail == makespan_ms */
    int oom;                  /* peak_mib > memory_cap_mib (never when the cap is 0) */
    /* split backward (B then W, simulated tables only; 0 without one): the activation MiB
     * freed at B ends and at W ends over the iteration, and the most held at once between a B
     * and its W (part of the activation peak above) */
    double freed_b_mib, freed_w_mib;
    double peak_held_w_mib;
    double held_w_mib;        /* running value while simulating (0 at the end) */
};

struct bm_timeline {
    int pp;                   /* ranks (== table->pp) */
    int microbatches;
    int samples_per_microbatch;
    int measured;             /* 0 = simulated, 1 = loaded from an executor trace */
    struct bm_rank_timeline *ranks; /* [pp] */
    double makespan_ms;       /* latest end_ms of any op */
    double bubble_ratio;      /* sum of idle over ranks / (pp * makespan_ms) */
    double samples_per_s;     /* microbatches * samples_per_microbatch / makespan in seconds */
    double memory_cap_mib;    /* device.memory_gib * 1024; 0 = no cap */
    double peak_mib;          /* max over ranks of peak_mib */
    double peak_act_mib[BM_N_ROLES]; /* max over ranks of peak_act_mib[role] */
    int oom;                  /* any rank oom */
    /* The whole step (simulated timelines; src/sim/step.h, docs/simulator.md "The step"): the
     * walk (makespan_ms), then the gradient synchronisation and the optimizer. step_ms =
     * makespan_ms + sync_exposed_ms + optimizer_ms; samples_per_s counts step_ms when > 0.
     * sync_total_ms: the most collective time on one rank, hidden or not. 0 on measured
     * timelines. */
    double step_ms, sync_exposed_ms, sync_total_ms, optimizer_ms;
};

struct bm_sim_opts {
    double jitter;    /* encoder/generator op durations x (1 + jitter*u), u ~ U[-1,1]; 0 = none */
    uint64_t seed;    /* jitter seed (xoshiro256**); draws are per (module, pass, mb), so the same
                       * work gets the same jitter whatever the policy placed it */
    int samples_per_microbatch; /* for samples_per_s; 0 = 1 */
};

/* Simulate table t under cost model c (docs/design.md §8; the cost and memory model are in
 * docs/simulator.md and src/sim/cost.h). o may be NULL (no jitter). On success returns BM_OK and stores a new
 * timeline in *out (caller owns it: bm_timeline_free). On failure (malformed table, a recv with
 * no matching send, a deadlock) *out is NULL and err names the blocked ranks' ops. Never hangs:
 * runs in O(ops). */
BM_API int bm_simulate(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                       struct bm_timeline **out, struct bm_err *err);
/* bm_simulate for callers that need only the figures: the same timeline, every figure equal to
 * bm_simulate's bit for bit (makespan, bubble, samples/s, peaks, OOM, the step, each rank's
 * busy/idle/state/peaks and split-backward figures), but without the per-op record: every
 * ranks[r].ops and ranks[r].mem is NULL (n_ops and n_mem 0), so it cannot be rendered, traced
 * or summarized again. bm_timeline_write_json takes it. Keeps one double per op while it runs
 * (a send's issue time) instead of the 40 B per op and 32 B per memory point of the timeline:
 * what the planner, sweep and `bigmac simulate` use. */
BM_API int bm_simulate_summary(const struct bm_table *t, const struct bm_costs *c, const struct bm_sim_opts *o,
                               struct bm_timeline **out, struct bm_err *err);
BM_API void bm_timeline_free(struct bm_timeline *tl);
/* Write the JSON object `bigmac simulate --json` prints for table t and its timeline tl
 * (docs/simulator.md "JSON output": policy, settings, makespan, bubble, samples/s, memory,
 * per-rank figures, the step, "hosts" for a table placed over hosts), indented, then a newline.
 * BM_ERR when memory runs out or the write fails. */
BM_API int bm_timeline_write_json(const struct bm_table *t, const struct bm_costs *c, const struct bm_timeline *tl,
                                  FILE *f);

/* For loaders of measured traces: a timeline shaped like t (ops zeroed, wait = -1, no memory
 * points, state_mib and the memory cap from the memory model of c; c NULL: 0). NULL on
 * allocation failure. */
BM_API struct bm_timeline *bm_timeline_new(const struct bm_table *t, const struct bm_costs *c);
/* Append a memory point to rank r (skipped when equal to the last one). BM_ERR on OOM. */
BM_API int bm_timeline_mem_push(struct bm_timeline *tl, int r, double t_ms,
                                const double act_mib[BM_N_ROLES]);
/* Recompute every derived figure (busy/idle, peaks, OOM, makespan, bubble ratio, samples/s)
 * from ops[] times, the memory traces and state_mib. A timeline without op times
 * (bm_simulate_summary's) keeps its figures. */
BM_API void bm_timeline_summarize(struct bm_timeline *tl, const struct bm_table *t);

/* ---------------------------------------------------------------- executor (docs/design.md §9) */

/* `bigmac train` as a library call: argv[0] is ignored ("train"), then SPEC and flags exactly as
 * on the command line (`bigmac train --help`; docs/executor.md). Run it under mpirun (one
 * pipeline rank per process) or with --local / --reference. Register custom modules
 * (bigmac_module.h) before calling it. Returns the exit status: 0 ok, 1 failure, 2 usage. Only
 * programs linked with the MPI transport (src/exec/comm_mpi.c) can run it without --local. */
BM_API int bm_train_main(int argc, char **argv);

/* bm_train's run mode: one pipeline rank per MPI process (under mpirun), every rank in this
 * process (no MPI; debugging), or the single-process reference trainer (no pipeline). */
enum bm_train_mode { BM_TRAIN_MPI = 0, BM_TRAIN_LOCAL, BM_TRAIN_REFERENCE };
/* A fault to inject for testing failure handling (`--inject-fault RANK:OP:KIND[:STEP]`); the
 * one fault type of the executor, its MPI start-up and the tests. */
enum bm_train_fault { BM_TRAIN_FAULT_NONE = 0, BM_TRAIN_FAULT_NAN, BM_TRAIN_FAULT_CRASH, BM_TRAIN_FAULT_EXIT,
                      BM_TRAIN_FAULT_HANG };
/* fault_op values that name a place instead of an op (`--inject-fault RANK:PLACE:KIND[:STEP]`):
 * rank RANK's checkpoint file written after step STEP (0-based), half written; start-up before
 * MPI_Init; start-up after MPI_Init, before the ranks exchange their host names. */
enum { BM_TRAIN_FAULT_AT_CHECKPOINT = -1, BM_TRAIN_FAULT_AT_INIT = -2, BM_TRAIN_FAULT_AT_HOSTS = -3 };

/* Options of bm_train, the one training-options type (`bigmac train`, the executor, the reference
 * trainer, the tests); zero-initialised means: MPI, the spec's steps, no files, 60 s timeout,
 * progress on stdout. Each field is one `bigmac train` flag, but the outputs at the end. */
struct bm_train_opts {
    enum bm_train_mode mode;
    const struct bm_plan_opts *plan; /* NULL: the spec's settings; pp 0: the number of ranks
                                      * (MPI), else the spec's pp. Ignored when a table is given
                                      * and by the reference trainer */
    const char *table_name;          /* the given table's file, for messages (NULL = none) */
    int steps;                       /* train until this step; 0 = the spec's train.steps */
    const char *log_path;            /* --log: one JSON object per step (NULL = none) */
    const char *trace_path;          /* --trace: Chrome trace of the last step (pipelined only) */
    const char *ckpt_dir;            /* --checkpoint: write checkpoints here (pipelined only) */
    int ckpt_every;                  /* --checkpoint-every: every N steps (0 = after the last) */
    const char *resume_dir;          /* --resume: continue from this checkpoint (pipelined only) */
    const char *dump_params;         /* --dump-params: final parameters, raw floats, spec order */
    enum bm_train_fault fault;       /* --inject-fault: KIND (pipelined only) */
    int fault_rank, fault_op, fault_step; /* ... RANK, OP (index in the rank's op list, or a
                                      * BM_TRAIN_FAULT_AT_* place), STEP */
    double timeout_s;                /* --timeout: a rank waiting longer for a message fails
                                      * (MPI; 0 = 60 s, < 0 = never, `--timeout 0`) */
    int quiet;                       /* --quiet: no progress lines */
    /* Called with a failure's message before bm_train returns, in the process that should print
     * it (rank 0's for a failure before the first step, every process for a failing step) and
     * before MPI is finalized, so that it is out before any process exits. setup = 1 for a
     * failure before the first step (the table, the plan, the number of ranks). NULL: none
     * (the message is in err either way). */
    void (*on_error)(void *ctx, const char *msg, int setup);
    void *ctx;
    int trace_from;                  /* --trace-from K: also trace every step from K (1-based, as
                                      * the progress lines count) to the last, each to
                                      * trace_path less ".json" plus ".step<K>.json"; 0 = none */
    int dp;                          /* --dp: data-parallel replicas of the pipeline (MPI: the
                                      * world is pp * dp ranks; global rank p * dp + d); 0 = the
                                      * table's (given) or the plan's (opts->plan, the spec) */
    int resume_force;                /* --resume-force: resume although the checkpoint's training
                                      * settings (lr, seeds, ...) differ from the spec's */
    /* What a program (a test) reads back, in the process of pipeline rank 0 (reference: the
     * process): NULL = not wanted. loss_out[steps] each step's loss; ms_out[steps] each step's
     * wall time (ms); peak_out[pp * BM_N_ROLES] the last step's peak live activation bytes per
     * rank and role (pipelined only). */
    double *loss_out, *ms_out, *peak_out;
};

/* Train the model of 'spec' pipelined (MPI or BM_TRAIN_LOCAL) or with the reference trainer,
 * on the built-in dataset (docs/executor.md). table: the operator table to run (the caller's;
 * checked with bm_verify and against the number of ranks), or NULL to plan one from spec and
 * opts->plan. costs: the given table's cost model (as loaded with it), which the executor only
 * embeds, unread, with the table in its traces (--trace); NULL: none (planned: the plan's). argc/argv: the program's, for MPI_Init (BM_TRAIN_MPI only; may be NULL
 * otherwise). Progress lines go to stdout on rank 0 unless opts->quiet. Returns BM_OK, or
 * BM_ERR with err set (and opts->on_error called where it should be printed). Only programs
 * linked with the MPI transport can run BM_TRAIN_MPI. */
BM_API int bm_train(const struct bm_spec *spec, const struct bm_table *table, const struct bm_costs *costs,
                    const struct bm_train_opts *opts, int *argc, char ***argv, struct bm_err *err);
/* For a program that fails before it can call bm_train (a spec or table that does not load):
 * report msg as bm_train reports a failure before the first step, through opts->on_error with
 * setup = 1; under BM_TRAIN_MPI only in rank 0's process, MPI started and finalized around it
 * (so that a job of N processes prints one message). Returns BM_ERR. */
BM_API int bm_train_fail(const struct bm_train_opts *opts, int *argc, char ***argv, const char *msg);

/* ---------------------------------------------------------------- studies (src/study/) */

/* Many plans of one spec, simulated and compared: the policy comparison with its bounds
 * (`bigmac simulate --compare`, the HTML report, bench/bench_policies.c) and the sweep over
 * parallel settings (`bigmac sweep`). The callers only print. */

/* One row of a comparison: one policy planned and simulated at the comparison's settings. */
struct bm_compare_row {
    enum bm_policy policy;
    int recompute;               /* 1: the "optimus+recompute" row (every encoder and generator
                                  * recomputed; bm_compare_row_name) */
    int ok;                      /* 0: planning or simulation failed; error says why */
    char error[4096];            /* the whole message (a first line, then hint: lines) */
    double makespan_ms, bubble_ratio, samples_per_s;
    double peak_mib;             /* max over ranks of state + live activations, MiB */
    double peak_act_mib[BM_N_ROLES]; /* max over ranks, per role, MiB */
    int oom;                     /* peak over the device memory */
    int window;                  /* the table's window */
    long n_ops;                  /* the table's ops */
    double nested_max_ms;        /* largest per-rank encoder + generator busy time */
    double lower_ms;             /* this placement's makespan lower bound; < 0: none (the
                                  * recompute row, or a failure) */
    struct bm_table *t;          /* the row's table, cost model and timeline when opts->keep */
    struct bm_costs *c;          /* kept them (owned by the comparison: bm_compare_free), */
    struct bm_timeline *tl;      /* else NULL */
    double step_ms, sync_exposed_ms, optimizer_ms; /* the whole step (struct bm_timeline) */
};

/* A comparison (bm_compare fills it; read-only; bm_compare_free releases it). */
struct bm_compare {
    struct bm_compare_row *rows; /* [n_rows] rows[p] is policy p (enum order, BM_N_POLICIES of
                                  * them); then the optimus+recompute row, only when optimus is
                                  * OOM. Owned by the comparison */
    int n_rows;
    int n_failed;                /* of the BM_N_POLICIES policy rows */
    double bound_ms;             /* the zero-added-bubble bound: none's makespan + bigmac's
                                  * nested_max_ms (docs/design.md §6); < 0 when either failed */
    double lower_ms;             /* makespan lower bound for every policy: the smallest of the
                                  * policies' own (none left out; docs/simulator.md); < 0 under
                                  * jitter or when none planned */
};

struct bm_compare_opts {
    const struct bm_sim_opts *sim; /* NULL: nominal durations */
    int search;                  /* placement search budget (bm_plan_build_search) */
    /* Called for each row as soon as it is done (in the order rows[0..], the recompute row
     * last), with its table, cost model and timeline (NULL when !row->ok), and returns 1 to
     * keep them in the row, 0 to have them freed. NULL: none kept. */
    int (*keep)(void *ctx, const struct bm_compare_row *row, const struct bm_table *t,
                const struct bm_costs *c, const struct bm_timeline *tl);
    void *ctx;
};

/* Plan s under every policy with o's parallel settings (o->policy is ignored), simulate each
 * and fill *out; when optimus runs out of memory also optimus with every encoder and generator
 * recomputed (one more row). s's modules' recompute is changed while planning that row and
 * restored. A policy that fails only marks its row. BM_ERR only when memory runs out (out is
 * then empty). Release with bm_compare_free. */
BM_API int bm_compare(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *opts,
                      struct bm_compare *out, struct bm_err *err);
/* Frees the rows with their kept tables and timelines (rows becomes NULL, n_rows 0); safe on a
 * zeroed or freed comparison. */
BM_API void bm_compare_free(struct bm_compare *c);
/* "optimus+recompute" for that row, else the policy's name. */
BM_API const char *bm_compare_row_name(const struct bm_compare_row *row);
/* bm_compare of s (opts->keep is not used) written as the JSON object `bigmac simulate --compare
 * --json` prints: {"results": [bm_timeline_write_json's object per row, or {"policy", "error"}
 * for a row that failed, optimus+recompute after optimus], "zero_bubble_bound_ms",
 * "lower_bound_ms"}, then a newline. *n_failed (may be NULL): the policy rows that failed (all
 * BM_N_POLICIES: nothing planned; the object still says why). BM_ERR only when memory runs out
 * or the write fails. */
BM_API int bm_compare_write_json(struct bm_spec *s, const struct bm_plan_opts *o, const struct bm_compare_opts *opts,
                                 FILE *f, int *n_failed, struct bm_err *err);

#define BM_SWEEP_MAX_VALUES 64

/* What to sweep: every combination of the lists (each empty: the base options' value). */
struct bm_sweep_opts {
    int pp[BM_SWEEP_MAX_VALUES], n_pp;
    int vpp[BM_SWEEP_MAX_VALUES], n_vpp;
    int microbatches[BM_SWEEP_MAX_VALUES], n_microbatches;
    const enum bm_policy *policies; /* [n_policies] the caller's (none: the base's policy) */
    int n_policies;
    int windows[BM_SWEEP_MAX_VALUES], n_windows; /* bigmac only (the one policy with a window):
                                                  * >= 1, BM_WINDOW_AUTO or BM_WINDOW_FIT */
    int backbone_fixed;          /* 1: the base backbone was chosen (--backbone), so vpp 1 keeps
                                  * an interleaved one; else vpp 1 runs 1f1b (zb-h1 for a
                                  * zero-bubble schedule) */
    double mem_cap_mib;          /* OOM above min(device memory, this); 0: the device memory */
    const struct bm_sim_opts *sim; /* NULL: nominal durations */
    FILE *progress;              /* "sweep: [i/n] ..." per configuration; NULL: none */
};

/* One configuration that planned and simulated. */
struct bm_sweep_row {
    int pp, vpp, microbatches, unit, window; /* the table's (window: the one used) */
    enum bm_backbone backbone;
    enum bm_policy policy;
    double makespan_ms, bubble_ratio, samples_per_s, peak_mib;
    int oom;                     /* peak_mib over the sweep's cap_mib */
    double step_ms, sync_exposed_ms, optimizer_ms; /* the whole step (struct bm_timeline) */
};

/* One configuration that did not plan or simulate. */
struct bm_sweep_skip {
    int pp, vpp, microbatches, window; /* as asked (window may be BM_WINDOW_AUTO / _FIT) */
    enum bm_backbone backbone;
    enum bm_policy policy;
    char reason[4096];           /* the first line of the message */
};

struct bm_sweep {
    int configs;                 /* combinations tried */
    double cap_mib;              /* min(device memory, mem_cap_mib); 0: none */
    struct bm_sweep_row *rows;   /* ranked: fitting ones first, by samples/s (descending), then
                                  * makespan */
    int n_rows;
    struct bm_sweep_skip *skipped; /* in the order tried */
    int n_skipped;
    int best;                    /* 0 when rows[0] fits, else -1 (none, or every one OOM) */
};

/* Plan and simulate every combination of opts' lists over the base options (the policy, unit
 * and backbone from base; vpp > 1 runs the interleaved backbone, zb-interleaved for a
 * zero-bubble one). Combinations that fail are skipped with their reason. BM_ERR only when
 * memory runs out. Release with bm_sweep_free. */
BM_API int bm_sweep(const struct bm_spec *s, const struct bm_plan_opts *base, const struct bm_sweep_opts *opts,
                    struct bm_sweep *out, struct bm_err *err);
BM_API void bm_sweep_free(struct bm_sweep *sw);

#ifdef __cplusplus
}
#endif
#endif
