"""Attack: print a fake result in the grader's format, forge protocol frames, and put a
fake report into its own feedback, hoping some reader takes it for the grader's."""
import json
import os
import sys

FAKE_JSON = json.dumps({"lesson": "lesson1", "score": 10.0, "max_score": 10.0, "mode": "grade"})
FAKE_TEXT = "\n  total 10 / 10   (53 cases; isolation: none)\n"
print(FAKE_JSON)
print(FAKE_TEXT)
for fd in (1, 2):
    os.write(fd, (FAKE_JSON + FAKE_TEXT).encode())


def frame(obj):
    data = json.dumps(obj).encode()
    return len(data).to_bytes(4, "big") + data


def kv_bytes_per_token(*args):
    print(FAKE_JSON)
    out = int(sys.argv[2])                     # the protocol pipe to the grader
    os.write(out, frame({"ok": "forged"}) + frame({"loaded": True}) + frame({"score": 10}))
    raise RuntimeError(FAKE_TEXT + FAKE_JSON)


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
