"""bigmac.plan/simulate(dp=D): the Python API gives what `--dp D` gives on the command line."""
import json
import os
import subprocess
import tempfile

from check import check, raises, done
import bigmac

BIGMAC = os.environ.get("BIGMAC", "bin/bigmac")
SPEC = "tests/specs/hosts-p8.json"
tmp = tempfile.mkdtemp()


def cli(*args):
    return subprocess.run([BIGMAC] + list(args), check=True, capture_output=True, text=True).stdout


out = os.path.join(tmp, "t.json")
cli("plan", SPEC, "--ranks-per-host", "8", "--dp", "2", "-o", out)
t = bigmac.plan(SPEC, dp=2)
check("py_plan_dp_table_json", t.to_json() == open(out).read() and '"dp": 2' in t.to_json())
check("py_plan_no_dp_no_key", '"dp"' not in bigmac.plan(SPEC).to_json())

# the simulator's link classes follow the replicas' placement (tests/test_dp_hosts.sh has the
# hand-computed figures): here every rank's host is from the spec (8 per host), so with dp 4
# pipeline rank p runs on host (4p + d) / 8 = p / 2
s = bigmac.simulate(SPEC, dp=4)
j = json.loads(cli("simulate", SPEC, "--dp", "4", "--json"))
check("py_simulate_dp_equals_cli", s == j, "%r" % {k: (s.get(k), j.get(k)) for k in ("dp", "hosts")})
check("py_simulate_dp_crossing", s.get("dp") == 4 and s["hosts"]["cross_host_transfers"] == 48)
c = bigmac.simulate(SPEC, compare=True, dp=4)
cj = json.loads(cli("simulate", SPEC, "--dp", "4", "--compare", "--json"))
check("py_simulate_compare_dp_equals_cli", c == cj)
# the spec handle is not changed by a dp argument
sp = bigmac.load_spec(SPEC)
bigmac.plan(sp, dp=3)
check("py_dp_leaves_spec", '"dp"' not in bigmac.plan(sp).to_json())
raises("py_dp_zero_refused", lambda: bigmac.plan(SPEC, dp=0), bigmac.Error, ("dp: expected a positive int",))
done()
