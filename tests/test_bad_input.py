"""Bad input from people: each is one line on stderr naming the file and the field, exit 2.

Instructors' files (rubrics, workloads, the secret, the gradebook URL) and learners'
files (empty, binary, corrupt notebooks) are broken on purpose in a copy of the course;
nothing is graded and nothing crashes.
"""
import os

import pytest

from conftest import ROOT, refused
from grader.engine.errors import InputError

REF = ROOT / "reference" / "solutions" / "lesson1.py"


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "course.secret"
    path.write_text("class of 2026, 4c1f9e27\n")
    return path


def edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


# ---------------------------------------------------------------------------- probe files

@pytest.mark.parametrize("lesson, file, old, new, says", [
    ("lesson2", "probes.yaml", "    ledger: {total_pages: 640", "    ledgr: {total_pages: 640", "missing key 'ledger'"),
    ("lesson1", "public.yaml", "prompt_tokens: 512,", "prompt_tokens: ,", "expected a number; got nothing"),
    ("lesson1", "public.yaml", "prompt_tokens: 512,", "prompt_tokens: lots,", "expected an integer; got 'lots'"),
])
def test_a_broken_probe_file_speaks_yaml(course, capsys, lesson, file, old, new, says):
    edit(course / "assignments" / lesson / file, old, new)
    err = refused(capsys, "--course", course, "check", lesson, "--submission", REF)
    assert file in err and says in err
    assert not any(word in err for word in ("NoneType", "KeyError", "TypeError", "ValueError", "int()"))


# ---------------------------------------------------------------------------- rubrics

def test_malformed_rubric_yaml_names_the_file_and_line(course, capsys):
    rubric = course / "rubrics" / "lesson1.yaml"
    edit(rubric, "  - id: pool-pages", "  - id: [pool-pages")
    err = refused(capsys, "--course", course, "check", "lesson1", "--submission", REF)
    assert str(rubric) in err and "not valid YAML" in err and "line " in err


@pytest.mark.parametrize("old,new,field", [
    ("    points: 2\n", "    points: -2\n", "criteria[0].points"),
    ("    visibility: both\n", "    visibility: sometimes\n", "criteria[0].visibility"),
    ("    credit: {rule: linear, floor: 0.5, target: 1.0}\n",
     "    credit: {rule: linear, floor: 0.9, target: 0.5}\n", "criteria[0].credit"),
    ("    check: lesson1.kv_bytes\n", "    check: lesson1.no_such_check\n", "criteria[0].check"),
    ("  - id: pool-pages", "  - id: kv-bytes", "criteria[1].id"),
    ("version: 1\n", "version: one\n", "version"),
    ("lesson: lesson1\n", "lesson: lesson2\n", "lesson: expected 'lesson1', this file's lesson; got 'lesson2'"),
    # A credit is one of two shapes told apart by its rule: the message is the chosen shape's.
    ("    credit: {rule: linear, floor: 0.5, target: 1.0}\n", "    credit: {rule: linear, target: 1.0}\n",
     "criteria[0].credit.floor: missing key (required)"),
    ("    credit: {rule: linear, floor: 0.5, target: 1.0}\n",
     "    credit: {rule: linear, floor: 0.5, target: 1.0, cap: 2}\n",
     "criteria[0].credit.cap: unknown key 'cap' (known here: floor, rule, target)"),
    ("    credit: {rule: linear, floor: 0.5, target: 1.0}\n", "    credit: {rule: linar, floor: 0.5, target: 1.0}\n",
     "criteria[0].credit.rule: expected one of all_or_nothing, linear; got a string 'linar'"),
    ("    credit: {rule: linear, floor: 0.5, target: 1.0}\n", "    credit: linear\n",
     "criteria[0].credit: expected a mapping; got a string 'linear'"),
])
def test_rubric_that_breaks_the_schema_names_the_field(course, capsys, old, new, field):
    rubric = course / "rubrics" / "lesson1.yaml"
    edit(rubric, old, new)
    err = refused(capsys, "--course", course, "check", "lesson1", "--submission", REF)
    text = rubric.read_text()
    line = text[:text.rindex(new)].count("\n") + 1 + new.startswith("\n")      # the edited line
    assert f"{rubric}: line {line}: {field}" in err


# "line {}": the line of the params the edit leaves, counted in the rubric as it stands (its
# header comment may grow), so the message must point at the edited line itself.
@pytest.mark.parametrize("old, new, says", [
    ("params: {share: 0.95}", "params: {shar: 0.95}",
     "line {}: criteria[1].params.shar: lesson3.progress has no parameter 'shar' (known: share)"),
    ("params: {share: 0.95}", "params: {share: high}",
     "line {}: criteria[1].params.share: expected a number from 0 to 1; got a string 'high'"),
    ("params: {percentile: 99}", "params: {percentile: 200}",
     "line {}: criteria[4].params.percentile: expected a number from 0 to 100; got an integer 200"),
    ("    check: lesson3.page_aligned\n", "    check: lesson3.page_aligned\n    params: {share: 0.5}\n",
     "line {}: criteria[2].params.share: lesson3.page_aligned has no parameter 'share' (it takes none)"),
], ids=["misspelt", "text", "out-of-bounds", "check-takes-none"])
def test_a_criterions_params_are_the_ones_its_check_reads(course, capsys, old, new, says):
    """A misspelt parameter graded with the default and said nothing; a wrong one crashed
    the grade with a ValueError from deep inside the check."""
    rubric = course / "rubrics" / "lesson3.yaml"
    text = rubric.read_text()
    # The params line is where ``old`` starts, or the line after it when the edit adds one.
    says = says.format(text[:text.index(old)].count("\n") + 1 + new.startswith(old))
    edit(rubric, old, new)
    err = refused(capsys, "--course", course, "check", "lesson3",
                  "--submission", ROOT / "reference" / "solutions" / "lesson3.py")
    assert f"{rubric}: {says}" in err, err


def test_non_finite_numbers_in_a_rubric(course, capsys):
    rubric = course / "rubrics" / "lesson1.yaml"
    edit(rubric, "    points: 2\n", "    points: .nan\n")      # JSON Schema bounds let NaN pass
    err = refused(capsys, "--course", course, "check", "lesson1", "--submission", REF)
    assert "criteria[0].points: must be a finite number" in err


# Whether a loader can go 2,000 levels deep differs between builds of libyaml (CI's could,
# and the schema check's repr then overflowed the stack), so each case runs under the
# parser this PyYAML reads course files with (libyaml where it was built with it) and under
# the pure one.
@pytest.fixture(params=["as-built", "pure"])
def loader(request, monkeypatch):
    from grader.engine import layout
    monkeypatch.setattr(layout, "_FAST_LOADER", layout._FAST_LOADER
                        if request.param == "as-built" else None)
    return request.param


@pytest.mark.parametrize("levels", [100, 2000])
def test_deep_nesting_in_a_rubric_is_refused_by_every_loader(course, capsys, loader, levels):
    rubric = course / "rubrics" / "lesson1.yaml"
    edit(rubric, "version: 1\n", f"version: 1\nextra: {'[' * levels}{']' * levels}\n")
    err = refused(capsys, "--course", course, "check", "lesson1", "--submission", REF)
    assert f"{rubric}: not valid YAML (nested more than 64 levels deep)" in err


@pytest.mark.parametrize("body, ok", [
    ("a: " + "[" * 63 + "1" + "]" * 63, True),             # 64 levels below the top: the bound
    ("a: " + "[" * 64 + "1" + "]" * 64, False),
    ("a: " + "{b: " * 63 + "1" + "}" * 63, True),
    ("a: " + "{b: " * 64 + "1" + "}" * 64, False),
], ids=["lists-at-the-bound", "lists-past-it", "mappings-at-the-bound", "mappings-past-it"])
def test_the_nesting_bound_counts_levels_exactly(tmp_path, loader, body, ok):
    from grader.engine.layout import read_yaml
    path = tmp_path / "deep.yaml"
    path.write_text(body + "\n")
    if ok:
        assert read_yaml(path)["a"] is not None
    else:
        with pytest.raises(InputError, match="nested more than 64 levels deep"):
            read_yaml(path)


@pytest.mark.parametrize("body", [
    "a: &x [1, *x]\n",                                      # a cycle
    "a: &x {b: 1}\nc: *x\n",                                # shared
    "a: &a [1, 2]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n",   # a small alias bomb
], ids=["cycle", "shared", "bomb"])
def test_a_course_file_that_repeats_a_list_or_mapping_by_alias_is_refused(tmp_path, loader, body):
    from grader.engine.layout import read_yaml
    path = tmp_path / "alias.yaml"
    path.write_text(body)
    with pytest.raises(InputError, match=r"repeated by a YAML alias \(\*name\): not allowed"):
        read_yaml(path)
    path.write_text("a: &x 1\nb: *x\n")           # a scalar repeated is harmless: allowed
    assert read_yaml(path) == {"a": 1, "b": 1}


@pytest.mark.parametrize("body, line, key", [
    ("a: 1\nb: 2\na: 3\n", 3, "'a' (first at line 1)"),
    ("top:\n  points: 2\n  title: t\n  points: 20\n", 4, "'points' (first at line 2)"),
    ("- {x: 1, x: 2}\n", 1, "'x' (first at line 1)"),
], ids=["top", "nested", "flow"])
def test_a_key_repeated_in_a_course_file_is_refused_by_every_loader(tmp_path, loader, body, line, key):
    # PyYAML keeps the last of two equal keys: a rubric's `points: 2` pasted again as
    # `points: 20` further down would grade with 20 and say nothing.
    from grader.engine.layout import read_yaml
    path = tmp_path / "twice.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as raised:
        read_yaml(path)
    assert str(raised.value) == f"{path}: line {line}: not valid YAML (duplicate key {key})"


def test_a_rubric_with_a_repeated_key_is_refused_naming_its_line(course, capsys):
    rubric = course / "rubrics" / "lesson1.yaml"
    edit(rubric, "    points: 2\n", "    points: 2\n    points: 20\n")
    err = refused(capsys, "--course", course, "check", "lesson1", "--submission", REF)
    text = rubric.read_text()
    line = text[:text.index("    points: 20")].count("\n") + 1
    assert f"{rubric}: line {line}: not valid YAML (duplicate key 'points' (first at line {line - 1}))" in err


def test_course_files_read_as_the_pure_python_loader_reads_them():
    # read_yaml parses with libyaml where PyYAML has it: the values must be the pure
    # loader's for every YAML file the course ships (the errors are the pure loader's by
    # construction: a file libyaml refuses is read again by it).
    import yaml
    from grader.engine.layout import read_yaml
    files = sorted((ROOT / "assignments").rglob("*.yaml")) + sorted((ROOT / "rubrics").glob("*.yaml"))
    assert len(files) > 20
    for path in files:
        assert read_yaml(path) == yaml.safe_load(path.read_text(encoding="utf-8")), path


# ---------------------------------------------------------------------------- workloads

@pytest.mark.parametrize("old,new,field", [
    ("prompt: {dist: lognormal, median: 384, sigma: 0.7, min: 16, max: 4096}",
     "prompt: {dist: uniform, min: 4096, max: 16}", "prompt.min"),
    ("arrival: {process: gamma, rate: 25.0, cv: 4.0}",
     "arrival: {process: gamma, rate: -25.0, cv: 4.0}", "arrival.rate"),
    ("requests: 100", "requests: 0", "requests"),
    ("  - {name: interactive, weight: 0.7, ttft_s: 2.0, gap_s: 0.2}",
     "  - {name: interactive, weight: 0.7, ttft_s: .nan, gap_s: 0.2}", "classes[0].ttft_s"),
])
def test_workload_with_impossible_parameters_names_the_field(course, capsys, old, new, field):
    workload = course / "assignments" / "lesson2" / "public" / "bursts.yaml"
    edit(workload, old, new)
    err = refused(capsys, "--course", course, "check", "lesson2",
                  "--submission", ROOT / "reference" / "solutions" / "lesson2.py")
    text = workload.read_text()
    line = text[:text.index(new)].count("\n") + 1                # the edited line
    assert f"{workload}:{line}: {field}" in err


@pytest.mark.parametrize("file, old, new, says", [
    ("assignments/lesson2/public/heavy-load.scenario.yaml", "max_running: 128}",
     "max_running: 128, cots: {step_fixed: 0.01}}",
     "worker.cots: unknown key (known here: name, device_bytes, reserved_bytes, page_tokens, "
     "max_running, cost)"),
    ("assignments/lesson1/public.yaml", "layers:", "layer: 3, layers:",
     "models.gqa-8b-bf16.layer: unknown key (known here: name, layers, "),
], ids=["worker-in-a-scenario", "model-in-lesson1-probes"])
def test_a_misspelt_model_or_worker_field_is_refused_not_left_at_its_default(course, capsys, file, old,
                                                                             new, says):
    """`cots:` for `cost:` ran the scenario on the default cost model and said nothing."""
    path = course / file
    edit(path, old, new)
    lesson = file.split("/")[1]
    err = refused(capsys, "--course", course, "check", lesson,
                  "--submission", ROOT / "reference" / "solutions" / f"{lesson}.py")
    assert err.startswith(f"grader: {path}: {says}"), err


# ---------------------------------------------------------------------------- hidden families

@pytest.mark.parametrize("old, new, says", [
    ("families:\n", "famlies:\n", "line 7: famlies: unknown key 'famlies' (known here: families)"),
    ("  - name: heavy-load\n", "  - heavy-load\n  - name: x\n", "line 7: families[0]: expected a mapping; got a string 'heavy-load'"),
    ("    instances: 1\n", "    instances: 0\n", "line 9: families[0].instances: expected an integer >= 1; got 0"),
    ("    instances: 1\n", "    instances: two\n", "line 9: families[0].instances: expected an integer >= 1; got a string 'two'"),
    ("    instances: 1\n", "    instnces: 1\n", "line 9: families[0].instnces: unknown key 'instnces' (known here: name, base, instances, vary)"),
    ("    base: ../../../assignments/lesson2/public/heavy-load.scenario.yaml\n", "",
     "line 7: families[0].base: missing key (required)"),
    ("heavy-load.scenario.yaml", "heavy.scenario.yaml", "line 8: families[0].base: no such scenario file"),
    ("      requests: [200, 300]\n", "      requests: [300, 200]\n", "line 11: families[0].vary.requests: low 300 is above high 200"),
    ("      requests: [200, 300]\n", "      requests: 250\n", "line 11: families[0].vary.requests: expected a list; got an integer 250"),
    ("worker.device_bytes: [20468203520, 21005074432]", "worker.device_byte: [20468203520, 21005074432]",
     "line 13: families[0].vary.worker.device_byte: 'device_byte' is not a worker field"),
    ("  - name: long-outputs\n", "  - name: heavy-load\n",
     "line 14: families[1].name: a second family named 'heavy-load'"),
    ("      requests: [200, 300]\n", "      requests: [200, 300]\n      sheet.chunk_rule.budget: [0.1, 0.2]\n",
     "line 12: families[0].vary.sheet.chunk_rule.budget: not a knob of chunk_rule (known: rule, "),
], ids=["top-typo", "not-a-mapping", "zero-instances", "instances-text", "key-typo", "no-base",
        "base-missing", "low-above-high", "bounds-not-a-list", "worker-field-typo", "name-twice",
        "sheet-knob-typo"])
def test_a_broken_hidden_families_file_names_its_line_and_field(course, old, new, says):
    """An instructor's families file: each mistake is one line naming the file, the line
    and the place, not a KeyError, an AttributeError or a silently ignored typo."""
    from grader.course.scenario import hidden_scenarios
    from grader.engine.layout import FAMILIES, find_course
    path = course / "grader" / "instructor" / "families" / "lesson2.yaml"
    path.parent.mkdir(parents=True)
    path.write_text((FAMILIES / "lesson2.yaml").read_text())
    edit(path, old, new)
    with pytest.raises(InputError) as raised:
        hidden_scenarios(find_course(str(course)), "lesson2", b"class of 2026", path)
    assert str(raised.value).startswith(f"{path}: {says}"), raised.value


def test_an_emptied_families_file_is_refused_not_graded_on_public_cases_alone(course):
    from grader.course.scenario import hidden_scenarios
    from grader.engine.layout import find_course
    path = course / "families.yaml"
    for body, says in (("families: []\n", "line 1: families: expected at least one family"),
                       ("", "families: missing key (required)")):
        path.write_text(body)
        with pytest.raises(InputError) as raised:
            hidden_scenarios(find_course(str(course)), "lesson2", b"class of 2026", path)
        assert str(raised.value).startswith(f"{path}: {says}"), raised.value


@pytest.mark.parametrize("body, says", [
    ("", "worker.yaml: models: missing key (required)"),
    ("- a80\n", "worker.yaml: line 1: (top level): expected a mapping; got a list"),
    ("models: {}\nworkers: []\n", "worker.yaml: line 2: workers: expected a mapping; got a list"),
    ("models: {}\nworkers: {}\nmachines: {}\n", "worker.yaml: line 3: machines: unknown key 'machines'"),
    ("models: {}\nworkers: {}\n", "worker.yaml: models: unknown model 'gqa-8b-bf16' (known: )"),
])
def test_a_broken_worker_file_names_the_file_and_field(course, capsys, body, says):
    (course / "assignments" / "worker.yaml").write_text(body)
    err = refused(capsys, "--course", course, "experiment", "prefill-deadline")
    assert f"{course / 'assignments' / says}" in err, err


@pytest.mark.parametrize("old, new, says", [
    ("  request_contract: {enforce:", "  request_contrat: {enforce:",
     "line 10: sheet.request_contrat: not a section with knobs (known: request_contract, "),
    ("{enforce: [", "{enfroce: [", "line 10: sheet.request_contract.enfroce: not a knob of "
                                   "request_contract (known: enforce, reasons)"),
    ("[empty_prompt, no_output_budget", "[empty_promt, no_output_budget",
     "line 10: sheet.request_contract.enforce: expected a list of contract rules from empty_prompt, "),
    ("  request_contract: {enforce: [empty_prompt, no_output_budget, over_max_context]}",
     "  chunk_rule: {rule: fxed}", "line 10: sheet.chunk_rule.rule: expected one of budget, "
                                   "per_token_only, fixed; got 'fxed'"),
    ("device_bytes: 19712MiB", "device_bytes: 19712 MB",
     "worker.device_bytes: '19712 MB' is a decimal unit; write 19712MiB"),
    ("\nsheet:\n", "\nshet:\n", "line 10: shet: unknown key 'shet' (known here: name, model, worker, "
                                 "sheet, workload)"),
], ids=["section", "knob", "contract-rule", "choice", "units", "top-level"])
def test_a_scenario_whose_sheet_misspells_a_knob_is_refused_not_run_on_the_default(course, capsys,
                                                                                   old, new, says):
    """The knobs' defaults change nothing: a misspelt section, knob or value graded the
    scenario under the default design and said nothing."""
    path = course / "assignments" / "lesson2" / "public" / "heavy-load.scenario.yaml"
    edit(path, old, new)
    err = refused(capsys, "--course", course, "check", "lesson2",
                  "--submission", ROOT / "reference" / "solutions" / "lesson2.py")
    assert err.startswith(f"grader: {path}: {says}"), err


def test_a_release_suite_takes_a_suites_keys_and_no_other(course, capsys):
    path = course / "assignments" / "lesson5" / "public" / "release.suite.yaml"
    edit(path, "\nseeds:", "\nseed:")
    err = refused(capsys, "--course", course, "check", "lesson5",
                  "--submission", ROOT / "reference" / "solutions" / "lesson5.py")
    assert err.startswith(f"grader: {path}: line 12: seed: unknown key 'seed' (known here: name, model, "
                          "worker, sheet, workload, seeds, rule, candidates, expect)"), err


@pytest.mark.parametrize("lesson,public_file", [
    ("lesson1", "public.yaml"), ("lesson2", "probes.yaml"), ("lesson3", "public/probes.yaml"),
    ("lesson4", "probes.yaml"), ("lesson5", "public/records.yaml")])
def test_a_broken_public_file_of_any_lesson_is_one_line_naming_it(course, capsys, lesson, public_file):
    path = course / "assignments" / lesson / public_file
    path.write_text("probes: [1, 2\n")
    err = refused(capsys, "--course", course, "check", lesson,
                  "--submission", ROOT / "reference" / "solutions" / f"{lesson}.py")
    assert f"{path}: line 2: not valid YAML" in err
    path.unlink()
    assert f"{path}: no such file" in refused(capsys, "--course", course, "check", lesson, "--submission",
                                              ROOT / "reference" / "solutions" / f"{lesson}.py")


@pytest.mark.parametrize("lesson, public_file, first", [
    ("lesson1", "public.yaml", "models"), ("lesson2", "probes.yaml", "probes"),
    ("lesson3", "public/probes.yaml", "probes"), ("lesson4", "probes.yaml", "publishable"),
    ("lesson5", "public/records.yaml", "records")])
def test_an_emptied_or_misshapen_public_file_is_refused_not_graded_on_nothing(course, capsys, lesson,
                                                                               public_file, first):
    """An emptied probe file graded every criterion on no case (0 points for everyone, the
    reference included) and a list where the mapping belongs named only the folder."""
    path = course / "assignments" / lesson / public_file
    solution = ROOT / "reference" / "solutions" / f"{lesson}.py"
    for body, says in (("", f"{first}: missing key (required)"),
                       ("- 1\n", "line 1: (top level): expected a mapping; got a list"),
                       (f"{first}: []\n", f"line 1: {first}: expected a list of at least 1 item; got 0"),
                       (f"{first}: 3\n", f"line 1: {first}: expected a list; got an integer 3"),
                       (f"{first}: [1]\nprobez: []\n", "line 2: probez: unknown key 'probez'")):
        path.write_text(body)
        err = refused(capsys, "--course", course, "check", lesson, "--submission", solution)
        assert f"grader: {path}: {says}" in err, (body, err)


@pytest.mark.parametrize("file, old, new, says", [
    ("demo.incident.yaml", "seed: 6\n", "", "line 5: seed: missing key (required)"),
    ("demo.incident.yaml", "evidence_seed: 24", "evidence_seed: soon", "line 9: evidence_seed: expected an integer; got a string 'soon'"),
    ("demo.incident.yaml", "faults: [stall_hidden, inactive_free]", "faults:", "line 7: faults: expected a list; got nothing"),
    ("baseline.sheet.yaml", "  rule: budget\n", "  rule: fast\n", "line 26: chunk_rule.rule: expected one of"),
])
def test_a_broken_lesson6_incident_file_speaks_yaml(course, capsys, tmp_path, file, old, new, says):
    path = course / "assignments" / "lesson6" / "public" / file
    edit(path, old, new)
    err = refused(capsys, "--course", course, "incident", "--demo", "--out", tmp_path / "demo")
    assert f"{path}: " in err and says in err, err
    assert "NoneType" not in err and "KeyError" not in err


@pytest.mark.parametrize("student, says", [
    ("submitted/alice/", "--student: 'submitted/alice/' is a path; give the student's id, their "
                         "folder's name alone (--student alice)"),
], ids=["a-path"])
def test_an_incident_for_a_student_id_no_grade_would_use_is_refused(tmp_path, capsys, secret, student, says):
    """Grading draws a student's incident from their folder's name: an incident drawn for
    a path would be handed out and never graded against (one for nothing, an empty
    --student, is refused with every empty value: tests/test_cli_arguments.py)."""
    out = tmp_path / "incident"
    err = refused(capsys, "incident", "--student", student, "--secret-file", secret, "--out", out)
    assert err.startswith(f"grader: {says}"), err
    assert not out.exists()


@pytest.mark.parametrize("args", [["incident", "--demo", "--out"], ["release", "--out"]])
def test_an_unwritable_out_folder_is_one_line_naming_it(tmp_path, capsys, args):
    blocker = tmp_path / "a-file"          # a file where a folder should be: unwritable even for root
    blocker.write_text("")
    target = blocker / "out"
    assert refused(capsys, *args, target).startswith(f"grader: {target}: cannot write")


def test_deeply_nested_workload(course, capsys):
    workload = course / "assignments" / "lesson2" / "public" / "bursts.yaml"
    workload.write_text("name: " + "[" * 2000 + "]" * 2000 + "\n")
    err = refused(capsys, "--course", course, "check", "lesson2",
                  "--submission", ROOT / "reference" / "solutions" / "lesson2.py")
    assert f"{workload}: invalid YAML: nested too deeply" in err


# ---------------------------------------------------------------------------- submissions

@pytest.mark.parametrize("name,body,message", [
    ("empty.py", b"  \n\n", "the submission is empty"),
    ("binary.py", b"\x7fELF\x02\x01\x01\x00\x00", "is a binary file"),
    ("latin1.py", "x = 'café'\n".encode("latin-1"), "is not UTF-8 text (byte 8)"),
    ("corrupt.ipynb", b'{"cells": [{"cell_type": "code", "source": ',   # cut off: where the JSON breaks
     "not a readable Jupyter notebook: its JSON breaks at line 1, column 44 (Expecting value)"),
    ("list.ipynb", b'[1, 2]', "cells: not a readable Jupyter notebook"),
    ("nocode.ipynb", b'{"cells": [{"cell_type": "markdown", "source": "hi"}]}',
     "cells: the notebook has no code cells"),
    ("exercise.txt", b"def f(): pass\n", "a submission is a .py file or a .ipynb notebook"),
])
def test_unusable_submission_is_refused_in_one_line(tmp_path, capsys, secret, name, body, message):
    path = tmp_path / name
    path.write_bytes(body)
    for args in (("check", "lesson1", "--submission", path),
                 ("grade", "lesson1", path, "--secret-file", secret)):
        err = refused(capsys, *args)
        assert f"{path}: {message}" in err


def test_a_submission_that_is_no_regular_file_or_too_large_is_refused_unread(tmp_path, capsys):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)                                # opening it to read would wait forever
    assert f"{fifo}: is not a regular file" in refused(capsys, "check", "lesson1", "--submission", fifo)
    huge = tmp_path / "huge.py"
    with open(huge, "wb") as f:                    # sparse: 4 GiB on paper, nothing on disk
        f.truncate(4 << 30)
    err = refused(capsys, "check", "lesson1", "--submission", huge)
    assert err == f"grader: {huge}: submission is larger than {1 << 20} bytes, the limit\n"
    # A notebook is mostly large by its saved outputs (a plot, a printout): the line says so.
    notebook = tmp_path / "plots.ipynb"
    with open(notebook, "wb") as f:
        f.truncate((1 << 20) + 1)
    err = refused(capsys, "check", "lesson1", "--submission", notebook)
    assert err == (f"grader: {notebook}: submission is larger than {1 << 20} bytes, the limit; a "
                   "notebook's saved outputs count: clear them (Jupyter: Edit > Clear Outputs of All "
                   "Cells), save, and hand it in again\n")


def test_a_workload_or_course_file_that_is_a_pipe_is_refused_unread(tmp_path, capsys):
    """sheet run --workload and every course YAML reader: a FIFO would block the read forever."""
    from grader.engine.layout import read_yaml
    fifo = tmp_path / "workload.yaml"
    os.mkfifo(fifo)
    sheet = ROOT / "assignments" / "design_sheet.yaml"
    err = refused(capsys, "sheet", "run", sheet, "--workload", fifo)
    assert f"{fifo}: is not a regular file" in err
    with pytest.raises(InputError, match=f"{fifo}: is not a regular file"):
        read_yaml(fifo)
    from reference.workload import WorkloadError, load_workload
    with pytest.raises(WorkloadError, match=f"{fifo}: is not a regular file"):
        load_workload(fifo)


def test_missing_lesson_and_missing_submission(capsys):
    assert "lesson9: no such lesson" in refused(capsys, "check", "lesson9")
    err = refused(capsys, "check", "lesson1", "--submission", "nope.py")
    assert "nope.py: no such submission file" in err


# ---------------------------------------------------------------------------- secret, gradebook

def test_secret_file_that_is_empty_or_unreadable(tmp_path, capsys):
    empty = tmp_path / "empty.secret"
    empty.write_bytes(b" \n\t")
    assert f"{empty}: the secret file is empty" in refused(
        capsys, "grade", "lesson1", REF, "--secret-file", empty)
    unreadable = empty / "inside"             # a path through a file: unreadable even for root
    assert f"{unreadable}: cannot read the secret file: Not a directory" in refused(
        capsys, "grade", "lesson1", REF, "--secret-file", unreadable)
    assert f"{tmp_path}: is a directory, not a secret file" in refused(
        capsys, "grade", "lesson1", REF, "--secret-file", tmp_path)


@pytest.mark.parametrize("command", [("grade", "lesson1", REF), ("incident", "--student", "alice"),
                                     ("gradescope", "lesson1")])
def test_a_secret_short_enough_to_guess_is_refused(command, tmp_path, capsys):
    # A learner knows their incident's id and holds the code that draws it from the secret.
    short = tmp_path / "course.secret"
    short.write_text("cs101 spring\n")
    out = tmp_path / "out"
    err = refused(capsys, *command, "--secret-file", short, "--out", out) if command[0] != "grade" \
        else refused(capsys, *command, "--secret-file", short)
    assert f"{short}: the secret is 12 bytes, short enough to be guessed (at least 16); " \
           "make a random one: head -c 32 /dev/urandom | base64 > course.secret" in err
    assert not out.exists() and short.read_text() == "cs101 spring\n"


@pytest.mark.parametrize("url,message", [
    ("nosuchdialect://x/y", "nosuchdialect://x/y: not a usable database URL"),
    ("sqlite:///{tmp}/missing/dir/grades.db",
     "{tmp}/missing/dir/grades.db: cannot make the gradebook: the folder {tmp}/missing/dir does not exist"),
])
def test_gradebook_that_cannot_be_opened(tmp_path, capsys, secret, url, message):
    url, message = url.format(tmp=tmp_path), message.format(tmp=tmp_path)
    err = refused(capsys, "grade", "lesson1", REF, "--secret-file", secret, "--gradebook", url)
    assert message in err
    assert not (tmp_path / "missing").exists()


def test_unknown_sandbox_mode_is_an_input_error(capsys, monkeypatch):
    monkeypatch.setenv("GRADER_SANDBOX", "docker")
    err = refused(capsys, "check", "lesson1", "--submission", REF)
    assert "GRADER_SANDBOX: unknown sandbox mode 'docker' (use auto, bwrap, process)" in err


@pytest.mark.parametrize("body, where", [
    ("wrong: [unclosed\n", "mutants.yaml"),
    ("- just a list\n", "mutants.yaml"),
    ("bad_one:\n  replace: [{old: x}]\n", "bad_one.replace"),
    ("bad_one: 3\n", "bad_one.replace"),
])
def test_a_broken_mutants_file_names_the_file_and_the_mutant(tmp_path, body, where):
    from grader.instructor.templates import mutations
    folder = tmp_path / "tests" / "submissions" / "lesson2"
    folder.mkdir(parents=True)
    (folder / "mutants.yaml").write_text(body)
    with pytest.raises(InputError) as raised:
        mutations(tmp_path, "lesson2")
    assert "mutants.yaml" in str(raised.value) and where in str(raised.value)


def test_outside_any_course_the_cli_says_where_to_run_it(tmp_path, monkeypatch, capsys):
    """Installed without -e, the package sits in site-packages: run outside the course, the
    grader must say so, not look for lessons in site-packages."""
    from grader.engine import layout
    site, elsewhere = tmp_path / "site-packages", tmp_path / "elsewhere" / "deeper"
    (site / "grader").mkdir(parents=True)
    elsewhere.mkdir(parents=True)
    monkeypatch.setattr(layout, "_PACKAGE_ROOT", site)
    monkeypatch.chdir(elsewhere)
    err = refused(capsys, "check", "lesson1")
    assert str(elsewhere) in err and "no course folder here or above" in err and "--course" in err
    # A course above the working directory, or the installed package's own folder, is found.
    (tmp_path / "elsewhere" / "rubrics").mkdir()
    (tmp_path / "elsewhere" / "assignments").mkdir()
    assert layout.find_course().root == tmp_path / "elsewhere"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(layout, "_PACKAGE_ROOT", ROOT)
    assert layout.find_course().root == ROOT
