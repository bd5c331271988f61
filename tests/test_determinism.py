"""A grade is a function of the submission, the lesson, the rubric and the secret: the same
bytes give the same report (duration_s aside) whatever else changes between two runs."""
from conftest import ROOT, SECRET, grade
from grader.engine.sandbox.session import Sandbox

LESSON1 = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()


def stable(report) -> dict:
    d = report.to_dict()
    d.pop("duration_s")
    return d


# ---------------------------------------------------------------------------- the learner's child

def test_a_childs_str_hash_seed_is_fixed_and_a_restart_takes_another():
    """Each interpreter draws its own str hash seed unless told one: a submission that
    iterates a set of strings would answer differently at every grade. A restarted child
    must still hash differently (lesson 4 catches keys built on hash() that way)."""
    source = "def h(text):\n    return hash(text)\n"
    with Sandbox(source, "h.py") as one, Sandbox(source, "h.py") as two:
        first = one.call("h", "serving").value
        assert isinstance(first, int)
        assert two.call("h", "serving").value == first
        one.restart()
        again = one.call("h", "serving").value
        assert isinstance(again, int) and again != first


def test_answers_that_hang_on_str_hashes_grade_the_same_twice(tmp_path):
    """A wrong answer on about half the inputs, which half picked by str hash: two grades
    (four children) give one report."""
    path = tmp_path / "hashed.py"
    path.write_text(LESSON1.replace("    return -(-tokens // page_tokens)\n",
                                    "    return -(-tokens // page_tokens) + (hash(str(tokens)) & 1)\n"))
    first = grade("lesson1", path, mode="grade", secret=SECRET)
    feedback = next(c.feedback for c in first.criteria if c.id == "pages-for")
    wrong, _, total = feedback.partition(" token counts wrong")[0].partition(" of ")
    assert 0 < int(wrong) < int(total), feedback          # which ones: the seed's choice
    assert stable(grade("lesson1", path, mode="grade", secret=SECRET)) == stable(first)
