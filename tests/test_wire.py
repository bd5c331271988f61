"""The grader's half of the sandbox's wire, in this process: how an argument is written for
the child, and how a frame from the child becomes an answer (or is refused). Everything a
child sends is a learner's; nothing in it may reach a report unbounded or unparsed."""
import collections
import dataclasses
import json
import math

import numpy as np
import pytest

from conftest import answer_to
from grader.engine.sandbox import session, wire
from reference.shapes import CostModel, PageInfo, Slo

PAGE = PageInfo(index=3, prompt_tokens=16, page_tokens=16, written_tokens=8, published=False)
PAGE_FIELDS = [3, 16, 16, 8, False]


# ---- arguments, as the child receives them ---------------------------------------------------
def test_a_shape_is_sent_as_its_field_values_in_order():
    assert wire.wire_arg(PAGE) == {"__type__": "PageInfo", "__fields__": PAGE_FIELDS}
    assert wire.wire_arg((PAGE, 7, "s")) == [{"__type__": "PageInfo", "__fields__": PAGE_FIELDS}, 7, "s"]
    assert wire.wire_arg([(PAGE,)]) == [[{"__type__": "PageInfo", "__fields__": PAGE_FIELDS}]]
    assert wire.wire_arg(Slo(2.0, 0.5)) == {"__type__": "Slo", "__fields__": [2.0, 0.5]}


def test_the_keyed_form_names_every_field():
    assert wire.encode_arg(PAGE) == {"__type__": "PageInfo", "index": 3, "prompt_tokens": 16,
                                        "page_tokens": 16, "written_tokens": 8, "published": False}
    cost = wire.encode_arg(CostModel())
    assert cost["__type__"] == "CostModel"
    assert set(cost) - {"__type__"} == {f.name for f in dataclasses.fields(CostModel)}


def test_plain_containers_and_numbers_are_sent_as_their_plain_values():
    Pair = collections.namedtuple("Pair", "a b")

    class Name(str):
        pass
    sent = wire.encode_arg({"pair": Pair(1, 2), "name": Name("x"), "n": np.int64(3),
                               "x": np.float32(0.5), "pages": [PAGE]})
    assert sent == {"pair": [1, 2], "name": "x", "n": 3, "x": 0.5, "pages": [wire.encode_arg(PAGE)]}
    assert [type(sent[k]) for k in ("name", "n", "x")] == [str, int, float]
    assert json.loads(json.dumps(sent)) == sent


def test_what_is_not_the_courses_is_never_sent():
    @dataclasses.dataclass(frozen=True)
    class PageInfo:                      # a lookalike: a shape's name, another class
        index: int

    @dataclasses.dataclass(frozen=True)
    class Other:
        index: int

    for value in (PageInfo(1), Other(1), {1: "int key"}, {"a": object()}, object(), b"bytes",
                  lambda: None, {"nested": [Other(2)]}):
        with pytest.raises(TypeError, match="cannot send"):
            wire.encode_arg(value)
        with pytest.raises(TypeError, match="cannot send"):
            wire.wire_arg(value)


# ---- answers, as the grader reads them --------------------------------------------------------
def test_an_answer_is_parsed_whole_and_its_output_cleaned():
    got = answer_to(json.dumps({"ok": [1, 2.5, "s", None, True], "stdout": "hi\n\tthere\x1b[31m"}).encode())
    assert (got.status, got.value, got.detail) == ("ok", [1, 2.5, "s", None, True], "")
    assert got.stdout == "hi\n\tthere\ufffd[31m"


def test_a_non_finite_float_is_refused_by_name_whatever_else_the_answer_holds():
    for frame, why in ((b'{"ok": [1, 2, NaN]}', "returned a non-finite float (NaN)"),
                       (b'{"ok": [1, -Infinity]}', "returned a non-finite float (-Infinity)"),
                       (b'{"ok": {"a": 1, "b": 1e999}}', "returned a non-finite float (1e999)")):
        got = answer_to(frame)
        assert (got.status, got.detail) == ("bad", why)
    long = "9" * 41                              # the bound docs/architecture.md gives, written out
    got = answer_to(f'{{"ok": [1, 22, {long}]}}'.encode())
    assert (got.status, got.detail) == ("bad", f"returned an integer with {len(long)} digits")
    ok = "9" * 40                              # the longest integer that is an answer
    assert answer_to(f'{{"ok": [1, {ok}, 2.5]}}'.encode()).value == [1, int(ok), 2.5]
    assert answer_to(f'{{"ok": [-{ok}, 1e3]}}'.encode()).value == [-int(ok), 1000.0]


def test_the_grader_writes_a_frame_as_compact_json_writes_it():
    """The encoder built once writes the text json.dumps gives with compact separators: the
    keys in the order the grader built them (a learner may iterate a dict argument), a
    non-finite float as JSON's extension, and a key that is no JSON key refused, not
    dropped."""
    for value in ({"b": 1, "a": [1, 2.5, None, True, "\u00e9\u2028"]}, [float("inf"), -float("inf")],
                  {"calls": [["f", [{"__type__": "Slo", "__fields__": [2.0, 0.5]}]]]}):
        assert wire.dumps(value) == json.dumps(value, separators=(",", ":"))
    assert wire.dumps({"z": 1, "a": 2}) == '{"z":1,"a":2}'
    assert math.isnan(json.loads(wire.dumps(float("nan"))))
    with pytest.raises(TypeError):
        wire.dumps({(1, 2): 3})


@pytest.mark.parametrize("frame", [b"[1]", b'"ok"', b"3", b"not json", b'{"ok": 1', b"\xff\xfe"])
def test_a_frame_that_is_not_an_object_is_a_protocol_error(frame):
    with pytest.raises(wire.ProtocolError, match="^sent "):
        answer_to(frame)


def test_raised_and_bad_answers_are_one_bounded_printable_line():
    long = "ValueError: " + "x" * 2000
    got = answer_to(json.dumps({"raised": long}).encode())
    assert got.status == "raised"
    assert len(got.detail) == session.DETAIL_CHARS and got.detail.endswith("...")
    assert got.detail[:-3] == long[:session.DETAIL_CHARS - 3]
    got = answer_to(json.dumps({"bad": "a\nb\u202ec\u200bd"}).encode())
    assert (got.status, got.detail) == ("bad", "a b\ufffdc\ufffdd")
    with pytest.raises(wire.ProtocolError):
        answer_to(json.dumps({"raised": ["not", "text"]}).encode())


def test_a_line_is_cut_after_its_whitespace_is_folded():
    limit = session.DETAIL_CHARS
    spaced = " " * (3 * limit) + "the message"
    assert session._one_line(spaced) == "the message"
    exact = "y" * limit
    assert session._one_line(exact) == exact
    assert session._one_line(exact + "z") == "y" * (limit - 3) + "..."
    assert session._one_line("a  b\n\tc", limit=10) == "a b c"


# ---- what a call gave, and what a submission may still spend ----------------------------------
def test_a_call_result_is_frozen_and_only_a_raised_not_implemented_is_the_stub():
    stub = session.CallResult("raised", detail="  NotImplementedError: write me")
    assert stub.stub and not stub.ok
    with pytest.raises(dataclasses.FrozenInstanceError):
        stub.status = "ok"
    for status in ("ok", "bad", "missing", "crashed", "timeout", "unavailable"):
        assert not session.CallResult(status, detail="NotImplementedError").stub, status
    assert not session.CallResult("raised", detail="ValueError: NotImplementedError").stub
    assert session.CallResult("ok", 1).ok


def test_a_budget_starts_whole_and_is_spent_by_what_is_charged():
    budget = session.Budget(5)
    assert (budget.seconds, budget.spent, budget.remaining) == (5.0, 0.0, 5.0)
    budget.charge(0.25)
    budget.charge(-3.0)                  # a clock that went backwards gives no time back
    budget.charge(0.0)
    assert budget.remaining == 4.75


def test_every_status_but_ok_is_not_ok():
    for status in session.STATUSES:
        assert session.CallResult(status).ok is (status == "ok"), status


def test_the_first_reason_an_answer_is_refused_is_the_one_given():
    got = answer_to(b'{"ok": [NaN, 1e999, Infinity]}')
    assert got.detail == "returned a non-finite float (NaN)"
    text = "1" + "0" * 30 + "e999"               # a long literal is cut in the sentence
    got = answer_to(f'{{"ok": {text}}}'.encode())
    assert got.detail == f"returned a non-finite float ({text[:20]})"


def test_the_careful_decoder_keeps_every_integer_within_the_bound():
    # A long digit run inside a string sends the frame to the careful decoder, which must
    # accept the longest integer allowed beside it.
    edge = "9" * wire.MAX_INT_DIGITS
    frame = f'{{"ok": ["{"1" * (wire.MAX_INT_DIGITS + 5)}", {edge}, -{edge}, 2.5]}}'.encode()
    got = answer_to(frame)
    assert got.status == "ok" and got.value[1:] == [int(edge), -int(edge), 2.5]


def test_a_shape_the_constructor_takes_by_keyword_is_sent_keyed(monkeypatch):
    from reference import shapes

    @dataclasses.dataclass(frozen=True)
    class OneField:
        tokens: int

    @dataclasses.dataclass(frozen=True)
    class Keyed:
        a: int
        b: int = dataclasses.field(default=0, kw_only=True)

    @dataclasses.dataclass(frozen=True)
    class Derived:
        a: int
        b: int = dataclasses.field(default=0, init=False)

    for cls in (OneField, Keyed, Derived):
        monkeypatch.setattr(shapes, cls.__name__, cls, raising=False)
        monkeypatch.setattr(shapes, "__all__", [*shapes.__all__, cls.__name__])
    assert wire.wire_arg(OneField(5)) == {"__type__": "OneField", "__fields__": [5]}
    assert wire.wire_arg(Keyed(1, b=2)) == {"__type__": "Keyed", "a": 1, "b": 2}
    assert wire.wire_arg(Derived(1)) == {"__type__": "Derived", "a": 1, "b": 0}


def test_only_the_bytes_of_a_frame_past_16_kib_draw_on_the_4_mib_allowance():
    # The sandbox's bookkeeping alone, without a child: docs/security.md's figures, by hand.
    box = object.__new__(session.Sandbox)
    box._bulk_spent = 0
    box._draw(16384)                       # 16 KiB exactly: free
    assert box._bulk_spent == 0
    box._draw(16385)                       # one byte past it draws one byte
    assert box._bulk_spent == 1
    box._draw(16384 + 4194303)             # the rest of the 4 MiB, to the byte: still allowed
    assert box._bulk_spent == 4194304
    box._draw(16384)                       # a free frame is free even when the allowance is spent,
    box._draw(100)                         # and a small one gives nothing back
    with pytest.raises(wire.ProtocolError, match="answer of 16385 bytes after 4.0 MiB.*over 16 KiB "
                                                "draws on 4 MiB"):
        box._draw(16385)
    assert box._bulk_spent == 4194304      # a refused frame spends nothing
    box._bulk_spent = 3 * 2**20 + 2**19     # 3.5 MiB spent: the message gives the fraction
    with pytest.raises(wire.ProtocolError, match="answer of 1064960 bytes after 3.5 MiB"):
        box._draw(16384 + 2**20)
