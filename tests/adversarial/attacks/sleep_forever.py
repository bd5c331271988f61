"""Attack: sleep forever while loading (no CPU spent, so only the wall clock stops it)."""
import select
import time

time.sleep(10 ** 6)
select.select([], [], [])


def kv_bytes_per_token(model):
    return 0
