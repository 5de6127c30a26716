/* flow.h — the dataflow of one microbatch, derived from the table's module graph:
 * which tensors each compute op (module, chunk, pass) needs on its rank before it runs and
 * which it makes. The planner's lowering, the verifier and the executor all read this, so
 * "what travels" is defined once.
 *
 * Tensors (interned into table->tensors by bm_flow_build):
 *   - each name a module lists in "produces" (the backbone's come from its last chunk);
 *   - "<bb>.c<c>.out" for the backbone's chunk c -> c+1 activation (c < P*V-1);
 *   - "grad:<x>" for the gradient of tensor x flowing back to its producer; when several
 *     modules consume x and send a gradient back, one per consumer, "grad:<x>@<consumer>",
 *     so every tensor has one producer (the producer's backward needs all of them and sums).
 * Gradient flows from consumer y back to producer x unless y is a generator with
 * grad_to_backbone = false and x is not a generator. Spec inputs ("image", "text") are data,
 * present on every rank, and never travel.
 * Besides these tensors, a B op needs its own F on the same rank (activations are local). */
#ifndef BM_FLOW_H
#define BM_FLOW_H

#include "bigmac.h"

struct bm_flow_op {
    int n_needs, n_makes;
    int *needs;  /* tensor indices */
    int *makes;  /* tensor indices */
};

struct bm_flow {
    int n_modules, n_chunks, backbone;
    struct bm_flow_op *ops;   /* see bm_flow_get */
    int *producer;            /* [n_tensors*3]: module, chunk, pass of the op making tensor i */
    int n_tensors;
};

/* Build the flow for t's modules, interning every tensor into t. Caller owns *out. */
int bm_flow_build(struct bm_table *t, struct bm_flow **out, struct bm_err *err);
void bm_flow_free(struct bm_flow *f);
/* The op (module, chunk (-1 unless backbone), pass F or B). */
const struct bm_flow_op *bm_flow_get(const struct bm_flow *f, int module, int chunk, int pass);
/* Order op (module, chunk, pass)'s needs and makes by the module each tensor belongs to (spec
 * module order; stable): the executor concatenates several encoders' outputs in that order. */
void bm_flow_sort_by_module(struct bm_flow *f, const struct bm_table *t, int module, int chunk, int pass);
/* Which compute op makes tensor i: returns 0 and fills module/chunk/pass, or -1 if none
 * (tensor unknown to the graph). */
int bm_flow_producer(const struct bm_flow *f, int tensor, int *module, int *chunk, int *pass);
/* 1 when gradient flows from consumer module y back to producer module x. */
int bm_flow_grad_flows(const struct bm_table *t, int x, int y);

#endif
