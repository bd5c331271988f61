def kv_bytes_per_token(model)
    return 0
