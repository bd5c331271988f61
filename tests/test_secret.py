"""grader.engine.secret: the instructor secret and the seeds every hidden case is drawn from.

A seed's derivation is a published contract (a course that re-grades must draw the same
instances), so it is pinned twice over: by known answers written here as numbers, and by
HMAC-SHA256 recomputed in this file from its definition (RFC 2104, with hashlib alone),
itself checked against the RFC 4231 test vector.
"""
import hashlib

import pytest

from grader.engine.secret import SecretError, derive_seed, instance_digest, load_secret

MASK = (1 << 63) - 1


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """RFC 2104 by hand: H((K ^ opad) || H((K ^ ipad) || m)), 64-byte blocks."""
    if len(key) > 64:
        key = hashlib.sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = hashlib.sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return hashlib.sha256(bytes(b ^ 0x5C for b in key) + inner).digest()


def by_definition(secret: bytes, *labels: str) -> int:
    """The docstring's words: the first 8 bytes, big-endian, of HMAC-SHA256(secret, labels
    joined by the unit separator), top bit cleared."""
    mac = hmac_sha256(secret, "\x1f".join(labels).encode("utf-8"))
    return int.from_bytes(mac[:8], "big") & MASK


def test_the_hand_written_hmac_meets_rfc_4231():
    assert hmac_sha256(b"Jefe", b"what do ya want for nothing?").hex() == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    long_key = b"\xaa" * 131                         # RFC 4231 test case 6: a key over a block
    assert hmac_sha256(long_key, b"Test Using Larger Than Block-Size Key - Hash Key First").hex() == (
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")


# (secret, labels, seed): computed once from the definition above and kept as numbers, so
# neither the function nor this file can drift without a test failing.
KNOWN = [
    (b"test-secret-for-hidden-cases", ("lesson2", "probes"), 6196175902446375211),
    (b"course secret", ("lesson1", "hidden"), 4056627070457401756),
    (b"k", ("a", "b"), 2406614580945932763),
    (b"x", (), 8250142789169856644),                 # first byte 0xf2: the top bit is cleared
]


@pytest.mark.parametrize("secret,labels,seed", KNOWN)
def test_derive_seed_known_answers(secret, labels, seed):
    assert derive_seed(secret, *labels) == seed == by_definition(secret, *labels)
    assert derive_seed(bytearray(secret), *labels) == seed


def test_derive_seed_is_63_bits_and_labels_are_not_concatenated():
    seeds = {derive_seed(b"s", *labels) for labels in [("ab", "c"), ("a", "bc"), ("abc",),
                                                       ("a", "b", "c"), ()]}
    assert len(seeds) == 5
    assert all(0 <= s <= MASK for s in seeds)
    assert derive_seed(b"s", "a") != derive_seed(b"t", "a")
    # A non-ASCII label is its UTF-8 bytes.
    assert derive_seed(b"s", "é") == by_definition(b"s", "é")


@pytest.mark.parametrize("secret,labels,error,text", [
    (b"", ("a",), ValueError, "non-empty bytes secret"),
    ("text", ("a",), ValueError, "non-empty bytes secret"),
    (b"s", ("a", 3), TypeError, "labels must be strings, got int"),
    (b"s", ("a\x1fb",), ValueError, "contains the separator"),
])
def test_derive_seed_refuses_what_would_make_seeds_ambiguous(secret, labels, error, text):
    with pytest.raises(error, match=text):
        derive_seed(secret, *labels)


def test_instance_digest_is_the_first_16_hex_digits_of_sha256():
    assert instance_digest('{"a":1}') == hashlib.sha256(b'{"a":1}').hexdigest()[:16]
    assert instance_digest("é") == hashlib.sha256("é".encode()).hexdigest()[:16]


def test_load_secret_strips_surrounding_whitespace_only(tmp_path):
    path = tmp_path / "course.secret"
    path.write_bytes(b"  top secret of the course\n\n")
    assert load_secret(path) == b"top secret of the course"
    path.write_bytes(b"\x00\xffkey bytes, not text\t")
    assert load_secret(str(path)) == b"\x00\xffkey bytes, not text"


def test_load_secret_refuses_one_short_enough_to_guess(tmp_path):
    # 16 bytes once its whitespace is dropped is the least taken; 15 is refused, naming the
    # file, its length and how to make a random one.
    path = tmp_path / "course.secret"
    path.write_bytes(b"\n0123456789abcdef  ")
    assert load_secret(path) == b"0123456789abcdef"
    path.write_bytes(b"  0123456789abcde\n")
    with pytest.raises(SecretError) as info:
        load_secret(path)
    assert str(info.value) == (f"{path}: the secret is 15 bytes, short enough to be guessed (at least "
                               "16); make a random one: head -c 32 /dev/urandom | base64 > course.secret")


def test_load_secret_refusals_name_the_file(tmp_path):
    cases = {tmp_path / "missing": "secret file not found", tmp_path: "is a directory",
             tmp_path / "blank": "the secret file is empty"}
    (tmp_path / "blank").write_bytes(b" \n\t")
    for path, text in cases.items():
        with pytest.raises(SecretError) as info:
            load_secret(path)
        assert str(info.value) == f"{path}: {text}" or str(info.value).startswith(f"{path}: {text}")


def test_load_secret_refuses_what_is_no_file_unread(tmp_path):
    import os
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)                       # reading it would hang: refused before any read
    with pytest.raises(SecretError) as info:
        load_secret(fifo)
    assert str(info.value) == (f"{fifo}: cannot read the secret file: it is not a regular file "
                               "(a pipe, a device or a socket): not read")


def test_load_secret_takes_up_to_a_mebibyte(tmp_path):
    path = tmp_path / "course.secret"
    path.write_bytes(b"k" * (1 << 20))
    assert load_secret(path) == b"k" * (1 << 20)
    path.write_bytes(b"k" * ((1 << 20) + 1))
    with pytest.raises(SecretError) as info:
        load_secret(path)
    assert str(info.value) == (f"{path}: the secret file is larger than 1048576 bytes; a secret "
                               "is a few dozen random bytes")
