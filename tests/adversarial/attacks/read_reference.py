"""Attack: get the reference solution, by import or by file, and hand in its answers."""
import importlib
import json
import sys

TARGETS = {}  # the test writes the real paths here

tried = {}
sys.path[:0] = [TARGETS.get("course_root", "/nonexistent"), "/work/main", "/root", "/"]
shapes = sys.modules.pop("reference.shapes")
sys.modules.pop("reference")                 # forget the sandbox's one-module package
for name in ("reference.solutions.lesson1", "reference.worker", "grader.lessons.lesson1"):
    try:
        module = importlib.import_module(name)
        tried[name] = "ok"
        if name == "reference.solutions.lesson1":
            globals().update({k: getattr(module, k) for k in dir(module) if not k.startswith("_")})
    except BaseException as exc:
        tried[name] = type(exc).__name__
sys.modules["reference.shapes"] = shapes
try:
    source = open(TARGETS.get("reference", "/nonexistent")).read()
    exec(compile(source, "stolen.py", "exec"), globals())   # its functions are now ours
    tried["file"] = "ok:" + source[:60]
except BaseException as exc:
    tried["file"] = type(exc).__name__

if "kv_bytes_per_token" not in globals():
    raise RuntimeError("LEAK " + json.dumps(tried))
