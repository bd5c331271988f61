"""Attack: answer with a list nested 850 to 1000 levels deep, a frame written straight to
the answer pipe (the child's own encoder refuses more than 20 levels), the child's own frame
for the call sent to /dev/null. Such a list parses in the grader, near Python's recursion
limit: before the grader bounded a frame's nesting, the first repr of it (validate's
message on a wrong type, deeper in the grader's stack than the parse) raised RecursionError
and ended the whole check or grade with a traceback."""
import itertools
import os
import sys

ANSWERS = int(sys.argv[2])                 # the protocol pipe to the grader
SAVED = os.dup(ANSWERS)
NULL = 1                                   # the child put /dev/null on 0, 1 and 2
turn = itertools.count()


def kv_bytes_per_token(*args):
    n = 850 + (next(turn) * 7) % 160
    body = ('{"ok":' + "[" * n + "]" * n + "}").encode()
    os.dup2(SAVED, ANSWERS)
    os.write(SAVED, len(body).to_bytes(4, "big") + body)
    os.dup2(NULL, ANSWERS)                 # the child's own frame for this call: nowhere
    return None


pages_for = pool_pages = worst_case_pages = check_contract = admit = kv_bytes_per_token
