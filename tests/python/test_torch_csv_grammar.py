"""Table.to_torch_csv / render --format torch-csv against PyTorch's grammar (torch_grammar.py, a
parser written from the grammar, not bigmac's loader): every backbone, with and without nested
work, compute-only and with SEND/RECV cells, passes the parse, PyTorch's count/order validation
and (with comms) the pairing of every transfer; the three PyTorch artifacts round-trip byte for
byte through bigmac."""
import os
import subprocess
import tempfile
import warnings

from check import check, done
import bigmac
import torch_grammar as tg

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
SPEC = "examples/tiny-mllm.json"
ART = "../shared/data/torch" if os.path.isdir("../shared/data/torch") else "/work/shared/data/torch"
tmp = tempfile.mkdtemp()

spec = bigmac.load_spec(SPEC)
V_SHAPED = ("zb-v", "dualpipe-v")  # stage s on rank s for s < P, on rank 2P-1-s after


def placed(s, pp, bb):
    return (s if s < pp else 2 * pp - 1 - s) if bb in V_SHAPED else s % pp


for bb, vpp in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1), ("zb-interleaved", 2),
                ("zb-v", 2), ("dualpipe-v", 2)):
    for pp in (2, 4):
        for pol in ("none", "bigmac", "optimus"):
            M = 2 * pp
            name = "%s_p%d_%s" % (bb, pp, pol)
            try:
                t = bigmac.plan(spec, pp=pp, vpp=vpp, microbatches=M, backbone=bb, policy=pol)
            except bigmac.Error as e:
                check("torch_csv_plan_" + name, False, str(e))
                continue
            for comms in (False, True):
                with warnings.catch_warnings(record=True) as wl:
                    warnings.simplefilter("always")
                    text = t.to_torch_csv(comms=comms)
                tag = name + ("_comms" if comms else "")
                try:
                    acts = tg.load(text)
                    ranks = tg.validate(acts, pp, pp * vpp, M)
                    ok = all(ranks[s] == placed(s, pp, bb) for s in ranks)
                    if comms:
                        tg.check_comms(acts, ranks, pp * vpp)
                    check("torch_csv_grammar_" + tag, ok, "stage -> rank is not the backbone's placement")
                except tg.GrammarError as e:
                    check("torch_csv_grammar_" + tag, False, str(e))
                # nested work is left out, and said so once; a backbone-only table leaves nothing out
                nested = pol != "none"
                check("torch_csv_left_out_note_" + tag,
                      len(wl) == (1 if nested else 0) and (not nested or "vit" in str(wl[0].message)),
                      [str(w.message) for w in wl])
            # the CLI writes the same text
            out = os.path.join(tmp, "t.csv")
            p = subprocess.run([BIGMAC, "render", SPEC, "--pp", str(pp), "--vpp", str(vpp), "--microbatches", str(M),
                                "--backbone", bb, "--policy", pol, "--format", "torch-csv", "--comms", "-o", out],
                               capture_output=True, text=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                py_text = t.to_torch_csv(comms=True)
            check("torch_csv_cli_equals_python_" + name,
                  p.returncode == 0 and open(out).read() == py_text and
                  (("bigmac: note: torch-csv: left out" in p.stderr) == (pol != "none")), p.stderr)

# the chunk -> rank map the executors read (Table.chunk_ranks)
tv = bigmac.plan(spec, pp=4, vpp=2, microbatches=8, backbone="zb-v", policy="none")
ti = bigmac.plan(spec, pp=4, vpp=2, microbatches=8, backbone="interleaved", policy="none")
check("table_chunk_ranks_v", tv.chunk_ranks() == [0, 1, 2, 3, 3, 2, 1, 0], tv.chunk_ranks())
check("table_chunk_ranks_mod_p", ti.chunk_ranks() == [0, 1, 2, 3, 0, 1, 2, 3], ti.chunk_ranks())

# the artifacts: PyTorch file -> bigmac -> PyTorch file is byte-identical, and they pass the parser
for f, comms, pp, n_mb in (("zb1p_2rank_2stagep_compute.csv", False, 2, 8), ("zb1p_2rank_2stagep_comms.csv", True, 2, 8),
                           ("dualpipev_4rank_10mb.csv", False, 4, 10)):
    path = os.path.join(ART, f)
    orig = open(path).read()
    acts = tg.load(orig)
    ranks = tg.validate(acts, pp, 2 * pp, n_mb)
    if comms:
        tg.check_comms(acts, ranks, 2 * pp)
    out = os.path.join(tmp, "rt.csv")
    args = [BIGMAC, "render", path, "--format", "torch-csv", "-o", out] + (["--comms"] if comms else [])
    p = subprocess.run(args, capture_output=True, text=True)
    check("torch_csv_roundtrip_" + f, p.returncode == 0 and open(out).read() == orig, p.stderr)
    # and through a table file: plan --from-csv -o, then render the table
    js = os.path.join(tmp, "rt.json")
    p1 = subprocess.run([BIGMAC, "plan", "--from-csv", path, "-o", js], capture_output=True, text=True)
    p2 = subprocess.run([BIGMAC, "render", js] + args[3:], capture_output=True, text=True)
    check("torch_csv_roundtrip_via_json_" + f, p1.returncode == 0 and p2.returncode == 0 and open(out).read() == orig,
          p1.stderr + p2.stderr)
done()
