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
                          schema_problems, unfilled, validate_sheet)
from grader.engine.oracle import reference_policy
from reference.shapes import CostModel
from reference.yaml_words import number_as_text

COURSE = find_course(str(ROOT))
TEMPLATE = ROOT / "assignments" / "design_sheet.yaml"
SCHEMA = json.loads((ROOT / "rubrics" / "design_sheet.schema.json").read_text())
R42 = ROOT / "assignments" / "lesson6" / "demo" / "sheets" / "R42.yaml"


def sheet() -> dict:
    return yaml.safe_load(TEMPLATE.read_text())


def with_record() -> dict:
    """The template with a change record: the demo's R41 and R42 entries."""
    data = sheet()
    data["change_record"] = yaml.safe_load(R42.read_text())["change_record"]
    return data


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


# Lesson 5's README points at its section file (checked above) instead of quoting it.
@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_readme_excerpt_uses_only_keys_of_the_schema(n):
    text = (ROOT / "assignments" / f"lesson{n}" / "README.md").read_text()
    part = text[text.index("## Your design sheet"):]
    excerpt = re.search(r"```yaml\n(.*?)```", part, re.S)
    assert excerpt, f"lesson {n}'s README quotes no part of its design sheet"
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
    other = with_record()
    other["cancellation"]["fence"] = "in other words"
    other["change_record"][0]["summary"] = "another summary"
    other["request_contract"]["pool_pages"] = 30720
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


def test_a_number_yaml_reads_as_text_is_shown_how_to_write_it(tmp_path):
    """YAML 1.1 reads 5e-2 and 1e+3 as strings (a float needs a decimal point and a signed
    exponent): the line says so, and how to write the number, or 'expected a number; got a
    string' reads as nonsense beside what the person wrote."""
    text = TEMPLATE.read_text()
    assert "\n  gap_budget_s: 0.1" in text
    path = tmp_path / "sheet.yaml"
    path.write_text(text.replace("\n  gap_budget_s: 0.1", "\n  gap_budget_s: 1e-1", 1))
    shown = [str(p) for p in load_sheet(path, COURSE)[1]]
    assert any("chunk_rule.gap_budget_s: expected a number" in s and
               "got a string '1e-1' (YAML reads 1e-1 as text; as a number write 0.1)" in s for s in shown), shown
    # Words that only look like numbers to Python are not numbers to explain.
    for word in ("nan", "inf", "fast"):
        assert number_as_text(word) == ""
    assert number_as_text("2e-9") == " (YAML reads 2e-9 as text; as a number write 2.0e-09)"
    assert number_as_text("1e+3") == " (YAML reads 1e+3 as text; as a number write 1000)"
    assert yaml.safe_load("a: 2.0e-09")["a"] == 2e-9        # what it says to write is a number


@pytest.mark.parametrize("written, read_as", [("010", "the octal number 8"), ("07", "the octal number 7"),
                                               ("4:05", "the base-60 number 245"),
                                               ("1:30.5", "the base-60 number 90.5")])
def test_a_number_yaml_reads_as_another_number_is_refused(tmp_path, written, read_as):
    # paired_seeds: [4, 5, 6, 010] replayed seed 8, and 4:05 was seed 245, silently.
    path = tmp_path / "sheet.yaml"
    text = TEMPLATE.read_text()
    assert "  paired_seeds: [4, 5, 6, 7]" in text
    path.write_text(text.replace("  paired_seeds: [4, 5, 6, 7]", f"  paired_seeds: [4, 5, 6, {written}]", 1))
    line = 1 + next(i for i, l in enumerate(path.read_text().split("\n"))
                    if l.startswith(f"  paired_seeds: [4, 5, 6, {written}]"))
    data, problems = load_sheet(path, COURSE)
    assert data is None and [str(p) for p in problems] == [
        f"line {line}, column 27: not valid YAML (YAML reads {written} as {read_as}; write the number in "
        f"decimal digits without a leading 0 or a colon, or quote it as text)"]
    # What it says to write reads as written; 0, 0.5 and 1_000 are decimal as they stand.
    assert read_yaml(b"a: [0, 0.5, 1_000, 'x', 10]")[0] == {"a": [0, 0.5, 1000, "x", 10]}


def test_what_the_schema_cannot_say_is_checked_after_it():
    data = with_record()
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
    assert "recorded twice" in by_path["change_record[2].release"]
    assert "not a key of the design sheet" in by_path["change_record[0].changes[0].diff[0].path"]


def test_worked_numbers_must_agree_with_the_model_and_worker():
    data = sheet()
    data["request_contract"]["pool_pages"] = 30000
    [p] = validate_sheet(data, COURSE)
    assert p.path == "request_contract.pool_pages"
    assert p.message == ("30000 does not agree with the model and worker in the section: it is fewer "
                         "pages of the pool than they give")


@pytest.mark.parametrize("change,path", [
    (lambda rc: rc.update(pool_pages=30000), "request_contract.pool_pages"),
    (lambda rc: rc["model"].update(kv_heads=32), "request_contract.kv_bytes_per_token"),
    (lambda rc: rc.update(page_tokens=32), "request_contract.page_bytes"),
], ids=["pool", "kv", "page"])
def test_a_wrong_size_is_named_without_the_size_it_should_be(change, path):
    # The validator said "(they give 30720)": the answer the sheet asks the learner to work
    # out with their own functions (docs/learners.md: "what is wrong, never the answer").
    data = worked_sheet()
    change(data["request_contract"])
    right = {"request_contract.pool_pages": 30720,                 # (80 - 16 - 4) GiB / 2 MiB
             "request_contract.kv_bytes_per_token": 2 * 32 * 32 * 128 * 2,
             "request_contract.page_bytes": 2 * 32 * 8 * 128 * 2 * 32}[path]
    message = problems_of(data)[path]
    assert str(right) not in message and "does not agree with the model and worker" in message


@pytest.mark.parametrize("pool,device,hinted", [
    (27906, "80GiB", True),      # lesson 1's README: 80 x 10^9 - 16 GiB - 4 GiB over 2 MiB pages
    (28610, "80GiB", True),      # every size read in decimal: (80 - 16 - 4) x 10^9 // 2 MiB
    (27905, "80GiB", False),
    (27906, 85899345920, False),  # the device given in bytes has no unit to misread
])
def test_a_pool_from_a_decimal_reading_of_a_size_says_so(pool, device, hinted):
    data = worked_sheet()
    data["request_contract"].update(pool_pages=pool)
    data["request_contract"]["worker"].update(device_bytes=device)
    message = problems_of(data)["request_contract.pool_pages"]
    assert ("read in decimal units (GB for GiB)" in message) is hinted, message


@pytest.mark.parametrize("page,unit", [(2048, "KiB"), (2, "MiB"), (131072, None)])
def test_a_page_in_another_unit_says_which(page, unit):
    data = worked_sheet()
    data["request_contract"].update(page_bytes=page)
    message = problems_of(data)["request_contract.page_bytes"]
    assert "it is fewer bytes of one page than they give" in message
    if unit:
        assert f"that is the page in {unit}, and the sheet counts bytes" in message
    else:                        # one token's KV: 2 x 32 x 8 x 128 x 2
        assert "that is one token's KV, and a page holds 16 tokens" in message


# ---- worked numbers: blank until worked, then checked by what they are --------------------
ANSWERS = ["request_contract.kv_bytes_per_token", "request_contract.page_bytes", "request_contract.pool_pages",
           "chunk_rule.worked.decode_only_s", "chunk_rule.worked.first_chunk_tokens",
           "chunk_rule.worked.late_chunk_tokens", "cancellation.key_encoding", "cancellation.fence",
           "release_criteria.ship_when", "change_record"]
COST = CostModel()


def largest_chunk(n, context, done, remaining, page, budget):
    """The largest candidate chunk whose step fits, by trying every candidate (0 if none)."""
    fits = [c for c in list(range(page, remaining, page)) + [remaining]
            if COST.step_time(tuple([context] * n), c, done) <= budget]
    return max(fits, default=0)


def worked_sheet(page=16, budget=0.1) -> dict:
    """The template with every worked number right, worked out here by hand and by trial."""
    data = with_record()
    rc, w = data["request_contract"], data["chunk_rule"]["worked"]
    rc["page_tokens"], data["chunk_rule"]["gap_budget_s"] = page, budget
    kv = 2 * 32 * 8 * 128 * 2                                   # K and V, layers, KV heads, dim, bf16
    free = (80 - 16 - 4) * 2 ** 30
    rc.update(kv_bytes_per_token=kv, page_bytes=kv * page, pool_pages=free // (kv * page))
    w.update(decode_only_s=0.004 + 4e-5 * 48 + 1e-7 * 48 * 4096,
             first_chunk_tokens=largest_chunk(48, 4096, 0, 16384, page, budget),
             late_chunk_tokens=largest_chunk(48, 4096, 12288, 4096, page, budget))
    data["cancellation"].update(key_encoding="my words", fence="my words")
    data["release_criteria"]["ship_when"] = "my words"
    return data


def problems_of(data) -> dict:
    return {p.path: p.message for p in validate_sheet(data, COURSE)}


def test_the_templates_leave_every_worked_answer_blank():
    data = sheet()
    assert validate_sheet(data, COURSE) == []
    assert [p.path for p in unfilled(data, [])] == ANSWERS
    for n in range(1, 7):
        section = yaml.safe_load((ROOT / "assignments" / f"lesson{n}" / "design_sheet.yaml").read_text())
        for p in unfilled(section, []):
            assert p.path in ANSWERS and "not yet filled" in p.message
    assert data["request_contract"]["kv_bytes_per_token"] is None
    assert data["chunk_rule"]["worked"]["first_chunk_tokens"] is None
    assert data["cancellation"]["key_encoding"] is None and data["change_record"] == []


def test_a_sheet_with_every_answer_right_validates_with_nothing_unfilled():
    data = worked_sheet()
    assert data["chunk_rule"]["worked"]["first_chunk_tokens"] == 1776          # by trial, above
    assert (data["request_contract"]["pool_pages"], data["chunk_rule"]["worked"]["late_chunk_tokens"]) == (30720, 1120)
    assert validate_sheet(data, COURSE) == [] and unfilled(data, []) == []
    other = worked_sheet(page=32, budget=0.05)                 # the section's own page and budget
    assert validate_sheet(other, COURSE) == []
    assert other["chunk_rule"]["worked"]["first_chunk_tokens"] % 32 == 0


@pytest.mark.parametrize("change,path,says", [
    # the four the issue names
    (lambda d: d["request_contract"].update(pool_pages=30721), "request_contract.pool_pages", "it is more pages of the pool than they give"),
    (lambda d: d["request_contract"]["model"].update(kv_heads=32), "request_contract.kv_bytes_per_token",
     "131072 does not agree with the model and worker in the section: it is fewer bytes of KV per token "
     "than they give"),
    (lambda d: d["request_contract"].update(pool_pages=30720.0), "request_contract.pool_pages",
     "expected an integer (or a blank: not yet filled); got a number 30720.0"),
    (lambda d: d["request_contract"].update(reasons=[]), "request_contract.reasons", "expected a list of at least 1 item; got 0"),
    # inconsistent fields
    (lambda d: d["request_contract"].update(page_bytes=2097151), "request_contract.page_bytes", "it is fewer bytes of one page"),
    (lambda d: d["request_contract"]["worker"].update(device_bytes="40GiB"), "request_contract.pool_pages",
     "it is more pages of the pool than they give"),
    (lambda d: d["request_contract"].update(page_tokens=32), "request_contract.page_bytes", "it is fewer bytes of one page"),
    (lambda d: d["request_contract"].update(reasons=["over_pool", "empty_prompt"]), "request_contract.reasons",
     "order: empty_prompt, over_pool"),
    # non-integers where a count belongs
    (lambda d: d["request_contract"]["model"].update(layers=32.0), "request_contract.model.layers", "expected an integer; got a number 32.0"),
    (lambda d: d["request_contract"].update(kv_bytes_per_token="131072"), "request_contract.kv_bytes_per_token",
     "expected an integer (or a blank: not yet filled); got a string '131072'"),
    (lambda d: d["chunk_rule"]["worked"].update(first_chunk_tokens=1776.0), "chunk_rule.worked.first_chunk_tokens",
     "expected an integer (or a blank: not yet filled); got a number 1776.0"),
    (lambda d: d["chunk_rule"]["worked"].update(decode_requests=48.5), "chunk_rule.worked.decode_requests",
     "expected an integer; got a number 48.5"),
    (lambda d: d["chunk_rule"]["worked"].update(late_chunk_tokens=True), "chunk_rule.worked.late_chunk_tokens",
     "got a boolean True"),
    # empty lists
    (lambda d: d["release_criteria"].update(slo_classes=[]), "release_criteria.slo_classes", "at least 1"),
    (lambda d: d["release_criteria"].update(rollback_when=[]), "release_criteria.rollback_when", "at least 1"),
    (lambda d: d["release_criteria"].update(paired_seeds=[4]), "release_criteria.paired_seeds", "at least 2 items"),
    (lambda d: d["change_record"][0].update(changes=[]), "change_record[0].changes", "at least 1"),
    (lambda d: d["change_record"][0]["changes"][0].update(diff=[]), "change_record[0].changes[0].diff", "at least 1"),
    # lesson 3's worked numbers, by what makes each the answer
    (lambda d: d["chunk_rule"]["worked"].update(decode_only_s=0.0256), "chunk_rule.worked.decode_only_s",
     "not the step of 48 requests decoding at context 4096 under the default cost model (to within "
     "0.01%: five significant figures, in seconds)"),
    # the right step, in milliseconds
    (lambda d: d["chunk_rule"]["worked"].update(decode_only_s=(0.004 + 4e-5 * 48 + 1e-7 * 48 * 4096) * 1000),
     "chunk_rule.worked.decode_only_s", ": that is the step in milliseconds, and the sheet takes seconds"),
    (lambda d: d["chunk_rule"]["worked"].update(first_chunk_tokens=1760), "chunk_rule.worked.first_chunk_tokens",
     "1760 is not the largest chunk that fits at the start of the prompt"),
    (lambda d: d["chunk_rule"]["worked"].update(first_chunk_tokens=1792), "chunk_rule.worked.first_chunk_tokens",
     "over the 0.1 s budget"),
    (lambda d: d["chunk_rule"]["worked"].update(late_chunk_tokens=1128), "chunk_rule.worked.late_chunk_tokens",
     "neither a whole number of 16-token pages nor the 4096 tokens"),
    (lambda d: d["chunk_rule"]["worked"].update(late_chunk_tokens=4112), "chunk_rule.worked.late_chunk_tokens",
     "more than the 4096 tokens left to prefill after 12288 prefilled tokens"),
    (lambda d: d["chunk_rule"]["worked"].update(late_chunk_tokens=1776), "chunk_rule.worked.late_chunk_tokens",
     "over the 0.1 s budget"),                 # the first chunk is not the late one: d counts
    (lambda d: d["chunk_rule"].update(gap_budget_s=0.05), "chunk_rule.worked.first_chunk_tokens",
     "over the 0.05 s budget"),                # the numbers are the section's own budget's
    (lambda d: d["chunk_rule"]["worked"].update(late_done=16384), "chunk_rule.worked.late_done",
     "leaves nothing of the 16384-token prompt"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_each_wrong_answer_is_a_problem_at_its_path(change, path, says):
    data = worked_sheet()
    change(data)
    found = problems_of(data)
    assert path in found and says in found[path], found


def test_a_chunk_answer_is_right_exactly_when_it_is_the_largest_that_fits():
    for done, remaining, key in ((0, 16384, "first_chunk_tokens"), (12288, 4096, "late_chunk_tokens")):
        right = largest_chunk(48, 4096, done, remaining, 16, 0.1)
        accepted = []
        for c in range(right - 70, right + 70):
            data = worked_sheet()
            data["chunk_rule"]["worked"][key] = c
            if not problems_of(data):
                accepted.append(c)
        assert accepted == [right]


@pytest.mark.parametrize("decode,context,prompt,budget,want", [
    (0, 1, 40, 0.1, 40),             # the whole prompt fits: the answer need not be page-aligned
    (256, 8192, 16384, 0.1, 0),      # the batch alone misses the budget: nothing fits
    (4, 100, 20, 0.0041, 0),         # a budget that leaves less than a page: nothing fits
])
def test_chunk_answers_at_the_edges(decode, context, prompt, budget, want):
    assert largest_chunk(decode, context, 0, prompt, 16, budget) == want
    data = worked_sheet()
    data["chunk_rule"]["gap_budget_s"] = budget
    w = data["chunk_rule"]["worked"]
    w.update(decode_requests=decode, decode_context=context, prompt_tokens=prompt, late_done=prompt - 1,
             decode_only_s=None, first_chunk_tokens=want, late_chunk_tokens=None)
    assert problems_of(data) == {}
    for wrong in {want + 16, want - 16, 16, 0} - {want}:
        if wrong >= 0:
            w["first_chunk_tokens"] = wrong
            assert "chunk_rule.worked.first_chunk_tokens" in problems_of(data), wrong


def test_a_chunk_is_checked_not_computed(monkeypatch):
    """The learner edition ships this check: it times the claim and its next candidate, and
    never searches for the answer."""
    calls, data = [], worked_sheet()
    real = CostModel.step_time_of
    monkeypatch.setattr(CostModel, "step_time_of", lambda self, *a: calls.append(a) or real(self, *a))
    assert validate_sheet(data, COURSE) == []
    assert len(calls) <= 1 + 2 * 3               # the decode-only step; each chunk, its next candidate


def test_a_chunk_rule_without_a_request_contract_uses_16_token_pages():
    data = worked_sheet()
    section = {"chunk_rule": data["chunk_rule"]}
    assert validate_sheet(section, COURSE) == []
    section["chunk_rule"]["worked"]["first_chunk_tokens"] += 8
    assert "16-token pages" in problems_of(section)["chunk_rule.worked.first_chunk_tokens"]


def test_blanks_are_listed_only_for_sections_without_problems():
    data = sheet()
    data["chunk_rule"]["rule"] = "budgett"
    problems = validate_sheet(data, COURSE)
    listed = [p.path for p in unfilled(data, problems)]
    assert not [p for p in listed if p.startswith("chunk_rule")]
    assert "request_contract.pool_pages" in listed and "cancellation.fence" in listed
    data = worked_sheet()
    data["cancellation"]["fence"] = ""                # an empty answer is a blank too
    assert [p.path for p in unfilled(data, [])] == ["cancellation.fence"]


# ---- hostile YAML is a problem, never an exception --------------------------------------
BOMB = b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"


@pytest.mark.parametrize("raw,needle", [
    (BOMB, "anchors"),
    (b"admission_ledger: {}\nadmission_ledger: {}\n", "duplicate key 'admission_ledger' (first at line 1)"),
    (b"x" * (MAX_BYTES + 1), "more than 262144 bytes, the limit"),
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


@pytest.mark.parametrize("text", ["", "# only comments, as lesson 6's submission stub\n\n"])
def test_a_sheet_with_nothing_in_it_says_where_to_start(tmp_path, text):
    """Lesson 6's stub design_sheet.yaml is comments only: validating it said '(top level):
    expected a mapping; got nothing', which names no next step."""
    (tmp_path / "design_sheet.yaml").write_text(text)
    data, problems = load_sheet(tmp_path / "design_sheet.yaml", COURSE)
    assert data is None and len(problems) == 1
    assert str(problems[0]) == ("design_sheet.yaml holds no sheet yet (nothing but comments): start "
                                "from assignments/design_sheet.yaml, or for an incident from your "
                                "bundle's sheets/R42.yaml")


def test_a_linked_or_missing_sheet_is_a_problem(tmp_path):
    (tmp_path / "secret.txt").write_text("instructor: secret\n")
    (tmp_path / "sheet.yaml").symlink_to(tmp_path / "secret.txt")
    assert "symbolic link" in load_sheet(tmp_path / "sheet.yaml", COURSE)[1][0].message
    assert "there is no" in load_sheet(tmp_path / "none.yaml", COURSE)[1][0].message


# ---- the commands --------------------------------------------------------------------------
def test_validate_command(tmp_path, capsys):
    filled = tmp_path / "filled.yaml"
    filled.write_text(yaml.safe_dump(worked_sheet()))
    assert main(["sheet", "validate", str(filled)]) == 0
    assert capsys.readouterr().out.strip().endswith(": valid")
    assert main(["sheet", "validate", str(TEMPLATE)]) == 0           # blanks are allowed
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": valid; 10 answers not yet filled")
    assert "  request_contract.pool_pages: not yet filled (pages in the pool" in out[3]
    assert main(["sheet", "validate", str(TEMPLATE), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is True and report["problems"] == []
    assert [u["path"] for u in report["unfilled"]] == ANSWERS
    bad = tmp_path / "bad.yaml"
    bad.write_text(TEMPLATE.read_text().replace("rule: budget", "rule: budgett"))
    assert main(["sheet", "validate", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "1 problem" in out and "chunk_rule.rule: expected one of budget" in out
    assert main(["sheet", "validate", str(bad), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["problems"][0]["path"] == "chunk_rule.rule"
    # The JSON names the line the text names, as run's worked_problems do: a script (an
    # editor's, say) points at the place without parsing the sentence.
    rule_line = 1 + next(i for i, l in enumerate(bad.read_text().splitlines())
                         if l.lstrip().startswith("rule: budgett"))
    assert report["problems"][0]["line"] == rule_line and f"line {rule_line}: chunk_rule.rule" in out


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
    # The class guard of the baseline's release rule (5 points below its attainment), drawn
    # over each class and named: interactive falls under it, which is why the rule rolls back.
    assert attainment.bars.limits == pytest.approx(
        tuple(100 * (base["classes"][c]["attainment"] - 0.05) for c in ("batch", "interactive")))
    assert attainment.bars.limits_label == "rollback below: baseline - 5 points"


def test_run_command_alone_says_what_it_draws_and_why_no_decision(tmp_path, drawn):
    assert main(["sheet", "run", str(TEMPLATE), "--plot", str(tmp_path / "alone.png")]) == 0
    (plot,) = drawn
    assert plot.title.startswith("design_sheet.yaml: goodput, SLO attainment and violations on seeds ")
    assert "no baseline, so no release decision" in plot.title
    assert plot.panels[1].bars.limits == ()          # no baseline: no rule to draw


def test_run_command_refuses_a_plot_it_cannot_write(tmp_path, capsys):
    assert main(["sheet", "run", str(TEMPLATE), "--plot", str(tmp_path / "x.pdf")]) == 2
    assert "ending in .png" in capsys.readouterr().err


@pytest.mark.parametrize("plot, says", [
    ("link.png", "link.png: is a symbolic link (to kept.yaml): the plot would be written over what it "
                 "points to; name a file of its own"),
    ("sheet.png", "sheet.png: is the sheet this command reads: name another file for the plot"),
    ("base.png", "base.png: is the baseline this command reads: name another file for the plot"),
    ("same.png", "same.png: is the baseline this command reads: name another file for the plot"),
])
def test_run_command_overwrites_nothing_but_the_plot_it_names(tmp_path, monkeypatch, capsys, plot, says):
    # --plot link.png once wrote the PNG over the sheet the link pointed to, and --plot of
    # the sheet itself replaced it with its own picture; every file is left as it was.
    monkeypatch.chdir(tmp_path)
    text = TEMPLATE.read_bytes()
    for name in ("kept.yaml", "sheet.png", "base.png"):
        (tmp_path / name).write_bytes(text)
    (tmp_path / "link.png").symlink_to("kept.yaml")
    (tmp_path / "same.png").hardlink_to(tmp_path / "base.png")
    assert main(["sheet", "run", "sheet.png", "--baseline", "base.png", "--seeds", "4,5", "--plot", plot]) == 2
    assert capsys.readouterr().err == f"grader: {says}\n"
    assert all((tmp_path / n).read_bytes() == text for n in ("kept.yaml", "sheet.png", "base.png"))


def test_an_experiment_plot_that_is_a_link_is_refused_before_it_runs(tmp_path, capsys):
    (tmp_path / "kept.py").write_text("x = 1\n")
    (tmp_path / "p.png").symlink_to(tmp_path / "kept.py")
    assert main(["experiment", "goodput", "--plot", str(tmp_path / "p.png")]) == 2
    assert "p.png: is a symbolic link (to " in capsys.readouterr().err
    assert (tmp_path / "kept.py").read_text() == "x = 1\n"


def test_run_command_on_the_template_uses_its_own_workload_and_machine(capsys):
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4,5"]) == 0
    out = capsys.readouterr().out
    assert "lesson5/public/release.yaml" in out and "(seeds 4, 5)" in out and "violations: none" in out


@pytest.mark.parametrize("seeds, says", [
    ("4,x", "expected seeds like 4,5,6,7; got '4,x'"),
    ("４,５", "expected seeds like 4,5,6,7; got '４,５'"),        # digits of another script
    ("4,-1", "a seed is an integer from 0 to 2147483647; got -1"),
    ("4,2147483648", "a seed is an integer from 0 to 2147483647; got 2147483648"),
    ("3,4,3", "seed 3 is given twice: paired seeds are distinct"),
    (",".join(map(str, range(33))), "at most 32 seeds; got 33"),
    (",".join(["7"] * 100_000), "at most 32 seeds; got 100000"),    # counted before it is searched
])
def test_run_command_takes_the_seeds_a_sheet_may_hold_and_no_others(capsys, seeds, says):
    # A seed given twice would count one run twice and narrow the noise band of the rule.
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", seeds]) == 2
    assert capsys.readouterr().err == f"grader: --seeds: {says}\n"


def test_one_seed_replays_but_decides_no_release(capsys):
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4"]) == 0
    assert "(seeds 4)" in capsys.readouterr().out
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4", "--baseline", str(TEMPLATE)]) == 2
    assert capsys.readouterr().err == ("grader: --seeds: a release decision (--baseline) pairs runs seed "
                                       "by seed and needs 2 to 32 seeds; got 1\n")


def test_the_seed_bounds_are_the_sheet_schemas():
    from grader.course import replay
    schema = json.loads((ROOT / "rubrics" / "design_sheet.schema.json").read_text())
    paired = schema["$defs"]["release_criteria"]["properties"]["paired_seeds"]
    assert (paired["minItems"], paired["maxItems"], paired["items"]["minimum"], paired["items"]["maximum"],
            paired["uniqueItems"]) == (replay.SEEDS_MIN, replay.SEEDS_MAX, 0, replay.SEED_MAX, True)
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", f"0,{replay.SEED_MAX}"]) == 0


def test_the_workloads_bounds_hold_for_the_sheets_overrides(tmp_path, capsys):
    # A rate of 1e-300 validated, then `sheet run` stopped on the workload file's own bound,
    # naming release.yaml "(with overrides)", not the sheet's line that set it.
    from reference.workload import MIN_RATE, SCHEMA_PATH
    own = SCHEMA["$defs"]["release_criteria"]["properties"]["workload"]["properties"]
    workload = json.loads(SCHEMA_PATH.read_text())["properties"]
    assert own["rate"]["minimum"] == MIN_RATE and "exclusiveMinimum" not in own["rate"]
    assert own["requests"]["minimum"] >= workload["requests"]["minimum"]
    assert own["requests"]["maximum"] <= workload["requests"]["maximum"]
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(TEMPLATE.read_text().replace("    rate: 7.0 ", "    rate: 1.0e-300 ", 1))
    assert main(["sheet", "run", str(tiny)]) == 2
    out = capsys.readouterr().out
    line = 1 + tiny.read_text().split("\n").index(next(l for l in tiny.read_text().split("\n") if "1.0e-300" in l))
    assert f"  line {line}: release_criteria.workload.rate: expected a number >= 1e-06; got 1e-300\n" in out


@pytest.mark.parametrize("edit", [
    ("    device_bytes: 80GiB", "    device_bytes: 1099511627776GiB"),     # 2**80 bytes
    ("    layers: 32", "    layers: 1"),          # with one KV head of 1: 64 bytes a page, a billion pages
])
def test_a_pool_the_worker_cannot_hold_is_a_problem_of_the_sheet(tmp_path, capsys, edit):
    # Valid by the schema, then `sheet run` ended in a MemoryError traceback: the worker keeps
    # an entry per page. Now validate names the field, and run stops before any replay.
    big = tmp_path / "big.yaml"
    text = TEMPLATE.read_text().replace(*edit, 1)
    big.write_text(text.replace("    head_dim: 128", "    head_dim: 1", 1).replace(
        "    kv_heads: 8 ", "    kv_heads: 1 ", 1) if "layers" in edit[1] else text)
    line = 1 + next(i for i, l in enumerate(big.read_text().split("\n")) if l.startswith("    device_bytes"))
    for command in ("validate", "run"):
        assert main(["sheet", command, str(big)]) == 2
        out = capsys.readouterr().out
        assert re.search(rf"\n  line {line}: request_contract\.worker\.device_bytes: the pool would hold "
                         r"[\d,]+ pages, more than the worker simulates \(1,048,576\)", out), out


@pytest.mark.parametrize("edit, left", [
    (("    reserved_bytes: 4GiB", "    reserved_bytes: 90GiB"), -(26 << 30)),
    (("    reserved_bytes: 4GiB", "    reserved_bytes: 68717379585"), 2097151),   # one byte short of a page
])
def test_a_pool_of_no_page_is_a_problem_of_the_sheet(tmp_path, capsys, edit, left):
    # Valid by the schema, and `sheet run` rejected all its requests and said nothing why.
    empty = tmp_path / "empty.yaml"
    assert edit[0] in TEMPLATE.read_text()
    empty.write_text(TEMPLATE.read_text().replace(*edit, 1))
    line = 1 + next(i for i, l in enumerate(empty.read_text().split("\n")) if l.startswith("    device_bytes"))
    assert main(["sheet", "validate", str(empty)]) == 2
    out = capsys.readouterr().out
    assert (f"\n  line {line}: request_contract.worker.device_bytes: the pool would hold no page: device_bytes "
            f"less the model's weight_bytes and reserved_bytes leaves {left:,} bytes, and one page is "
            f"2,097,152") in out, out


def test_a_scenario_whose_pool_the_worker_cannot_hold_is_refused_naming_it(tmp_path, capsys):
    source = ROOT / "assignments" / "lesson2" / "public"
    scenario = tmp_path / "huge.scenario.yaml"
    scenario.write_text((source / "bursts.scenario.yaml").read_text().replace(
        "device_bytes: 19712MiB", "device_bytes: 1099511627776GiB", 1))
    (tmp_path / "bursts.yaml").write_bytes((source / "bursts.yaml").read_bytes())
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4", "--workload", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"grader: {scenario}: worker: the pool would hold ") and err.count("\n") == 1


def test_a_replay_too_large_is_refused_before_it_runs(tmp_path, capsys):
    # requests: 100000 (the schema's bound then) replayed one seed in 2.5 minutes and 1.5 GB,
    # and by default eight such runs, with nothing said. Now one run is bounded by the
    # schema and all of them together by the replay, naming where the count comes from.
    from grader.course import replay
    own = SCHEMA["$defs"]["release_criteria"]["properties"]["workload"]["properties"]["requests"]
    assert own["maximum"] * 4 * 2 <= replay.MAX_REPLAYED_REQUESTS     # the default seeds, a baseline
    many = tmp_path / "many.yaml"
    many.write_text(TEMPLATE.read_text().replace("    requests: 80", "    requests: 10000", 1))
    seeds = ",".join(map(str, range(9)))
    assert main(["sheet", "run", str(many), "--seeds", seeds]) == 2
    assert capsys.readouterr().err == (
        f"grader: {many}: 10,000 requests (release_criteria.workload.requests) x 9 seeds x 1 (the sheet) "
        "is 90,000 requests to replay, more than 80,000: give fewer requests or fewer seeds (--seeds)\n")
    # A workload file may hold more requests than a sheet may ask for: the product bounds it too.
    source = ROOT / "assignments" / "lesson5" / "public" / "release.yaml"
    big = tmp_path / "big-release.yaml"
    text = source.read_text()
    assert re.search(r"(?m)^requests: \d+", text)
    big.write_text(re.sub(r"(?m)^requests: \d+", "requests: 50000", text, count=1))
    assert main(["sheet", "run", str(TEMPLATE), "--workload", str(big), "--seeds", "4,5",
                 "--baseline", str(TEMPLATE)]) == 2
    assert capsys.readouterr().err == (
        f"grader: {TEMPLATE}: 50,000 requests (the requests of {big}) x 2 seeds x 2 (the sheet and its "
        "baseline) is 200,000 requests to replay, more than 80,000: give fewer requests or fewer seeds "
        "(--seeds)\n")


def test_run_command_refuses_an_invalid_sheet(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("chunk_rule: {rule: budget}\n")
    assert main(["sheet", "run", str(bad)]) == 2
    assert "line 1: chunk_rule.gap_budget_s: missing key (required)" in capsys.readouterr().out


def test_a_wrong_worked_number_is_reported_but_does_not_stop_a_replay(tmp_path, capsys):
    """A worked number is the learner's arithmetic, which a replay never reads: validate
    still reports it (exit 2), run replays the sheet as if it were right and says which
    numbers are wrong, in its text and its JSON, for the sheet and for its baseline."""
    right, wrong = worked_sheet(), worked_sheet()
    wrong["chunk_rule"]["worked"]["first_chunk_tokens"] = 1760        # a candidate, not the largest
    wrong["request_contract"]["pool_pages"] = 30719
    files = {}
    for name, data in (("right", right), ("wrong", wrong)):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["sheet", "validate", str(files["wrong"])]) == 2
    assert "chunk_rule.worked.first_chunk_tokens" in capsys.readouterr().out
    assert main(["sheet", "validate", str(files["wrong"]), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["valid"] is False
    runs = {}
    for name in ("right", "wrong"):
        assert main(["sheet", "run", str(files[name]), "--seeds", "4,5", "--json"]) == 0
        runs[name] = json.loads(capsys.readouterr().out)
    assert runs["wrong"]["figures"] == runs["right"]["figures"] and runs["right"]["worked_problems"] == []
    assert sorted((p["file"], p["path"]) for p in runs["wrong"]["worked_problems"]) == [
        (str(files["wrong"]), "chunk_rule.worked.first_chunk_tokens"),
        (str(files["wrong"]), "request_contract.pool_pages")]
    assert main(["sheet", "run", str(files["right"]), "--seeds", "4,5", "--baseline", str(files["wrong"])]) == 0
    notes = [l for l in capsys.readouterr().out.splitlines() if l.startswith("note: ")]
    assert len(notes) == 2 and all(l.startswith(f"note: {files['wrong']}: line ") for l in notes)
    assert all(l.endswith("(a worked number: this replay does not read it; grader sheet validate lists "
                          "every problem)") for l in notes)
    # Anything else wrong still stops it, the worked numbers listed with it.
    wrong["chunk_rule"]["rule"] = "budgett"
    files["wrong"].write_text(yaml.safe_dump(wrong, sort_keys=False))
    assert main(["sheet", "run", str(files["wrong"]), "--seeds", "4,5"]) == 2
    assert "chunk_rule.rule: expected one of" in capsys.readouterr().out


def test_a_refused_baseline_names_the_problem_that_stops_it(tmp_path, capsys):
    """A baseline with a wrong worked number (listed first) and a knob the replay cannot
    take: the refusal names the knob, not the number the replay would have run past."""
    right, base = worked_sheet(), worked_sheet()
    base["request_contract"]["pool_pages"] += 1
    base["chunk_rule"]["min_chunk_tokens"] = 100         # not a whole number of 16-token pages
    files = {}
    for name, data in (("right", right), ("base", base)):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["sheet", "run", str(files["right"]), "--seeds", "4,5", "--baseline", str(files["base"])]) == 2
    said = capsys.readouterr().err.split("does not validate (", 1)[1]
    assert said.split(")", 1)[0].endswith("chunk_rule.min_chunk_tokens: 100 is not a whole number of "
                                          "16-token pages"), said


def test_a_lifted_contract_rule_lifts_the_specs_of_each_call():
    """The contract knobs lift a rule's limit on the specs it is asked with; the lifted specs
    are made once per pair of specs, so a call with other specs must see its own lifted."""
    from dataclasses import replace
    from worker_helpers import machine, request
    from reference.knobs import enforcing
    from reference.shapes import Verdict
    seen = []
    check = enforcing(lambda r, m, w: seen.append((r, m, w)) or Verdict(True, ""),
                      ("empty_prompt", "no_output_budget"))
    huge = 1 << 50
    pairs = [machine(64), machine(128, page_tokens=8, max_context=4096), machine(64)]
    view = request(0, 0.0, 10, 5).view()
    for model, worker in pairs + pairs[:1]:
        check(view, model, worker)
    # Worked out by hand: the tiny model keeps 2 * 1 * 1 * 64 * 2 = 256 bytes a token.
    for (model, worker), (r, m, w) in zip(pairs + pairs[:1], seen):
        assert m == replace(model, max_context=huge)
        assert w == replace(worker, device_bytes=worker.device_bytes + huge * worker.page_tokens * 256)
        assert (r.slo.ttft_s, r.slo.gap_s) == (float(huge), float(huge)) and r.id == view.id


def test_an_id_of_the_wrong_form_is_told_what_an_id_looks_like():
    """A diagnosis citing evidence as numbers, or a change in lower case, was told
    "'c4' does not have the expected form (^C[0-9]{1,3}$)": a regular expression, where a
    learner needs an example of the ids their bundle uses."""
    from grader.course.sheet import schema_path
    diagnosis = {"incident": "p1", "causes": [{"change": "c4", "mechanism": "reclaim_before_fence",
                                               "evidence": [10, "e15"],
                                               "fix": {"cancellation": {"release": "at_fence"}}}]}
    said = {p.path: p.message for p in schema_problems(diagnosis, schema_path(COURSE, "diagnosis.schema.json"))}
    assert said == {"causes[0].change": "'c4' is not of the expected form: write it like C1, C12",
                    "causes[0].evidence[0]": "expected a string like E1, E12; got an integer 10",
                    "causes[0].evidence[1]": "'e15' is not of the expected form: write it like E1, E12"}


def test_a_problem_of_the_whole_file_names_no_placeholder(tmp_path):
    # "diagnosis.yaml is not usable: (file): line 5, column 4: not valid YAML"
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    _, problems = load_sheet(bad, COURSE)
    assert [str(p) for p in problems] == ["line 2, column 1: not valid YAML (expected ',' or ']', "
                                          "but got '<stream end>')"]
    assert problems[0].path == "(file)"          # JSON still says where: the whole file
    _, problems = load_sheet(tmp_path / "absent.yaml", COURSE)
    assert [str(p) for p in problems] == ["there is no absent.yaml"]


def test_a_pattern_ends_where_the_text_ends_as_json_schema_means_it():
    """Python's re lets `$` match before a final newline, JSON Schema (ECMA-262) does not:
    'R41\\n' was a release id, and lesson 6 then said R43 rolls back to 'R41\\n', not the last
    good release, R41. Anchors in a character class or escaped stay as they are."""
    from grader.course.sheet import ecma_anchors
    sheet = yaml.safe_load((ROOT / "reference" / "solutions" / "lesson6" / "design_sheet.yaml").read_text())
    assert validate_sheet(sheet, COURSE) == []
    sheet["change_record"][-1]["rollback"]["to"] = "R41\n"
    sheet["change_record"][-1]["changes"][0]["id"] = "F1\n"
    by_path = {p.path: p.message for p in validate_sheet(sheet, COURSE)}
    assert by_path.keys() == {"change_record[2].rollback.to", "change_record[2].changes[0].id"}, by_path
    assert all("does not have the expected form" in m for m in by_path.values()), by_path
    assert ecma_anchors(r"^[$a]\$x$") == r"^[$a]\$x\Z"


def test_the_lines_of_many_problems_are_found_in_one_reading_of_the_file(monkeypatch):
    """Each problem's line was found by composing the whole YAML file again: a diagnosis of
    500 causes (245 KiB, under the size limit) had 1000 problems placed and kept the grader
    busy for half an hour. The lines are the same, read from one composition."""
    from grader.course.sheet import Problem, with_lines
    composed = []
    real = yaml.compose
    monkeypatch.setattr(yaml, "compose", lambda *a, **k: composed.append(1) or real(*a, **k))
    text = "causes:\n" + "".join(f"  - change: C{i}\n    evidence: [E1]\n" for i in range(200))
    problems = [Problem(f"causes[{i}].evidence", "bad") for i in range(200)]
    problems += [Problem("causes[3].missing", "absent"), Problem("(file)", "whole"), Problem("x", "y", line=7)]
    line = {p.path: p.line for p in with_lines(text.encode(), problems)}
    assert [line[f"causes[{i}].evidence"] for i in range(200)] == [3 + 2 * i for i in range(200)]
    # A key that is not there: the mapping it belongs in; the file's own and a placed one stay.
    assert [line["causes[3].missing"], line["(file)"], line["x"]] == [8, None, 7]
    assert len(composed) == 1


def test_a_sheets_problems_come_in_the_files_order(tmp_path):
    """Problems came by path (the schema's sorting): chunk_rule's line 74 before
    request_contract's line 47, so a learner reading them fixed the file bottom up."""
    text = (ROOT / "assignments" / "design_sheet.yaml").read_text()
    broken = (text.replace("\n  rule: budget ", "\n  rule: budgett", 1)
                  .replace("\n  page_bytes:                #", "\n  page_bytes: 2.0e6          #", 1))
    assert broken.count("budgett") == 1 and broken.count("2.0e6") == 1
    (tmp_path / "sheet.yaml").write_text(broken)
    _, problems = load_sheet(tmp_path / "sheet.yaml", find_course(str(ROOT)))
    assert {p.path for p in problems} == {"chunk_rule.rule", "request_contract.page_bytes"}
    lines = [p.line for p in problems]
    assert lines == sorted(lines) and None not in lines, problems
    # A diagnosis's causes too: by path, causes[10] came before causes[2].
    from grader.course.sheet import Problem, with_lines
    text = "causes:\n" + "".join(f"  - change: C{i}\n" for i in range(12))
    lined = with_lines(text.encode(), [Problem("causes[10].change", "a"), Problem("causes[2].change", "b")])
    assert [p.path for p in lined] == ["causes[2].change", "causes[10].change"]
