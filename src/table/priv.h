/* priv.h — what a table keeps for the library alone: struct bm_table's priv (include/bigmac.h
 * names the type and nothing more, so its layout can change without moving the public one's).
 * Only src/table/ includes this header (table.c, flow.c); every other package reads the dataflow
 * through bm_table_flow and grows op lists through bm_table_push / bm_table_reserve (table.h).
 *
 * The rooms (allocated entries) of a table's lists are kept here beside the pointer they belong
 * to: a program may hand a rank a new op list (ranks[r].ops, malloc'd, owned by the table) or
 * shorten n_ops, and the table then takes that list's room to be its n_ops, growing it with
 * realloc when the next op comes. */
#ifndef BM_TABLE_PRIV_H
#define BM_TABLE_PRIV_H

#include "bigmac.h"

struct bm_flow;

struct bm_table_room {
    const struct bm_op *ops; /* the op list 'room' belongs to */
    int room;                /* ops allocated there */
};

struct bm_table_private {
    int n_ranks;                 /* entries of rank[]: the pp the table was made with */
    struct bm_table_room *rank;  /* [n_ranks] */
    const struct bm_tensor *tensors_at; /* the tensor list room_tensors belongs to */
    int room_tensors;
    int index_cap;               /* tensor name -> index hash: a power of two, 0 = none yet */
    int *index_slot;             /* [index_cap] tensor index + 1; 0 = empty */
    /* the dataflow (table/flow.h) bm_table_finish computed from the modules; NULL until then */
    struct bm_flow *flow;
};

#endif
