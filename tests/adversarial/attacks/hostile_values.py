"""Attack: return NaN, infinities, huge integers, wrong types, and objects whose __eq__,
__hash__, __reduce__ or attribute access are hostile, one after another."""
import itertools
import os

from reference.shapes import Verdict


class Hostile:
    def __eq__(self, other):
        os._exit(9)

    def __hash__(self):
        raise SystemExit("hash")

    def __reduce__(self):
        return (os.system, ("touch /tmp/pwned-by-reduce",))

    def __getattr__(self, name):
        raise RuntimeError(name)


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class LyingVerdict(Verdict):
    def __getattribute__(self, name):
        return Hostile()


def self_loop():
    x = []
    x.append(x)
    return x


def deep():
    x = []
    for _ in range(10 ** 5):
        x = [x]
    return x


VALUES = [lambda: float("nan"), lambda: float("inf"), lambda: float("-inf"), lambda: 10 ** 100,
          lambda: 10 ** 5000, lambda: 2 ** 62, lambda: -(2 ** 62), lambda: "12", lambda: b"12",
          lambda: True, lambda: 1.5e300, lambda: [12], lambda: {"value": 12}, lambda: None,
          lambda: Hostile(), lambda: AlwaysEqual(12), lambda: LyingVerdict(True, ""),
          lambda: Verdict(ok=Hostile(), reason=""), lambda: Verdict(ok="yes", reason=7),
          lambda: {"__type__": "Verdict", "ok": True, "reason": "", "extra": Hostile()},
          lambda: {"__type__": "Hostile"}, self_loop, deep, lambda: "x" * (10 ** 7),
          lambda: [0.5] * (10 ** 6), lambda: {1: 2}, lambda: object(), lambda: (lambda: 3)]
turn = itertools.count()


def kv_bytes_per_token(*args):
    return VALUES[next(turn) % len(VALUES)]()


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
