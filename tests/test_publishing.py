"""Lesson 4's publishable probes, in process: the offers a probe makes (as the worker makes
them, worked out by hand below) and what the judge says of a page it should not publish.
The end-to-end tests of the criterion, through the sandbox, are in tests/test_lesson4.py."""
import pytest

from grader.engine.cases import Case
from grader.engine.checks import Answer, CheckContext
from grader.lessons import publishing
from grader.lessons.publishing import may_publish, offered_pages
from reference.shapes import PageInfo

# (page_tokens, prompt_tokens, written_tokens, first, published) -> the pages offered, as
# (index, prompt tokens in it, slots written, already published), each worked out by hand:
# the offer runs from `first` through the first page not fully written, and never past the
# prompt's last page; a request with nothing written past its hits is still offered one.
OFFERS = {
    # 40 prompt tokens on 16-token pages: pages 0, 1 full of prompt, page 2 holds 8.
    (16, 40, 0, 0, ()): [(0, 16, 0, False)],
    (16, 40, 20, 0, ()): [(0, 16, 16, False), (1, 16, 4, False)],
    (16, 40, 32, 0, ()): [(0, 16, 16, False), (1, 16, 16, False), (2, 8, 0, False)],
    (16, 40, 40, 0, ()): [(0, 16, 16, False), (1, 16, 16, False), (2, 8, 8, False)],
    (16, 40, 40, 1, (1,)): [(1, 16, 16, True), (2, 8, 8, False)],
    # The pages before `first` were hits: written may end before them, and one page is offered.
    (16, 40, 10, 2, ()): [(2, 8, 0, False)],
    # Whole pages only: 64 tokens, all written, on 16-token pages.
    (16, 64, 64, 0, (0, 2)): [(0, 16, 16, True), (1, 16, 16, False), (2, 16, 16, True), (3, 16, 16, False)],
    (4, 10, 7, 0, ()): [(0, 4, 4, False), (1, 4, 3, False)],
    (1, 3, 2, 0, ()): [(0, 1, 1, False), (1, 1, 1, False), (2, 1, 0, False)],
}


@pytest.mark.parametrize("probe, want", sorted(OFFERS.items()))
def test_a_probe_offers_the_pages_the_worker_would(probe, want):
    pt, prompt, written, first, published = probe
    got = offered_pages(pt, prompt, written, first, frozenset(published))
    assert [(p.index, p.prompt_tokens, p.written_tokens, p.published) for p in got] == want
    assert all(p.page_tokens == pt for p in got)


@pytest.mark.parametrize("page, publish", [
    (PageInfo(0, 16, 16, 16, False), True),
    (PageInfo(0, 16, 16, 15, False), False),       # one slot not yet written
    (PageInfo(0, 16, 16, 16, True), False),        # already in the cache
    (PageInfo(2, 8, 16, 8, False), False),         # the prompt's partial last page
    (PageInfo(2, 8, 16, 16, False), False),        # ... even with every slot written
])
def test_may_publish_is_the_lessons_rule(page, publish):
    assert may_publish(page) is publish


def _feedback(monkeypatch, offers: list[tuple], answer) -> str:
    """The publishable criterion's feedback on one probe per offer, each answered by ``answer``."""
    cases = [Case("publish", f"publish {n}", "public", pages, f"offer {n}") for n, pages in enumerate(offers)]
    monkeypatch.setattr(publishing, "ask", lambda ctx, fname, asked, args, returns:
                        [Answer(c, answer(c.inputs)) for c in asked])
    return publishing.publishable(CheckContext(None, cases), {}).feedback


def _right(pages) -> tuple:
    return tuple(p.index for p in pages if may_publish(p))


@pytest.mark.parametrize("extra, why", [
    (lambda p: p.published, "publishes page 1, which is already published; expected [0]"),
    (lambda p: p.prompt_tokens < p.page_tokens, "publishes page 2, which holds 8 of 16 prompt tokens; expected [0]"),
    (lambda p: p.written_tokens < p.page_tokens and p.prompt_tokens == p.page_tokens,
     "publishes page 3, which has 5 of 16 slots written; expected [0]"),
])
def test_a_page_published_wrongly_is_named_with_what_is_wrong_with_it(monkeypatch, extra, why):
    offer = (PageInfo(0, 16, 16, 16, False), PageInfo(1, 16, 16, 16, True),
             PageInfo(2, 8, 16, 8, False), PageInfo(3, 16, 16, 5, False))
    said = _feedback(monkeypatch, [offer], lambda pages: _right(pages) + tuple(p.index for p in pages if extra(p)))
    assert said == f"1 of 1 offers wrong; first, offer 0: {why}"


def test_of_several_pages_published_wrongly_the_lowest_is_named(monkeypatch):
    offer = (PageInfo(0, 16, 16, 16, False), PageInfo(1, 16, 16, 3, False), PageInfo(2, 16, 16, 0, False))
    said = _feedback(monkeypatch, [offer, offer], lambda pages: (2, 1, 0))
    assert said == "2 of 2 offers wrong; first, offer 0: publishes page 1, which has 3 of 16 slots written; expected [0]"
