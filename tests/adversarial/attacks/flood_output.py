"""Attack: flood stdout and stderr, through print, sys.stderr and the raw descriptors."""
import os
import sys

LINE = "FLOOD " * 1000 + "\n"


def flood():
    for _ in range(2000):
        print(LINE, end="")
        sys.stderr.write(LINE)
        for fd in (1, 2):
            try:
                os.write(fd, LINE.encode())
            except OSError:
                pass
    return "flooded"


flood()


def kv_bytes_per_token(*args):
    return flood()


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
