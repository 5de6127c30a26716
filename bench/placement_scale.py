#!/usr/bin/python3
"""placement_scale.py — issue 28's figures: bigmac at window cap 3 against the independent list
scheduler (bench/indep_plan.py), optimus, ideal and the lower bound, on the paper-shaped
workloads with "layers" removed from every module (both split the backbone evenly), U = P.

  bench/placement_scale.py parity  [--bigmac BIN] [--rows N]   the issue's eight rows
  bench/placement_scale.py regress [--bigmac BIN]              P 8..64 x V 1,2,4 x M 8P,16P x
                                                               1f1b/interleaved/zb-h1, both workloads

Every makespan comes from bigmac's simulator: `bigmac simulate SPEC ... --json` for the policies,
`bigmac plan --from-csv INDEP.csv SPEC` (bm_simulate on the table; the JSON of the largest tables
is over bigmac's 64 MiB table limit) for the independent plan, cross-checked with `bigmac verify`
and `bigmac simulate --table` where the JSON fits. Prints Markdown tables (bench/RESULTS.md).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = [("understanding", "examples/understanding-qwen3-30b-a3b.json"),
             ("generation", "examples/generation-mmdit-20b.json")]
ISSUE_ROWS = [(16, 2, "interleaved", 128), (32, 1, "1f1b", 256), (64, 4, "interleaved", 256),
              (64, 4, "interleaved", 1024)]
# the independent planner's figures as issue 28 reports them (understanding, generation)
ISSUE_INDEP = {("understanding", 0): 3046.0, ("understanding", 1): 3411.4, ("understanding", 2): 1764.0,
               ("understanding", 3): 6227.7, ("generation", 0): 4069.0, ("generation", 1): 4416.9,
               ("generation", 2): 2173.9, ("generation", 3): 8068.0}


def strip_layers(src, dst):
    with open(os.path.join(ROOT, src)) as f:
        s = json.load(f)
    for m in s["modules"]:
        m.pop("layers", None)
    with open(dst, "w") as f:
        json.dump(s, f)


def sim(bigmac, spec, P, V, bb, M, policy, window=None, extra=()):
    cmd = [bigmac, "simulate", spec, "--pp", str(P), "--vpp", str(V), "--backbone", bb,
           "--microbatches", str(M), "--unit", str(P), "--policy", policy, "--json"] + list(extra)
    if window is not None:
        cmd += ["--window", str(window)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        return None
    return json.loads(out.stdout)


def lower_bound(bigmac, spec, P, V, bb, M):
    """simulate --compare's lower_bound_ms (the smallest of every policy's own bound), with
    bigmac at window cap 3."""
    cmd = [bigmac, "simulate", spec, "--pp", str(P), "--vpp", str(V), "--backbone", bb,
           "--microbatches", str(M), "--unit", str(P), "--window", "3", "--compare", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        return None, {}
    d = json.loads(out.stdout)
    rows = {r["policy"]: r.get("makespan_ms") for r in d["results"] if "makespan_ms" in r}
    return d.get("lower_bound_ms"), rows


def indep(bigmac, spec, P, V, bb, M, tmp, W=3):
    o = os.path.join(tmp, "optimus.csv")
    i = os.path.join(tmp, "indep.csv")
    subprocess.run([bigmac, "plan", spec, "--pp", str(P), "--vpp", str(V), "--backbone", bb,
                    "--microbatches", str(M), "--unit", str(P), "--policy", "optimus", "--csv", o],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, os.path.join(HERE, "indep_plan.py"), o, str(W), i], check=True,
                   capture_output=True)
    j = os.path.join(tmp, "indep.json")
    out = subprocess.run([bigmac, "plan", "--from-csv", i, spec, "-o", j], capture_output=True, text=True,
                         check=True).stdout
    ms = float(out.split("nominal makespan ")[1].split()[0])
    checked = ""
    if os.path.getsize(j) <= 64 << 20:
        v = subprocess.run([bigmac, "verify", j], capture_output=True, text=True)
        s = json.loads(subprocess.run([bigmac, "simulate", spec, "--table", j, "--json"], capture_output=True,
                                      text=True, check=True).stdout)
        checked = "verified" if v.returncode == 0 else "VERIFY FAILED"
        if abs(s["makespan_ms"] - ms) > 1e-6 * ms:
            checked += " (simulate --table %.3f)" % s["makespan_ms"]
    else:
        checked = "JSON over 64 MiB: not verified"
    return ms, checked


def parity(bigmac, nrows):
    with tempfile.TemporaryDirectory() as tmp:
        print("| workload | P | V | backbone | M | bigmac ms | independent ms (here) | ratio | issue's independent ms | here / issue's | lower bound ms | bigmac / bound | indep / bound | check |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name, path in WORKLOADS:
            spec = os.path.join(tmp, name + ".json")
            strip_layers(path, spec)
            for k, (P, V, bb, M) in enumerate(ISSUE_ROWS[:nrows]):
                b = sim(bigmac, spec, P, V, bb, M, "bigmac", 3)
                im, chk = indep(bigmac, spec, P, V, bb, M, tmp)
                lb, _ = lower_bound(bigmac, spec, P, V, bb, M)
                bm = b["makespan_ms"]
                iss = ISSUE_INDEP[(name, k)]
                print("| %s | %d | %d | %s | %d | %.1f | %.1f | %.4f | %.1f | %.4f | %s | %s | %s | %s |" % (
                    name, P, V, bb, M, bm, im, bm / im, iss, im / iss, "%.1f" % lb if lb else "-",
                    "%.4f" % (bm / lb) if lb else "-", "%.4f" % (im / lb) if lb else "-", chk))
                sys.stdout.flush()


def regress(bigmac):
    with tempfile.TemporaryDirectory() as tmp:
        print("| workload | backbone | P | V | M | bigmac ms | W | optimus ms | ideal ms | lower bound ms | bigmac / bound | optimus / bigmac |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name, path in WORKLOADS:
            spec = os.path.join(tmp, name + ".json")
            strip_layers(path, spec)
            for bb in ("1f1b", "interleaved", "zb-h1"):
                for P in (8, 16, 32, 64):
                    for V in ((1,) if bb != "interleaved" else (2, 4)):
                        for M in (8 * P, 16 * P):
                            lb, rows = lower_bound(bigmac, spec, P, V, bb, M)
                            b = sim(bigmac, spec, P, V, bb, M, "bigmac", 3)
                            if not b:
                                print("| %s | %s | %d | %d | %d | (no plan) |" % (name, bb, P, V, M))
                                continue
                            bm = b["makespan_ms"]
                            op = rows.get("optimus")
                            idl = rows.get("ideal")
                            print("| %s | %s | %d | %d | %d | %.1f | %d | %s | %s | %s | %s | %s |" % (
                                name, bb, P, V, M, bm, b["window"], "%.1f" % op if op else "-",
                                "%.1f" % idl if idl else "-", "%.1f" % lb if lb else "-",
                                "%.4f" % (bm / lb) if lb else "-", "%.3f" % (op / bm) if op else "-"))
                            sys.stdout.flush()


def main():
    args = sys.argv[1:]
    bigmac = os.path.join(ROOT, "bin", "bigmac")
    nrows = len(ISSUE_ROWS)
    if "--bigmac" in args:
        bigmac = args[args.index("--bigmac") + 1]
    if "--rows" in args:
        nrows = int(args[args.index("--rows") + 1])
    if not args or args[0] not in ("parity", "regress"):
        sys.exit(__doc__)
    if args[0] == "parity":
        parity(bigmac, nrows)
    else:
        regress(bigmac)


if __name__ == "__main__":
    main()
