import pytest

from reference.units import UnitError, format_bytes, parse_bytes

GiB = 1 << 30


@pytest.mark.parametrize("value, expected", [
    (0, 0),
    (4096, 4096),
    ("4096", 4096),
    ("4096B", 4096),
    ("1KiB", 1024),
    ("512 MiB", 512 << 20),
    ("80GiB", 80 * GiB),
    ("80gib", 80 * GiB),
    (" 2 TiB ", 2 << 40),
    ("1.5GiB", 3 * GiB // 2),
    ("0.5KiB", 512),
    ("16MiB", 16 << 20),
    ("-0", 0),                 # a negative zero is zero, not a negative size
    ("-0.0GiB", 0),
    ("+1KiB", 1024),
    (".5KiB", 512),
    ("1.KiB", 1024),
])
def test_parse_bytes_accepts(value, expected):
    assert parse_bytes(value, "x") == expected


@pytest.mark.parametrize("value, fragment", [
    ("80GB", "write 80GiB (binary units: KiB=1024 B)"),
    ("80 MB", "write 80MiB"),
    ("80kb", "write 80KiB"),
    ("1.5 TB", "write 1.5TiB"),
    ("80G", "decimal unit"),
    ("0.3KiB", "not a whole number of bytes"),
    ("1.5B", "not a whole number of bytes"),
    (-1, "must be >= 0"),
    ("-1GiB", "must be >= 0"),
    ("-1", "must be >= 0"),
    ("- 2 B", "must be >= 0"),
    ("80 furlongs", "unknown unit"),
    ("", "not a byte quantity"),
    ("GiB", "not a byte quantity"),
    ("1e9", "not a byte quantity"),
    (True, "got a boolean True"),
    (1.5, "got a number 1.5"),
    (None, "got nothing"),
])
def test_parse_bytes_rejects(value, fragment):
    with pytest.raises(UnitError) as info:
        parse_bytes(value, "workers.a80.device_bytes")
    message = str(info.value)
    assert message.startswith("workers.a80.device_bytes: ")
    assert fragment in message
    assert "\n" not in message


def test_decimal_unit_message_in_full():
    with pytest.raises(UnitError) as info:
        parse_bytes("80GB", "workers.a80.device_bytes")
    assert str(info.value) == ("workers.a80.device_bytes: '80GB' is a decimal unit; "
                               "write 80GiB (binary units: KiB=1024 B)")


@pytest.mark.parametrize("n, text", [
    (0, "0B"),
    (512, "512B"),
    (1024, "1KiB"),
    (85899345920, "80GiB"),
    (3 * GiB + (512 << 20), "3584MiB"),
    (2 << 40, "2TiB"),
    (1536 + 1, "1.50KiB"),
    (80 * GiB + 1, "80.00GiB"),
    (-(2 << 20), "-2MiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("n", [0, 1, 1024, 80 * GiB, 3 * GiB + (512 << 20), 7 << 40])
def test_exact_formats_round_trip(n):
    text = format_bytes(n)
    if "." not in text:
        assert parse_bytes(text, "x") == n
