"""PyTorch's pipeline schedule files, read the way PyTorch reads them, written for the tests from
the grammar alone (torch/distributed/pipelining/schedules.py, 2.6 onwards; docs/csv.md): NOT
bigmac's loader. A cell is [stage][TYPE][microbatch], TYPE one of F, I, W, B, UNSHARD, RESHARD,
SEND_F, RECV_F, SEND_B, RECV_B, REDUCE_GRAD, or the composite (a;b)OVERLAP_F_B; an empty cell is
an idle step; one row per rank (csv.reader rows, "\\n" or "\\r\\n")."""
import csv
import io
import re

TYPES = ("F", "I", "W", "B", "UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F", "RECV_F", "SEND_B", "RECV_B")
COMPUTE = ("F", "I", "W", "B")
# longest type names first, so "SEND_F" is not read as stage + "S..."; the whole cell must match
_ACTION = re.compile(r"(\d+)(%s)(\d*)" % "|".join(sorted(TYPES, key=len, reverse=True)))


class GrammarError(Exception):
    pass


def parse_action(text):
    """One cell: None (idle), (stage, type, mb or None), or ("OVERLAP_F_B", [sub-actions])."""
    s = text.strip()
    if s == "":
        return None
    if s.startswith("("):
        close = s.find(")")
        if close < 0 or s[close + 1:] != "OVERLAP_F_B":
            raise GrammarError("bad composite cell %r" % text)
        subs = [parse_action(p) for p in s[1:close].split(";")]
        if not subs or any(a is None or a[0] == "OVERLAP_F_B" or a[1] not in COMPUTE for a in subs):
            raise GrammarError("an OVERLAP_F_B holds compute actions: %r" % text)
        return ("OVERLAP_F_B", subs)
    m = _ACTION.fullmatch(s)
    if not m:
        raise GrammarError("not an action: %r" % text)
    stage, typ, mb = int(m.group(1)), m.group(2), m.group(3)
    if typ in ("F", "I", "W", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B") and mb == "":
        raise GrammarError("%s needs a microbatch: %r" % (typ, text))
    return (stage, typ, int(mb) if mb != "" else None)


def load(text):
    """rank -> list of actions (None for an idle step), as _load_csv builds pipeline_order."""
    return {rank: [parse_action(c) for c in row] for rank, row in enumerate(csv.reader(io.StringIO(text)))}


def leaves(action):
    if action is None:
        return []
    if action[0] == "OVERLAP_F_B":
        return action[1]
    return [action]


def validate(actions, pp, n_stages, n_mb):
    """PyTorch's _validate_schedule, from its description: the rank count; per (stage, mb) an F
    before its I or B, an I before its W; every stage on one rank; per stage n_mb F's, as many
    I's as W's, and B + I = n_mb. Returns stage -> rank."""
    if len(actions) != pp:
        raise GrammarError("expected %d ranks, got %d" % (pp, len(actions)))
    seen = {s: {t: set() for t in COMPUTE} for s in range(n_stages)}
    stage_rank = {}
    for rank in range(pp):
        for step, a in enumerate(actions[rank]):
            for s, typ, mb in leaves(a):
                if not 0 <= s < n_stages:
                    raise GrammarError("rank %d step %d: stage %d out of range" % (rank, step, s))
                if typ in ("B", "I") and mb not in seen[s]["F"]:
                    raise GrammarError("rank %d step %d: %d%s%d before its forward" % (rank, step, s, typ, mb))
                if typ == "W" and mb not in seen[s]["I"]:
                    raise GrammarError("rank %d step %d: %dW%d before its I" % (rank, step, s, mb))
                if typ in COMPUTE:
                    seen[s][typ].add(mb)
                if stage_rank.setdefault(s, rank) != rank:
                    raise GrammarError("stage %d on ranks %d and %d" % (s, stage_rank[s], rank))
    for s in range(n_stages):
        f, b, i, w = (len(seen[s][t]) for t in ("F", "B", "I", "W"))
        if f != n_mb:
            raise GrammarError("stage %d: %d forwards, expected %d" % (s, f, n_mb))
        if i != w:
            raise GrammarError("stage %d: %d I but %d W" % (s, i, w))
        if b + (i + w) // 2 != n_mb:
            raise GrammarError("stage %d: B=%d I=%d W=%d, expected %d backwards" % (s, b, i, w, n_mb))
    return stage_rank


def check_comms(actions, stage_rank, n_stages):
    """A compute_comms file: each SEND_F of stage s (mb m) on s's rank has one RECV_F of stage
    s+1 on s+1's rank, each SEND_B of s one RECV_B of s-1; the send follows the compute that
    makes the tensor; a stage whose neighbour is on another rank receives before it computes."""
    sends, recvs = {}, {}
    for rank, row in actions.items():
        done = set()
        for a in row:
            for s, typ, mb in leaves(a):
                if typ in ("SEND_F", "SEND_B", "RECV_F", "RECV_B"):
                    if stage_rank.get(s) != rank:
                        raise GrammarError("rank %d holds %d%s%d of a stage on rank %s" % (rank, s, typ, mb, stage_rank.get(s)))
                    peer = s + 1 if typ in ("SEND_F", "RECV_B") else s - 1
                    if not 0 <= peer < n_stages:
                        raise GrammarError("%d%s%d: no neighbour stage" % (s, typ, mb))
                    key = (min(s, peer), typ[-1], mb)
                    (sends if typ.startswith("SEND") else recvs).setdefault(key, []).append(rank)
                    if typ == "SEND_F" and (s, "F", mb) not in done:
                        raise GrammarError("%dSEND_F%d before its forward" % (s, mb))
                    if typ == "SEND_B" and (s, "B", mb) not in done:
                        raise GrammarError("%dSEND_B%d before its backward" % (s, mb))
                    if typ.startswith("RECV"):
                        done.add((s, typ, mb))
                else:
                    if typ == "F" and s > 0 and stage_rank[s - 1] != rank and (s, "RECV_F", mb) not in done:
                        raise GrammarError("rank %d: %dF%d before its RECV_F" % (rank, s, mb))
                    if typ in ("B", "I") and s < n_stages - 1 and stage_rank[s + 1] != rank and (s, "RECV_B", mb) not in done:
                        raise GrammarError("rank %d: %d%s%d before its RECV_B" % (rank, s, typ, mb))
                    done.add((s, "B" if typ in ("B", "I") else typ, mb))
    if sorted(sends) != sorted(recvs) or any(len(v) != 1 for v in list(sends.values()) + list(recvs.values())):
        raise GrammarError("sends and receives do not pair up one to one")
    want = {(s, d, m) for s in range(n_stages - 1) if stage_rank[s] != stage_rank[s + 1]
            for d in ("F", "B") for m in {mb for row in actions.values() for a in row for (_, _, mb) in leaves(a)}}
    if set(sends) != want:
        raise GrammarError("missing transfers: %s" % sorted(want - set(sends))[:4])
