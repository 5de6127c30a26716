/* table.h — the operator table's own package (src/table/, docs/design.md §4), below every other
 * package but util/ and spec/: the table types live in include/bigmac.h; this header holds what
 * the readers and writers of tables share beyond that public API:
 *
 *   table.c     new/free/push, tensor interning, action strings, split flags; what a table
 *               keeps for the library alone (its priv: the tensor index, the lists' rooms, the
 *               dataflow) is table/priv.h's, which no other package includes
 *   costs.c     the cost model's new/copy/free (include/bigmac_cost.h)
 *   skeleton.c  a table's shell and its cost model from a spec and options (modules, costs,
 *               chunks, warm-up, dataflow), the one used by the planner and by the CSV loader
 *   flow.c      the dataflow (table/flow.h), computed once when a table is finished
 *   schedule.c  the backbone orders a table's "backbone" names (docs/design.md §5)
 *   match.c     the one send/recv matcher
 *   check.c     the one op validator
 *   json.c      JSON load/save (docs/table.md)
 *   csv.c       CSV load/save (docs/csv.md)
 *
 * Nothing here includes a header of another package except util/ and spec/. This header names
 * the cost model (struct bm_costs) without including include/bigmac_cost.h, so that the
 * executor, which includes it, never sees inside one. */
#ifndef BM_TABLE_H
#define BM_TABLE_H

#include <stdio.h>

#include "bigmac.h"
#include "bigmac_report.h"

/* ---------------------------------------------------------------- skeleton */

/* The table shell of spec s under the (already checked) shape o: pp, vpp, microbatches,
 * unit, backbone, policy (o->window is not used), the placement over hosts, the modules
 * (policy none: the backbone only), the backbone's chunk layers, the default warm-up extension,
 * and the dataflow (bm_table_finish); no ops. And its cost model (*costs): the modules' costs,
 * the spec's device, per-microbatch encoder scales, rank time scales and op overheads, and the
 * chunk weights (unified-balanced moves work off the ranks that also carry encoders and
 * generators). Both are the caller's (bm_table_free, bm_costs_free); NULL on failure. */
int bm_table_skeleton(const struct bm_spec *s, const struct bm_plan_opts *o, struct bm_table **out,
                      struct bm_costs **costs, struct bm_err *err);

/* Give the loaded table t (e.g. the plan a run executed) and its cost model c spec s's costs as
 * bm_table_skeleton would set them: each module's cost and spread from s's module of the same
 * name (and role), s's encoder scales, device, rank scale and per-op dispatch; t takes s's
 * placement over hosts when s has one, and ZeRO-1 when s asks for it. The ops, chunk split,
 * chunk weights and recompute flags stay. table_path names t in messages. BM_ERR when a module
 * is missing or has another role in s. */
int bm_table_use_spec_costs(struct bm_table *t, struct bm_costs *c, const struct bm_spec *s,
                            const char *table_path, struct bm_err *err);

/* Extra warm-up forwards per stage that t's policy and modules ask for (docs/design.md §6
 * step 2): for the policies that place generators off the last stage (bigmac, ideal, and
 * optimus so that the baseline is not a strawman) when a generator sends gradient into the
 * backbone, U-1 (the last stage holds the whole unit's forwards before its first backward;
 * more for looped schedules when U > P) plus one forward that covers the round trip to the
 * generator owners and back; 0 otherwise. What a table without "warmup_extra" means.
 * -1 on allocation failure. */
int bm_table_default_warmup(const struct bm_table *t);

/* ---------------------------------------------------------------- op lists */

/* The room of rank r's op list (ops allocated; struct bm_table's priv keeps it): pushes up to
 * it only store. A list a program gave the rank counts as n_ops long. */
int bm_table_room(const struct bm_table *t, int r);
/* Room for n ops on rank r (n_ops unchanged). BM_ERR (with message) on allocation failure. */
int bm_table_reserve(struct bm_table *t, int r, long n, struct bm_err *err);
/* Rank r's op list becomes ops (n_ops used of room allocated, malloc'd; t owns it), its old one
 * freed. */
void bm_table_set_ops(struct bm_table *t, int r, struct bm_op *ops, int n_ops, int room);

/* ---------------------------------------------------------------- field lists of the writers */

/* A number of the table as the writers put it: key and value (JSON "key": v, CSV key=v). */
struct bm_field {
    const char *key;
    double val;
};
/* The device's numbers a table writes, in writing order (the knob list's, src/spec/knobs.h:
 * each knob's JSON rule, or its CSV rule when csv), with ranks_per_host (the table's) as the
 * placement. At most n; returns how many. */
int bm_table_device_fields(const struct bm_device *d, int ranks_per_host, int csv, struct bm_field *out, int n);
/* The executor's time outside the ops a table writes (the knob list's overhead rows set > 0, by
 * their JSON rule, or their CSV rule when csv): us, as the keys say (ms in the cost model c).
 * At most n; returns how many. */
int bm_table_overhead_fields(const struct bm_costs *c, int csv, struct bm_field *out, int n);
/* A module's cost numbers in writing order: the knob list's cost rows by their JSON rule, or
 * their CSV rule when csv (fwd_ms, bwd_ms, act_mib, state_mib, out_mib; JSON: spread when > 0;
 * with split (the table splits some backward) or frozen (the module is) the resolved w_ms and
 * act_w_mib; JSON: param_mib when not state_mib / 4). At most n; returns how many. */
int bm_table_cost_fields(const struct bm_cost *k, double spread, int frozen, int split, int csv,
                         struct bm_field *out, int n);

/* ---------------------------------------------------------------- send/recv matching */

/* One message key: what a send and its recv agree on. */
struct bm_msg {
    int32_t src, dst, tensor, mb;
    int32_t n_send, n_recv;          /* ops carrying this key (1 and 1 in a valid table) */
    int32_t send_op, recv_op;        /* first send (on src) / recv (on dst), -1 when none */
    int32_t send_op2, recv_op2;      /* a second one, -1 when none (duplicates) */
};

/* Which send each recv receives: the k-th recv of (sender, receiver, tensor, mb) in program
 * order matches the k-th such send (MPI's non-overtaking order for one tag). Ops whose peer
 * or tensor is out of range take part in no message. */
struct bm_match {
    int pp;
    long *base;                  /* [pp+1] global id of rank r's op 0 */
    int32_t *peer_op;            /* [ops] send: its recv's index on the peer; recv: its send's; -1 */
    int32_t *msg_of;             /* [ops] index into msgs of a send/recv, -1 for others */
    struct bm_msg *msgs;
    int n_msgs;
};

/* Match every send of t to its recv in O(ops) (hash of the keys). BM_ERR only when out of
 * memory. Release with bm_match_free (also safe on a zeroed or half-built struct). */
int bm_match_build(const struct bm_table *t, struct bm_match *m, struct bm_err *err);
/* The same pairing with only base and peer_op filled (msg_of and msgs NULL, n_msgs 0): what
 * the simulator and bm_match_deadlock_report need, in about a third of the memory (one
 * 16-byte slot per send, no per-message records). BM_ERR only when out of memory. */
int bm_match_peers(const struct bm_table *t, struct bm_match *m, struct bm_err *err);
void bm_match_free(struct bm_match *m);
/* The op index on the peer rank matched with rank r's op i, or -1. */
static inline int32_t bm_match_peer(const struct bm_match *m, int r, int i)
{
    return m->peer_op[m->base[r] + i];
}
/* The message of rank r's send/recv op i, or NULL. */
static inline const struct bm_msg *bm_match_msg(const struct bm_match *m, int r, int i)
{
    int32_t k = m->msg_of[m->base[r] + i];
    return k >= 0 ? &m->msgs[k] : NULL;
}

/* The one deadlock report, worded the same by the verifier (invariant 2), the simulator and
 * anyone else who runs a table's ranks until none can move: pc[r] is where rank r stopped
 * (== its op count: finished); every stopped rank stands at a recv. Calls line(ctx, text) for
 * each line, without a prefix or hint (the caller adds its own):
 *   "B of P ranks cannot finish (each waits for a send that never happens)"
 *   "  cycle: rank a -> rank b -> rank a (each waits for the next)"      when the waits cycle
 *   "  rank r blocked at op #i RECV_..: waits for rank s's op #j SEND_..; rank s is itself
 *    blocked at op #k ..."                                               one per stopped rank
 * Returns the number of stopped ranks (0: no report). */
int bm_match_deadlock_report(const struct bm_table *t, const struct bm_match *m, const int *pc,
                             void (*line)(void *ctx, const char *text), void *ctx);

/* ---------------------------------------------------------------- op validation */

/* The one validator of an op's fields, shared by every reader (JSON and CSV loaders, the
 * verifier's invariant 0, the simulator, the executor): calls bad(ctx, why) for each problem of
 * rank r's op in t (why reads like "mb 7 is out of range 0..1") and returns how many there
 * were. Checked: the kind; mb in 0..M-1; compute: module index, pass F/B/W, the backbone's
 * chunk in 0..P*V-1, -1 for every other module; send/recv: peer a rank other than r, tensor
 * index in range, module -1 or a module index. Whether a chunk lives on r (bm_table_chunk_rank) is the
 * verifier's (invariant 0 says so; the executor has no instance there). bad may be NULL. */
int bm_op_check(const struct bm_table *t, int r, const struct bm_op *op,
                void (*bad)(void *ctx, const char *why), void *ctx);
/* The first of bm_op_check's problems of the op into why (n bytes; "" when none); returns how
 * many there were. */
int bm_op_why(const struct bm_table *t, int r, const struct bm_op *op, char *why, size_t n);
/* The first problem of every op of t: returns BM_OK, or BM_ERR with err reading
 * "<what>: rank R op #I <action>: <why>" (what: "simulate", "train", ...). Also checks pp,
 * microbatches and the op lists themselves. */
int bm_table_check_ops(const struct bm_table *t, const char *what, struct bm_err *err);

/* ---------------------------------------------------------------- CSV (csv.c, docs/csv.md) */

/* bm_csv_write, bm_csv_check_names and bm_csv_write_torch are public: include/bigmac_report.h. */

/* Load a CSV schedule (docs/csv.md) into a new table (*out) and its costs (*costs, NULL when
 * not wanted; the caller frees both). With spec != NULL
 * the modules, costs, device, chunk split and microbatch scales come from the spec (the CSV's
 * "# module"/"# device"/... lines are then ignored); otherwise from the CSV's '#' lines.
 * Header values come from the "# bigmac-table" line, overridden by the fields o gives (the plan
 * flags: not BM_UNSET; o may be NULL): pp, vpp, microbatches, unit, backbone, policy, and a window
 * >= 1 (auto and fit are ways to plan, not a window a file can have). Errors read
 * "path:line:col: what (in cell \"...\")". */
int bm_csv_load(const char *path, const struct bm_spec *spec, const struct bm_plan_opts *o,
                struct bm_table **out, struct bm_costs **costs, struct bm_err *err);
int bm_csv_parse(const char *text, const char *name, const struct bm_spec *spec,
                 const struct bm_plan_opts *o, struct bm_table **out, struct bm_costs **costs, struct bm_err *err);

#endif
