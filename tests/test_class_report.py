"""The class report, in a real browser: a small lesson 1 class is graded into a gradebook,
`grader report` writes the page, and headless Chromium (Debian's package, installed by
.ci/run) loads it, says whether each figure loaded, and takes a screenshot. The numbers the
page shows (and --json prints) are checked against the gradebook, counted here from its
stored results; which students are in trouble is known from what each handed in."""
from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from conftest import ROOT, SECRET, SUBMISSIONS, run_grader
from grader.instructor.gradebook import open_gradebook

LESSON1 = SUBMISSIONS / "lesson1"
CLASS = {   # student -> what they handed in (None: nothing)
    "ana": ROOT / "reference" / "solutions" / "lesson1.py",
    "ben": ROOT / "reference" / "solutions" / "lesson1.py",
    "chen": LESSON1 / "alt_correct.py",
    "dora": ROOT / "assignments" / "lesson1" / "exercise.py",
    "emil": LESSON1 / "raises.py",
    "fay": LESSON1 / "wrong_types.py",
    "gus": LESSON1 / "always_ok.py",
    "hana": LESSON1 / "syntax_error.py",
    "ivo": LESSON1 / "loops.py",
    "Zoë <b>O'Brien & co": LESSON1 / "wrong_types.py",
    "kim": None,
}
TROUBLE = {"hana": "did not load", "ivo": "timed out", "kim": "not graded"}
WINDOW = (1280, 4000)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is needed: apt-get install -y chromium (as .ci/run does)"
    return found


def browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on a local page, as root: no sandbox, no first run, no network of
    its own, a fresh profile."""
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=180)


class Dom(HTMLParser):
    """What a test reads in the loaded page: every data-key's data-value, the images'
    load marks, missing-figure notes and the text of every table cell."""

    def __init__(self, text: str):
        super().__init__()
        self.values: dict[str, str] = {}
        self.images: dict[str, str] = {}
        self.body: dict = {}
        self.missing: list[str] = []
        self.cells: list[str] = []
        self._in: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-key" in a:
            self.values[a["data-key"]] = a.get("data-value")
        if tag == "img":
            self.images[a["src"]] = a.get("data-loaded")
        if tag == "body":
            self.body = a
        if tag == "p" and "missing" in (a.get("class") or ""):
            self._in = "missing"
        if tag == "td":
            self._in = "td"
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag in ("p", "td"):
            self._in = None

    def handle_data(self, data):
        if self._in == "missing":
            self.missing.append(data)
        elif self._in == "td":
            self.cells[-1] += data


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    for student, source in CLASS.items():
        folder = tmp / "submitted" / student
        folder.mkdir(parents=True)
        if source is not None:
            (folder / "lesson1").mkdir()
            shutil.copy(source, folder / "lesson1" / "exercise.py")
    secret = tmp / "course.secret"
    secret.write_bytes(SECRET)
    url = f"sqlite:///{tmp / 'gradebook.db'}"
    code, out, err = run_grader("grade", "lesson1", str(tmp / "submitted"), "--secret-file", str(secret),
                                "--gradebook", url, "--jobs", "2", "--quiet")
    assert code == 0, err
    code, out, err = run_grader("report", "lesson1", "--gradebook", url, "--out", str(tmp / "report"), "--json")
    assert code == 0, err
    return tmp, url, json.loads(out)


def expected(url: str) -> dict:
    """The report's numbers, counted straight from the gradebook's stored results."""
    with open_gradebook(url) as book:
        results = book.results("lesson1")
        criteria = [c.id for c in book.lesson("lesson1").criteria]
    graded = [r for r in results if r.status == "graded"]
    scores = sorted(r.score for r in graded)
    n = len(scores)
    out = {"criteria": criteria, "graded": n, "full_marks": sum(1 for s in scores if s == 10),
           "mean": round(sum(scores) / n, 3),
           "median": (scores[n // 2] + scores[(n - 1) // 2]) / 2,
           "bins": [sum(1 for s in scores if s < 10 and int(s) == b) for b in range(10)] + [scores.count(10)]}
    for cid in criteria:
        mine = [s for r in graded for s in r.scores if s.criterion == cid]
        out[f"passed:{cid}"] = sum(s.passed for s in mine)
        out[f"mean_score:{cid}"] = round(sum(s.score for s in mine) / len(mine), 4)
        cites = Counter()
        for r in graded:
            report = r.report
            known = {c["name"] if c["visibility"] == "public" else f"hidden:{c['digest']}" for c in report["cases"]}
            crit = next(c for c in report["criteria"] if c["id"] == cid)
            cites.update(set(crit["evidence"]) & known)
        out[f"cites:{cid}"] = cites
    return out


def test_json_alone_prints_the_numbers_and_writes_no_page(graded_class, tmp_path):
    """`grader report lesson1 --json` asks for the numbers: it wrote report/ in the working
    directory too, saying nothing of it (and now a page there of something else would stop
    it). With --out it writes the page as well, and says so on stderr."""
    _, url, numbers = graded_class
    code, out, err = run_grader("report", "lesson1", "--gradebook", url, "--json", cwd=tmp_path)
    assert code == 0 and err == "", err
    assert json.loads(out) == numbers and list(tmp_path.iterdir()) == []
    code, out, err = run_grader("report", "lesson1", "--gradebook", url, "--json", "--out", "r", cwd=tmp_path)
    assert code == 0 and json.loads(out) == numbers
    assert err == "wrote r/index.html and 2 figures\n"
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["criteria.png", "index.html", "scores.png"]


def test_the_numbers_match_the_gradebook(graded_class):
    _, url, numbers = graded_class
    want = expected(url)
    assert numbers["students"] == len(CLASS) and numbers["graded"] == want["graded"] == len(CLASS) - 1
    assert numbers["full_marks"] == want["full_marks"] == 3            # the reference twice, alt_correct
    assert numbers["distribution"]["mean"] == want["mean"]
    assert numbers["distribution"]["median"] == want["median"]
    assert [b["count"] for b in numbers["distribution"]["bins"]] == want["bins"]
    assert [c["id"] for c in numbers["criteria"]] == want["criteria"]
    for c in numbers["criteria"]:
        assert c["passed"] == want[f"passed:{c['id']}"] and c["mean_score"] == want[f"mean_score:{c['id']}"]
        assert c["pass_rate"] == round(c["passed"] / want["graded"], 4)
        cites = want[f"cites:{c['id']}"]
        shown = c["failing_cases"]
        if cites:   # the most failed case first, each with the students who failed it
            assert shown[0]["students"] == max(cites.values())
            assert all(h["students"] == cites[h["case"]] for h in shown)
            assert all(h["feedback"] for h in shown)
    assert {p["student"]: p["kind"] for p in numbers["problems"]} == TROUBLE
    hidden = numbers["hardest_hidden"]
    assert hidden and all(h["case"].startswith("hidden:") and h["visibility"] == "hidden" for h in hidden)
    assert [h["students"] for h in hidden] == sorted((h["students"] for h in hidden), reverse=True)


def test_chromium_loads_the_page_with_its_figures_and_the_numbers_it_shows(graded_class, tmp_path):
    folder, url, numbers = graded_class
    page = folder / "report" / "index.html"
    p = browse(page, tmp_path / "profile", "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    dom = Dom(p.stdout)
    assert dom.body.get("data-ready") == "yes"                   # the page's own script ran
    assert dom.images == {"scores.png": "yes", "criteria.png": "yes"} and not dom.missing
    want = expected(url)
    assert int(dom.values["graded"]) == want["graded"] and int(dom.values["full_marks"]) == want["full_marks"]
    assert float(dom.values["mean"]) == want["mean"] and float(dom.values["median"]) == want["median"]
    assert int(dom.values["problems"]) == len(TROUBLE)
    for c in numbers["criteria"]:
        assert int(dom.values[f"passed:{c['id']}"]) == want[f"passed:{c['id']}"]
        assert float(dom.values[f"mean_score:{c['id']}"]) == want[f"mean_score:{c['id']}"]
        for h in c["failing_cases"]:
            assert int(dom.values[f"failing:{c['id']}:{h['case']}"]) == want[f"cites:{c['id']}"][h["case"]]
    assert {k.split(":", 1)[1]: v for k, v in dom.values.items() if k.startswith("problem:")} == TROUBLE
    assert "Zoë <b>O'Brien & co" not in p.stdout                   # a name is text, never markup
    # The feedback a stuck student got is on the page, as the gradebook has it.
    with open_gradebook(url) as book:
        ivo = book.results("lesson1", "ivo")[0]
    assert next(s.feedback for s in ivo.scores if s.criterion == "pages-for") in dom.cells


def test_a_figure_left_behind_says_so_in_the_page(graded_class, tmp_path):
    folder, _, _ = graded_class
    copy = tmp_path / "report"
    shutil.copytree(folder / "report", copy)
    (copy / "criteria.png").unlink()
    dom = Dom(browse(copy / "index.html", tmp_path / "profile", "--dump-dom").stdout)
    assert dom.images == {"scores.png": "yes", "criteria.png": "no"}
    assert dom.missing == ["Missing figure: criteria.png (keep the PNG files beside this page)."]


def test_the_screenshot_shows_the_page(graded_class, tmp_path):
    folder, _, _ = graded_class
    shot = tmp_path / "report.png"
    p = browse(folder / "report" / "index.html", tmp_path / "profile", f"--screenshot={shot}",
               f"--window-size={WINDOW[0]},{WINDOW[1]}")
    assert p.returncode == 0 and shot.is_file(), p.stderr[-2000:]
    with Image.open(shot) as im:
        assert im.size == WINDOW
        # The figures' green bars are drawn (not a blank or an error page).
        colours = {colour: n for n, colour in im.convert("RGB").getcolors(maxcolors=1 << 24)}
    green = sum(colours.get(c, 0) for c in ((0x3b, 0x7d, 0x5a), (0x2f, 0x6a, 0x4b)))
    assert len(colours) > 200 and green > 2000


def test_report_refuses_an_unknown_lesson_in_one_line(graded_class, tmp_path):
    _, url, _ = graded_class
    code, out, err = run_grader("report", "lesson4", "--gradebook", url, "--out", str(tmp_path / "r"))
    assert code == 2 and "no results for this lesson" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_results_graded_on_two_sets_of_cases_are_flagged_not_merged(tmp_path):
    """A regrade under another secret, stopped part-way: the report says the class is not
    one grading, in the terminal, the JSON and the page."""
    from grader.instructor.class_report import write_report
    from test_gradebook import fake_report
    one = ({"family": "models", "name": "m", "visibility": "public"},)
    other = ({"family": "models", "name": "m2", "visibility": "public"},)
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        for student in ("a", "b", "c"):
            book.record(student, fake_report(cases=one))
        book.record("d", fake_report(cases=other))
        written = write_report(book, "lesson1", tmp_path / "report")
    n = written.numbers
    assert [count for _, count in n.case_sets] == [3, 1]
    assert n.mixed().startswith(f"graded on 2 sets of cases (3 on cases {n.case_sets[0][0][:12]}, "
                                f"1 on cases {n.case_sets[1][0][:12]}): two secrets")
    assert f"warning: {n.mixed()}" in written.render()
    assert json.loads(json.dumps(n.to_dict()))["case_sets"] == [[d, c] for d, c in n.case_sets]
    assert "Not one grading:" in (tmp_path / "report" / "index.html").read_text()
    with open_gradebook(str(tmp_path / "one.db")) as book:
        book.record("a", fake_report(cases=one))
        assert write_report(book, "lesson1", tmp_path / "r1").numbers.mixed() == ""
