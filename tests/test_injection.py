"""Learner text in what the grader writes (docs/security.md, "Learner text in the outputs").

A class of hostile lesson 1 submissions, named and written to forge what an instructor
reads: file names with escape sequences, line breaks, a bidirectional override, markup
and spreadsheet formulas; code whose exceptions and returned strings carry the same. Each
output the grader makes of them is read back byte by byte: nothing in it may be obeyed
(a terminal escape, a forged line, a tag, a formula), and honest names stay as they are.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
from html.parser import HTMLParser

import pytest

from conftest import ROOT, SECRET, run_grader

# What a terminal, a browser or a spreadsheet acts on rather than shows.
ESC, CR, RLO, LRI = "\x1b", "\r", "\u202e", "\u2066"
HOSTILE = (f"{ESC}[2J{ESC}[1;1H10/10 points{CR}{RLO}FORGED\n<script>alert(1)</script> "
           f"=HYPERLINK(\"http://x\",\"y\") [a](javascript:x) {LRI}&lt;b&gt;")
EVIL = f'''from reference.shapes import Verdict
HOSTILE = {HOSTILE!r}
print(HOSTILE)
def kv_bytes_per_token(model):
    raise ValueError(HOSTILE)
def pages_for(tokens, page_tokens):
    return HOSTILE
def worst_case_pages(request, worker):
    raise RuntimeError("=cmd|' /C calc'!A0")
def contract_reasons(request, model, worker):
    return (HOSTILE,)
def check_contract(request, model, worker):
    return Verdict(ok=False, reason=HOSTILE)
'''
FORMULA = "=cmd|' \\C calc'!A0"          # a spreadsheet formula, as a file name
SPLIT = "x;=1+2"                         # a formula once a spreadsheet splits on ";"
MARKUP = "<img src=x onerror=alert(1)>"
REVERSED = f"{RLO}yp.live"               # reads "evil.py" backwards
FORGER = f"esc{ESC}[2J{ESC}[1;1Hall 10-10{CR}ok\nFAKE"     # an empty file: listed as failed
HONEST = ("José", "王", "Zoë Ångström")
UNSEEN = (ESC, CR, RLO, LRI, "\x00", "\x08")


def unseen(text: str) -> list[str]:
    return [ch for ch in UNSEEN if ch in text]


def forged_lines(text: str) -> list[str]:
    """Lines that begin with the learner's words: only a line break of theirs starts one."""
    return [line for line in text.split("\n") if line.lstrip("\ufffd").startswith(("FAKE", "FORGED", "<script"))]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded into a gradebook: (folder, gradebook URL, summary stdout)."""
    tmp = tmp_path_factory.mktemp("hostile")
    folder = tmp / "class"
    folder.mkdir()
    for name in (FORMULA, SPLIT, MARKUP, REVERSED):
        (folder / f"{name}.py").write_text(EVIL, encoding="utf-8")
    for name in HONEST:
        shutil.copy(ROOT / "reference" / "solutions" / "lesson1.py", folder / f"{name}.py")
    (folder / f"{FORGER}.py").write_bytes(b"")
    secret = tmp / "course.secret"
    secret.write_bytes(SECRET)
    url = f"sqlite:///{tmp / 'gb.db'}"
    code, out, err = run_grader("grade", "lesson1", str(folder), "--secret-file", str(secret),
                                "--gradebook", url, "--jobs", "1", "--quiet")
    assert code == 0, err
    return folder, secret, url, out


def test_terminal_reports_show_learner_text_and_obey_none_of_it(graded, tmp_path):
    folder, secret, url, summary = graded
    (tmp_path / "evil.py").write_text(EVIL, encoding="utf-8")
    sheet = tmp_path / "design_sheet.yaml"
    sheet.write_text(f"{json.dumps(HOSTILE)}: 1\n", encoding="utf-8")     # a key of the learner's
    outputs = {
        "grade summary": summary,
        "check": run_grader("check", "lesson1", str(tmp_path / "evil.py"))[1],
        "report": run_grader("report", "lesson1", "--gradebook", url, "--out", str(tmp_path / "r"))[1],
        "an unreadable file": run_grader("grade", "lesson1", str(folder / f"{FORGER}.py"),
                                         "--secret-file", str(secret))[2],
        "csv on stdout": run_grader("export", "--gradebook", url, "--format", "csv")[1],
        "sheet validate": run_grader("sheet", "validate", str(sheet))[1],
    }
    for what, text in outputs.items():
        assert text.strip(), what
        assert not unseen(text), (what, unseen(text))
        assert not forged_lines(text), (what, forged_lines(text))
    # Shown, not dropped: the instructor still reads who failed and what their code said.
    assert "10-10" in outputs["grade summary"] and "FAKE" in outputs["grade summary"]
    assert "FORGED" in outputs["check"] and "<script>" in outputs["check"]
    assert "the submission is empty" in outputs["an unreadable file"]
    assert "FORGED" in outputs["sheet validate"]


def test_json_stays_json_and_its_feedback_one_printable_line(graded, tmp_path):
    _, _, url, _ = graded
    (tmp_path / "evil.py").write_text(EVIL, encoding="utf-8")

    def strict(text):
        def refuse(constant):
            raise ValueError(constant)
        return json.loads(text, parse_constant=refuse)
    code, out, err = run_grader("check", "lesson1", str(tmp_path / "evil.py"), "--json")
    assert code == 0, err
    report = strict(out)
    said = " ".join(c["feedback"] + c["public_feedback"] for c in report["criteria"])
    assert "FORGED" in said and "\n" not in said and not unseen(said)
    code, out, err = run_grader("report", "lesson1", "--gradebook", url, "--json", "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert {p["student"] for p in strict(out)["problems"]} == {FORGER}   # the name, exactly


def test_csv_cells_are_text_never_formulas_and_stay_whole_under_any_separator(graded, tmp_path):
    _, _, url, _ = graded
    out = tmp_path / "grades.csv"
    assert run_grader("export", "--gradebook", url, "--format", "csv", "--out", str(out))[0] == 0
    raw = out.read_bytes().decode("utf-8-sig")
    assert not unseen(raw.replace("\r\n", "\n"))              # CRLF ends a row; no other CR
    with out.open(encoding="utf-8-sig", newline="") as f:
        header, *rows = list(csv.reader(f))
    names = [row[0] for row in rows]
    assert len(rows) == len(HONEST) + 5
    assert set(HONEST) <= set(names)                                      # honest names, exactly
    assert {"'" + FORMULA, SPLIT, MARKUP} <= set(names)
    for row in rows:
        for cell in (row[0], row[-1]):                                    # the text cells
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        for cell in row[1:-1]:                                            # the numbers stay numbers
            assert cell == "" or float(cell) >= 0
    # Quoted, so a spreadsheet that splits rows on ";" keeps "x;=1+2" one cell starting "x".
    assert f'\r\n"{SPLIT}",' in raw
    for cells in csv.reader(io.StringIO(raw, newline=""), delimiter=";"):
        assert not any(c.startswith(("=", "+", "-", "@")) for c in cells), cells


class Page(HTMLParser):
    """The elements and the text of a page, as a browser parses them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.handlers, self.text = [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]

    def handle_data(self, data):
        self.text.append(data)


def test_the_class_report_page_shows_names_and_feedback_as_text(graded, tmp_path):
    _, _, url, _ = graded
    assert run_grader("report", "lesson1", "--gradebook", url, "--out", str(tmp_path / "r"))[0] == 0
    text = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    page = Page(text)
    assert page.tags.count("img") == 2 and page.tags.count("script") == 1   # the page's own
    assert not page.handlers and not unseen(text)
    shown = "".join(page.text)
    assert "<script>alert(1)</script>" in shown                              # a feedback line, shown


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_feedback_files_quote_names_and_feedback_and_are_named_plainly(graded, tmp_path, fmt):
    _, _, url, _ = graded
    out = tmp_path / "fb"
    assert run_grader("feedback", "--gradebook", url, "--out", str(out), "--format", fmt)[0] == 0
    files = sorted(out.iterdir())
    assert len(files) == len(HONEST) + 5
    assert {f"{name}.{fmt}" for name in HONEST} <= {f.name for f in files}
    for f in files:
        assert not unseen(f.name) and "\n" not in f.name
        text = f.read_text(encoding="utf-8")
        assert not unseen(text)
        if fmt == "html":
            page = Page(text)
            assert "img" not in page.tags and "script" not in page.tags and not page.handlers
        else:
            # Markdown: every < [ & is escaped, so no tag, link or entity of the learner's.
            for i, ch in enumerate(text):
                if ch in "<[&":
                    assert text[i - 1] == "\\", text[max(0, i - 30):i + 30]
    marked = next(f for f in files if "onerror" in f.name).read_text(encoding="utf-8")
    assert ("&lt;img src=x onerror=alert(1)&gt;" if fmt == "html" else r"\<img src=x onerror=alert\(1\)\>") in marked


def test_gradescope_results_hold_only_text_a_reader_sees():
    from grader.engine.report import COST_MODEL_NOTE, CriterionResult, Report
    from grader.engine.rubric import load_rubric
    from grader.engine.checks import REGISTRY
    from grader.instructor.gradescope.results import from_report, not_graded, problems
    from grader.lessons import lesson_module
    crit = (CriterionResult("a", "A", 0.0, 2.0, False, HOSTILE, "both", public_feedback=HOSTILE),
            CriterionResult("b", "B", 0.0, 2.0, False, HOSTILE, "hidden"))
    report = Report("lesson1", "T", "grade", f"{REVERSED}.py", "0" * 64, 1, crit, (), "bwrap", "0", 0.1,
                    notes=(f"graded {FORGER}.py as exercise.py",))
    graded = from_report(report, graded=f"{REVERSED}.py", build={"course_digest": "d" * 64})
    lesson_module("lesson1")
    rubric = load_rubric(ROOT / "rubrics" / "lesson1.yaml", REGISTRY)
    refused = not_graded(rubric, f"{FORGER}.py: the submission is empty", build={"course_digest": "d" * 64})
    from grader.instructor.gradescope.results import failed
    for data in (graded, refused, failed(f"{FORGER}.py broke the autograder")):
        assert not problems(json.loads(json.dumps(data)))
        # Left to itself Gradescope renders the top-level output as HTML (simple_format),
        # and that output names the student's files: every output is pinned as text.
        assert (data["output_format"], data["test_output_format"], data["test_name_format"]) == ("text",) * 3
        tests = data.get("tests", [])
        texts = [data["output"]] + [t["output"] for t in tests] + [t["name"] for t in tests]
        assert all(not unseen(t) and not forged_lines(t) for t in texts), texts
        assert all("\n" not in t["output"] for t in tests)
    # The grader's own lines, one per fact: the header, a blank, graded, cases, isolation,
    # autograder, the note, a blank, the cost model.
    lines = graded["output"].split("\n")
    assert len(lines) == 9 and lines[-1] == COST_MODEL_NOTE and "FAKE" in lines[6]
    assert all("FORGED" in t["output"] for t in graded["tests"])


def test_the_gradebook_stores_any_name_as_a_value(tmp_path):
    from grader.instructor.gradebook import open_gradebook
    from test_gradebook import fake_report
    name = "x'); DROP TABLE results; --"
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        book.record(name, fake_report())
        book.record("bob", fake_report())
        assert [r.student for r in book.results("lesson1")] == ["bob", name]
        assert book.students() == ["bob", name]
