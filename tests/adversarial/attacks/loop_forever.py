"""Attack: every function loops forever, burning CPU."""


def kv_bytes_per_token(*args):
    while True:
        pass


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
