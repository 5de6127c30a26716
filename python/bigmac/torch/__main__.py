"""python3 -m bigmac.torch train SPEC [plan flags] [--steps N] [--log FILE] [--trace FILE]
                                     [--dump-params FILE] [--nproc P] [--reference] [--device D]
                                     [--timeout S] [--dp D] [--checkpoint DIR]
                                     [--checkpoint-every N] [--resume DIR]

Trains SPEC's built-in models (vit, gpt, dit) as their torch twins with the torch executor:
under torch.distributed.run (one process per pipeline rank), with --nproc P (spawns P local
processes, gloo), or --reference (one process, no pipeline). The log is `bigmac train --log`'s
JSONL; the trace `bigmac train --trace`'s Chrome trace; --dump-params writes the final
parameters as `bigmac train --dump-params` does; every output path is checked before step 1.
--timeout S (default 300): how long any one receive, send or collective may wait (and the process
group's timeout); a rank that stops answering ends the run with a message naming it and the op
that waited. --dp D: D data-parallel replicas of the pipeline (P*D processes, global rank
p*D + d; with --nproc N, pp defaults to N/D; with --reference, the step of D*M microbatches).
--checkpoint DIR writes a checkpoint set every --checkpoint-every N steps and after the last
(torch.save per pipeline rank, committed as a set; the last complete set is kept); --resume DIR
continues from DIR's last complete set (same spec, pp and table, else refused with the reason). Exit status: 0 ok, 1 failure, 2 usage."""
import os
import sys

USAGE = ("usage: python3 -m bigmac.torch train SPEC [--pp N] [--vpp V] [--microbatches M] [--unit U]\n"
         "         [--backbone gpipe|1f1b|interleaved] [--policy P] [--window W|auto|fit]\n"
         "         [--steps N] [--log FILE] [--trace FILE] [--dump-params FILE] [--nproc P | --reference]\n"
         "         [--device cpu|cuda] [--timeout S] [--dp D] [--checkpoint DIR] [--checkpoint-every N]\n"
         "         [--resume DIR]\n")

PLAN_FLAGS = {"--pp": "pp", "--vpp": "vpp", "--microbatches": "microbatches", "--unit": "unit",
              "--backbone": "backbone", "--policy": "policy", "--window": "window"}
INT_FLAGS = ("pp", "vpp", "microbatches", "unit")


def usage_error(msg):
    sys.stderr.write("bigmac: error: %s\n%s" % (msg, USAGE))
    return 2


def parse(argv):
    o = {"plan": {}, "steps": None, "log": None, "trace": None, "dump": None, "nproc": None, "reference": False,
         "device": "cpu", "spec": None, "timeout": None, "dp": None, "checkpoint": None,
         "checkpoint_every": None, "resume": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE + __doc__.split("\n", 2)[2] + "\n")
            sys.exit(0)
        if a == "--reference":
            o["reference"] = True
            i += 1
            continue
        if a.startswith("--"):
            if i + 1 >= len(argv):
                raise ValueError("%s needs a value" % a)
            v = argv[i + 1]
            i += 2
            if a in PLAN_FLAGS:
                k = PLAN_FLAGS[a]
                if k in INT_FLAGS or (k == "window" and v not in ("auto", "fit")):
                    try:
                        v = int(v)
                    except ValueError:
                        raise ValueError("%s: expected an integer, got '%s'" % (a, v))
                    if v < 1:
                        raise ValueError("%s: expected a positive integer, got %d" % (a, v))
                o["plan"][k] = v
            elif a in ("--steps", "--nproc", "--dp", "--checkpoint-every"):
                try:
                    n = int(v)
                except ValueError:
                    raise ValueError("%s: expected an integer, got '%s'" % (a, v))
                if n < 1:
                    raise ValueError("%s: expected a positive integer, got %d" % (a, n))
                o[a[2:].replace("-", "_")] = n
            elif a == "--timeout":
                try:
                    t = float(v)
                except ValueError:
                    raise ValueError("--timeout: expected a number of seconds, got '%s'" % v)
                if not (0 < t <= 1e7):  # NaN fails too
                    raise ValueError("--timeout: expected a number of seconds in (0, 1e7], got '%s'" % v)
                o["timeout"] = t
            elif a in ("--log", "--trace", "--device", "--checkpoint", "--resume"):
                o[a[2:]] = v
            elif a == "--dump-params":
                o["dump"] = v
            else:
                raise ValueError("unknown flag '%s'" % a)
            continue
        if o["spec"] is not None:
            raise ValueError("unexpected argument '%s'" % a)
        o["spec"] = a
        i += 1
    if o["spec"] is None:
        raise ValueError("train: missing SPEC")
    if o["reference"] and (o["nproc"] or o["trace"] or o["plan"]):
        raise ValueError("--reference runs one process without a plan: no --nproc, --trace or plan flags")
    if o["reference"] and (o["checkpoint"] or o["resume"]):
        raise ValueError("--checkpoint and --resume are for the pipelined run, not --reference")
    if o["checkpoint_every"] and not o["checkpoint"]:
        raise ValueError("--checkpoint-every needs --checkpoint DIR")
    return o


def _rank_main(rank, o):
    import bigmac.torch as bt
    return bt.train(o["spec"], steps=o["steps"], log=o["log"], trace=o["trace"], dump=o["dump"], device=o["device"],
                    progress=sys.stdout, timeout=o["timeout"] or bt.DEFAULT_TIMEOUT, dp=o["dp"],
                    checkpoint=o["checkpoint"], checkpoint_every=o["checkpoint_every"], resume=o["resume"],
                    **o["plan"])


def main(argv):
    if not argv or argv[0] != "train":
        return usage_error("expected the subcommand 'train'")
    try:
        o = parse(argv[1:])
    except ValueError as e:
        return usage_error(str(e))
    import bigmac
    import bigmac.torch as bt
    timeout = o["timeout"] or bt.DEFAULT_TIMEOUT
    distributed = False
    try:
        bigmac.load_spec(o["spec"])  # a bad spec fails here, before any process starts
        for flag in ("log", "trace", "dump"):  # so do unwritable outputs
            if o[flag]:
                bt.check_output(o[flag], "--dump-params" if flag == "dump" else "--" + flag)
        if o["reference"]:
            bt.reference(o["spec"], steps=o["steps"], log=o["log"], dump=o["dump"], device=o["device"],
                         progress=sys.stdout, dp=o["dp"] or 1)
        elif o["nproc"]:
            D = o["dp"] or 1
            if "pp" not in o["plan"]:
                if o["nproc"] % D:
                    raise bigmac.Error("--nproc %d cannot hold %d data-parallel replicas of one pipeline (not a "
                                       "multiple)\nhint: --nproc %d" % (o["nproc"], D, max(1, o["nproc"] // D) * D))
                o["plan"]["pp"] = o["nproc"] // D
            elif D > 1 and o["plan"]["pp"] * D != o["nproc"]:
                raise bigmac.Error("the layout pp %d \u00d7 dp %d needs %d ranks but --nproc %d\nhint: --nproc %d"
                                   % (o["plan"]["pp"], D, o["plan"]["pp"] * D, o["nproc"], o["plan"]["pp"] * D))
            bt.spawn(_rank_main, o["nproc"], (o,), timeout=timeout)
        else:
            distributed = bt.init_from_env(timeout=timeout)[1] > 1
            _rank_main(0, o)
            bt.finish()
    except bigmac.Error as e:
        for line in str(e).splitlines():
            sys.stderr.write(("bigmac: hint:%s\n" % line[5:]) if line.startswith("hint:") else
                             ("bigmac: error: %s\n" % line))
        if distributed:  # a failed group's threads may block the interpreter's exit: end now
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
