"""Attack: crash the interpreter in each call (a NULL read through ctypes, then a C stack
overflow), so the process dies of SIGSEGV rather than raising."""
import sys


def kv_bytes_per_token(*args):
    try:
        import ctypes
        ctypes.string_at(0)
    except ImportError:
        pass
    sys.setrecursionlimit(10 ** 7)

    def down(n):
        return down(n + 1) + 1
    return down(0)


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
