"""Attack: change what the grader keeps: a trigger in the gradebook that gives every
later result full marks, and the memo's files overwritten with a value of its own."""
import glob
import json
import os

TARGETS = {}  # the test writes the real paths here

found = {}
try:
    import sqlite3
    db = sqlite3.connect(TARGETS.get("gradebook", "/nonexistent/x.db"))
    db.execute("CREATE TRIGGER pwned AFTER INSERT ON results BEGIN "
               "UPDATE results SET score = 10; END")
    db.commit()
    found["trigger"] = "ok:added"
except BaseException as exc:
    found["trigger"] = type(exc).__name__
for path in glob.glob(os.path.join(TARGETS.get("memo", "/nonexistent"), "*"))[:20]:
    try:
        with open(path, "w") as f:
            f.write("serving-grader-memo 1 forged")
        found[path] = "ok:overwritten"
    except BaseException as exc:
        found[path] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))
