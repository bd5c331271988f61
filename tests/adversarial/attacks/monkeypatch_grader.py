"""Attack: import the grader and the worker, and monkeypatch everything in reach: the
sandbox child's own encoder and protocol, json, os.write, the shapes classes."""
import json
import os
import sys

import reference.shapes as shapes

tried = {}
for name in ("grader", "grader.engine.validate", "grader.engine.sandbox.session", "reference.worker",
             "reference.policy", "yaml", "numpy"):
    try:
        __import__(name)
        tried[name] = "imported"
    except BaseException as exc:
        tried[name] = type(exc).__name__

child = sys.modules.get("__main__")
if child is not None:                           # the sandbox child: rewrite its answers
    child.encode = lambda value, depth=0: "patched-encode"
    child.run_call = lambda *a, **k: {"ok": "patched-run-call"}
    child.describe = lambda exc, filename: "patched describe"
json.dumps = lambda *a, **k: '{"ok": "patched-json"}'
os.write = lambda fd, data: len(data)          # swallow every answer
shapes.Verdict.__eq__ = lambda self, other: True
shapes.ModelSpec.__hash__ = lambda self: 0


def kv_bytes_per_token(*args):
    return "not a number: " + repr(tried)


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
