"""bigmac from Python: the C library's planner, verifier, simulator and renderers (docs/python.md).

    import bigmac
    spec = bigmac.load_spec("examples/tiny-mllm.json")
    table = bigmac.plan(spec, pp=2, microbatches=8, policy="bigmac", backbone="1f1b")
    bigmac.verify(table)
    sim = bigmac.simulate(table)          # the dict `bigmac simulate --json` prints
    bigmac.render(table, "ascii", "-")

Everything here calls the C library (build/python/_bigmac.so, built by `make`) through ctypes;
nothing is re-implemented. Failures raise bigmac.Error with the C library's positioned message
("examples/x.json:14:9: ..."). bigmac.torch is the PyTorch executor of the same tables.
"""
import ctypes as _C
import json as _json
import math as _math
import numbers as _numbers
import os as _os

__all__ = ["Error", "Spec", "Table", "Batch", "load_spec", "plan", "verify", "simulate", "render",
           "load_table", "data_batch", "module_init", "ROLES", "POLICIES", "BACKBONES"]

OP_COMPUTE, OP_SEND, OP_RECV = 0, 1, 2


class Error(Exception):
    """A failure reported by the C library; str(e) is its message (file:line:col: ...)."""


def _find_lib():
    env = _os.environ.get("BIGMAC_LIB")
    if env:
        return env
    here = _os.path.dirname(_os.path.abspath(__file__))
    for cand in (_os.path.join(here, "_bigmac.so"),  # installed (make install)
                 _os.path.join(here, "..", "..", "build", "python", "_bigmac.so")):  # repository
        if _os.path.exists(cand):
            return _os.path.normpath(cand)
    raise ImportError("bigmac: the C library is not built: run `make` in the repository "
                      "(it writes build/python/_bigmac.so), or set BIGMAC_LIB")


_lib = _C.CDLL(_find_lib())
_P, _I, _D, _S, _Z = _C.c_void_p, _C.c_int, _C.c_double, _C.c_char_p, _C.c_size_t
_IP, _DP, _FP = _C.POINTER(_C.c_int), _C.POINTER(_C.c_double), _C.POINTER(_C.c_float)


def _sig(name, res, *args):
    f = getattr(_lib, name)
    f.restype, f.argtypes = res, list(args)
    return f


def _names(fn):
    """The names of a C enum in enum order, from the library's own name function (bm_*_name,
    "?" past the last value), so Python never lists them a second time."""
    f = _sig(fn, _S, _I)
    out = []
    while (name := f(len(out)).decode()) != "?":
        out.append(name)
    return tuple(out)


__version__ = _sig("bm_version", _S)().decode()  # the C library's BM_VERSION (bigmac --version)

ROLES = _names("bm_role_name")          # enum bm_role order
PASSES = _names("bm_pass_name")         # "F", "B", "W"
BACKBONES = _names("bm_backbone_name")  # enum bm_backbone order
POLICIES = _names("bm_policy_name")     # enum bm_policy order


_sig("bmpy_free", None, _P)
_sig("bmpy_spec_load", _P, _S, _S, _Z)
_sig("bmpy_spec_parse", _P, _S, _S, _S, _Z)
_sig("bm_spec_free", None, _P)
_sig("bmpy_spec_json", _P, _P)
_sig("bmpy_plan", _P, _P, _S, _S, _Z)
_sig("bmpy_table_free", None, _P)
_sig("bmpy_table_json", _P, _P)
_sig("bmpy_table_parse", _P, _S, _S, _S, _Z)
_sig("bmpy_table_load", _P, _S, _S, _Z)
_sig("bmpy_table_save", _I, _P, _S, _S, _Z)
_sig("bmpy_table_info", _P, _P)
_sig("bmpy_table_rank_ops", _P, _P, _I)
_sig("bmpy_table_op_flow", _P, _P, _I, _I, _I)
_sig("bmpy_verify", _I, _P, _S, _Z)
_sig("bmpy_simulate_json", _P, _P, _D, _C.c_ulonglong, _I, _S, _Z)
_sig("bmpy_simulate_measured", _P, _P, _DP, _DP, _DP, _D, _C.c_ulonglong, _I, _DP, _S, _Z)
_sig("bmpy_simulate_compare", _P, _P, _S, _D, _C.c_ulonglong, _IP, _S, _Z)
_sig("bmpy_render", _I, _P, _S, _S, _I, _S, _S, _Z)
_sig("bmpy_table_torch_csv", _P, _P, _I, _S, _Z)
_sig("bmpy_trace_write", _I, _P, _C.POINTER(_DP), _C.POINTER(_DP), _C.POINTER(_DP), _IP, _S, _S, _Z)
_sig("bmpy_dataset_new", _P, _P, _S, _Z)
_sig("bm_dataset_free", None, _P)
_sig("bmpy_dataset_batch", _P, _P, _C.c_long, _I, _S, _Z)
_sig("bm_batch_free", None, _P)
_sig("bmpy_batch_info", _P, _P)
_sig("bmpy_batch_copy", None, _P, _IP, _FP, _IP, _FP, _FP, _FP)
_sig("bmpy_module_init", _FP, _P, _I, _I, _I, _C.POINTER(_Z), _S, _Z)
_sig("bm_vocab_word", _S, _I)

_ERRN = 4096


def _errbuf():
    return _C.create_string_buffer(_ERRN)


def _raise(buf):
    raise Error(buf.value.decode("utf-8", "replace"))


def _take_str(ptr):
    """A malloc'd C string as str (freed)."""
    try:
        return _C.string_at(ptr).decode("utf-8")
    finally:
        _lib.bmpy_free(ptr)


def _b(s):
    return s.encode("utf-8") if isinstance(s, str) else s


def _take_json(ptr, what):
    """A malloc'd JSON text from the C interface as Python objects (freed)."""
    if not ptr:
        raise Error("%s: out of memory" % what)
    return _json.loads(_take_str(ptr))


# ---------------------------------------------------------------- argument checks
# ctypes converts a Python int to a C int modulo 2^32 and a C double from anything float()
# takes, so every number is checked here before it reaches C: a bigmac.Error names the argument.

_INT_MAX = 2 ** 31 - 1


def _int(name, v, lo=0, hi=_INT_MAX):
    """v as an int in lo..hi (a C int at most)."""
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral):
        raise Error("%s: expected an integer, got %r" % (name, v))
    v = int(v)
    if not lo <= v <= hi:
        raise Error("%s = %d: must be in %d..%d" % (name, v, lo, hi))
    return v


def _index(name, v, n, what):
    """v as an index into n things (what: "the table's tensors")."""
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral):
        raise Error("%s: expected an integer index, got %r" % (name, v))
    v = int(v)
    if not 0 <= v < n:
        raise Error("%s = %d: out of range: %s are 0..%d" % (name, v, what, n - 1) if n else
                    "%s = %d: out of range: there are no %s" % (name, v, what.replace("the ", "", 1)))
    return v


def _num(name, v, lo, hi):
    """v as a finite float in lo..hi."""
    if isinstance(v, bool) or not isinstance(v, _numbers.Real):
        raise Error("%s: expected a number, got %r" % (name, v))
    f = float(v)
    if not (_math.isfinite(f) and lo <= f <= hi):
        raise Error("%s = %r: must be a finite number in %g..%g" % (name, v, lo, hi))
    return f


class _Owned:
    """A C object owned by Python: ._h is its handle, bigmac.Error once close()d (so no call
    reaches C with a freed or NULL handle). with-statement closes it."""
    _handle = None
    _free = None
    _what = "object"

    @property
    def _h(self):
        if self._handle is None:
            raise Error("%s is closed" % self._what)
        return self._handle

    def close(self):
        """Free the C object now (idempotent); any later use raises bigmac.Error."""
        h, self._handle = self._handle, None
        if h:
            getattr(_lib, self._free)(h)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        # its handle is an address in this process: unpickled elsewhere it would be freed twice
        raise Error("a bigmac %s holds a C object and cannot be pickled as it is" % self._what)


# ---------------------------------------------------------------- spec

class Module:
    """One module of a spec (read-only view): name, role, impl, arch (dict), cost (dict), layers
    (the backbone's layer count for the chunk split: "layers", else arch.layers; 0 = none)."""

    def __init__(self, i, d):
        self.index = i
        self.name = d["name"]
        self.role = d["role"]
        self.impl = d["impl"]
        self.grad_to_backbone = bool(d["grad_to_backbone"])
        self.trainable = bool(d["trainable"])  # "trainable": false = frozen
        self.layers = d["layers"]
        self.arch = d["arch"]
        self.cost = d["cost"]

    def __repr__(self):
        return "Module(%r, %s)" % (self.name, self.role)


class Spec(_Owned):
    """A parsed, checked spec (bigmac.load_spec). .text is the JSON it was parsed from, .path
    the file (or None), .modules the modules in spec order. close() frees it at once."""
    _free = "bm_spec_free"

    def __init__(self, handle, text, path):
        self._handle, self.text, self.path = handle, text, path
        self._what = "spec %s" % (path or "<dict>")
        d = _take_json(_lib.bmpy_spec_json(handle), self._what)
        for k in ("name", "pp", "vpp", "microbatches", "unit", "window", "backbone", "policy", "backbone_module",
                  "steps", "samples_per_microbatch", "max_images", "train"):
            setattr(self, k, d[k])
        self.modules = [Module(i, m) for i, m in enumerate(d["modules"])]

    def module(self, name):
        for m in self.modules:
            if m.name == name:
                return m
        raise Error("spec %s: no module named %r" % (self.name, name))

    def to_dict(self):
        return _json.loads(self.text)

    def __repr__(self):
        return "Spec(%r, %d modules)" % (self.name, len(self.modules))


def load_spec(src, name=None):
    """Parse and check a spec: a path, a dict, or a Spec (returned as is). Raises bigmac.Error
    with the C library's positioned message."""
    if isinstance(src, Spec):
        return src
    err = _errbuf()
    if isinstance(src, dict):
        text = _json.dumps(src, indent=1)
        h = _lib.bmpy_spec_parse(_b(text), _b(name or "<dict>"), err, _ERRN)
        path = None
    elif isinstance(src, (str, bytes, _os.PathLike)):
        path = _os.fsdecode(src)
        h = _lib.bmpy_spec_load(_b(path), err, _ERRN)
        text = None
        if h:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    else:
        raise TypeError("load_spec: expected a path, a dict or a Spec, got %s" % type(src).__name__)
    if not h:
        _raise(err)
    return Spec(h, text, path)


# ---------------------------------------------------------------- table

class Op:
    __slots__ = ("kind", "pass_", "module", "chunk", "mb", "peer", "tensor", "name")

    def __init__(self, kind, pass_, module, chunk, mb, peer, tensor, name):
        self.kind, self.pass_, self.module, self.chunk = kind, pass_, module, chunk
        self.mb, self.peer, self.tensor, self.name = mb, peer, tensor, name

    @property
    def kind_name(self):
        return ("compute", "send", "recv")[self.kind]

    def __repr__(self):
        return "Op(%s)" % self.name


class Table(_Owned):
    """An operator table: per-rank op lists (.ops[rank] -> [Op]), .to_json(), .write(path).
    .spec is the Spec it was planned from (None when loaded from a file), kept alive with it.
    close() frees it at once."""
    _free = "bmpy_table_free"
    _what = "table"

    def __init__(self, handle, spec=None):
        self._handle, self.spec = handle, spec
        d = _take_json(_lib.bmpy_table_info(handle), "table")
        for k in ("pp", "vpp", "microbatches", "unit", "window", "backbone", "policy", "backbone_module"):
            setattr(self, k, d[k])
        self.module_names = [m["name"] for m in d["modules"]]
        self.module_roles = [m["role"] for m in d["modules"]]
        self._tensors = d["tensors"]
        self._chunk_ranks, self._chunk_layers = d["chunk_ranks"], d["chunk_layers"]
        self._ops = None

    @property
    def n_tensors(self):
        return len(self._tensors)

    def _tensor(self, i):
        self._h  # a closed table raises
        return self._tensors[_index("tensor", i, self.n_tensors, "the table's tensors")]

    def tensor_name(self, i):
        return self._tensor(i)["name"]

    def tensor_module(self, i):
        return self._tensor(i)["module"]

    def tensor_is_grad(self, i):
        return bool(self._tensor(i)["grad"])

    @property
    def ops(self):
        """ops[rank]: the rank's ordered list of Op."""
        if self._ops is None:
            self._ops = [self._rank_ops(r) for r in range(self.pp)]
        return self._ops

    def _rank_ops(self, r):
        """One foreign call per rank (the rank's ops as one JSON object of columns), none per op."""
        d = _take_json(_lib.bmpy_table_rank_ops(self._h, r), "table")
        return list(map(Op, d["kind"], d["pass"], d["module"], d["chunk"], d["mb"], d["peer"], d["tensor"],
                        d["name"]))

    def chunk_ranks(self):
        """The rank of each global backbone chunk (pp*vpp): c mod P, or under zb-v / dualpipe-v
        the V (c for c < P, 2P-1-c after), or a loaded table's own map (docs/table.md)."""
        return list(self._chunk_ranks)

    def chunk_layers(self):
        """Layers of each global backbone chunk (pp*vpp), or None when the table has none."""
        return list(self._chunk_layers) if self._chunk_layers is not None else None

    def flow(self, module, chunk, pass_):
        """(needs, makes): tensor indices the compute op (module, chunk or -1, "F"/"B") needs
        on its rank and makes (the C dataflow, src/table/flow.h, computed when the table was
        planned or loaded); chunk 0's encoder parts in spec module order. module: index or name."""
        if isinstance(module, str):
            if module not in self.module_names:
                raise Error("flow: module %r is not in the table (%s)" % (module, ", ".join(self.module_names)))
            module = self.module_names.index(module)
        module = _index("module", module, len(self.module_names), "the table's modules")
        chunk = _int("chunk", chunk, -1, self.pp * self.vpp - 1)
        if pass_ not in PASSES:
            raise Error("flow: pass_ must be one of %s, got %r" % (", ".join(repr(p) for p in PASSES), pass_))
        d = _take_json(_lib.bmpy_table_op_flow(self._h, module, chunk, PASSES.index(pass_)), "table")
        if d["found"] < 0:
            raise Error("table: it has no dataflow (not planned or loaded by the library)")
        if not d["found"]:
            raise Error("table: no dataflow for module %d chunk %d pass %s" % (module, chunk, pass_))
        return d["needs"], d["makes"]

    def __reduce__(self):
        """Pickled as its JSON text (another process loads it with load_table; .spec is not kept)."""
        return (load_table, (self.to_json(),))

    def to_json(self):
        """The table as the JSON text `bigmac plan` writes (docs/table.md)."""
        p = _lib.bmpy_table_json(self._h)
        if not p:
            raise Error("table: out of memory writing JSON")
        return _take_str(p)

    def to_dict(self):
        return _json.loads(self.to_json())

    def to_torch_csv(self, comms=False):
        """The backbone in PyTorch's own schedule grammar, as its _load_csv reads it (docs/csv.md
        "Writing PyTorch's files"): compute cells only, or with comms=True also its SEND/RECV
        cells (format "compute_comms"). Encoder and generator work has no cell in that grammar:
        a warning (UserWarning) says what was left out."""
        note = _errbuf()
        p = _lib.bmpy_table_torch_csv(self._h, 1 if comms else 0, note, _ERRN)
        if not p:
            raise Error("table: cannot write it in PyTorch's grammar (out of memory)")
        text = _take_str(p)
        if note.value:
            import warnings
            warnings.warn("to_torch_csv: " + note.value.decode("utf-8", "replace"), stacklevel=2)
        return text

    def write(self, path):
        err = _errbuf()
        if _lib.bmpy_table_save(self._h, _b(_os.fspath(path)), err, _ERRN):
            _raise(err)

    def write_trace(self, times, mem, path, msg_bytes=None):
        """Write a measured Chrome trace (the C executor's format, docs/trace.md): times[r] is a
        list of (start_ms, end_ms, ready_ms) per op of rank r, mem[r] a list of
        (t_ms, encoder, backbone, generator live bytes), msg_bytes[r] (optional) one number per
        op of rank r: a send's or recv's message bytes (its "bytes"; ignored for compute ops).
        Every time is a finite number of ms in 0..1e12, every size a finite number >= 0; a
        wrong shape or value raises bigmac.Error naming its place (times[r][k])."""
        P = self.pp
        tarr = (_DP * P)()
        barr = (_DP * P)()
        marr = (_DP * P)()
        nmem = (_C.c_int * P)()
        keep = []
        for name, v in (("times", times), ("mem", mem), ("msg_bytes", msg_bytes)):
            if v is not None and (isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != P):
                raise Error("trace: %s must have one list per rank (%d), got %s" % (
                    name, P, len(v) if hasattr(v, "__len__") else type(v).__name__))
        _tuples = self._trace_tuples
        for r in range(P):
            if len(times[r]) != len(self.ops[r]):
                raise Error("trace: rank %d has %d op times, the table %d ops" % (r, len(times[r]), len(self.ops[r])))
            if msg_bytes is not None:
                if len(msg_bytes[r]) != len(self.ops[r]):
                    raise Error("trace: rank %d has %d message sizes, the table %d ops"
                                % (r, len(msg_bytes[r]), len(self.ops[r])))
                for k, b in enumerate(msg_bytes[r]):
                    if isinstance(b, bool) or not isinstance(b, _numbers.Real) or not (0 <= b <= 1e18):
                        raise Error("trace: msg_bytes[%d][%d] = %r: message sizes must be numbers >= 0" % (r, k, b))
                ba = (_C.c_double * (len(msg_bytes[r]) + 1))(*[float(b) for b in msg_bytes[r]])
                keep.append(ba)
                barr[r] = _C.cast(ba, _DP)
            ta = (_C.c_double * (3 * len(times[r]) + 1))(*_tuples("times", r, times[r], 3, 1e12))
            ma = (_C.c_double * (4 * len(mem[r]) + 1))(*_tuples("mem", r, mem[r], 4, 1e18))
            keep += [ta, ma]
            tarr[r] = _C.cast(ta, _DP)
            marr[r] = _C.cast(ma, _DP)
            nmem[r] = len(mem[r])
        err = _errbuf()
        if _lib.bmpy_trace_write(self._h, tarr, barr if msg_bytes is not None else None, marr, nmem,
                                 _b(_os.fspath(path)), err, _ERRN):
            _raise(err)

    @staticmethod
    def _trace_tuples(name, r, rows, width, hi):
        """rows (tuples of width numbers, each finite in 0..hi) flattened."""
        out = []
        for k, q in enumerate(rows):
            if isinstance(q, (str, bytes)) or not hasattr(q, "__len__") or len(q) != width:
                raise Error("trace: %s[%d][%d] = %r: expected %d numbers" % (name, r, k, q, width))
            for v in q:
                if isinstance(v, bool) or not isinstance(v, _numbers.Real) or not (0 <= v <= hi):
                    raise Error("trace: %s[%d][%d] = %r: every value must be a finite number in 0..%g"
                                % (name, r, k, tuple(q), hi))
                out.append(float(v))
        return out

    def __repr__(self):
        return "Table(pp=%d, vpp=%d, M=%d, %s/%s)" % (self.pp, self.vpp, self.microbatches, self.policy,
                                                      self.backbone)


def load_table(src):
    """A table from a path (or a JSON string starting with '{')."""
    err = _errbuf()
    if isinstance(src, str) and src.lstrip().startswith("{"):
        h = _lib.bmpy_table_parse(_b(src), b"<string>", err, _ERRN)
    else:
        h = _lib.bmpy_table_load(_b(_os.fspath(src)), err, _ERRN)
    if not h:
        _raise(err)
    return Table(h)


def _enum(val, names, what):
    if val is not None and val not in names:
        raise Error("%s: unknown %s %r (%s)" % (what, what, val, ", ".join(names)))
    return val


def _window(w):
    if w is None or w in ("auto", "fit"):
        return w
    if isinstance(w, _numbers.Integral) and not isinstance(w, bool) and 1 <= w <= _INT_MAX:
        return int(w)
    raise Error("window: expected an int in 1..%d, 'auto' or 'fit', got %r" % (_INT_MAX, w))


def _posint(name, v):
    if v is None:
        return None
    if not isinstance(v, _numbers.Integral) or isinstance(v, bool) or not 1 <= v <= _INT_MAX:
        raise Error("%s: expected a positive int (1..%d), got %r" % (name, _INT_MAX, v))
    return int(v)


def _zero(v):
    """zero= (train.zero, `--zero`): None (the spec's), 0 or 1."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral) or v not in (0, 1):
        raise Error("zero: expected 0 or 1 (train.zero: 1 = ZeRO-1), got %r" % (v,))
    return int(v)


def _plan_kwargs(pp=None, vpp=None, microbatches=None, policy=None, backbone=None, window=None, unit=None,
                 dp=None, zero=None):
    """The keyword arguments given (checked) as the JSON object of plan options the C interface
    lays over the spec's (bm_plan_opts_merge); an argument left None is not given."""
    kw = {"pp": _posint("pp", pp), "vpp": _posint("vpp", vpp), "microbatches": _posint("microbatches", microbatches),
          "unit": _posint("unit", unit), "dp": _posint("dp", dp), "zero": _zero(zero), "window": _window(window),
          "backbone": _enum(backbone, BACKBONES, "backbone"), "policy": _enum(policy, POLICIES, "policy")}
    return _b(_json.dumps({k: v for k, v in kw.items() if v is not None}))


def plan(spec, pp=None, vpp=None, microbatches=None, policy=None, backbone=None, window=None, unit=None, dp=None,
         zero=None):
    """Plan spec (a Spec, path or dict); arguments left None take the spec's values, as the
    plan flags of `bigmac plan` do (dp: data-parallel replicas, `--dp`; zero: train.zero,
    `--zero`, 1 = ZeRO-1). Returns a Table."""
    spec = load_spec(spec)
    err = _errbuf()
    h = _lib.bmpy_plan(spec._h, _plan_kwargs(pp, vpp, microbatches, policy, backbone, window, unit, dp, zero), err, _ERRN)
    if not h:
        _raise(err)
    return Table(h, spec)


def verify(table):
    """Check every invariant of the table (a Table, or a table file's path or JSON text, as
    load_table takes; bm_verify); raises bigmac.Error naming the first violated invariant,
    returns True otherwise."""
    if isinstance(table, (str, bytes, _os.PathLike)):
        table = load_table(table if isinstance(table, str) else _os.fsdecode(table))
    elif not isinstance(table, Table):
        raise Error("verify: expected a Table or a table file's path, got %s" % type(table).__name__)
    err = _errbuf()
    if _lib.bmpy_verify(table._h, err, _ERRN):
        _raise(err)
    return True


def _measured(table, what, given, keys):
    """The flat C array [(module * pp*vpp + chunk) * M + mb] of bytes given as {(module name or
    index, chunk or -1/None off the backbone, mb): bytes}, which must hold exactly keys (the
    table's (module, chunk, mb) this measure is used for; chunk -1 off the backbone)."""
    if not isinstance(given, dict):
        raise Error("simulate: %s: expected a dict {(module, chunk, microbatch): bytes}, got %s"
                    % (what, type(given).__name__))
    C, M, names = table.pp * table.vpp, table.microbatches, table.module_names
    arr = (_C.c_double * (len(names) * C * M + 1))()
    seen = set()
    for key, v in given.items():
        if not (isinstance(key, tuple) and len(key) == 3):
            raise Error("simulate: %s: key %r: expected (module, chunk, microbatch)" % (what, key))
        m, c, mb = key
        if isinstance(m, str):
            if m not in names:
                raise Error("simulate: %s: key %r: no module %r in the table (%s)" % (what, key, m, ", ".join(names)))
            m = names.index(m)
        m = _index("%s: key %r: module" % (what, key), m, len(names), "the table's modules")
        c = -1 if c is None else _int("%s: key %r: chunk" % (what, key), c, -1, C - 1)
        mb = _int("%s: key %r: microbatch" % (what, key), mb, 0, M - 1)
        k = (m, c, mb)
        if k not in keys:
            raise Error("simulate: %s: key %r: the table has no such %s" % (
                what, key, "forward" if what != "act_w_bytes" else "split backward (a B with its W)"))
        if k in seen:
            raise Error("simulate: %s: key %r: given twice" % (what, key))
        seen.add(k)
        if isinstance(v, bool) or not isinstance(v, _numbers.Real) or not (0 <= v < 2 ** 53) or v != int(v):
            raise Error("simulate: %s: key %r: expected a whole number of bytes >= 0, got %r" % (what, key, v))
        arr[(m * C + max(c, 0)) * M + mb] = float(v)
    missing = sorted(keys - seen)
    if missing:
        m, c, mb = missing[0]
        raise Error("simulate: %s: no bytes for module %s%s microbatch %d (%d of %d missing): every one of the "
                    "table's %s needs its measured bytes" % (
                        what, names[m], " chunk %d" % c if c >= 0 else "", mb, len(missing), len(keys),
                        "split backwards" if what == "act_w_bytes" else "forwards"))
    return arr


def _simulate_measured(t, jitter, seed, spm, act_bytes, act_w_bytes, in_bytes):
    """simulate() of table t with measured bytes (docs/python.md "Measured activation bytes")."""
    fwd, split = set(), set()
    for ops in t.ops:
        for o in ops:
            if o.kind == OP_COMPUTE:
                k = (o.module, o.chunk if o.module == t.backbone_module else -1, o.mb)
                if o.pass_ == "F":
                    fwd.add(k)
                elif o.pass_ == "W":
                    split.add(k)
    rc = {i for i, m in enumerate(t.to_dict()["modules"]) if m.get("recompute", "none") != "none"}
    arrs = [None if v is None else _measured(t, w, v, ks) for w, v, ks in (
        ("act_bytes", act_bytes, fwd), ("act_w_bytes", act_w_bytes, split),
        ("in_bytes", in_bytes, {k for k in fwd if k[0] in rc}))]
    peaks = (_C.c_double * (t.pp * len(ROLES)))()
    err = _errbuf()
    p = _lib.bmpy_simulate_measured(t._h, arrs[0], arrs[1], arrs[2], _num("jitter", jitter, 0, 1e300),
                                    _int("seed", seed, 0, 2 ** 64 - 1), spm, peaks, err, _ERRN)
    if not p:
        _raise(err)
    out = _json.loads(_take_str(p))
    for r, rk in enumerate(out["ranks"]):
        rk["peak_act_bytes"] = {role: int(peaks[r * len(ROLES) + i]) for i, role in enumerate(ROLES)}
    return out


def simulate(src, compare=False, jitter=0.0, seed=1, act_bytes=None, act_w_bytes=None, in_bytes=None, **plan_args):
    """The dict `bigmac simulate --json` prints: of a Table, or of a spec (planned with
    plan_args). compare=True (spec only): every policy and the zero-bubble bound, exactly as
    `bigmac simulate SPEC --compare --json`.

    act_bytes, act_w_bytes, in_bytes (a Table only): an executor's measured bytes
    {(module, chunk, microbatch): bytes} (chunk -1 off the backbone) of every forward (what it
    keeps until its backward), of every split backward (what its B keeps until its W) and of
    every recomputed forward (the input it keeps), in place of the spec's act_mib model; each
    rank of the result then also has "peak_act_bytes" {role: bytes}, exact (docs/python.md
    "Measured activation bytes"; bigmac.torch.train's Result.act_bytes are such bytes)."""
    measured = not (act_bytes is None and act_w_bytes is None and in_bytes is None)
    if measured and not isinstance(src, Table):
        raise Error("simulate: act_bytes, act_w_bytes and in_bytes need a Table (the measured run's)")
    if isinstance(src, Table):
        if compare:
            raise Error("simulate: compare=True needs a spec (it plans every policy)")
        if plan_args:
            raise Error("simulate: plan arguments (%s) need a spec, not a table" % ", ".join(plan_args))
        verify(src)  # only valid tables are simulated (the CLI's rule; docs/hardening.md)
        spm = src.spec.samples_per_microbatch if src.spec else 1
        if measured:
            return _simulate_measured(src, jitter, seed, spm, act_bytes, act_w_bytes, in_bytes)
        err = _errbuf()
        p = _lib.bmpy_simulate_json(src._h, _num("jitter", jitter, 0, 1e300), _int("seed", seed, 0, 2 ** 64 - 1),
                                    spm, err, _ERRN)
        if not p:
            _raise(err)
        return _json.loads(_take_str(p))
    spec = load_spec(src)
    if not compare:
        return simulate(plan(spec, **plan_args), jitter=jitter, seed=seed)
    return _simulate_compare(spec, jitter, seed, plan_args)


def _simulate_compare(spec, jitter, seed, plan_args):
    allowed = ("pp", "vpp", "microbatches", "unit", "backbone", "window", "dp", "zero")
    for k in plan_args:
        if k not in allowed:
            raise Error("simulate: unknown plan argument %r (compare plans every policy)" % k)
    kw = _plan_kwargs(**plan_args)
    jitter, seed = _num("jitter", jitter, 0, 1e300), _int("seed", seed, 0, 2 ** 64 - 1)
    err = _errbuf()
    n_failed = _C.c_int()
    p = _lib.bmpy_simulate_compare(spec._h, kw, jitter, seed, _C.byref(n_failed), err, _ERRN)
    if not p:
        _raise(err)
    d = _json.loads(_take_str(p))
    if n_failed.value == len(POLICIES):
        raise Error("simulate --compare: no policy planned (bigmac: %s)" % d["results"][0].get("error", "?"))
    return d


def render(table, format, path="-", width=120, title=None):
    """Simulate table and draw it: format ascii|svg|html|trace|csv to path ("-" = stdout);
    title heads svg and html (None: the renderer's default)."""
    if not isinstance(table, Table):
        table = plan(table)
    verify(table)  # only valid tables are drawn
    err = _errbuf()
    if not isinstance(format, str):
        raise Error("render: format must be a string (ascii, svg, html, trace, csv), got %r" % (format,))
    if _lib.bmpy_render(table._h, _b(format), _b(_os.fspath(path)), _int("width", width, 1),
                       _b(title) if title else None, err, _ERRN):
        _raise(err)


# ---------------------------------------------------------------- data, initialisation

class Batch:
    """One microbatch of the built-in dataset (src/data/data.h), drawn by the C library from
    (data.seed, step, mb): numpy arrays n_images [S], images [I, ch, H, W], text [S, seq],
    target and noise [S, ch, H, W], timestep [S]."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


class _Dataset:
    def __init__(self, spec):
        err = _errbuf()
        self._h = _lib.bmpy_dataset_new(spec._h, err, _ERRN)
        if not self._h:
            _raise(err)

    def __del__(self):
        if getattr(self, "_h", None):
            _lib.bm_dataset_free(self._h)


_cfg_cache = {}


def data_batch(spec, step, mb):
    """Microbatch mb of training step step of spec's dataset, as the C trainers draw it."""
    import numpy as np
    spec = load_spec(spec)
    cfg = _cfg_cache.get(id(spec))
    if cfg is None or cfg[0] is not spec:
        cfg = _cfg_cache[id(spec)] = (spec, _Dataset(spec))
    err = _errbuf()
    d = _lib.bmpy_dataset_batch(cfg[1]._h, _int("step", step, 0, 2 ** 63 - 1), _int("mb", mb), err, _ERRN)
    if not d:
        _raise(err)
    try:
        info = _take_json(_lib.bmpy_batch_info(d), "data_batch")
        S, I, ch, H, seq = (info[k] for k in ("n_samples", "n_images_total", "channels", "image", "seq"))
        n_images = np.zeros(S, np.int32)
        images = np.zeros((I, ch, H, H), np.float32)
        text = np.zeros((S, seq), np.int32)
        target = np.zeros((S, ch, H, H), np.float32)
        noise = np.zeros((S, ch, H, H), np.float32)
        timestep = np.zeros(S, np.float32)
        ip = lambda a: a.ctypes.data_as(_IP)
        fp = lambda a: a.ctypes.data_as(_FP)
        _lib.bmpy_batch_copy(d, ip(n_images), fp(images), ip(text), fp(target), fp(noise), fp(timestep))
    finally:
        _lib.bm_batch_free(d)
    return Batch(step=step, mb=mb, n_samples=S, n_images=n_images, images=images, text=text, target=target,
                 noise=noise, timestep=timestep, seq=seq, image=H, channels=ch)


def module_init(spec, module, layer_begin=0, layer_end=0):
    """The initial flat parameters (numpy float32) of module (index or name) of spec as its C
    implementation creates them with the trainers' seed; layers [layer_begin, layer_end) for the
    backbone (layer_end 0 = all layers)."""
    import numpy as np
    spec = load_spec(spec)
    i = spec.module(module).index if isinstance(module, str) else \
        _index("module", module, len(spec.modules), "spec %s's modules" % spec.name)
    m = spec.modules[i]
    layer_begin, layer_end = _int("layer_begin", layer_begin), _int("layer_end", layer_end)
    if m.role == "backbone" and layer_end == 0:
        layer_end = m.layers
    n = _Z()
    err = _errbuf()
    p = _lib.bmpy_module_init(spec._h, i, layer_begin, layer_end, _C.byref(n), err, _ERRN)
    if not p:
        _raise(err)
    try:
        return np.ctypeslib.as_array(p, shape=(n.value,)).copy()
    finally:
        _lib.bmpy_free(p)


def vocab_word(i):
    i = _int("i", i, -_INT_MAX - 1)
    w = _lib.bm_vocab_word(i)
    return w.decode() if w else None
