"""The documentation names only what exists: every relative link of README.md, docs/*.md,
each lesson's README and bench/README.md (and its #anchor) resolves, and every repository path they name, in `code` or in a code
block, is in the repository. A path with a placeholder (lessonN, <student>, *) must match
something; a file the learner edition's build writes (its manifest, its recorded
expectations) counts as existing; a bare `name.md` must be some file of the repository; and
a code object named with its file (`reference/baselines.py: baseline_contract`) is defined
in that file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT
from grader.engine.edition import MARKER
from grader.engine.oracle import EXPECTATIONS

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "assignments").glob("*/README.md")), ROOT / "bench" / "README.md"]
TOP_FILES = {"README.md", "pyproject.toml"}
# Written by `grader release` into the learner edition, not kept in the repository.
BUILT = {MARKER.relative_to(ROOT).as_posix(), EXPECTATIONS.relative_to(ROOT).as_posix()}

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`([^`\n]+)`")
_TOKEN = re.compile(r"[^\s`'\"=,;()\[\]{}|]+")
_NAMED = re.compile(r"([\w./-]+\.py): ?([A-Za-z_][\w.]*)")


def top_level(root: Path) -> set[str]:
    # A folder the commands write (report/, after `grader report` as the docs show) is
    # ignored by git and is no part of the course: the docs may name what it will hold.
    ignore = root / ".gitignore"
    written = {line.strip().strip("/") for line in (ignore.read_text().splitlines() if ignore.is_file() else ())
               if line.strip().endswith("/") and not line.startswith("#")}
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.endswith(".egg-info")
            and p.name not in written and p.name != "__pycache__"
            and (not p.name.startswith(".") or p.name == ".ci")}


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, markup and punctuation dropped
    (underscores and hyphens stay), spaces to -."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def anchors(doc: Path) -> set[str]:
    text = _FENCE.sub("", doc.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def _exists(root: Path, path: str) -> bool:
    path = path.rstrip("/")
    if any(path == b or path.startswith(b + "/") for b in BUILT):
        return True
    pattern = re.sub(r"<[^>]*>|\{[^}]*\}", "*", path)
    pattern = re.sub(r"lesson[NX]\b", "lesson*", pattern)
    if pattern != path or "*" in path:
        return any(root.glob(pattern))
    return (root / path).exists()


def defines(root: Path, file: str, name: str) -> bool:
    """Whether `file` (a path in the repository, or a bare file name found anywhere in it)
    defines `name`'s last part: a def, a class or an assignment at the start of a line."""
    files = [root / file] if "/" in file else [p for p in root.rglob(file) if ".git" not in p.parts]
    last = re.escape(name.split(".")[-1])
    pattern = re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{last}\b|^\s*{last}\s*(?::[^=\n]*)?=", re.M)
    return any(p.is_file() and pattern.search(p.read_text(encoding="utf-8")) for p in files)


def dead_references(doc: Path, root: Path = ROOT) -> list[str]:
    """What ``doc`` names that is not there, each as 'kind: what'."""
    text = doc.read_text(encoding="utf-8")
    dead = []
    for target in _LINK.findall(_FENCE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):            # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        where = (doc.parent / path).resolve() if path else doc
        if not where.exists():
            dead.append(f"link: {target}")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            dead.append(f"anchor: {target}")
    inline = _CODE.findall(_FENCE.sub("", text))
    spans = inline + [b.group(0) for b in _FENCE.finditer(text)]
    for span in inline:
        named = _NAMED.fullmatch(span.strip())
        # A path that is not there is reported as a path, below.
        if named and ("/" not in named[1] or (root / named[1]).exists()) and not defines(root, *named.groups()):
            dead.append(f"name: {span.strip()}")
    tops = top_level(root)
    names = {p.name for p in root.rglob("*.md")}
    for span in spans:
        for token in _TOKEN.findall(span):
            token = token.rstrip(".:")
            if token.startswith("./"):
                token = token[2:]
            first = token.split("/")[0]
            if (first in tops and "/" in token) or token in TOP_FILES:
                if not _exists(root, token):
                    dead.append(f"path: {token}")
            elif token.endswith(".md") and "/" not in token and token == span.strip() and token not in names:
                dead.append(f"file: {token}")
    return sorted(f"{d} (line {text[:text.find(d.split(': ', 1)[1])].count(chr(10)) + 1})" for d in set(dead))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_and_link_the_docs_name_exists(doc):
    assert dead_references(doc) == [], f"{doc.relative_to(ROOT)} names what is not there"


def test_the_docs_are_there():
    names = {p.relative_to(ROOT).as_posix() for p in DOCS}
    assert {"README.md", "docs/learners.md", "docs/instructors.md", "docs/architecture.md",
            "assignments/lesson1/README.md", "assignments/lesson6/README.md"} <= names


def test_the_check_finds_what_is_missing(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "cli.py").write_text("EXAMPLES = 1\n\n\ndef main():\n    pass\n")
    (tmp_path / "report").mkdir()                      # written by a command, ignored by git
    (tmp_path / ".gitignore").write_text("# outputs\n/report/\n")
    (tmp_path / "docs" / "other.md").write_text("# Other page\n## Its part\n## The `page_tokens` knob\n")
    doc = tmp_path / "docs" / "page.md"
    doc.write_text("A [link](other.md#its-part), a [dead one](gone.md), [a lost part](other.md#nope),\n"
                   "[a knob](other.md#the-page_tokens-knob), [no knob](other.md#the-pagetokens-knob),\n"
                   "[the web](https://example.org) and [here](#a-title).\n\n# A title\n\n"
                   "`grader/cli.py` is there, `grader/gone.py: main` is not; see `worker.md`.\n"
                   "`report/scores.png` is what a command will write.\n"
                   "`grader/cli.py: main` and `cli.py: EXAMPLES` are defined, `grader/cli.py: gone` is not.\n\n"
                   "```sh\ngrader check --submission grader/missing/x.py --out report/\n```\n")
    assert dead_references(doc, tmp_path) == ["anchor: other.md#nope (line 1)",
                                              "anchor: other.md#the-pagetokens-knob (line 2)",
                                              "file: worker.md (line 7)", "link: gone.md (line 1)",
                                              "name: grader/cli.py: gone (line 9)",
                                              "path: grader/gone.py (line 7)",
                                              "path: grader/missing/x.py (line 12)"]


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_second():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and lines[2] == "```sh" and lines[5] == "```", lines[:6]
    run, suite = lines[3], lines[4]
    for command in (run, suite):
        assert re.match(r"python3\.11 -m venv (\S+) && \. \1/bin/activate && pip install -e ", command), command
    assert run.endswith("pip install -e . && grader check lesson1 --submission reference/solutions/lesson1.py")
    tail = "pip install -e '.[test]' && python -m pytest"
    assert suite.endswith(" && " + tail)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip().splitlines()
    assert ci[-1] == tail, ci[-1]


def test_the_readme_maps_every_page_of_docs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    mapped = set(re.findall(r"^- \[[^\]]*\]\((docs/[^)#]+\.md)\): ", text, re.M))
    assert mapped == {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}


def documented_commands_and_flags():
    """Every command of grader/cli.py (`grader sheet run`) and every long option of each,
    as (command, flag or None)."""
    import argparse
    from grader.cli import _parser

    def walk(parser, words):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield " ".join(words + [name]), None
                    yield from walk(sub, words + [name])
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    yield " ".join(words), flag
    return sorted(set(walk(_parser(), ["grader"])), key=lambda x: (x[0], x[1] or ""))


def test_every_command_and_flag_of_the_cli_is_in_the_docs():
    """A user finds a command or a flag on a page, not only in --help: each appears in the
    README, a page of docs/ or a lesson's README."""
    text = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in DOCS)
    missing = [f"{command} {flag or ''}".strip() for command, flag in documented_commands_and_flags()
               if not re.search(rf"{re.escape(flag or command)}(?![\w-])", text)]
    assert missing == []


def ignored_by_git(path: str, root: Path = ROOT) -> bool:
    """Whether the course's .gitignore ignores ``path`` (a file or folder at the course's
    top, as the commands write it): its first part against each pattern, as git matches a
    pattern without an inner slash."""
    from fnmatch import fnmatch
    patterns = [line.strip().strip("/") for line in (root / ".gitignore").read_text().splitlines()
                if line.strip() and not line.startswith(("#", "!"))]
    return any(fnmatch(path.split("/")[0], p) for p in patterns if "/" not in p)


def test_what_the_instructors_quick_start_writes_in_the_course_is_ignored_by_git():
    """The quick start runs in the course's clone: its secret, its Gradescope zip (which
    holds the secret and the solutions), its grades and the students' code must not be
    committed with the course by a `git add -A`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Instructors: a quick start", 1)[1].split("```", 2)[1]
    written = re.findall(r"(?:--out|>)\s+(\S+)", block) + re.findall(r"grade \w+ (\S+/) ", block)
    assert {"course.secret", "grades.csv", "lesson1-autograder.zip", "submitted/", "report/",
            "learner-edition/"} <= set(written), written
    assert [p for p in [*written, "gradebook.db", "nbgrader/", "feedback/"] if not ignored_by_git(p)] == []
    assert not ignored_by_git("grader/") and not ignored_by_git("README.md")


def test_the_learners_page_feedback_example_is_what_the_check_prints(tmp_path, monkeypatch, capsys):
    """docs/learners.md shows `grader check lesson1 my_work.py` on a solution whose pages_for
    goes through a float. Every line it shows (but the `...` it leaves out and the isolation
    it abbreviates) is a line the check prints: the page said 60 cases after lesson 1 had 62."""
    from grader.cli import main
    text = (ROOT / "docs" / "learners.md").read_text(encoding="utf-8")
    shown = re.search(r"```\n(lesson1: The request contract  \(check, my_work\.py\)\n.*?)```", text, re.S)[1]
    honest = (ROOT / "tests" / "submissions" / "lesson1" / "from_readme.py").read_text(encoding="utf-8")
    floats = honest.replace("    whole, part = divmod(tokens, page_tokens)\n    return whole + (1 if part else 0)\n",
                            "    import math\n    return math.ceil(tokens / page_tokens)\n")
    assert floats != honest
    (tmp_path / "my_work.py").write_text(floats, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")       # the page shows a report at its widest
    assert main(["--course", str(ROOT), "check", "lesson1", "my_work.py"]) == 0
    printed = capsys.readouterr().out.splitlines()
    for line in shown.splitlines():
        if line.strip() == "...":
            continue
        if line.endswith("isolation: ...)"):
            line = line[:-len(" ...)")]
            assert any(p.startswith(line) for p in printed), (line, printed)
        else:
            assert line in printed, (line, printed)


def criteria_an_edition_may_leave_unchecked(root: Path = ROOT) -> set[str]:
    """The rubric criteria whose check can answer `not_checked_here` (read from the source:
    a function registered with @check("ID") that calls it)."""
    import ast
    import yaml
    checks = set()
    for module in (root / "grader" / "lessons").glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(n, ast.Call) and getattr(n.func, "id", "") == "not_checked_here"
                    for n in ast.walk(node)):
                checks |= {d.args[0].value for d in node.decorator_list
                           if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "check"}
    return {c["id"] for rubric in (root / "rubrics").glob("lesson*.yaml")
            for c in yaml.safe_load(rubric.read_text(encoding="utf-8"))["criteria"] if c["check"] in checks}


@pytest.mark.parametrize("page, says", [("learners.md", "`n/a` is a criterion this copy"),
                                        ("learner-edition.md", "`n/a`, *not")])
def test_the_pages_name_every_criterion_the_learner_edition_may_not_check(page, says):
    """Both pages said lesson 6's fix-replayed was the one criterion an edition reports n/a;
    rollback-rule is one too (a release rule the edition holds no replay for)."""
    paragraph = next(p for p in re.split(r"\n(?=- )|\n\n", (ROOT / "docs" / page).read_text(encoding="utf-8"))
                     if says in p)
    unchecked = criteria_an_edition_may_leave_unchecked()
    assert {"fix-replayed", "rollback-rule"} <= unchecked
    assert [c for c in sorted(unchecked) if f"`{c}`" not in paragraph] == []


def test_the_learner_editions_figures_of_what_the_baselines_and_a_copy_earn_hold():
    """docs/learner-edition.md quotes what the baselines (and lesson 1 copied from the worker)
    earn on the hidden grade; it said about 1.9 of lesson 1 and 3.8 to 4.2 of lesson 3 after
    both lessons weighed more limits as clauses and the baselines earned 1.4 and 2.6. Fixed
    secrets, so the test is the same every run; each figure rounded must lie in its range."""
    from importlib.util import module_from_spec, spec_from_file_location

    from grader.engine.layout import find_course
    from grader.instructor.equivalence import _grade
    from reference import baselines
    text = " ".join((ROOT / "docs" / "learner-edition.md").read_text(encoding="utf-8").split())
    figures = re.search(r"baselines earn ([\d.]+) to ([\d.]+) of 10 points of lesson 1 \(the contract\), "
                        r"([\d.]+) of 10 of lesson 2 \(safety alone\), ([\d.]+) to ([\d.]+) of 12 of lesson 3 "
                        r"and ([\d.]+) of 24 of lesson 4", text)
    copied = re.search(r"earned \*\*([\d.]+) to ([\d.]+) of 10\*\* on the hidden grade", text)
    assert figures and copied, "the page no longer quotes the figures this test reads"
    l1_low, l1_high, l2, l3_low, l3_high, l4 = map(float, figures.groups())
    # The worker's size arithmetic, written out (loaded by path: each lesson has a from_readme).
    spec = spec_from_file_location("_lesson1_sizes", ROOT / "tests" / "submissions" / "lesson1" / "from_readme.py")
    sizes = module_from_spec(spec)
    spec.loader.exec_module(sizes)
    copy = {n: getattr(sizes, n) for n in ("kv_bytes_per_token", "pages_for", "pool_pages", "worst_case_pages")}
    copy["check_contract"] = baselines.baseline_contract
    course = find_course(str(ROOT))
    for secret in (b"docs-1", b"docs-2", b"docs-3"):
        earned = {
            "lesson1": _grade("lesson1", {"check_contract": baselines.baseline_contract}, course, secret)[0],
            "lesson2": _grade("lesson2", {"admit": baselines.baseline_admit}, course, secret)[0],
            "lesson3": _grade("lesson3", {"choose_chunk": baselines.baseline_chunk}, course, secret)[0],
            "lesson4": _grade("lesson4", {"on_event": baselines.baseline_on_event}, course, secret)[0],
            "copied": _grade("lesson1", copy, course, secret)[0]}
        assert l1_low <= round(earned["lesson1"], 1) <= l1_high, (secret, earned)
        assert round(earned["lesson2"], 1) == l2 and round(earned["lesson4"], 1) == l4, (secret, earned)
        assert l3_low <= round(earned["lesson3"], 1) <= l3_high, (secret, earned)
        assert float(copied[1]) <= round(earned["copied"], 1) <= float(copied[2]), (secret, earned)
