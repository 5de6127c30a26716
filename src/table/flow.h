/* flow.h — the dataflow of one microbatch, derived from the table's module graph:
 * which tensors each compute op (module, chunk, pass) needs on its rank before it runs and
 * which it makes. The planner's lowering, the verifier and the executor all read this, so
 * "what travels" is defined once. A finished table keeps its flow (bm_table_finish,
 * bm_table_flow); the flow never changes the table it was built from.
 *
 * Tensors (indices into table->tensors, which bm_table_finish fills with them):
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
    int *needs;  /* tensor indices, in graph order (the lowering's send/recv order) */
    int *makes;  /* tensor indices */
};

struct bm_flow {
    int n_modules, n_chunks, backbone;
    struct bm_flow_op *ops;   /* see bm_flow_get */
    int *producer;            /* [n_tensors*3]: module, chunk, pass of the op making tensor i */
    int n_tensors;            /* the table's tensors, then the extra ones below */
    int n_table;              /* tensors 0 .. n_table-1 are the table's own */
    struct bm_tensor *extra;  /* [n_tensors - n_table]: tensors of the graph the table does not
                               * list (a hand-made table that was never finished) */
    int cap_extra;
    void *extra_index;        /* private: name -> extra tensor hash */
    /* Backbone chunk 0's encoder parts in spec module order (the executor concatenates several
     * encoders' outputs in that order): [0] its F's needs, [1] its B's makes. */
    int *parts[2];
    int n_parts[2];
};

/* The dataflow of t's modules. t is not changed: a tensor t lists keeps its index, one it does
 * not gets the next index after t's (its name etc. in f->extra). Caller owns *out. */
int bm_flow_build(const struct bm_table *t, struct bm_flow **out, struct bm_err *err);
void bm_flow_free(struct bm_flow *f);
/* The flow t was finished with (bm_table_finish), or NULL. */
const struct bm_flow *bm_table_flow(const struct bm_table *t);
/* The op (module, chunk (-1 unless backbone), pass F or B). NULL when out of range. */
const struct bm_flow_op *bm_flow_get(const struct bm_flow *f, int module, int chunk, int pass);
/* Tensor i of the flow (the table's or an extra one), or NULL when out of range. */
const struct bm_tensor *bm_flow_tensor(const struct bm_flow *f, const struct bm_table *t, int i);
/* Which compute op makes tensor i: returns 0 and fills module/chunk/pass, or -1 if none
 * (tensor unknown to the graph). */
int bm_flow_producer(const struct bm_flow *f, int tensor, int *module, int *chunk, int *pass);
/* 1 when gradient flows from consumer module y back to producer module x. */
int bm_flow_grad_flows(const struct bm_table *t, int x, int y);

#endif
