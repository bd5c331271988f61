"""Attack: allocate without bound in every call.

Address space is claimed with untouched anonymous maps (free to take, so the memory
limit is reached at once however loaded the machine is: the grader's wall clock never
decides this one), then one ordinary allocation more, which the limit refuses."""
import mmap


def kv_bytes_per_token(*args):
    hoard = []
    try:
        while True:
            hoard.append(mmap.mmap(-1, 1 << 24))
    except OSError:
        pass
    hoard.append(bytearray(1 << 24))        # MemoryError: the limit, not the clock


def pages_for(*args):
    return len("x" * (1 << 40))


pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
