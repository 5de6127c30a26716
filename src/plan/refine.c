/* refine.c — gap refinement of a policy's order (see bm_refine_gaps in plan.h): single encoder
 * ops moved into nominal idle gaps they fit entirely, a round kept only when the nominal
 * makespan does not grow. Optimus's rule (docs/design.md §6); bigmac applies it anywhere. */
#include <string.h>

#include "plan/plan.h"
#include "util/util.h"

int bm_refine_gaps(const struct bm_graph *g, struct bm_order *o, int anywhere, struct bm_err *err)
{
    int N = g->n_tasks, P = o->pp;
    double *start = bm_malloc((size_t)N * sizeof(double));
    double *finish = bm_malloc((size_t)N * sizeof(double));
    int *ins_before = bm_malloc((size_t)N * sizeof(int)); /* task -> index it moves before, -1 */
    double *cap = NULL;
    int rc = BM_OK;
    if (!start || !finish || !ins_before) {
        rc = bm_err_set(err, "out of memory refining the optimus plan");
        goto done;
    }
    double best;
    if (bm_order_times(g, o, start, finish, &best, err)) {
        rc = BM_ERR; /* a stall of the order just scheduled cannot happen: internal error */
        goto done;
    }
    for (int round = 0; round < 8; round++) {
        int moved = 0;
        struct bm_order *n = bm_calloc(1, sizeof *n);
        if (!n) {
            rc = bm_err_set(err, "out of memory refining the optimus plan");
            goto done;
        }
        n->pp = P;
        n->seq = bm_calloc((size_t)P, sizeof *n->seq);
        n->n = bm_calloc((size_t)P, sizeof *n->n);
        if (!n->seq || !n->n) {
            bm_order_free(n);
            rc = bm_err_set(err, "out of memory refining the optimus plan");
            goto done;
        }
        for (int r = 0; r < P; r++) {
            int len = o->n[r];
            int *seq = o->seq[r];
            bm_free(cap);
            cap = bm_malloc((size_t)(len + 1) * sizeof(double)); /* free time at gap i (before seq[i]) */
            n->seq[r] = bm_malloc((size_t)(len ? len : 1) * sizeof(int));
            if (!cap || !n->seq[r]) {
                bm_order_free(n);
                rc = bm_err_set(err, "out of memory refining the optimus plan");
                goto done;
            }
            for (int i = 0; i < len; i++) ins_before[seq[i]] = -1;
            /* gap i lies between seq[i-1] and seq[i]; cap[i] = where free time starts */
            for (int i = 1; i < len; i++) cap[i] = finish[seq[i - 1]];
            cap[0] = 0;
            int first_bb = -1, last_bb = -1;
            for (int i = 0; i < len; i++)
                if (g->task[seq[i]].chunk >= 0) {
                    if (first_bb < 0) first_bb = i;
                    last_bb = i;
                }
            if (first_bb < 0) {
                memcpy(n->seq[r], seq, (size_t)len * sizeof(int));
                n->n[r] = len;
                continue;
            }
            /* backwards in the trailing block -> earliest gap after their inputs arrive */
            for (int i = anywhere ? first_bb + 1 : last_bb + 1; i < len; i++) {
                int x = seq[i];
                const struct bm_task *tx = &g->task[x];
                if (g->t->modules[tx->module].role != BM_ROLE_ENCODER || tx->pass != BM_PASS_B) continue;
                double rd = 0;
                int pred_pos_ok = 1;
                for (int e = 0; e < tx->npred; e++) {
                    struct bm_edge pe = g->pred[tx->pred0 + e];
                    double a = finish[pe.task] + pe.comm_ms;
                    if (a > rd) rd = a;
                    if (g->task[pe.task].rank == r && g->task[pe.task].chunk < 0 &&
                        g->task[pe.task].pass == BM_PASS_B)
                        pred_pos_ok = 0; /* chained encoder backwards stay put */
                }
                if (!pred_pos_ok) continue;
                int gi_end = last_bb < i - 1 ? last_bb : i - 1;
                for (int gi = first_bb + 1; gi <= gi_end; gi++) {
                    double s = cap[gi] > rd ? cap[gi] : rd;
                    if (s + tx->dur <= start[seq[gi]] + BM_T_EPS && g->task[seq[gi - 1]].chunk >= 0) {
                        ins_before[x] = gi;
                        cap[gi] = s + tx->dur;
                        moved = 1;
                        break;
                    }
                }
            }
            /* forwards in the leading block -> latest gap that still feeds the consumer */
            for (int i = anywhere ? last_bb - 1 : first_bb - 1; i >= 0; i--) {
                int x = seq[i];
                const struct bm_task *tx = &g->task[x];
                if (g->t->modules[tx->module].role != BM_ROLE_ENCODER || tx->pass != BM_PASS_F) continue;
                double need = BM_T_INF;
                int chain = 0;
                for (int e = 0; e < tx->nsucc; e++) {
                    struct bm_edge se = g->succ[tx->succ0 + e];
                    if (g->task[se.task].chunk < 0 && g->task[se.task].pass == BM_PASS_F) chain = 1;
                    if (g->task[se.task].pass == BM_PASS_F && start[se.task] - se.comm_ms < need)
                        need = start[se.task] - se.comm_ms;
                }
                if (chain) continue;
                if (ins_before[x] >= 0) continue;
                int gi_begin = first_bb > i + 1 ? first_bb : i + 1;
                for (int gi = last_bb; gi > gi_begin; gi--) {
                    double s = cap[gi];
                    double end = start[seq[gi]] < need ? start[seq[gi]] : need;
                    if (s + tx->dur <= end + BM_T_EPS && g->task[seq[gi - 1]].chunk >= 0 &&
                        finish[seq[gi - 1]] <= need) {
                        ins_before[x] = gi;
                        cap[gi] = s + tx->dur;
                        moved = 1;
                        break;
                    }
                }
            }
            /* rebuild: ops staying put, plus moved ops before their target index (bucketed,
             * keeping their relative order) */
            int *head = bm_malloc((size_t)(len + 1) * sizeof(int));
            int *next = bm_malloc((size_t)(len ? len : 1) * sizeof(int));
            int *tail = bm_malloc((size_t)(len + 1) * sizeof(int));
            if (!head || !next || !tail) {
                bm_free(head);
                bm_free(next);
                bm_free(tail);
                bm_order_free(n);
                rc = bm_err_set(err, "out of memory refining the optimus plan");
                goto done;
            }
            for (int i = 0; i <= len; i++) head[i] = tail[i] = -1;
            for (int j = 0; j < len; j++) {
                int gi = ins_before[seq[j]];
                next[j] = -1;
                if (gi < 0 || gi == j) continue;
                if (tail[gi] < 0) head[gi] = j;
                else next[tail[gi]] = j;
                tail[gi] = j;
            }
            int k = 0;
            for (int i = 0; i <= len; i++) {
                for (int j = head[i]; j >= 0; j = next[j]) n->seq[r][k++] = seq[j];
                if (i < len && (ins_before[seq[i]] < 0 || ins_before[seq[i]] == i))
                    n->seq[r][k++] = seq[i];
            }
            bm_free(head);
            bm_free(next);
            bm_free(tail);
            n->n[r] = k;
        }
        if (!moved) {
            bm_order_free(n);
            break;
        }
        double ms;
        struct bm_err e2;
        int trc = bm_order_times(g, n, start, finish, &ms, &e2);
        if (trc == BM_ERR) { /* out of memory: not "no better", which would mask it */
            bm_order_free(n);
            rc = bm_err_set(err, "%s", e2.msg);
            goto done;
        }
        if (trc == BM_PLAN_STALL || ms > best + BM_T_EPS) {
            bm_order_free(n);
            break;
        }
        best = ms;
        for (int r = 0; r < P; r++) {
            bm_free(o->seq[r]);
            o->seq[r] = n->seq[r];
            o->n[r] = n->n[r];
            n->seq[r] = NULL;
        }
        bm_order_free(n);
    }
done:
    bm_free(start);
    bm_free(finish);
    bm_free(ins_before);
    bm_free(cap);
    return rc;
}
