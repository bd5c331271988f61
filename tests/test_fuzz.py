"""Property-based fuzzing of everything that reads untrusted input.

- Rubric files (instructors'): any text, and any damage to a valid rubric, gives a
  Rubric that makes sense or one InputError line naming the file, never a crash.
- Workload files: any text gives a spec or one WorkloadError line (test_workload.py
  fuzzes the mapping level; this is the file level, YAML syntax included).
- Returned values (learners'): any frame the child sends is parsed into plain JSON or
  refused; any JSON value, validated against any return type, becomes that type or an
  InvalidValue, never another exception; and every valid value survives the trip through
  the protocol and validation unchanged.
"""
import copy
import dataclasses
import json
import math
import types
import typing
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT, answer_to
from grader.engine.checks import REGISTRY
from grader.engine.errors import InputError
from grader.lessons import lesson_module
from grader.engine.learner_policy import RETURNS
from grader.engine.rubric import Rubric, load_rubric
from grader.engine.sandbox import session, wire
from grader.engine.validate import MAX_INT, InvalidValue, coerce
from reference import shapes
from reference.workload import WorkloadError, WorkloadSpec, load_workload

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
RUBRIC = yaml.safe_load((ROOT / "rubrics" / "lesson1.yaml").read_text())
lesson_module("lesson1")

# ---------------------------------------------------------------------------- junk

_edges = st.sampled_from([math.nan, math.inf, -math.inf, 0, -1, 0.0, -0.0, 1e308, 2 ** 62, 2 ** 63,
                          "", "\n", "lesson1", "lesson1.kv_bytes", "linear", "both"])
_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-2 ** 80, 2 ** 80),
                    st.floats(), st.text(max_size=8), _edges)
_keys = st.one_of(st.sampled_from(["__type__", "ok", "reason", "admit", "reserve_pages",
                                   "tokens", "verdict", "state", "actions", "id", "points"]),
                  st.text(max_size=5))
JUNK = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=5)), max_leaves=15)
# A junk dataclass: a tagged dict naming a real shape, with junk or real-looking fields.
TAGGED = st.builds(lambda name, fields: {"__type__": name, **fields},
                   st.sampled_from([n for n in shapes.__all__ if isinstance(getattr(shapes, n), type)]),
                   st.dictionaries(_keys, JUNK, max_size=5))


def yaml_text():
    """Text that is often YAML-ish: fragments of real files, indentation, tags, junk."""
    fragments = ["lesson: lesson1\n", "criteria:\n", "  - id: x\n", "    points: ", ".nan\n",
                 ".inf\n", "[", "]", "{", "}", ": ", "- ", "\t", "!!python/object:os.system ",
                 "&a ", "*a ", "---\n", "? ", "'", '"', "\x00", "\x1f", "é", "\n", "  ", "1e999", "-1"]
    return st.one_of(st.text(max_size=200),
                     st.lists(st.sampled_from(fragments), max_size=40).map("".join))


# ---------------------------------------------------------------------------- rubrics

@FUZZ
@given(text=yaml_text())
def test_any_rubric_text_loads_or_is_one_input_error(tmp_path, text):
    _assert_rubric_or_error(_rubric_file(tmp_path, text))


def _damage(mapping, path, junk):
    node = mapping
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = junk


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


PATHS = [p for p in _paths(RUBRIC) if p]
NUMBERS = [p for p in PATHS if p[-1] in ("points", "floor", "target", "version")]


@FUZZ
@given(damage=st.lists(st.one_of(st.tuples(st.sampled_from(PATHS), JUNK),
                                 st.tuples(st.sampled_from(NUMBERS), st.one_of(_edges, st.floats()))),
                       min_size=1, max_size=3))
def test_damaged_rubric_loads_sanely_or_is_one_input_error(tmp_path, damage):
    mapping = copy.deepcopy(RUBRIC)
    for path, junk in damage:
        try:
            _damage(mapping, path, junk)
        except (KeyError, IndexError, TypeError):   # an earlier damage removed the way there
            pass
    _assert_rubric_or_error(_rubric_file(tmp_path, yaml.safe_dump(mapping, allow_unicode=True)))


def _rubric_file(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "rubrics"
    if not folder.exists():
        folder.mkdir()
        (folder / "rubric.schema.json").write_text((ROOT / "rubrics" / "rubric.schema.json").read_text())
    path = folder / "lesson1.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def _assert_rubric_or_error(path: Path) -> None:
    try:
        rubric = load_rubric(path, REGISTRY)
    except InputError as e:
        assert str(e).startswith(f"{path}: ") and "\n" not in str(e), str(e)
        return
    assert isinstance(rubric, Rubric) and rubric.criteria
    assert len({c.id for c in rubric.criteria}) == len(rubric.criteria)
    for c in rubric.criteria:
        assert math.isfinite(c.points) and 0 < c.points <= 1000 and c.check in REGISTRY
        assert c.visibility in ("public", "hidden", "both")
        assert c.credit.rule == "all_or_nothing" or 0 <= c.credit.floor < c.credit.target <= 1
        for m in (0.0, 0.5, 1.0):
            assert 0.0 <= c.credit.share(m) <= 1.0


# ---------------------------------------------------------------------------- workload files

@FUZZ
@given(text=yaml_text())
def test_any_workload_text_loads_or_is_one_workload_error(tmp_path, text):
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        spec = load_workload(path)
    except WorkloadError as e:
        assert str(e).startswith(f"{path}") and "\n" not in str(e), str(e)
    else:
        assert isinstance(spec, WorkloadSpec)


# ---------------------------------------------------------------------------- returned values

def _supported(t) -> bool:
    """Return types validate knows: the shapes dataclasses whose fields it can check."""
    try:
        coerce(None, t)
    except InvalidValue:
        return True
    except TypeError:
        return False
    return True


SHAPES = [getattr(shapes, n) for n in shapes.__all__ if dataclasses.is_dataclass(getattr(shapes, n))]
TYPES = sorted({*RETURNS.values(), int, float, bool, str, tuple[int, ...], tuple[str, int],
                *[t for t in SHAPES if _supported(t)]}, key=repr)


@FUZZ
@given(expected=st.sampled_from(TYPES), value=st.one_of(JUNK, TAGGED))
def test_any_value_becomes_the_type_or_an_invalid_value(expected, value):
    try:
        got = coerce(value, expected)
    except InvalidValue as e:
        assert e.message and "\n" not in e.message
        return
    origin = typing.get_origin(expected) or expected
    assert type(got) is origin


def valid(t):
    """A strategy for valid instances of a return type, within validate's bounds."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*[valid(a) for a in args])
    if t is type(None):
        return st.none()
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(valid(args[0]), max_size=4).map(tuple)
        return st.tuples(*[valid(a) for a in args])
    if dataclasses.is_dataclass(t):
        hints = typing.get_type_hints(t)
        return st.builds(t, **{f.name: valid(hints[f.name]) for f in dataclasses.fields(t) if f.init})
    return {int: st.integers(-MAX_INT + 1, MAX_INT - 1), bool: st.booleans(),
            float: st.floats(allow_nan=False, allow_infinity=False),
            str: st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)}[t]


@FUZZ
@given(data=st.data())
def test_every_valid_value_survives_the_protocol_and_validation(data):
    expected = data.draw(st.sampled_from(TYPES))
    value = data.draw(valid(expected))
    frame = json.dumps({"ok": wire.encode_arg(value)}).encode()   # what the child sends
    result = answer_to(frame)
    assert result.status == "ok"
    assert coerce(result.value, expected) == value


@FUZZ
@given(frame=st.one_of(st.binary(max_size=300),
                       JUNK.map(lambda v: json.dumps(v).encode()),
                       st.builds(lambda k, v: json.dumps({k: v}).encode(),
                                 st.sampled_from(["ok", "raised", "missing", "bad", "stdout"]), JUNK)))
def test_any_frame_is_an_answer_or_a_protocol_error(frame):
    try:
        result = answer_to(frame)
    except wire.ProtocolError as e:
        assert str(e).startswith("sent ")
        return
    assert result.status in session.STATUSES and "\n" not in result.detail
    json.dumps(result.value, allow_nan=False)          # plain, finite JSON only
