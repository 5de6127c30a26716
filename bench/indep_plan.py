#!/usr/bin/python3
"""indep_plan.py — an independent list-scheduling planner, the reference of issue 28.

It shares no code with src/plan: it reads a schedule CSV that bigmac wrote for the same work
(`bigmac plan SPEC ... --policy optimus --csv FILE`, docs/csv.md) only for what is not a placement
question -- the module graph and costs of the header lines, each rank's fixed backbone order
(Megatron's, with the table's warm-up extension) and which rank owns each encoder/generator
microbatch -- and decides the order of every nested op itself, with the cost model of
docs/simulator.md (durations: backbone x chunk weight, encoders x mb_scale; a transfer takes
link_latency_us + out_mib / link_gbytes_per_s when its ends are on different ranks).

The scheduler: a discrete-event list scheduler over global time. A rank that is free at time t
looks at the ops it may start at t: its next backbone op (fixed order) when its inputs have
arrived, and its nested ops whose inputs have arrived, within the window cap: at most
W * ceil(U/P) live encoder microbatches and ceil(U/P) live generator microbatches per rank
(bigmac's verifier invariant 5, which the written table is checked against), encoder forwards
in microbatch order. Each op's priority is its bottom level: its duration plus the longest chain
of work and transfers that must follow it in the relaxed graph (data edges, each rank's backbone
order, and the window's own edges: the backward of a rank's j-th microbatch before the forward of
its (j + cap)-th). The highest-priority ready op runs. When the next backbone op's inputs are all
committed but have not arrived yet, a nested op runs first only when that does not raise the
two-op estimate max(start + priority) (run it now, or wait and run it after); when they are not
all committed, the rank does not wait on a guess and runs its best ready nested op. A second pass
reschedules with the bottom levels of the first pass's order (resource-aware); the shorter order
is kept, timed exactly as bigmac's simulator times a table (checked: equal to the last digit).

Output: the planned table as CSV (the optimus CSV's header with policy bigmac and the window),
send right after the producing op, recv right before the first op that needs the tensor.
bigmac's own simulator gives the makespan: `bigmac plan --from-csv OUT.csv SPEC` prints the
nominal makespan, and (where the JSON fits bigmac's 64 MiB table limit) `bigmac verify` and
`bigmac simulate SPEC --table` check it.

Usage: indep_plan.py OPTIMUS.csv WINDOW OUT.csv
"""
import heapq
import math
import sys


def parse_kv(items):
    out = {}
    for it in items:
        k, _, v = it.partition("=")
        out[k] = v
    return out


def read_csv(path):
    head, mods, rows, extra = None, [], [], {}
    header_lines = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.startswith("#"):
                header_lines.append(line)
                w = line[1:].split()
                if not w:
                    continue
                if w[0] == "bigmac-table":
                    head = parse_kv(w[1:])
                elif w[0] == "device":
                    extra["device"] = parse_kv(w[1:])
                elif w[0] == "module":
                    mods.append(parse_kv(w[1:]))
                elif w[0] in ("chunk_weights", "mb_scale", "rank_time_scale", "chunk_layers"):
                    extra[w[0]] = [float(x) for x in w[1:]]
                continue
            if line.strip() == "":
                continue
            rows.append([c.strip() for c in line.split(",") if c.strip()])
    return head, mods, extra, rows, header_lines


ITERATIONS = 2


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: indep_plan.py OPTIMUS.csv WINDOW OUT.csv")
    src, W, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    head, mods, extra, rows, header_lines = read_csv(src)
    P, V, M = int(head["pp"]), int(head["vpp"]), int(head["microbatches"])
    U = int(head["unit"])
    C = P * V
    dev = extra["device"]
    lat_ms = float(dev.get("link_latency_us", 0)) / 1000.0
    gbps = float(dev.get("link_gbytes_per_s", 0))
    names = [m["name"] for m in mods]
    role = {m["name"]: m["role"] for m in mods}
    bbn = [m["name"] for m in mods if m["role"] == "backbone"][0]
    cost = {m["name"]: {k: float(m[k]) for k in ("fwd_ms", "bwd_ms", "out_mib") if k in m} for m in mods}
    for m in mods:
        cost[m["name"]]["w_ms"] = float(m.get("w_ms", 0))
    consumes = {m["name"]: [x for x in m.get("consumes", "").split(",") if x] for m in mods}
    produces = {m["name"]: [x for x in m.get("produces", "").split(",") if x] for m in mods}
    g2b = {m["name"]: m.get("grad_to_backbone", "false") == "true" for m in mods}
    producer = {}
    for n in names:
        for x in produces[n]:
            producer[x] = n
    cw = extra.get("chunk_weights", [1.0 / C] * C)
    mbs = extra.get("mb_scale", [1.0] * M)
    rts = extra.get("rank_time_scale", [1.0] * P)

    def comm(mib):
        return lat_ms + (mib * 1048576.0 / (gbps * 1e9) * 1000.0 if gbps > 0 else 0.0)

    def grad_flows(x, y):  # from consumer y back to producer x (docs/design.md §4)
        return not (role[y] == "generator" and not g2b[y] and role[x] != "generator")

    # ---- tasks: id -> (module, chunk or -1, pass, mb); rank from the optimus CSV
    tid = {}
    tmod, tch, tpass, tmb, trank = [], [], [], [], []

    def task(mod, ch, ps, mb):
        k = (mod, ch, ps, mb)
        i = tid.get(k)
        if i is None:
            i = tid[k] = len(tmod)
            tmod.append(mod), tch.append(ch), tpass.append(ps), tmb.append(mb), trank.append(-1)
        return i

    bbseq = [[] for _ in range(P)]
    split = False
    for r, row in enumerate(rows):
        for cell in row:
            if cell.startswith("SEND_") or cell.startswith("RECV_"):
                continue
            if ":" in cell:
                mod, rest = cell.split(":", 1)
                ps, mb = rest[0], int(rest[1:])
                i = task(mod, -1, ps, mb)
                trank[i] = r
            else:
                j = 0
                while cell[j].isdigit():
                    j += 1
                ch, ps, mb = int(cell[:j]), cell[j], int(cell[j + 1:])
                if ps == "I":
                    ps = "B"
                if ps == "W":
                    split = True
                i = task(bbn, ch, ps, mb)
                trank[i] = r
                bbseq[r].append(i)
    N = len(tmod)
    dur = [0.0] * N
    for i in range(N):
        mod, ch, ps, mb = tmod[i], tch[i], tpass[i], tmb[i]
        c = cost[mod]
        base = c["fwd_ms"] if ps == "F" else (c["w_ms"] if ps == "W" else c["bwd_ms"] - (c["w_ms"] if split and ch >= 0 else 0.0))
        if ch >= 0:
            base *= cw[ch]
        elif role[mod] == "encoder":
            base *= mbs[mb]
        dur[i] = base * rts[trank[i]]

    # ---- data edges (pred lists with transfer times) and the tensors they carry
    preds = [[] for _ in range(N)]  # (pred, comm_ms, tensor name, is_grad)

    def edge(a, b, tensor, grad, mib):
        preds[b].append((a, comm(mib) if trank[a] != trank[b] else 0.0, tensor, grad))

    for i in range(N):
        mod, ch, ps, mb = tmod[i], tch[i], tpass[i], tmb[i]
        if ps == "W":
            edge(tid[(mod, ch, "B", mb)], i, None, False, 0)
            continue
        if ch >= 0 and ps == "F":
            if ch > 0:
                edge(tid[(bbn, ch - 1, "F", mb)], i, "%s.c%d.out" % (bbn, ch - 1), False, cost[bbn]["out_mib"])
            else:
                for x in consumes[bbn]:
                    if x in producer:
                        pm = producer[x]
                        edge(tid[(pm, -1, "F", mb)], i, x, False, cost[pm]["out_mib"])
        elif ch >= 0 and ps == "B":
            edge(tid[(bbn, ch, "F", mb)], i, None, False, 0)
            if ch < C - 1:
                edge(tid[(bbn, ch + 1, "B", mb)], i, "grad:%s.c%d.out" % (bbn, ch), True, cost[bbn]["out_mib"])
            else:
                for y in names:
                    for x in produces[bbn]:
                        if x in consumes[y] and grad_flows(bbn, y):
                            edge(tid[(y, -1, "B", mb)], i, "grad:" + x, True, cost[bbn]["out_mib"])
        elif ps == "F":
            for x in consumes[mod]:
                if x not in producer:
                    continue  # spec inputs never travel
                pm = producer[x]
                src = tid[(bbn, C - 1, "F", mb)] if pm == bbn else tid[(pm, -1, "F", mb)]
                edge(src, i, x, False, cost[pm]["out_mib"])
        else:  # nested B: its own F, and the gradients of its consumers
            edge(tid[(mod, -1, "F", mb)], i, None, False, 0)
            for x in produces[mod]:
                for y in names:
                    if x in consumes[y] and grad_flows(mod, y):
                        src = tid[(bbn, 0, "B", mb)] if y == bbn else tid[(y, -1, "B", mb)]
                        edge(src, i, "grad:" + x, True, cost[mod]["out_mib"])
    succs = [[] for _ in range(N)]
    for b in range(N):
        for (a, cm, _, _) in preds[b]:
            succs[a].append((b, cm))
    bb_next = [-1] * N
    bb_pos = [-1] * N
    for r in range(P):
        for k, i in enumerate(bbseq[r]):
            bb_pos[i] = k
            if k + 1 < len(bbseq[r]):
                bb_next[i] = bbseq[r][k + 1]

    # ---- priorities: bottom levels in the relaxed graph (data edges + backbone order + the
    # window: with forwards in microbatch order and at most cap live microbatches, the backward
    # of a rank's j-th microbatch must run before the forward of its (j + cap)-th)
    per = (U + P - 1) // P
    cap_enc, cap_gen = W * per, per
    slot_succ = [-1] * N
    owned = {}
    for i in range(N):
        if tch[i] < 0 and tpass[i] == "F" and role[tmod[i]] in ("encoder", "generator"):
            owned.setdefault((trank[i], tmod[i]), []).append(tmb[i])
    for (r, mod), ms in owned.items():
        ms.sort()
        cap = cap_enc if role[mod] == "encoder" else cap_gen
        for j in range(len(ms) - cap):
            slot_succ[tid[(mod, -1, "B", ms[j])]] = tid[(mod, -1, "F", ms[j + cap])]
    indeg = [len(preds[i]) for i in range(N)]
    for r in range(P):
        for i in bbseq[r][1:]:
            indeg[i] += 1
    for i in range(N):
        if slot_succ[i] >= 0:
            indeg[slot_succ[i]] += 1
    order = [i for i in range(N) if indeg[i] == 0]
    k = 0
    while k < len(order):
        x = order[k]
        k += 1
        for (s, _) in succs[x]:
            indeg[s] -= 1
            if indeg[s] == 0:
                order.append(s)
        for s in (bb_next[x], slot_succ[x]):
            if s >= 0:
                indeg[s] -= 1
                if indeg[s] == 0:
                    order.append(s)
    if len(order) != N:
        sys.exit("indep_plan: the graph with the backbone order has a cycle")
    prio = [0.0] * N
    for x in reversed(order):
        q = 0.0
        for (s, cm) in succs[x]:
            if cm + prio[s] > q:
                q = cm + prio[s]
        for s in (bb_next[x], slot_succ[x]):
            if s >= 0 and prio[s] > q:
                q = prio[s]
        prio[x] = dur[x] + q

    # ---- the list scheduler
    def schedule(prio):
        left = [len(preds[i]) for i in range(N)]
        ready = [0.0] * N           # arrival of the inputs once left == 0
        start = [None] * N
        finish = [0.0] * N
        free_at = [0.0] * P
        bi = [0] * P
        live_enc = [0] * P
        live_gen = [0] * P
        enc_next = {}               # (rank, encoder) -> sorted microbatch queue of forwards
        for i in range(N):
            if tch[i] < 0 and tpass[i] == "F" and role[tmod[i]] == "encoder":
                enc_next.setdefault((trank[i], tmod[i]), []).append(tmb[i])
        for q in enc_next.values():
            q.sort()
        enc_head = {k2: 0 for k2 in enc_next}
        avail = [set() for _ in range(P)]  # nested tasks with every input committed
        seq = [[] for _ in range(P)]
        events = []
        version = [0] * P

        def push(r, t):
            version[r] += 1
            heapq.heappush(events, (t, r, version[r]))

        def nested_ok(i):
            mod, r = tmod[i], trank[i]
            if tpass[i] != "F":
                return True
            if role[mod] == "encoder":
                key = (r, mod)
                q = enc_next[key]
                return live_enc[r] < cap_enc and enc_head[key] < len(q) and q[enc_head[key]] == tmb[i]
            if role[mod] == "generator":
                return live_gen[r] < cap_gen
            return True

        def release(i):
            rd = 0.0
            for (a, cm, _, _) in preds[i]:
                if finish[a] + cm > rd:
                    rd = finish[a] + cm
            ready[i] = rd
            if tch[i] < 0:
                avail[trank[i]].add(i)

        for i in range(N):
            if left[i] == 0:
                release(i)
        for r in range(P):
            push(r, 0.0)
        remaining = N
        no_wait = set()
        while events or (remaining and not no_wait):
            if not events:
                # every rank waits for a backbone op that needs some rank's nested work first: let
                # each run its ready nested work without waiting (a fallback; not met on the
                # paper-shaped workloads)
                no_wait = set(range(P))
                for q in range(P):
                    push(q, free_at[q])
                continue
            t, r, v = heapq.heappop(events)
            if v != version[r]:
                continue
            t = max(t, free_at[r])
            b = bbseq[r][bi[r]] if bi[r] < len(bbseq[r]) else -1
            b_known = b >= 0 and left[b] == 0
            if b_known:
                tb = ready[b]
            else:
                # its inputs are not all committed, so when it can start is unknown: no waiting
                # on a guess (waiting on an estimate idled ranks and cost 4-50% here)
                tb = math.inf
            best, nxt = -1, math.inf
            for i in avail[r]:
                if not nested_ok(i):
                    continue
                if ready[i] <= t + 1e-12:
                    if best < 0 or prio[i] > prio[best] or (prio[i] == prio[best] and i < best):
                        best = i
                elif ready[i] < nxt:
                    nxt = ready[i]
            pick = -1
            if b_known and tb <= t + 1e-12:
                pick = b if best < 0 or prio[b] >= prio[best] else best
            elif best >= 0:
                if b < 0 or tb == math.inf or r in no_wait:
                    pick = best
                else:
                    now = max(t + prio[best], max(tb, t + dur[best]) + prio[b])
                    wait = max(tb + prio[b], tb + dur[b] + prio[best])
                    pick = best if now <= wait else -1
            if pick < 0:
                if b_known and tb < nxt:
                    nxt = tb
                if nxt < math.inf:
                    push(r, nxt)
                continue
            # commit pick at t
            i = pick
            start[i] = t
            finish[i] = t + dur[i]
            free_at[r] = finish[i]
            seq[r].append(i)
            remaining -= 1
            if tch[i] >= 0:
                bi[r] += 1
            else:
                avail[r].discard(i)
                mod = tmod[i]
                if role[mod] == "encoder":
                    if tpass[i] == "F":
                        live_enc[r] += 1
                        enc_head[(r, mod)] += 1
                    else:
                        live_enc[r] -= 1
                elif role[mod] == "generator":
                    live_gen[r] += 1 if tpass[i] == "F" else -1
            woken = {r}
            for (s, _) in succs[i]:
                left[s] -= 1
                if left[s] == 0:
                    release(s)
                    woken.add(trank[s])
            for q in woken:
                push(q, max(free_at[q], t))
            no_wait.discard(r)
        if remaining:
            blocked = []
            for r in range(P):
                b = bbseq[r][bi[r]] if bi[r] < len(bbseq[r]) else -1
                if b >= 0:
                    blocked.append("rank %d at %s" % (r, fmt(tmod, tch, tpass, tmb, b)))
            sys.stderr.write("indep_plan: window %d deadlocks: %s\n" % (W, "; ".join(blocked[:4])))
            return None
        return seq

    def asap(seq):
        """Start and finish of every op when each rank runs seq[r] in order, each op as soon as
        its inputs have arrived (what bigmac's simulator computes for the table)."""
        st, fi = [0.0] * N, [0.0] * N
        done = [False] * N
        pos, free = [0] * P, [0.0] * P
        waiting = {}
        stack = list(range(P))
        while stack:
            r = stack.pop()
            while pos[r] < len(seq[r]):
                x = seq[r][pos[r]]
                t = free[r]
                blocked = -1
                for (a2, cm, _, _) in preds[x]:
                    if not done[a2]:
                        blocked = a2
                        break
                    if fi[a2] + cm > t:
                        t = fi[a2] + cm
                if blocked >= 0:
                    waiting.setdefault(blocked, []).append(r)
                    break
                st[x], fi[x] = t, t + dur[x]
                free[r] = fi[x]
                done[x] = True
                pos[r] += 1
                stack.extend(waiting.pop(x, ()))
        return st, fi, max(fi)

    def levels(seq, st):
        """Bottom levels in the scheduled order: an op's duration plus the longest chain after it
        through data edges and each rank's order (resource-aware, unlike the relaxed ones)."""
        nxt = [-1] * N
        for r in range(P):
            for k2 in range(len(seq[r]) - 1):
                nxt[seq[r][k2]] = seq[r][k2 + 1]
        bl = [0.0] * N
        for x in sorted(range(N), key=lambda y: -st[y]):
            q = bl[nxt[x]] if nxt[x] >= 0 else 0.0
            for (s2, cm) in succs[x]:
                if cm + bl[s2] > q:
                    q = cm + bl[s2]
            bl[x] = dur[x] + q
        return bl

    # Iterated list scheduling: the first pass uses the relaxed bottom levels, each further pass
    # the bottom levels of the previous pass's order; the order with the shortest makespan is kept.
    best_seq, best_ms, pr = None, math.inf, prio
    for it in range(ITERATIONS):
        seq = schedule(pr)
        if seq is None:
            break
        st, fi, ms = asap(seq)
        if ms < best_ms - 1e-9:
            best_seq, best_ms = seq, ms
        pr = levels(seq, st)
    if best_seq is None:
        sys.exit("indep_plan: window %d deadlocks" % W)
    seq = best_seq


    # ---- lowering: recv right before the first op that needs a tensor, send right after its producer
    dests = {}
    for b in range(N):
        for (a, cm, tensor, grad) in preds[b]:
            if tensor is not None and trank[a] != trank[b]:
                dests.setdefault(a, [])
                if (tensor, grad, trank[b]) not in dests[a]:
                    dests[a].append((tensor, grad, trank[b]))
    with open(out_path, "w") as f:
        for line in header_lines:
            if line.startswith("# bigmac-table"):
                w = line.split()
                kv = []
                for it in w[2:]:
                    k2, _, v = it.partition("=")
                    if k2 == "policy":
                        v = "bigmac"
                    if k2 == "window":
                        v = str(W)
                    kv.append(k2 + "=" + v)
                line = " ".join(w[:2] + kv)
            f.write(line + "\n")
        for r in range(P):
            have = set()
            cells = []
            for i in seq[r]:
                for (a, cm, tensor, grad) in preds[i]:
                    if tensor is None or trank[a] == r or (tensor, tmb[i]) in have:
                        continue
                    have.add((tensor, tmb[i]))
                    cells.append("RECV_%s:%s:%d<%d" % ("B" if grad else "F", tensor, tmb[i], trank[a]))
                cells.append(fmt(tmod, tch, tpass, tmb, i))
                for (tensor, grad, d) in dests.get(i, ()):
                    cells.append("SEND_%s:%s:%d>%d" % ("B" if grad else "F", tensor, tmb[i], d))
            f.write(",".join(cells) + "\n")
    print("indep_plan: P=%d V=%d M=%d U=%d window %d: %d tasks, makespan %.3f ms (its own timing of the order)" % (P, V, M, U, W, N, best_ms))


def fmt(tmod, tch, tpass, tmb, i):
    if tch[i] >= 0:
        return "%d%s%d" % (tch[i], tpass[i], tmb[i])
    return "%s:%s%d" % (tmod[i], tpass[i], tmb[i])


if __name__ == "__main__":
    main()
