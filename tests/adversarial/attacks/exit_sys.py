"""Attack: sys.exit(0) in every call, hoping a clean exit reads as success."""
import sys


def kv_bytes_per_token(*args):
    sys.exit(0)


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
