"""No learner-facing file hands over a graded function's algorithm (tests/pseudocode.py says
what that looks like): the lessons' READMEs, exercise stubs, design-sheet sections, public
YAML notes, rubric texts, the learner guide and the feedback of the lessons' grading
modules. The detectors are tested on planted examples of every form, from every lesson, so
that a new lesson's rule block is caught as well as today's."""
import pytest

import pseudocode as P
from conftest import ROOT

FILES = P.learner_files(ROOT)


def test_the_scan_reaches_every_kind_of_learner_file():
    names = {str(p.relative_to(ROOT)) for p in FILES}
    for n in range(1, 7):
        assert f"assignments/lesson{n}/README.md" in names
        assert f"assignments/lesson{n}/design_sheet.yaml" in names
    assert {f"assignments/lesson{n}/exercise.py" for n in range(1, 6)} <= names
    assert {"assignments/design_sheet.yaml", "assignments/lesson2/probes.yaml",
            "assignments/lesson5/public/records.yaml", "rubrics/lesson3.yaml",
            "grader/lessons/chunk_probes.py", "reference/shapes.py"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_learner_file_states_a_graded_algorithm(path):
    found = P.findings(P.fragments(path, ROOT))
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("path", sorted(ROOT.glob("assignments/lesson*/exercise.py")),
                         ids=lambda p: p.parent.name)
def test_a_stub_says_only_what_is_not_implemented(path):
    assert P.stub_messages(path) == []


# ---- the detectors find every form, in any lesson ------------------------------------------
def frag(text, kind="prose", worked=False):
    return P.Fragment("planted.md", 1, text, kind, worked)


PLANTED = {
    # a decision rule, in pseudo-code, a docstring, a table or a YAML note
    "comparison": ["if footprint > total_pages:                  reject",
                   "6. need <= available: return Admission(\"admit\", reserve, reason)",
                   "| `ok` | L finishes the prompt (L == `prefill_remaining`), or L > 0 and L ≥ `min_chunk_tokens` |",
                   "no token at all, or token_times[0] > D1         -> \"late_first_token\"",
                   "ship_when: gain >= min_gain and mean paired difference > band",
                   "Full of prompt tokens (`prompt_tokens == page_tokens`)",
                   "A gain is real only if `d̄ > band`",
                   "rejected when pages_for(prompt + max_new) > pool_pages"],
    # a formula of a graded answer over the inputs' names
    "arithmetic": ["need = reserve + (prefix_hit_pages - prefix_hit_active)",
                   "kv_bytes_per_token = 2 × layers × kv_heads × head_dim × dtype_bytes",
                   "A dense decoder. KV bytes per token = 2 x layers x kv_heads x head_dim x dtype_bytes.",
                   "| `pool_pages(model, worker)` | floor((device − weights − reserved) / page_bytes) |",
                   "c = (gap_budget_s − decode_only) / per_token",
                   "attainment = good / (requests − excluded)",
                   "`headroom` = capacity - reserved",
                   "D1 = arrival_s + ttft_s"],
    "closed-form": ["c = (−b + √(b² + 4a·slack)) / (2a)",
                    "the same value as 2·slack / (b + sqrt(b**2 + 4*a*slack))",
                    "Solve the quadratic for the chunk"],
    "method": ["binary search over page counts finds L in 17 steps",
               "write each field's length before it, or use json.dumps([scope, parent])",
               "length-prefixed scope and parent, hashed with blake2b",
               "use hashlib"],
    "transition": ["If step_in_flight is True, go to `cancelling` and release nothing.",
                   "`done` + release_pages -> 'done'"],
}
PLANTED_BLOCKS = [
    "def admit(request, ledger):\n    return Admission('wait', 0, '')",
    "reserve = footprint - request.prefix_hit_pages",
    "key = json.dumps([scope, parent_key, list(block_tokens)])",
    "-(-tokens // page_tokens)",
    "if ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done) <= ctx.gap_budget_s:\n    best = c",
    "f'{scope}|{parent}|{tokens}'",
]
# Worked calculations, the course's cost model, failure stories in words: all pass.
CLEAN = ["footprint = pages_for(140, 16) = 9 pages     (8 pages hold only 128 tokens)",
         "available     = 30 - 22 = 8 pages  <  9   ->  wait          (probe worked-1-wait)",
         "step = step_fixed + per_token × T + per_context_token × C + per_attention_pair × A",
         "c = 2,080:  A = 2,164,240   step = 0.09936208 s   fits",
         "L = 32 < 64 and the prompt is far from done",
         "d̄ = (1.058 + 2.237 + 1.034 + 0.647) / 4            = 1.244 req/s",
         "TPOT = (last token time − first token time) / (tokens − 1)",
         "See `assignments/lesson2/public/long-outputs.yaml` and `heavy-load`.",
         "The client sees the cancel at once - the pages wait for the fence.",
         "A *bigger* chunk means a longer step.",
         "`ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)` computes the step",
         "Python's hash() of a str is salted per process"]


@pytest.mark.parametrize("detector,text", [(d, t) for d, ts in PLANTED.items() for t in ts])
def test_each_detector_finds_its_form(detector, text):
    assert detector in {f.detector for f in P.findings([frag(text)])}, text


@pytest.mark.parametrize("block", PLANTED_BLOCKS)
def test_code_that_computes_a_graded_answer_is_found(block):
    assert [f.detector for f in P.findings([frag(block, "block")])] == ["code"], block


@pytest.mark.parametrize("text", CLEAN)
def test_worked_numbers_and_concepts_pass(text):
    assert P.findings([frag(text), frag(text, "code")]) == [], text


def test_numbered_steps_are_found_outside_worked_sections_only():
    steps = ["1. footprint is the worst case of the context", "   (in pages)",
             "2. reject what can never fit", "3. admit when it fits"]
    found = P.findings([frag(t, "doc") for t in steps])
    assert [f.detector for f in found] == ["steps"]
    assert P.findings([frag(t, worked=True) for t in steps]) == []
    assert P.findings([frag("1. only one item")]) == []


def test_a_new_lessons_names_come_from_its_stub(tmp_path):
    """The vocabulary is read from the stubs: a lesson added tomorrow is scanned for its own
    function's logic without touching the detectors."""
    stub = tmp_path / "assignments" / "lesson7" / "exercise.py"
    stub.parent.mkdir(parents=True)
    stub.write_text("def shed(queue_depth: int, deadline_s: float) -> bool:\n    raise NotImplementedError\n")
    vocab = P.vocabulary(tmp_path)
    assert "shed" in vocab[0] and {"queue_depth", "deadline_s"} <= vocab[1]
    rule = [frag("Shed when queue_depth × step_s > deadline_s."), frag("def shed(q, d):\n    return 1", "block")]
    assert {f.detector for f in P.findings(rule, vocab)} == {"comparison", "arithmetic", "code"}
    assert P.findings(rule[:1]) == []              # this course's vocabulary has no such names


def test_a_stub_that_restates_the_rule_is_found(tmp_path):
    stub = tmp_path / "exercise.py"
    stub.write_text('def admit(r, l):\n    raise NotImplementedError("admit: admit when need <= available")\n'
                    'def qualify(r, s):\n    raise NotImplementedError("qualify is not implemented yet")\n')
    assert P.stub_messages(stub) == ["exercise.py: admit: 'admit: admit when need <= available'"]
