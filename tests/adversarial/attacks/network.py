"""Attack: open a network connection: to a listener on the host's loopback, by UDP, by
name resolution, and to the outside world."""
import json
import socket

TARGETS = {}  # the test writes the real paths here

found = {}
attempts = {
    "tcp": lambda: socket.create_connection(("127.0.0.1", TARGETS.get("tcp_port", 9)), timeout=0.3),
    "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
        b"escaped", ("127.0.0.1", TARGETS.get("udp_port", 9))),
    "dns": lambda: socket.getaddrinfo("example.com", 80),
    "outside": lambda: socket.create_connection(("1.1.1.1", 53), timeout=0.3),
    "unix": lambda: socket.socket(socket.AF_UNIX).connect("/run/systemd/private"),
}
for name, attempt in attempts.items():
    try:
        attempt()
        found[name] = "ok:connected"
    except BaseException as exc:
        found[name] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))
