"""bigmac.torch under faults (issue 27, cases 1, 3, 5 and 14's torch part; run by tests/test_python_faults.sh):
* spawn's deadline is per-op progress, not the whole run: a run longer than the timeout that keeps
  progressing finishes; a rank that stops (SIGSTOP) ends the run within the timeout, and the one
  message names the stopped rank (not the rank that waited) and the op that waited for it;
* a killed rank (SIGKILL) under `python3 -m bigmac.torch train --nproc` gives one message naming
  it (its pid and signal) and the op of the rank that lost it, not a traceback;
* a user module's exception is tagged with rank, op, step and microbatch;
* --trace / --dump-params / --log are checked before step 1 (no step runs with a bad path).
Every run is bounded (spawn's timeout, subprocess timeouts); only our own processes are signalled."""
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time

from check import check, done
import bigmac
import bigmac.torch as bt
from bigmac.torch import twins

SPEC = "tests/specs/exec-small.json"
spec = bigmac.load_spec(SPEC)
tmp = tempfile.mkdtemp()


def spawn_error(fn, nproc, timeout):
    try:
        bt.spawn(fn, nproc, timeout=timeout)
    except bigmac.Error as e:
        return str(e)
    return None


# ---- spawn: a long run that keeps progressing is not ended; one that stalls is
def beating(rank):
    for i in range(12):  # 6 s in all, twice the timeout, with a heartbeat every 0.5 s
        time.sleep(0.5)
        bt.heartbeat(0, i)
    return rank


try:
    r = bt.spawn(beating, 2, timeout=3)
    check("torch_fault_spawn_progress_not_deadline", r == [0, 1], str(r))
except Exception as e:
    check("torch_fault_spawn_progress_not_deadline", False, "%s: %s" % (type(e).__name__, e))


def silent(rank):
    if rank == 1:
        time.sleep(60)  # no heartbeat: a hang as far as spawn can tell
    return rank


t0 = time.time()
msg = spawn_error(silent, 2, 3)  # (3 s: the process group's rendezvous has the same timeout)
check("torch_fault_spawn_stall_names_rank", msg is not None and msg.startswith("rank 1 (pid ") and
      "made no progress" in msg and time.time() - t0 < 30, repr(msg))


# ---- a healthy training run longer than its timeout finishes (per-op deadlines)
def long_train(rank):
    return bt.train(spec, steps=40, pp=2, timeout=3)


try:
    t0 = time.time()
    losses = bt.spawn(long_train, 2, timeout=3)[0]
    check("torch_fault_long_run_finishes", len(losses) == 40, "%d steps in %.1f s" % (len(losses), time.time() - t0))
    print("  (40 steps in %.1f s with timeout 3 s)" % (time.time() - t0))
except Exception as e:
    check("torch_fault_long_run_finishes", False, "%s: %s" % (type(e).__name__, e))


# ---- SIGSTOP: the run ends within the timeout naming the stopped rank
class StopAt(__import__("torch").nn.Module):
    """Wraps a backbone chunk: its n-th forward call stops this process (SIGSTOP)."""

    def __init__(self, inner, n):
        super().__init__()
        self.inner, self.n, self.calls = inner, n, 0

    def forward(self, x, b):
        self.calls += 1
        if self.calls == self.n:
            os.kill(os.getpid(), signal.SIGSTOP)
        return self.inner(x, b)


def stop_rank(who, at_step):
    def fn(rank):
        build = twins.factory(spec)

        def b2(name, a, b):  # this rank's backbone chunk stops in step at_step's forward of microbatch 1
            m = build(name, a, b)
            return StopAt(m, spec.microbatches * at_step + 2) if rank == who and name == "gpt" else m
        bt.train(spec, build=b2, steps=1000, pp=2, timeout=3)
    return fn


for who in (1, 0):
    t0 = time.time()
    msg = spawn_error(stop_rank(who, 2), 2, 3)
    waiter = 1 - who
    first = (msg or "").splitlines()[0] if msg else ""
    check("torch_fault_sigstop_rank%d_named" % who, msg is not None and
          first.startswith("rank %d (pid " % who) and "is stopped" in first and "step 3" in first and
          ("rank %d: " % waiter) in msg and "op #" in msg and ("rank %d did not answer" % who) in msg,
          repr(msg))
    print("  (ended %.1f s after the start, timeout 3 s)" % (time.time() - t0))
check("torch_fault_sigstop_children_reaped", multiprocessing.active_children() == [],
      str(multiprocessing.active_children()))


# ---- a user module's exception: tagged with rank, op, step and microbatch, no traceback
def boom_at(rank):
    build = twins.factory(spec)

    class Boom(__import__("torch").nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x, b):
            if b.mb == 2:
                raise ValueError("boom on purpose")
            return self.inner(x, b)

    def b2(name, a, b):
        m = build(name, a, b)
        return Boom(m) if name == "gpt" and a > 0 else m
    bt.train(spec, build=b2, steps=1, pp=2)


class _MB:
    pass


msg = spawn_error(boom_at, 2, 30)
check("torch_fault_user_exception_tagged", msg is not None and msg.startswith("rank 1: op #") and
      "(step 1)" in msg and 'module "gpt" chunk 1 raised ValueError: boom on purpose' in msg and
      "microbatch 2" in msg and "faults_torch.py:" in msg and "Traceback" not in msg, repr(msg))


# ---- the command line: outputs checked before step 1
def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "bigmac.torch", "train", SPEC] + list(args), capture_output=True,
                          text=True, timeout=timeout)


log = os.path.join(tmp, "a.jsonl")
r = cli("--nproc", "2", "--steps", "3", "--log", log, "--trace", os.path.join(tmp, "no", "dir", "t.json"))
check("torch_cli_trace_checked_before_step_1", r.returncode == 1 and "--trace " in r.stderr and
      "cannot write it: No such file or directory" in r.stderr and not os.path.exists(log), r.stderr[-600:])
r = cli("--nproc", "2", "--steps", "3", "--log", log, "--dump-params", tmp)
check("torch_cli_dump_checked_before_step_1", r.returncode == 1 and "--dump-params " + tmp in r.stderr and
      "directory" in r.stderr and not os.path.exists(log), r.stderr[-600:])
r = cli("--reference", "--steps", "3", "--log", log, "--dump-params", os.path.join(tmp, "no", "p.bin"))
check("torch_cli_reference_dump_checked_first", r.returncode == 1 and "--dump-params" in r.stderr and
      not os.path.exists(log), r.stderr[-600:])


def train_bad_trace(rank):
    bt.train(spec, steps=3, pp=2, log=log, trace=os.path.join(tmp, "no", "t.json"))


msg = spawn_error(train_bad_trace, 2, 30)
check("torch_api_trace_checked_before_step_1", msg is not None and msg.startswith("trace ") and
      "cannot write it" in msg and not os.path.exists(log), repr(msg))
for bad in ("0", "nan", "-1", "soon"):
    r = cli("--nproc", "2", "--timeout", bad)
    check("torch_cli_timeout_usage_%s" % bad, r.returncode == 2 and "--timeout" in r.stderr, r.stderr[-300:])


# ---- the command line under faults: a killed rank, a stopped rank
def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def run_and_signal(sig, name, *extra):
    """Start a long --nproc 2 run, wait for its first logged step, send sig to one of its two
    rank processes; returns (rc, stderr, pid signalled)."""
    lg = os.path.join(tmp, name + ".jsonl")
    p = subprocess.Popen([sys.executable, "-m", "bigmac.torch", "train", SPEC, "--nproc", "2", "--steps", "100000",
                          "--log", lg] + list(extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    victim = None
    try:
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None:
            kids = children(p.pid)
            if len(kids) == 2 and os.path.exists(lg) and os.path.getsize(lg) > 0:
                victim = max(kids)
                os.kill(victim, sig)
                break
            time.sleep(0.2)
        err = p.communicate(timeout=120)[1]
    except subprocess.TimeoutExpired:
        for k in children(p.pid):
            os.kill(k, signal.SIGKILL)
        p.kill()
        err = p.communicate()[1] + "\n(test: timed out)"
    return p.returncode, err, victim


rc, err, victim = run_and_signal(signal.SIGKILL, "kill")  # the default timeout: a death is seen at once
lines = [l for l in err.splitlines() if l.strip()]
killed = lines[0].split("rank ", 1)[1].split(" ", 1)[0] if lines and "rank " in lines[0] else "?"
check("torch_cli_killed_rank_one_message", victim is not None and rc == 1 and
      ("(pid %d) was killed by SIGKILL" % victim) in lines[0] and "Traceback" not in err and 2 <= len(lines) <= 4
      and ("the connection to rank %s broke" % killed) in lines[1], err[-1500:])
rc, err, victim = run_and_signal(signal.SIGSTOP, "stop", "--timeout", "3")
lines = [l for l in err.splitlines() if l.strip()]
check("torch_cli_stopped_rank_named", victim is not None and rc == 1 and
      ("(pid %d) is stopped" % victim) in lines[0] and "Traceback" not in err and "did not answer" in err, err[-1500:])
check("torch_cli_stopped_rank_reaped", victim is not None and (not os.path.exists("/proc/%d/stat" % victim) or
      open("/proc/%d/stat" % victim).read().split(") ")[1][0] == "Z"), str(victim))
done()
