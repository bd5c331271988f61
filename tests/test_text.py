"""grader.engine.text, unit by unit: what a reader would not see as itself is shown as
U+FFFD, what they would see stays, and each output's helper lays its lines out.
The expected strings are written out by hand, character by character."""
import pytest

from grader.engine.text import REPLACEMENT as R
from grader.engine.text import html_text, one_line, plural, printable, terminal


@pytest.mark.parametrize("text, shown", [
    ("plain ascii 10/10", "plain ascii 10/10"),
    ("José 王 Ångström", "José 王 Ångström"),                 # letters of every script stay
    ("e\u0301", "e\u0301"),                                  # a combining mark stays
    ("a\u00a0b\u3000c", "a\u00a0b\u3000c"),                  # no-break and ideographic spaces
    ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),  # ZWNJ
    ("\U0001F469\u200d\U0001F4BB", "\U0001F469\u200d\U0001F4BB"),   # ZWJ in an emoji
    ("\x1b[2J10/10", R + "[2J10/10"),                        # an escape
    ("a\rb\nc\td\x00e\x08f", f"a{R}b{R}c{R}d{R}e{R}f"),      # control characters
    ("\u202egnp.exe", R + "gnp.exe"),                        # a bidi override
    ("x\u2066y\u2069z\u200ew\u200fv", f"x{R}y{R}z{R}w{R}v"),  # isolates, LRM, RLM
    ("\ufeffbom", R + "bom"),                                # a byte-order mark
    ("tag\U000E0041", "tag" + R),                            # a tag character
    ("line\u2028para\u2029", f"line{R}para{R}"),             # line and paragraph separators
    ("lone \ud800", "lone " + R),                            # a lone surrogate
    ("private \ue000", "private " + R),                      # private use
])
def test_printable_keeps_what_a_reader_sees(text, shown):
    assert printable(text) == shown


def test_printable_keeps_the_controls_a_caller_lays_out():
    assert printable("a\nb\tc\rd", keep="\n\t") == f"a\nb\tc{R}d"


def test_one_line_joins_whitespace_then_cuts_at_the_limit():
    assert one_line("  two\n\nlines\t and  \x1b ") == f"two lines and {R}"
    assert one_line("short", 10) == "short"                    # within the limit: whole
    assert one_line("abcdefghij", 10) == "abcdefghij"          # at the limit: whole
    assert one_line("abcdefghijk", 10) == "abcdefg..."         # past it: limit - 3, then "..."
    assert one_line(42) == "42"


def test_terminal_keeps_only_its_own_line_breaks():
    assert terminal(["head", "x\ny\x1b", ""]) == f"head\nx{R}y{R}\n"


def test_html_text_is_printable_then_escaped():
    assert html_text("<b a='1'>&\"\u202e</b>") == f"&lt;b a=&#x27;1&#x27;&gt;&amp;&quot;{R}&lt;/b&gt;"


def test_plural_counts_in_words():
    assert [plural(n, "student") for n in (0, 1, 2)] == ["0 students", "1 student", "2 students"]


def test_first_few_names_five_then_says_there_are_more():
    from grader.engine.text import first_few
    assert first_few([]) == ""
    assert first_few(["a", "b", "c", "d", "e"]) == "a, b, c, d, e"
    assert first_few(["a", "b", "c", "d", "e", "f"]) == "a, b, c, d, e ..."
    assert first_few(["a", "b", "c"], n=2) == "a, b ..."
