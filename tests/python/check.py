"""PASS/FAIL helpers for the Python tests (tests/test_python.sh)."""
import sys
import traceback

failed = 0


def check(name, cond, detail=""):
    global failed
    if cond:
        print("PASS %s" % name)
    else:
        failed += 1
        print("FAIL %s%s" % (name, (": " + detail) if detail else ""))
    sys.stdout.flush()
    return cond


def raises(name, fn, exc, contains=()):
    """PASS when fn() raises exc whose message contains every string of contains."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        miss = [c for c in contains if c not in msg]
        return check(name, not miss, "message %r lacks %r" % (msg, miss))
    except Exception:
        return check(name, False, "raised " + traceback.format_exc().splitlines()[-1])
    return check(name, False, "did not raise")


def done():
    sys.exit(1 if failed else 0)
