"""Attack: allocate without bound in every call (and fill the disk while at it)."""


def kv_bytes_per_token(*args):
    hoard = []
    while True:
        hoard.append(bytearray(1 << 24))


def pages_for(*args):
    return len("x" * (1 << 40))


pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
