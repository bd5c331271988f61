"""Where the course lives, and how a course file is read (grader/engine/layout.py).

tests/test_bad_input.py holds the refusals as a person meets them through the CLI; these
are the module's own edges."""
import os

import pytest

from conftest import ROOT
from grader.engine import layout
from grader.engine.errors import InputError
from grader.engine.layout import Course, find_course, nesting_depth, read_yaml, short_text


def test_a_course_names_its_folders_and_lists_lessons_in_order(tmp_path):
    (tmp_path / "rubrics").mkdir()
    for name in ("lesson3.yaml", "lesson1.yaml", "lesson10.yaml", "notes.yaml", "lesson2.yml"):
        (tmp_path / "rubrics" / name).write_text("version: 1\n")
    c = Course(tmp_path)
    assert c.rubrics == tmp_path / "rubrics"
    assert c.rubric_path("lesson3") == tmp_path / "rubrics" / "lesson3.yaml"
    assert c.assignment("lesson3") == tmp_path / "assignments" / "lesson3"
    # One digit, .yaml: lesson10 and lesson2.yml are no lessons.
    assert c.lessons() == ["lesson1", "lesson3"]
    assert "def step_time_of" in c.shapes_source or "class " in c.shapes_source
    assert c.shapes_source == (ROOT / "reference" / "shapes.py").read_text(encoding="utf-8")


def test_a_course_crosses_boundaries_frozen(tmp_path):
    import dataclasses
    with pytest.raises(dataclasses.FrozenInstanceError):
        Course(tmp_path).root = ROOT


def course_at(folder, *lessons, assignments=True):
    (folder / "rubrics").mkdir(parents=True)
    if assignments:
        (folder / "assignments").mkdir()
    for lesson in lessons:
        (folder / "rubrics" / f"{lesson}.yaml").write_text("version: 1\n")
    return folder


def test_a_missing_lesson_names_the_course_and_the_lessons_it_has(tmp_path):
    c = Course(course_at(tmp_path / "c", "lesson2", "lesson1"))
    c.require_lesson("lesson2")
    with pytest.raises(InputError) as e:
        c.require_lesson("lesson7")
    assert str(e.value) == f"lesson7: no such lesson in {tmp_path / 'c'} (lessons here: lesson1, lesson2)"
    with pytest.raises(InputError, match=r"\(lessons here: none\)$"):
        Course(course_at(tmp_path / "empty")).require_lesson("lesson1")


def test_an_explicit_course_needs_only_rubrics_and_is_resolved(tmp_path, monkeypatch):
    course_at(tmp_path / "c", "lesson1", assignments=False)
    monkeypatch.chdir(tmp_path)
    assert find_course("c") == Course(tmp_path / "c") and find_course("c").root.is_absolute()
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError) as e:
        find_course("plain")
    expected = "--course names the folder holding rubrics/ and assignments/"
    assert str(e.value) == f"plain: not a course folder (no rubrics/ inside): {expected}"


@pytest.mark.parametrize("given, found", [("notes.txt", "is a file"), ("gone", "no such folder")])
def test_an_explicit_course_that_is_no_folder_says_what_it_is(tmp_path, monkeypatch, given, found):
    """`--course notes.txt` said "no rubrics/ inside", as if it were a folder."""
    (tmp_path / "notes.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as e:
        find_course(given)
    assert str(e.value) == (f"{given}: not a course folder ({found}): --course names the folder holding "
                            "rubrics/ and assignments/")


def test_the_nearest_course_above_the_working_directory_is_found(tmp_path, monkeypatch):
    outer = course_at(tmp_path / "outer")
    inner = course_at(outer / "deep" / "inner")
    (inner / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(inner / "a" / "b")
    assert find_course() == Course(inner.resolve())
    monkeypatch.chdir(outer / "deep")
    assert find_course(None) == Course(outer.resolve())
    # rubrics/ without assignments/ is not a course to stop at.
    course_at(outer / "deep" / "half", assignments=False)
    monkeypatch.chdir(outer / "deep" / "half")
    assert find_course("") == Course(outer.resolve())


def test_outside_any_course_the_installed_course_else_a_clear_refusal(tmp_path, monkeypatch):
    (tmp_path / "nowhere").mkdir()
    monkeypatch.chdir(tmp_path / "nowhere")
    assert find_course() == Course(ROOT)            # an editable install: the course itself
    monkeypatch.setattr(layout, "_PACKAGE_ROOT", tmp_path / "site-packages")
    with pytest.raises(InputError) as e:
        find_course()
    assert str(e.value).startswith(f"{tmp_path / 'nowhere'}: no course folder here or above")
    assert "--course DIR" in str(e.value)


@pytest.mark.parametrize("data, depth", [
    (1, 0), ("text", 0), (None, 0), ([], 0), ({}, 0), ([1], 1), ({"a": 1}, 1),
    ([[1]], 2), ({"a": [1, {"b": [2]}]}, 4), ([1, [2, [3]], [4]], 3),
    ([[], [[[]]]], 3),
])
def test_nesting_depth_counts_lists_and_mappings_below_the_top(data, depth):
    assert nesting_depth(data) == depth


def test_nesting_depth_refuses_a_list_or_mapping_met_twice_not_a_scalar():
    shared = [1]
    assert nesting_depth({"a": shared, "b": shared}) is None
    cycle = []
    cycle.append(cycle)
    assert nesting_depth(cycle) is None
    text = "x" * 50
    assert nesting_depth([text, text, 7, 7]) == 1
    # A tuple is no YAML container: its insides are not walked.
    assert nesting_depth((shared, shared)) == 0


def test_short_text_is_one_line_and_cut_to_its_limit():
    assert short_text(ValueError("a\n  b\tc ")) == "a b c"
    assert short_text(ValueError("x" * 120)) == "x" * 120
    assert short_text(ValueError("x" * 121)) == "x" * 117 + "..."
    assert short_text(ValueError("abcdef"), limit=5) == "ab..."
    assert short_text(ValueError("abcde"), limit=5) == "abcde"


def test_a_course_file_at_the_size_bound_is_read_and_one_byte_more_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "MAX_COURSE_FILE", 1 << 20)
    path = tmp_path / "big.yaml"
    path.write_text("a: 1\n" + "#" * ((1 << 20) - 6) + "\n")
    assert path.stat().st_size == 1 << 20 and read_yaml(path) == {"a": 1}
    path.write_text("a: 1\n" + "#" * ((1 << 20) - 5) + "\n")
    with pytest.raises(InputError) as e:
        read_yaml(path)
    assert str(e.value) == f"{path}: larger than 1 MiB: not read"


@pytest.mark.parametrize("fast", [True, False], ids=["as-built", "pure"])
@pytest.mark.parametrize("body, says", [
    (b"a: 1\nb: [\n", "line 3: not valid YAML (expected the node content, but found '<stream end>')"),
    (b"a: 1\n  b: 2\n", "line 2: not valid YAML (mapping values are not allowed here)"),
    (b"d: 2001-02-30\n", "not valid YAML (a value that cannot be read: day is out of range for month)"),
    (b"a: \xff\n", "cannot read: 'utf-8' codec can't decode byte 0xff in position 3: invalid start byte"),
])
def test_every_unusable_course_file_is_one_error_naming_it(tmp_path, monkeypatch, fast, body, says):
    monkeypatch.setattr(layout, "_FAST_LOADER", layout._FAST_LOADER if fast else None)
    path = tmp_path / "bad.yaml"
    path.write_bytes(body)
    with pytest.raises(InputError) as e:
        read_yaml(path)
    assert str(e.value) == f"{path}: {says}"
    with pytest.raises(InputError) as e:
        read_yaml(tmp_path / "absent.yaml")
    assert str(e.value) == f"{tmp_path / 'absent.yaml'}: no such file"


def test_a_file_the_fast_loader_refuses_gets_the_pure_loaders_error(tmp_path, monkeypatch):
    import yaml

    class Refusing(yaml.SafeLoader):
        def __init__(self, stream):
            raise yaml.YAMLError("the fast loader's own words")

    monkeypatch.setattr(layout, "_FAST_LOADER", Refusing)
    path = tmp_path / "ok.yaml"
    path.write_text("a: [1, 2]\n")
    assert read_yaml(path) == {"a": [1, 2]}        # read again by the pure loader
    path.write_text("a: [1, 2\n")
    with pytest.raises(InputError, match="line 2: not valid YAML") as e:
        read_yaml(path)
    assert "fast loader" not in str(e.value)


def test_a_fields_value_is_taken_only_as_the_kind_asked_for(tmp_path):
    """Field: each kind refused in one InputError naming file, line and place, never a
    Python error from inside the grader, and each accepted value given back as it is."""
    path = tmp_path / "f.yaml"
    path.write_text("none:\nblank: '  '\ncount: 5\nflag: true\nnan: .nan\nname: x\nlist: [1]\n")
    top = layout.read_field(path)

    def refused(get, message):
        with pytest.raises(InputError) as e:
            get()
        assert e.value.where == str(path) and e.value.message == message

    assert top.at("none").items() == [] and top.at("list").items(at_least=1)[0].value == 1
    refused(lambda: top.at("list").items(at_least=2), "line 7: list: expected a list of at least 2 items; got 1")
    refused(lambda: top.at("name").items(), "line 6: name: expected a list; got a string 'x'")
    assert top.at("count").integer(minimum=1) == 5 and top.at("count").integer(minimum=5) == 5
    refused(lambda: top.at("count").integer(minimum=6), "line 3: count: expected an integer >= 6; got 5")
    assert top.at("count").number() == 5
    refused(lambda: top.at("flag").number(), "line 4: flag: expected a finite number; got a boolean True")
    refused(lambda: top.at("nan").number(), "line 5: nan: expected a finite number; got a number nan")
    refused(lambda: top.at("name").number(), "line 6: name: expected a finite number; got a string 'x'")
    assert top.at("name").text() == "x"
    refused(lambda: top.at("blank").text(), "line 2: blank: expected text; got a string '  '")
    refused(lambda: top.at("count").text(), "line 3: count: expected text; got an integer 5")
    refused(lambda: top.mapping(known=("none", "blank", "count", "flag", "nan")),   # the first unknown
            "line 6: name: unknown key 'name' (known here: none, blank, count, flag, nan)")
    with pytest.raises(AttributeError):          # frozen: a value read is the file's
        top.value = {}
    (tmp_path / "latin1.yaml").write_bytes(b"x: caf\xe9\n")
    for name in ("gone.yaml", "latin1.yaml"):                 # no text to find its line in
        with pytest.raises(InputError) as e:
            layout.Field(tmp_path / name, ("x",), 5).text()
        assert e.value.message == "x: expected text; got an integer 5"


def test_a_records_section_holds_mappings_and_a_mapping_section_may_be_absent(tmp_path):
    path = tmp_path / "probes.yaml"
    path.write_text("probes:\n  - {a: 1}\n  - 7\n")
    with pytest.raises(InputError) as e:
        layout.read_sections(path, {"defaults": "mapping", "probes": "records"})
    assert e.value.message == "line 3: probes[1]: expected a mapping; got an integer 7"
    path.write_text("probes:\n  - {a: 1}\n")
    assert layout.read_sections(path, {"defaults": "mapping", "probes": "records"}) == {
        "defaults": {}, "probes": [{"a": 1}]}
    assert layout.read_sections(path, {"probes": "list"}) == {"probes": [{"a": 1}]}


@pytest.mark.parametrize("typed, meant", [
    ("Lesson3", "lesson3"), ("lesson03", "lesson3"), ("lesson 3", "lesson3"), ("L3", "lesson3"),
    ("3", "lesson3"), ("lesson_3", "lesson3"), ("LESSON-3", "lesson3"), ("lesson010", "lesson10"),
    ("lesson3", None),          # the name itself is no slip
    ("lesson7", None),          # a lesson the course does not hold
    ("lessonx", None), ("", None), ("lessons3", None), ("3a", None),
])
def test_a_lesson_name_a_little_off_is_matched_to_the_lesson_meant_only_when_held(typed, meant):
    assert layout.lesson_meant(typed, ["lesson1", "lesson3", "lesson10"]) == meant
