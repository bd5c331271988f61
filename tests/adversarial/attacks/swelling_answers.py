"""Attack: answer every call with a frame the protocol allows (under 8 MiB) that parses into
millions of objects in the grader, `[[],[],...]`, written straight to the answer pipe so
no encoding slows it down. The grader holds a batch's answers before it validates any:
before the answer allowance, a few dozen of these took gigabytes of the grader's memory."""
import os
import sys
import time

OUT = int(sys.argv[2])                     # the protocol pipe to the grader
BODY = b'{"ok":[' + b"[]," * ((5 << 20) // 3) + b'[]]}'
FRAME = len(BODY).to_bytes(4, "big") + BODY


def kv_bytes_per_token(*args):
    for _ in range(200):
        os.write(OUT, FRAME)
    time.sleep(1000)


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
