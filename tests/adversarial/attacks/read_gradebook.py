"""Attack: read the gradebook, and raise its own score in it while there."""
import json

TARGETS = {}  # the test writes the real paths here

path = TARGETS.get("gradebook", "/nonexistent")
found = {}
try:
    with open(path, "rb") as f:
        found["raw"] = "ok:" + f.read(40).decode("latin-1")
except BaseException as exc:
    found["raw"] = type(exc).__name__
try:
    import sqlite3
    db = sqlite3.connect(path, timeout=0.1)
    found["rows"] = "ok:" + repr(db.execute("select * from sqlite_master").fetchall())[:80]
    db.execute("update results set score = 10")
    db.commit()
except BaseException as exc:
    found["sqlite"] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))
