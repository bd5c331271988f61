"""The grading engine's inputs: rubrics, submissions and notebooks, scoring rules."""
import dataclasses
import hashlib
import json
import shutil

import pytest

from conftest import ROOT, grade
from grader.engine.errors import InputError
from grader.engine.pipeline import PRINTED
from grader.engine.rubric import Credit, load_rubric
from grader.engine.submission import load_submission


def _rubric(tmp_path, text):
    shutil.copy(ROOT / "rubrics" / "rubric.schema.json", tmp_path)
    p = tmp_path / "lesson1.yaml"
    p.write_text(text)
    return p


GOOD = """lesson: lesson1
title: T
version: 1
criteria:
  - {id: a, title: A, points: 1, check: lesson1.kv_bytes, visibility: both, credit: {rule: all_or_nothing}}
"""


@pytest.mark.parametrize("text,needle", [
    ("lesson: [unclosed", "line 1"),
    (GOOD.replace("points: 1", "points: -1"), "criteria[0].points"),
    (GOOD.replace("visibility: both", "visibility: secret"), "criteria[0].visibility"),
    (GOOD.replace("version: 1\n", ""), "version"),
    (GOOD.replace("{rule: all_or_nothing}", "{rule: linear, floor: 0.9, target: 0.5}"), "floor must be below"),
    # No range between floor and target: linear credit would divide by zero, or be all or nothing.
    (GOOD.replace("{rule: all_or_nothing}", "{rule: linear, floor: 0.5, target: 0.5}"),
     "criteria[0].credit: floor must be below target"),
    (GOOD + "  - {id: a, title: B, points: 1, check: lesson1.kv_bytes, visibility: both, credit: {rule: all_or_nothing}}\n",
     "duplicate criterion id"),
    (GOOD.replace("lesson1.kv_bytes", "lesson1.nope"), "unknown check"),
])
def test_a_broken_rubric_is_one_line_naming_file_and_path(tmp_path, text, needle):
    from grader.engine.checks import REGISTRY
    import grader.lessons.lesson1  # noqa: F401  (registers its checks)
    with pytest.raises(InputError) as e:
        load_rubric(_rubric(tmp_path, text), REGISTRY)
    msg = str(e.value)
    assert "lesson1.yaml" in msg and needle in msg and "\n" not in msg


def test_every_shipped_rubric_loads():
    from grader.engine.checks import REGISTRY
    from grader.lessons import LESSONS, lesson_module
    for lesson in LESSONS:
        lesson_module(lesson)
        rubric = load_rubric(ROOT / "rubrics" / f"{lesson}.yaml", REGISTRY)
        assert rubric.criteria


@pytest.mark.parametrize("rule,measure,share", [
    (Credit("all_or_nothing"), 0.99, 0.0), (Credit("all_or_nothing"), 1.0, 1.0),
    (Credit("linear", 0.5, 1.0), 0.5, 0.0), (Credit("linear", 0.5, 1.0), 0.75, 0.5),
    (Credit("linear", 0.7, 0.97), 0.97, 1.0), (Credit("linear", 0.7, 0.97), 1.2, 1.0),
])
def test_credit_rules(rule, measure, share):
    assert rule.share(measure) == pytest.approx(share)


def test_credit_without_a_range_is_all_or_nothing_at_its_target():
    # The loader refuses such a rubric; built directly, it must not divide by zero.
    flat = Credit("linear", 0.5, 0.5)
    assert (flat.share(0.49), flat.share(0.5), flat.share(0.9)) == (0.0, 1.0, 1.0)
    assert Credit("linear", 0.5, 1.0).share(0.25) == 0.0 and Credit("linear").share(0.5) == 0.5
    # A floor above the target, built directly, is all or nothing at the target as well.
    inverted = Credit("linear", 0.9, 0.5)
    assert (inverted.share(0.4), inverted.share(0.7), inverted.share(0.95)) == (0.0, 1.0, 1.0)


def test_a_rubric_and_its_criteria_are_frozen(tmp_path):
    import dataclasses
    rubric = load_rubric(_rubric(tmp_path, GOOD))
    for obj, name in ((rubric, "version"), (rubric.criteria[0], "points"), (rubric.criteria[0].credit, "target")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, 0)


@pytest.mark.parametrize("visibility,check,grade", [("public", True, True), ("both", True, True),
                                                    ("hidden", False, True)])
def test_a_criterion_runs_in_check_unless_hidden_and_always_in_grade(visibility, check, grade):
    c = load_rubric(_rubric_at(visibility)).criteria[0]
    assert (c.runs_in("check"), c.runs_in("grade")) == (check, grade)


def _rubric_at(visibility):
    import tempfile
    from pathlib import Path
    folder = Path(tempfile.mkdtemp())
    return _rubric(folder, GOOD.replace("visibility: both", f"visibility: {visibility}"))


def test_a_rubric_loads_into_its_criteria(tmp_path):
    text = GOOD.replace("credit: {rule: all_or_nothing}}",
                        "credit: {rule: linear, floor: 0.25, target: 0.75}, params: {k: 3}}")
    rubric = load_rubric(_rubric(tmp_path, text + "  - {id: b, title: B, points: 2, check: lesson9.y, "
                                                 "visibility: hidden, credit: {rule: all_or_nothing}}\n"))
    a, b = rubric.criteria
    assert (rubric.lesson, rubric.title, rubric.version) == ("lesson1", "T", 1)
    assert (a.id, a.title, a.points, a.check, a.params) == ("a", "A", 1.0, "lesson1.kv_bytes", {"k": 3})
    assert type(a.points) is float and a.credit == Credit("linear", 0.25, 0.75)
    assert (b.visibility, b.params, b.credit) == ("hidden", {}, Credit("all_or_nothing"))
    assert rubric.path == str(tmp_path / "lesson1.yaml")      # no check registry: any check name


@pytest.mark.parametrize("value,where", [
    ("{a: [1, 2, .nan]}", "criteria[0].params.a[2]"), ("{b: {c: -.inf}}", "criteria[0].params.b.c"),
    ("{d: .inf}", "criteria[0].params.d"),
])
def test_a_non_finite_number_anywhere_is_named_by_its_path(tmp_path, value, where):
    text = GOOD.replace("credit: {rule: all_or_nothing}}", f"credit: {{rule: all_or_nothing}}, params: {value}}}")
    with pytest.raises(InputError) as e:
        load_rubric(_rubric(tmp_path, text))
    assert str(e.value) == f"{tmp_path / 'lesson1.yaml'}: line 5: {where}: must be a finite number"


def test_a_long_schema_message_is_cut_to_one_short_line(tmp_path):
    with pytest.raises(InputError) as e:
        load_rubric(_rubric(tmp_path, GOOD.replace("lesson: lesson1", "lesson: " + "x" * 400)))
    message = str(e.value).split(": lesson: ", 1)[1]
    assert len(message) <= 200 and "..." in message and message.startswith("'xxx") and "\n" not in message


def _nb(cells):
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_notebook_code_cells_in_order_magics_dropped_with_a_note(tmp_path):
    ref = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
    head, body = ref.split("\n\n\ndef kv_bytes_per_token", 1)
    p = tmp_path / "work.ipynb"
    p.write_text(_nb([
        {"cell_type": "markdown", "source": ["# my notes"]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "!pip install numpy\n", head]},
        {"cell_type": "code", "source": "def kv_bytes_per_token" + body},
    ]))
    sub = load_submission(p)
    assert "%matplotlib" not in sub.source and "!pip" not in sub.source
    assert len(sub.notes) == 2 and "cell 2" in sub.notes[0]
    report = grade("lesson1", p, "check")
    assert report.score == report.max_score
    assert report.notes == sub.notes


def test_a_notebooks_source_is_its_code_cells_each_headed_by_its_number(tmp_path):
    """The source names each code cell by its place among all cells (1-based), so a
    traceback's line shows which cell it is in; cells of any other type, or of none,
    are left out; a dropped magic keeps the cell's line numbers and its first 60 characters
    go into the note."""
    long_magic = "%timeit " + "x" * 80
    p = tmp_path / "work.ipynb"
    p.write_text(_nb([
        {"cell_type": "markdown", "source": "notes"},
        {"cell_type": "code", "source": ["a = 1\n", long_magic + "\n", "b = 2"]},
        {"cell_type": "blob", "source": "not code = at all"},      # a type sorting before "code"
        {"source": "no type either"},
        {"cell_type": "raw", "source": "raw text"},
        {"cell_type": "code", "source": "c = 3\n"},
    ]))
    sub = load_submission(p)
    assert sub.source == "# --- cell 2 ---\na = 1\n\nb = 2\n\n# --- cell 6 ---\nc = 3\n"
    assert sub.notes == (f"cell 2: dropped {long_magic[:60]!r} (IPython magic or shell escape)",)


MAGIC_LIKE = [
    # (a cell's lines, the indexes of the lines kept: None where a magic was dropped)
    (["def pages_for(tokens, page_tokens):", "    rem = (tokens", "           % page_tokens", "           )",
      "    return tokens // page_tokens + (1 if rem else 0)"], "all"),
    (['HELP = """', "!important: not a shell escape", "%d pages", '"""', "x = [1,", "     2]", "!ls"],
     [0, 1, 2, 3, 4, 5, None]),
    (["y = 1 \\", "    % 2", "%time y"], [0, 1, None]),
    (["s = '(' # [", "%who", "t = {'a': \"}\",", "     'b': 2}", "!pip list"], [0, None, 2, 3, None]),
    (["u = '''a ''' + (", "    !=_ if 0 else 1)"], "all"),
    (["if True:", "    %timeit f()", "v = r'\\' + '#'", "!echo"], [0, None, 2, None]),
    # nested brackets: one closed, the outer still open
    (["x = ((1,", "      2)", "     % 3)", "%who"], [0, 1, 2, None]),
    # a triple-quoted string closed where it opens; a line that ends in a letter, not a backslash
    (['s = """"""', "t = s", "%who"], [0, 1, None]),
]


@pytest.mark.parametrize("lines,kept", MAGIC_LIKE)
def test_only_a_line_that_starts_a_statement_is_dropped_as_a_magic(tmp_path, lines, kept):
    """'%' or '!' at the start of a line is an IPython magic or shell escape only where a
    statement starts there: on a bracket's continuation line, a triple-quoted string's line
    or after a backslash it is Python (modulo, !=, text) and is graded as written."""
    p = tmp_path / "cell.ipynb"
    p.write_text(_nb([{"cell_type": "code", "source": "\n".join(lines)}]))
    sub = load_submission(p)
    kept = range(len(lines)) if kept == "all" else kept
    expect = [lines[i] if i is not None else "" for i in kept]
    assert sub.source == "# --- cell 1 ---\n" + "\n".join(expect) + "\n"
    dropped = [line for line, i in zip(lines, kept) if i is None]
    assert sub.notes == tuple(f"cell 1: dropped {d.strip()!r} (IPython magic or shell escape)" for d in dropped)


# (a cell, the note it leaves): IPython syntax that is not Python, each a SyntaxError that
# failed the whole notebook before.
IPYTHON_ONLY = [
    # a cell magic whose body is not the kernel's Python: the whole cell goes
    ("%%bash\npip install numpy\nls -la\n",
     "cell 1: dropped the whole cell, '%%bash': a cell magic's body is not run as the notebook's Python"),
    ("\n  %%writefile notes.md\nkv_bytes_per_token = None  # text written to a file, never run\n",
     "cell 1: dropped the whole cell, '%%writefile notes.md': a cell magic's body is not run as the "
     "notebook's Python"),
    ("%%html\n<b>(unbalanced</b>\n", "cell 1: dropped the whole cell, '%%html': a cell magic's body is not "
                                      "run as the notebook's Python"),
    # an assignment from a shell escape or a magic, a help request
    ("files = !ls\n", "cell 1: dropped 'files = !ls' (IPython magic or shell escape)"),
    ("t, u = %timeit -o f()\n", "cell 1: dropped 't, u = %timeit -o f()' (IPython magic or shell escape)"),
    ("pages_for?\n", "cell 1: dropped 'pages_for?' (IPython help)"),
    ("??model.layers\n", "cell 1: dropped '??model.layers' (IPython help)"),
]


@pytest.mark.parametrize("cell,note", IPYTHON_ONLY)
def test_ipython_syntax_that_is_not_python_is_dropped_and_the_rest_grades(tmp_path, cell, note):
    """A notebook that runs in Jupyter grades: a %%bash or %%writefile cell (whose body Jupyter
    never runs as Python) and a help request or an assignment from a shell escape were graded
    as Python, a SyntaxError on which every criterion scored 0, and a %%writefile body that
    rebinds a function replaced the learner's own."""
    ref = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
    p = tmp_path / "work.ipynb"
    p.write_text(_nb([{"cell_type": "code", "source": ref}, {"cell_type": "code", "source": cell}]))
    sub = load_submission(p)
    assert sub.notes == (note.replace("cell 1", "cell 2"),)
    assert sub.source.endswith("# --- cell 2 ---\n" + "\n" * len(cell.splitlines()))   # its lines, blank
    report = grade("lesson1", p, "check")
    assert report.score == report.max_score, [c.feedback for c in report.criteria]


def test_a_cell_magic_that_runs_its_body_keeps_the_body(tmp_path):
    """%%time, %%timeit, %%capture and %%prun run the cell as the kernel's Python: only their
    own line goes; a %%bash on a later line is no cell magic (IPython reads one on the first)."""
    p = tmp_path / "work.ipynb"
    p.write_text(_nb([{"cell_type": "code", "source": f"%%{m} -q\nx_{m} = 1\n"} for m in
                      ("time", "timeit", "capture", "prun")]
                     + [{"cell_type": "code", "source": "y = 2\n%%bash\n"}]))
    sub = load_submission(p)
    assert all(f"x_{m} = 1" in sub.source for m in ("time", "timeit", "capture", "prun"))
    assert "y = 2" in sub.source and "%%bash" not in sub.source
    assert len(sub.notes) == 5 and all("(IPython magic or shell escape)" in n for n in sub.notes)


def test_a_notebooks_display_runs_and_ipythons_own_names_are_explained(tmp_path):
    """Jupyter's namespace has display(): a notebook that displays a value graded 0 of 10 (its
    load failed on a NameError). It runs, and is told as printing is. A name only IPython has
    (get_ipython, in a .py file exported from a notebook) still fails the load, and says why."""
    ref = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
    p = tmp_path / "work.ipynb"
    p.write_text(_nb([{"cell_type": "code", "source": ref},
                      {"cell_type": "code", "source": "display(pages_for(33, 16), kv_bytes_per_token)\n"}]))
    report = grade("lesson1", p, "check")
    assert report.score == report.max_score and report.notes == (PRINTED,)
    exported = tmp_path / "work.py"
    exported.write_text(ref + "\nget_ipython().run_line_magic('matplotlib', 'inline')\n")
    feedback = grade("lesson1", exported, "check").criteria[0].feedback
    assert "NameError: name 'get_ipython' is not defined (work.py line" in feedback
    assert feedback.endswith("get_ipython exists only in IPython (Jupyter); a graded file runs as plain Python")
    plain = tmp_path / "plain.py"
    plain.write_text(ref + "\ndisplay(1)\n")                   # a .py file has no display()
    assert "display exists only in IPython" in grade("lesson1", plain, "check").criteria[0].feedback


def test_a_modulo_on_a_notebooks_continuation_line_grades_as_in_a_py_file(tmp_path):
    ref = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
    p = tmp_path / "work.ipynb"
    p.write_text(_nb([{"cell_type": "code", "source": ref + "\n\n" + "\n".join(MAGIC_LIKE[0][0]) + "\n"}]))
    report = grade("lesson1", p, "check")
    assert report.score == report.max_score and not report.notes


@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_a_byte_order_mark_is_not_part_of_the_submission(tmp_path, suffix):
    text = "x = 1\n" if suffix == ".py" else _nb([{"cell_type": "code", "source": "x = 1"}])
    raw = b"\xef\xbb\xbf" + text.encode()
    p = tmp_path / f"bom{suffix}"
    p.write_bytes(raw)
    sub = load_submission(p)
    assert "\ufeff" not in sub.source and "x = 1" in sub.source
    assert sub.digest == hashlib.sha256(raw).hexdigest()          # what was handed in, byte for byte


def test_a_byte_not_utf8_after_a_byte_order_mark_is_named_by_its_place_in_the_file(tmp_path):
    p = tmp_path / "bom.py"
    p.write_bytes(b"\xef\xbb\xbfx = '\xe9'\n")
    with pytest.raises(InputError, match=r"is not UTF-8 text \(byte 8\)"):
        load_submission(p)


def test_a_submission_named_as_a_symbolic_link_is_refused_unread(tmp_path):
    """Named on the command line (grader grade a.py b.py, grader check lesson1 a.py), a link
    could lead to a reference solution or the secret: it is not read, whatever it leads to."""
    target = tmp_path / "real.py"
    target.write_text((ROOT / "reference" / "solutions" / "lesson1.py").read_text())
    link = tmp_path / "mallory.py"
    link.symlink_to(target)
    with pytest.raises(InputError) as e:
        load_submission(link)
    assert str(e.value) == f"{link}: is a symbolic link: not read; hand in the file itself"
    # In a class folder the batch allows a link to a file of the folder, not one out of it.
    assert load_submission(link, links_within=tmp_path).source == target.read_text()
    inner = tmp_path / "class"
    inner.mkdir()
    (inner / "bob.py").symlink_to(target)
    with pytest.raises(InputError, match="leads outside the class folder"):
        load_submission(inner / "bob.py", links_within=inner)


@pytest.mark.parametrize("others,note", [
    (1, "not graded: f00"),
    (10, "not graded: " + ", ".join(f"f{i:02}" for i in range(10))),
    (11, "not graded: " + ", ".join(f"f{i:02}" for i in range(10)) + " ..."),
])
def test_a_folder_submission_names_at_most_ten_files_it_leaves_alone(tmp_path, others, note):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "diagnosis.yaml").write_text("x: 1\n")
    for i in range(others):
        (folder / f"f{i:02}").write_text("")
    sub = load_submission(folder, ("diagnosis.yaml", "design_sheet.yaml"))
    assert sub.notes == (note,)


@pytest.mark.parametrize("name,content,needle", [
    ("empty.py", b"   \n", "empty"),
    ("binary.py", b"\x00\x01\x02", "binary"),
    ("latin.py", "x = 'é'".encode("latin-1"), "UTF-8"),
    ("bad.ipynb", b"{not json", "not a readable Jupyter notebook"),
    ("nocode.ipynb", _nb([{"cell_type": "markdown", "source": "hi"}]).encode(), "no code cells"),
    ("notes.txt", b"def f(): pass", ".py file or a .ipynb"),
    ("notes.html", b"def f(): pass", ".py file or a .ipynb"),      # a suffix sorting before .ipynb
])
def test_bad_submission_files_are_named_input_errors(tmp_path, name, content, needle):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        load_submission(p)
    assert name in str(e.value) and needle in str(e.value)


def test_missing_submission(tmp_path):
    with pytest.raises(InputError, match="no such submission"):
        load_submission(tmp_path / "nope.py")


def test_a_check_skips_only_the_hidden_criteria_and_a_grade_runs_them_all(tmp_path):
    """A rubric may hold a criterion on hidden cases alone: `grader check` leaves it out and
    still measures every criterion after it; a grade measures them all, in order."""
    from conftest import SECRET
    from grader.engine.checks import REGISTRY
    from grader.engine.layout import find_course
    from grader.engine.pipeline import PRINTED, grade_submission
    import grader.lessons.lesson1  # noqa: F401  (registers its checks)
    rows = "".join(f"  - {{id: {i}, title: {i.upper()}, points: 1, check: lesson1.kv_bytes, "
                   f"visibility: {v}, credit: {{rule: all_or_nothing}}}}\n"
                   for i, v in (("a", "public"), ("h", "hidden"), ("b", "both"), ("c", "public")))
    rubric = load_rubric(_rubric(tmp_path, GOOD.split("criteria:")[0] + "criteria:\n" + rows), REGISTRY)
    submission = load_submission(ROOT / "reference" / "solutions" / "lesson1.py")
    course = find_course(str(ROOT))
    check = grade_submission("lesson1", submission, course, mode="check", rubric=rubric)
    assert [(c.id, c.score) for c in check.criteria] == [("a", 1), ("b", 1), ("c", 1)]
    graded = grade_submission("lesson1", submission, course, mode="grade", secret=SECRET, rubric=rubric)
    assert [(c.id, c.score) for c in graded.criteria] == [("a", 1), ("h", 1), ("b", 1), ("c", 1)]


def test_a_submission_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    from grader.engine.submission import MAX_BYTES
    at = tmp_path / "at.py"
    at.write_bytes(b"x = 1\n" + b"#" * (MAX_BYTES - 7) + b"\n")
    assert len(at.read_bytes()) == MAX_BYTES
    sub = load_submission(at)
    assert len(sub.source) == MAX_BYTES
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.source = "changed"                       # what was graded stays what was read
    over = tmp_path / "over.py"
    over.write_bytes(at.read_bytes() + b"\n")
    with pytest.raises(InputError, match="larger than"):
        load_submission(over)


def _with_param(tmp_path, value):
    """GOOD with one criterion whose check (made here, in no registry) takes a share
    bounded by [0.25, 0.75]."""
    def bounded(*args, **kwargs):
        return None
    bounded.params = {"share": (0.25, 0.75)}
    return load_rubric(_rubric(tmp_path, GOOD.replace("visibility: both,", "params: {share: %s}, visibility: both," % value)),
                       {"lesson1.kv_bytes": bounded})


@pytest.mark.parametrize("value", ["0.25", "0.5", "0.75"])
def test_a_param_at_either_bound_is_accepted(tmp_path, value):
    # The bounds are inclusive, as the message "a number from 0.25 to 0.75" says.
    assert _with_param(tmp_path, value).criteria[0].params == {"share": float(value)}


@pytest.mark.parametrize("value", ["0.2499", "0.7501", "-1", "1"])
def test_a_param_past_a_bound_is_refused(tmp_path, value):
    with pytest.raises(InputError) as e:
        _with_param(tmp_path, value)
    assert "criteria[0].params.share: expected a number from 0.25 to 0.75" in str(e.value)


@pytest.mark.parametrize("stem, named", [("lesson3", "lesson2"), ("lesson3", "lesson4")])
def test_a_rubric_naming_another_lesson_is_refused_either_way(tmp_path, stem, named):
    # lesson2 sorts before the file's lesson3, lesson4 after it: both are other lessons.
    path = _rubric(tmp_path, GOOD.replace("lesson: lesson1", f"lesson: {named}"))
    path = path.rename(path.with_name(f"{stem}.yaml"))
    with pytest.raises(InputError) as e:
        load_rubric(path)
    assert f"lesson: expected {stem!r}, this file's lesson; got {named!r}" in str(e.value)
