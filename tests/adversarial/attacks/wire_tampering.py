"""Attack: tamper with the protocol from inside the child, a different way in each call:
answer ahead (frames for the calls still to come, then its own), send half a frame, claim
a frame of 8 MiB and send nothing more, point the answer pipe at /dev/null (dup2), close
the request pipe, and write a frame to the descriptors of the terminal. Each call either
answers for itself or costs its own call (the child is replaced); nothing reaches another
call's answer with the grader's trust, nor the next submission."""
import itertools
import json
import os
import sys

REQUESTS, ANSWERS = int(sys.argv[1]), int(sys.argv[2])
turn = itertools.count()


def frame(obj):
    data = json.dumps(obj).encode()
    return len(data).to_bytes(4, "big") + data


def ahead():
    os.write(ANSWERS, frame({"ok": "tampered"}) * 5)
    return "tampered"


def half():
    os.write(ANSWERS, frame({"ok": "tampered"})[:7])
    return "tampered"


def claim():
    os.write(ANSWERS, (8 << 20).to_bytes(4, "big") + b'{"ok":')
    return "tampered"


def deaf():
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, ANSWERS)
    return "tampered"


def hang_up():
    os.close(REQUESTS)
    return "tampered"


def terminal():
    for fd in (0, 1, 2):
        os.write(fd, frame({"ok": "tampered"}))
    return "tampered"


WAYS = (ahead, half, claim, deaf, hang_up, terminal)


def kv_bytes_per_token(*args):
    return WAYS[next(turn) % len(WAYS)]()


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
