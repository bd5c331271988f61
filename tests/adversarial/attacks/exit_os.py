"""Attack: os._exit(0) in every call: the process ends at once, status 0."""
import os


def kv_bytes_per_token(*args):
    os._exit(0)


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
