"""The design sheet: one schema for the template and every lesson's section, problems that
name their place in the file, hostile YAML read safely, and `grader sheet validate|run`."""
import json
import re

import pytest
import yaml

from conftest import ROOT
from grader.cli import main
from grader.engine.layout import find_course
from grader.course.sheet import (MAX_BYTES, SECTIONS, _known_path, load_sheet, policy_sheet, read_yaml,
                          validate_sheet)
from grader.engine.oracle import reference_policy

COURSE = find_course(str(ROOT))
TEMPLATE = ROOT / "assignments" / "design_sheet.yaml"
SCHEMA = json.loads((ROOT / "rubrics" / "design_sheet.schema.json").read_text())


def sheet() -> dict:
    return yaml.safe_load(TEMPLATE.read_text())


def paths(problems) -> list[str]:
    return [p.path for p in problems]


# ---- one schema for the template, the sections and the READMEs ---------------------------
def test_template_holds_every_section_and_validates():
    data = sheet()
    assert list(data) == list(SECTIONS)
    assert validate_sheet(data, COURSE) == []


@pytest.mark.parametrize("n", range(1, 7))
def test_each_lessons_section_validates_and_is_the_templates(n):
    section = yaml.safe_load((ROOT / "assignments" / f"lesson{n}" / "design_sheet.yaml").read_text())
    assert len(section) == 1 and validate_sheet(section, COURSE) == []
    name, = section
    assert sheet()[name] == section[name], f"assignments/design_sheet.yaml's {name} is not lesson {n}'s"


@pytest.mark.parametrize("n", range(1, 7))
def test_readme_excerpt_uses_only_keys_of_the_schema(n):
    text = (ROOT / "assignments" / f"lesson{n}" / "README.md").read_text()
    part = text[text.index("## Your design sheet"):]
    excerpt = re.search(r"```yaml\n(.*?)```", part, re.S)
    if excerpt is None:          # lesson 5 points at its section file instead of quoting it
        return
    data = yaml.safe_load(excerpt.group(1))

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                assert _known_path(SCHEMA, path + [str(k)]), ".".join(path + [str(k)])
                walk(v, path + [str(k)])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [str(i)])
    walk(data, [])


def test_the_sheets_knobs_are_the_reference_policys():
    data = sheet()
    knobs = policy_sheet(data)
    assert knobs["request_contract"] == {"enforce": data["request_contract"]["reasons"]}
    assert "key_encoding" not in knobs["cancellation"] and "release_criteria" not in knobs
    policy = reference_policy(knobs)
    assert (policy.gap_budget_s, policy.min_chunk_tokens, policy.prefix_cache) == (0.1, 64, True)
    # Two sheets that differ in words only replay as the same design.
    other = sheet()
    other["cancellation"]["fence"] = "in other words"
    other["change_record"][0]["summary"] = "another summary"
    assert policy_sheet(other) == knobs


# ---- problems name their place and what was expected ------------------------------------
def test_problems_speak_yaml_and_give_the_line(tmp_path):
    lines = TEMPLATE.read_text().splitlines()
    ledger = next(i for i, l in enumerate(lines) if l.startswith("admission_ledger:"))
    del lines[next(i for i, l in enumerate(lines) if i > ledger and l.strip().startswith("outstanding:"))]
    rule = next(i for i, l in enumerate(lines) if l.strip().startswith("rule: budget"))
    lines[rule] = lines[rule].replace("rule: budget", "rule: budgett", 1)
    # The mapping a missing key belongs in starts at its first key.
    first_key = next(i for i, l in enumerate(lines) if i > ledger and l.strip() and not l.lstrip().startswith("#"))
    path = tmp_path / "sheet.yaml"
    path.write_text("\n".join(lines) + "\n")
    _, problems = load_sheet(path, COURSE)
    shown = {str(p) for p in problems}
    assert shown == {f"line {rule + 1}: chunk_rule.rule: expected one of budget, per_token_only, fixed; "
                     f"got a string 'budgett'",
                     f"line {first_key + 1}: admission_ledger.outstanding: missing key (required)"}
    path.write_text("request_contract:\nchunk_rule: []\n")
    shown = {str(p) for p in load_sheet(path, COURSE)[1]}
    assert "line 1: request_contract: expected a mapping; got nothing" in shown
    assert "line 2: chunk_rule: expected a mapping; got a list" in shown
    assert not any("NoneType" in s or "object" in s or "array" in s for s in shown)



def test_every_problem_names_its_path_and_what_was_expected():
    data = sheet()
    data["chunk_rule"]["rule"] = "budgett"
    del data["admission_ledger"]["outstanding"]
    data["request_contract"]["worker"]["max_running"] = "sixty-four"
    data["cancellation"]["colour"] = "blue"
    data["release_criteria"]["qualification"]["token_deadline"] = "mean"
    problems = validate_sheet(data, COURSE)
    by_path = {p.path: p.message for p in problems}
    assert set(by_path) == {"chunk_rule.rule", "admission_ledger.outstanding",
                            "request_contract.worker.max_running", "cancellation.colour",
                            "release_criteria.qualification.token_deadline"}
    assert by_path["chunk_rule.rule"] == "expected one of budget, per_token_only, fixed; got a string 'budgett'"
    assert by_path["admission_ledger.outstanding"] == "missing key (required)"
    assert by_path["request_contract.worker.max_running"].startswith("expected an integer; got a string")
    assert by_path["cancellation.colour"].startswith("unknown key 'colour' (known here: ")


def test_what_the_schema_cannot_say_is_checked_after_it():
    data = sheet()
    rc = data["request_contract"]
    rc["model"]["weight_bytes"] = "16GB"                 # a decimal unit
    data["chunk_rule"]["min_chunk_tokens"] = 100         # not a whole number of 16-token pages
    data["chunk_rule"]["gap_budget_s"] = float("nan")
    data["release_criteria"]["slo_classes"].append(dict(data["release_criteria"]["slo_classes"][0]))
    data["change_record"].append(dict(data["change_record"][0]))
    data["change_record"][0]["changes"][0]["diff"][0]["path"] = "admission_ledger.inactive_hitz"
    by_path = {p.path: p.message for p in validate_sheet(data, COURSE)}
    assert "decimal unit" in by_path["request_contract.model.weight_bytes"]
    assert "not a whole number of 16-token pages" in by_path["chunk_rule.min_chunk_tokens"]
    assert "finite" in by_path["chunk_rule.gap_budget_s"]
    assert "listed twice" in by_path["release_criteria.slo_classes"]
    assert "recorded twice" in by_path["change_record[1].release"]
    assert "not a key of the design sheet" in by_path["change_record[0].changes[0].diff[0].path"]


def test_worked_numbers_must_agree_with_the_model_and_worker():
    data = sheet()
    data["request_contract"]["pool_pages"] = 30000
    [p] = validate_sheet(data, COURSE)
    assert p.path == "request_contract.pool_pages" and "they give 30720" in p.message


# ---- hostile YAML is a problem, never an exception --------------------------------------
BOMB = b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"


@pytest.mark.parametrize("raw,needle", [
    (BOMB, "anchors"),
    (b"admission_ledger: {}\nadmission_ledger: {}\n", "repeated"),
    (b"x" * (MAX_BYTES + 1), "the limit is"),
    (b"\x00\x01binary", "binary"),
    (b"\xff\xfe not utf-8", "UTF-8"),
    (b"[" * 5000, "nested too deeply"),
    (b"a: " + b"{b: " * 500 + b"1" + b"}" * 500, "nested too deeply"),
    (b"a: [1, 2\n", "not valid YAML"),
    (b"a: !!python/object:os.system ls\n", "not valid YAML"),
], ids=["alias-bomb", "repeated-key", "too-large", "binary", "not-utf8", "too-deep", "deep-mapping",
                           "broken", "python-tag"])
def test_hostile_yaml_is_a_problem_not_an_exception(raw, needle):
    data, problems = read_yaml(raw)
    assert data is None and len(problems) == 1 and needle in problems[0].message, problems


@pytest.mark.parametrize("text", ["just a string\n", "- a list\n", "42\n", "chunk_rule: null\n"])
def test_a_sheet_of_the_wrong_shape_is_a_problem(text):
    data, problems = read_yaml(text.encode())
    assert problems == [] and validate_sheet(data, COURSE)


def test_a_linked_or_missing_sheet_is_a_problem(tmp_path):
    (tmp_path / "secret.txt").write_text("instructor: secret\n")
    (tmp_path / "sheet.yaml").symlink_to(tmp_path / "secret.txt")
    assert "symbolic link" in load_sheet(tmp_path / "sheet.yaml", COURSE)[1][0].message
    assert "there is no" in load_sheet(tmp_path / "none.yaml", COURSE)[1][0].message


# ---- the commands --------------------------------------------------------------------------
def test_validate_command(tmp_path, capsys):
    assert main(["sheet", "validate", str(TEMPLATE)]) == 0
    assert capsys.readouterr().out.strip().endswith(": valid")
    bad = tmp_path / "bad.yaml"
    bad.write_text(TEMPLATE.read_text().replace("rule: budget", "rule: budgett"))
    assert main(["sheet", "validate", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "1 problem" in out and "chunk_rule.rule: expected one of budget" in out
    assert main(["sheet", "validate", str(bad), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["problems"][0]["path"] == "chunk_rule.rule"


def test_run_command_replays_a_sheet_and_decides_against_a_baseline(capsys):
    demo = ROOT / "assignments" / "lesson6" / "demo" / "sheets"
    assert main(["sheet", "run", str(demo / "R42.yaml"), "--baseline", str(demo / "R41.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["figures"]["seeds"] == [24, 25, 26, 27]              # the sheet's paired seeds
    assert out["workload"].endswith("incident.scenario.yaml")        # the sheet's workload file
    assert out["figures"]["violations"] == {"broken_promise": 4, "over_commit": 7}
    assert out["baseline"]["decision"] == "rollback"
    assert out["baseline"]["new_violations"] == {"broken_promise": [0, 4], "over_commit": [0, 7]}
    assert out["baseline"]["figures"]["classes"]["interactive"]["attainment"] == 0.9011


@pytest.fixture
def drawn(monkeypatch):
    """The plots ``sheet run --plot`` draws, as data (they are still written)."""
    from grader.course import plots
    seen, real = [], plots.save_plot
    monkeypatch.setattr(plots, "save_plot", lambda plot, path: seen.append(plot) or real(plot, path))
    return seen


def test_run_command_draws_the_figures_against_the_baseline(tmp_path, capsys, drawn):
    demo = ROOT / "assignments" / "lesson6" / "demo" / "sheets"
    png = tmp_path / "release.png"
    assert main(["sheet", "run", str(demo / "R42.yaml"), "--baseline", str(demo / "R41.yaml"), "--json",
                 "--plot", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plot"] == str(png) and png.read_bytes()[:4] == b"\x89PNG"
    (plot,) = drawn
    mine, base = out["figures"], out["baseline"]["figures"]
    assert plot.title == "R42.yaml against R41.yaml (baseline)\nlesson 5's rule decides: rollback"
    assert plot.captions == tuple(out["baseline"]["reasons"]) and plot.warnings == ()
    goodput, attainment, violations = plot.panels
    assert goodput.bars.categories == ("seed 24", "seed 25", "seed 26", "seed 27")
    series = dict(goodput.bars.series)
    for name, figures in (("R41.yaml (baseline)", base), ("R42.yaml", mine)):
        assert sum(series[name]) / 4 == pytest.approx(figures["goodput_rps"], abs=1e-4)
    assert attainment.bars.categories == ("batch", "interactive")
    assert dict(attainment.bars.series) == {
        name: tuple(100 * f["classes"][c]["attainment"] for c in ("batch", "interactive"))
        for name, f in (("R41.yaml (baseline)", base), ("R42.yaml", mine))}
    assert violations.bars.categories == ("broken promise", "over commit")
    assert dict(violations.bars.series) == {"R41.yaml (baseline)": (0.0, 0.0), "R42.yaml": (4.0, 7.0)}


def test_run_command_refuses_a_plot_it_cannot_write(tmp_path, capsys):
    assert main(["sheet", "run", str(TEMPLATE), "--plot", str(tmp_path / "x.pdf")]) == 2
    assert "ending in .png" in capsys.readouterr().err


def test_run_command_on_the_template_uses_its_own_workload_and_machine(capsys):
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4,5"]) == 0
    out = capsys.readouterr().out
    assert "lesson5/public/release.yaml" in out and "(seeds 4, 5)" in out and "violations: none" in out


def test_run_command_refuses_an_invalid_sheet(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("chunk_rule: {rule: budget}\n")
    assert main(["sheet", "run", str(bad)]) == 2
    assert "line 1: chunk_rule.gap_budget_s: missing key (required)" in capsys.readouterr().out
