"""The Python API never crashes and never wraps (issue 27, cases 7, 8, 11 and 14's Python part):
every index and integer argument is range-checked (bigmac.Error naming the argument), ints beyond
C's range are refused instead of wrapping modulo 2^32, a closed Spec or Table raises instead of
handing C a freed pointer, jitter and write_trace inputs are validated as the CLI validates them.

Each case runs in its own interpreter, so a segfault (what these calls did before) fails that
case alone. Under `make asan` the same cases run with the sanitizer build preloaded
(tests/test_python.sh), so an out-of-bounds read inside C is a failure too."""
import json
import os
import subprocess
import sys
import tempfile
import weakref
import gc

from check import check, done
import bigmac

SPEC = "tests/specs/exec-small.json"
tmp = tempfile.mkdtemp()
TABLE = os.path.join(tmp, "t.json")
bigmac.plan(SPEC).write(TABLE)

PRELUDE = """
import math, bigmac
spec = bigmac.load_spec(%r)
t = bigmac.plan(spec)
ops = t.ops
def times(f): return [[f(k) for k in range(len(o))] for o in ops]
mem = [[(0.0, 0, 0, 0)] for _ in ops]
""" % SPEC


def case(name, code, want=None, value=None):
    """Run code (after PRELUDE) in a fresh interpreter. want: substrings of the bigmac.Error it
    must raise; value: what its last expression must print instead (no exception)."""
    prog = PRELUDE + "try:\n    r = (%s)\nexcept bigmac.Error as e:\n    print('ERROR ' + str(e))\nelse:\n" \
        "    print('VALUE ' + repr(r))\n" % code
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120)
    out = p.stdout.strip().splitlines()
    last = out[-1] if out else ""
    if p.returncode != 0:
        return check(name, False, "exit %d: %s" % (p.returncode, (p.stderr.strip().splitlines() or ["?"])[-1]))
    if "runtime error" in p.stderr or "AddressSanitizer" in p.stderr:
        return check(name, False, "sanitizer: " + p.stderr[-400:])
    if want is not None:
        ok = last.startswith("ERROR ") and all(w in last for w in want)
        return check(name, ok, "wanted bigmac.Error with %r, got %r" % (want, last))
    return check(name, last == "VALUE " + value, "wanted %r, got %r" % (value, last))


# indices: module, tensor, flow arguments (the old code read past C arrays: segfaults)
case("py_guard_module_init_negative", "bigmac.module_init(spec, -1)", ("module = -1", "0..2"))
case("py_guard_module_init_past_end", "bigmac.module_init(spec, 3)", ("module = 3",))
case("py_guard_module_init_layers_wrap", "len(bigmac.module_init(spec, 'gpt', 0, 2**32 + 2))", ("layer_end",))
case("py_guard_tensor_name_negative", "t.tensor_name(-1)", ("tensor = -1", "tensors are 0.."))
case("py_guard_tensor_name_huge", "t.tensor_name(10**6)", ("tensor = 1000000",))
case("py_guard_tensor_module_huge", "t.tensor_module(10**7)", ("tensor = 10000000",))
case("py_guard_tensor_is_grad_wrap", "t.tensor_is_grad(2**32)", ("tensor = 4294967296",))
case("py_guard_tensor_name_valid", "t.tensor_name(0) == t.to_dict()['tensors'][0]['name'] if 'tensors' in t.to_dict() "
     "else bool(t.tensor_name(0))", value="True")
case("py_guard_flow_bad_pass", "t.flow(0, -1, 'X')", ("pass_", "'F', 'B', 'W'", "'X'"))
case("py_guard_flow_module_range", "t.flow(99, -1, 'F')", ("module = 99",))
case("py_guard_flow_module_name", "t.flow('vit', -1, 'F') == t.flow(0, -1, 'F')", value="True")
case("py_guard_flow_chunk_range", "t.flow(1, 2**32, 'F')", ("chunk",))
# the C accessors check their indices too (a caller of the flat interface gets NULL or "no such
# op", no read)
case("py_guard_capi_checks_indices",
     "(bigmac._lib.bmpy_table_rank_ops(t._h, -1), bigmac._lib.bmpy_table_rank_ops(t._h, 5), "
     "bigmac._take_json(bigmac._lib.bmpy_table_op_flow(t._h, 10**6, -1, 0), 'x'), "
     "bigmac._take_json(bigmac._lib.bmpy_table_op_flow(t._h, 0, 0, 7), 'x'))",
     value="(None, None, {'found': 0}, {'found': 0})")

# integers beyond C's range are refused, not wrapped modulo 2^32
case("py_guard_pp_2_32_plus_2", "bigmac.plan(spec, pp=2**32 + 2).pp", ("pp", "4294967298"))
case("py_guard_pp_2_64", "bigmac.plan(spec, pp=2**64).pp", ("pp", "18446744073709551616"))
case("py_guard_microbatches_2_32_plus_16", "bigmac.plan(spec, microbatches=2**32 + 16).microbatches",
     ("microbatches", "4294967312"))
case("py_guard_window_wrap", "bigmac.plan(spec, window=2**32 + 1).window", ("window",))
case("py_guard_compare_vpp_wrap", "bigmac.simulate(spec, compare=True, vpp=2**32 + 1)", ("vpp",))
case("py_guard_data_batch_step_negative", "bigmac.data_batch(spec, -1, 0)", ("step = -1",))
case("py_guard_data_batch_mb_wrap", "bigmac.data_batch(spec, 0, 2**32 + 1)", ("mb = 4294967297",))
case("py_guard_render_width_wrap", "bigmac.render(t, 'ascii', '/dev/null', width=2**32 + 90)", ("width",))
case("py_guard_vocab_word_wrap", "bigmac.vocab_word(2**32 + 5)", ("4294967301",))
case("py_guard_seed_negative", "bigmac.simulate(t, seed=-1)", ("seed = -1",))

# jitter as the CLI takes it: a finite number >= 0
case("py_guard_jitter_nan", "bigmac.simulate(t, jitter=float('nan'))['makespan_ms']", ("jitter", "nan"))
case("py_guard_jitter_negative", "bigmac.simulate(t, jitter=-1)['makespan_ms']", ("jitter = -1",))
case("py_guard_jitter_inf_compare", "bigmac.simulate(spec, compare=True, jitter=float('inf'))", ("jitter",))
case("py_guard_jitter_ok", "bigmac.simulate(t, jitter=0.1)['makespan_ms'] > 0", value="True")

# closed objects raise; a Table keeps its Spec alive
case("py_guard_plan_closed_spec", "(spec.close(), bigmac.plan(spec))", ("closed",))
case("py_guard_plan_freed_spec", "(spec.__del__(), bigmac.plan(spec))", ("closed",))
case("py_guard_closed_table", "(t.close(), bigmac.simulate(t))", ("table is closed",))
case("py_guard_table_outlives_closed_spec", "(spec.close(), round(bigmac.simulate(t)['makespan_ms'], 3) > 0, "
     "t.spec is spec)", value="(None, True, True)")
s = bigmac.load_spec(SPEC)
ref = weakref.ref(s)
t = bigmac.plan(s)
del s
gc.collect()
check("py_guard_table_keeps_spec_alive", ref() is not None and t.spec is ref() and bigmac.verify(t))
del t
gc.collect()
check("py_guard_spec_freed_with_table", ref() is None)

# verify takes a Table or a table file (path or JSON text); anything else is a clear error
case("py_guard_verify_path", "bigmac.verify(%r)" % TABLE, value="True")
case("py_guard_verify_spec_path", "bigmac.verify(%r)" % SPEC, (SPEC + ":",))
case("py_guard_verify_int", "bigmac.verify(42)", ("verify: expected a Table", "int"))

# write_trace: NaN/inf times, pairs instead of triples, bad sizes are refused before C
case("py_guard_write_trace_nan", "t.write_trace(times(lambda k: (k, float('nan'), k)), mem, %r)"
     % os.path.join(tmp, "n.json"), ("times[0][0]", "finite"))
case("py_guard_write_trace_inf", "t.write_trace(times(lambda k: (k, float('inf'), k)), mem, %r)"
     % os.path.join(tmp, "n.json"), ("times[0][0]",))
case("py_guard_write_trace_pairs", "t.write_trace(times(lambda k: (k, k + 0.5)), mem, %r)"
     % os.path.join(tmp, "n.json"), ("times[0][0]", "expected 3 numbers"))
case("py_guard_write_trace_negative", "t.write_trace(times(lambda k: (-1.0, k, k)), mem, %r)"
     % os.path.join(tmp, "n.json"), ("times[0][0]",))
case("py_guard_write_trace_mem_nan", "t.write_trace(times(lambda k: (k, k + 0.5, k)), [[(0.0, float('nan'), 0, 0)]"
     " for _ in ops], %r)" % os.path.join(tmp, "n.json"), ("mem[0][0]",))
case("py_guard_write_trace_bytes_inf", "t.write_trace(times(lambda k: (k, k + 0.5, k)), mem, %r, "
     "msg_bytes=[[float('inf')] * len(o) for o in ops])" % os.path.join(tmp, "n.json"), ("msg_bytes[0][0]",))
case("py_guard_write_trace_ranks", "t.write_trace(times(lambda k: (k, k + 0.5, k))[:1], mem, %r)"
     % os.path.join(tmp, "n.json"), ("times must have one list per rank",))
good = os.path.join(tmp, "good.json")
case("py_guard_write_trace_valid", "(t.write_trace(times(lambda k: (k, k + 0.5, k)), mem, %r), "
     "__import__('json').load(open(%r))['traceEvents'] != [])[1]" % (good, good), value="True")
done()
