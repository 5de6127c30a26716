"""bigmac_build — the PEP 517 backend that `pip install ./python` runs (python/pyproject.toml).

It builds the native half with the repository's own Makefile (the same objects and flags as
`make`, so there is one build description) and packs the wheel itself with the standard library
alone: `pip install ./python` needs no setuptools, no wheel package and no package index, in a
fresh venv with or without --system-site-packages, with or without build isolation.

  wheel  bigmac/**.py + bigmac/_bigmac.so (the library's objects and bigmac/_capi.c, loaded by
         ctypes, not a CPython extension: tagged py3-none-<platform>)
  sdist  pyproject.toml, this backend, the package, and native/: the Makefile, include/, src/ and
         python/bigmac/_capi.c, so the sdist builds on its own

The C toolchain and libraries are Debian's (`make deps` in the repository); the Makefile says what
is missing. BIGMAC_NATIVE_BUILD=DIR builds in DIR and keeps it (else a temporary directory). The version is BM_VERSION from include/bigmac.h, the one source of it.
"""
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sysconfig
import tarfile
import tempfile
import zipfile

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/ (or the sdist root)
NATIVE_FILES = ("Makefile", "bigmac.pc.in", "include", "src", os.path.join("python", "bigmac", "_capi.c"))


def _native_root():
    """The tree that holds the Makefile and the C sources: the repository (python/..) or an
    sdist's native/ copy of it."""
    for cand in (os.path.join(HERE, "native"), os.path.dirname(HERE)):
        if os.path.isfile(os.path.join(cand, "Makefile")) and os.path.isdir(os.path.join(cand, "src")):
            return cand
    raise RuntimeError("bigmac: cannot find the C sources (python/../Makefile or native/Makefile): "
                       "install from the repository (pip install ./python) or from bigmac's sdist")


def _version():
    path = os.path.join(_native_root(), "include", "bigmac.h")
    with open(path) as f:
        m = re.search(r'^#define BM_VERSION "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("bigmac: %s has no BM_VERSION" % path)
    return m.group(1)


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        text = f.read()
    if tomllib is None:
        return {"name": "bigmac", "description": "", "requires-python": ">=3.9"}
    return tomllib.loads(text.decode())["project"]


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % _version()]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    for dep in p.get("dependencies", []):
        lines.append("Requires-Dist: %s" % dep)
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append("Provides-Extra: %s" % extra)
        for dep in deps:
            lines.append('Requires-Dist: %s ; extra == "%s"' % (dep, extra))
    return "\n".join(lines) + "\n"


def _build_native(tmp):
    """make the Python library in a build directory of its own; returns its path."""
    root = _native_root()
    # BIGMAC_NATIVE_BUILD=DIR keeps the objects between installs (make rebuilds what changed)
    build = os.path.abspath(os.environ.get("BIGMAC_NATIVE_BUILD") or os.path.join(tmp, "native-build"))
    target = os.path.join(build, "python", "_bigmac.so")
    jobs = str(max(1, min(8, os.cpu_count() or 1)))
    # SAN= (no sanitizer: the library is loaded into a plain interpreter), whatever a calling
    # make exported (`make asan` exports SAN to the tests it runs)
    cmd = ["make", "-C", root, "-j" + jobs, "BUILD=" + build, "SAN=", target]
    # a top-level build of its own: a make that runs pip must not hand down its flags
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("bigmac: building the C library failed (%s):\n%s" % (" ".join(cmd), r.stdout[-4000:]))
    return target


def _package_files():
    """(path inside the wheel, path on disk) of every Python file of the package."""
    pkg = os.path.join(HERE, "bigmac")
    out = []
    for d, dirs, files in os.walk(pkg):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                full = os.path.join(d, name)
                out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), full))
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


# ---------------------------------------------------------------- PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version = _project()["name"], _version()
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = "py3-none-%s" % plat
    dist = "%s-%s" % (name, version)
    wheel_name = "%s-%s.whl" % (dist, tag)
    with tempfile.TemporaryDirectory(prefix="bigmac-wheel-") as tmp:
        lib = _build_native(tmp)
        entries = [(arc, open(full, "rb").read()) for arc, full in _package_files()]
        entries.append(("bigmac/_bigmac.so", open(lib, "rb").read()))
        info = dist + ".dist-info"
        entries.append((info + "/METADATA", _metadata().encode()))
        entries.append((info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: bigmac_build\n"
                                          "Root-Is-Purelib: false\nTag: %s\n" % tag).encode()))
        record = [_record_line(n, d) for n, d in entries] + [info + "/RECORD,,"]
        entries.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
        os.makedirs(wheel_directory, exist_ok=True)
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in entries:
                zi = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
                zi.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, d)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    name, version = _project()["name"], _version()
    base = "%s-%s" % (name, version)
    root = _native_root()
    out = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)

    def skip(ti):
        return None if "__pycache__" in ti.name.split("/") else ti

    with tarfile.open(os.path.join(sdist_directory, out), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in ("pyproject.toml", "_build", "bigmac"):
            tar.add(os.path.join(HERE, rel), arcname=base + "/" + rel, filter=skip)
        for rel in NATIVE_FILES:
            tar.add(os.path.join(root, rel), arcname=base + "/native/" + rel.replace(os.sep, "/"), filter=skip)
        meta = ("PKG-INFO", _metadata().encode())
        ti = tarfile.TarInfo(base + "/" + meta[0])
        ti.size = len(meta[1])
        tar.addfile(ti, io.BytesIO(meta[1]))
    return out
