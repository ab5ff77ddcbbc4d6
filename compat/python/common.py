"""Shared plumbing of the Python client scripts: JSON in on stdin, JSON out on stdout."""
import base64
import json
import sys
import time
import traceback


def unb64(s):
    return None if s is None else base64.b64decode(s)


def b64(b):
    if b is None:
        return None
    if isinstance(b, str):
        b = b.encode()
    return base64.b64encode(b).decode()


def rec_out(partition, offset, key, value, headers, timestamp):
    return {
        "partition": partition,
        "offset": offset,
        "key": b64(key),
        "value": b64(value),
        "headers": [{"key": k, "value": b64(v)} for k, v in headers] or None,
        "timestamp": timestamp,
    }


# Seconds to wait for records: the request's "timeout" (set by main), else 60.
TIMEOUT = 60


def deadline_loop(seconds=None):
    """Yields until the deadline passes (a condition is polled in the loop's body)."""
    end = time.monotonic() + (TIMEOUT if seconds is None else seconds)
    while time.monotonic() < end:
        yield
        time.sleep(0.01)


def error_response(typ, code, message):
    return {"error": {"type": typ, "code": code, "message": message}}


def main(ops, classify):
    """Runs op_<argv[1]> with the request on stdin; a client error becomes the response's
    error (classify(e) -> type, code, message), anything else a traceback and exit 2."""
    op = sys.argv[1].replace("-", "_")
    global TIMEOUT
    req = json.load(sys.stdin) if op != "version" else {}
    TIMEOUT = req.get("timeout") or TIMEOUT
    fn = ops.get("op_" + op)
    if fn is None:
        print("unknown op " + op, file=sys.stderr)
        sys.exit(2)
    try:
        resp = fn(req)
    except Exception as e:
        traceback.print_exc()
        typ, code, message = classify(e)
        resp = error_response(typ, code, message)
    json.dump(resp, sys.stdout)
