"""Issue 27 case 5 as reported: `python3 -m bigmac.torch train` under torch.distributed.run with
one rank stopped (SIGSTOP). Before, the job ended after gloo's 30-minute default and torchrun
blamed rank 0, the waiter. Now rank 0's wait ends after --timeout with a message naming rank 1
(the stopped one) and the op that waited; torchrun then ends the job (it gives the stopped
process its 30 s SIGTERM grace before SIGKILL). Run by tests/test_python_faults.sh."""
import os
import signal
import subprocess
import sys
import tempfile
import time

from check import check, done
import bigmac.torch as bt

SPEC = "tests/specs/exec-small.json"
tmp = tempfile.mkdtemp()
log = os.path.join(tmp, "run.jsonl")


def children(pid):
    out = []
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def rank_of(pid):
    """RANK of a worker torchrun started running bigmac.torch (its environment), else None."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if b"bigmac.torch" not in f.read():
                return None
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        return int(env[b"RANK"]) if b"RANK" in env else None
    except (OSError, ValueError):
        return None


p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "2",
                      "--tee", "2", "--master_port", str(bt._free_port()), "-m", "bigmac.torch", "train", SPEC,
                      "--timeout", "3", "--steps", "100000", "--log", log],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
victim = None
try:
    deadline = time.time() + 150
    while time.time() < deadline and p.poll() is None and victim is None:
        if os.path.exists(log) and os.path.getsize(log) > 0:
            for c in children(p.pid):
                for g in [c] + children(c):
                    if rank_of(g) == 1:
                        victim = g
                        os.kill(g, signal.SIGSTOP)
                        break
                if victim:
                    break
        time.sleep(0.2)
    err = p.communicate(timeout=150)[1]
except subprocess.TimeoutExpired:
    for pid in [victim] if victim else []:
        os.kill(pid, signal.SIGKILL)
    p.kill()
    err = p.communicate()[1] + "\n(test: timed out)"
ours = [l for l in err.splitlines() if "bigmac: error:" in l]
check("torchrun_sigstop_ends", victim is not None and p.returncode not in (0, None) and "(test: timed out)" not in err,
      "rc %s victim %s: %s" % (p.returncode, victim, err[-800:]))
# rank 0 waits at a receive from rank 1, for rank 1 to take a send (its message names the op) or,
# when rank 1 stopped between its ops, in a collective of the step (the message names the step and
# the collective; seen under ASan: the gradient all_reduce): where depends on when the signal
# lands; what is guaranteed is that rank 0 reports and names rank 1 as the one that did not answer
check("torchrun_sigstop_names_stopped_rank", len(ours) >= 1 and "rank 0: " in ours[0] and
      "rank 1 did not answer" in ours[0], "\n".join(ours) or err[-800:])
if victim and os.path.exists("/proc/%d" % victim):  # torchrun should have ended it
    os.kill(victim, signal.SIGKILL)
    check("torchrun_sigstop_stopped_rank_ended", False, "pid %d still there" % victim)
done()
