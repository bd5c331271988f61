"""The class report as one HTML page: no external styles, scripts or fonts; the two PNGs
beside it. Every number a cell shows is also in its ``data-value``, keyed by ``data-key``,
so a script (or a test) reads exactly what the page shows.

If a figure cannot be loaded (the page copied without its PNGs), a line says which file
is missing in its place.
"""
from __future__ import annotations

from grader.engine.report import COST_MODEL_NOTE
from grader.engine.text import html_text

STYLE = """
:root{--ink:#30343f;--muted:#6b7076;--line:#e3e5e8;--pass:#3b7d5a;--warn:#a4551c;--bg:#f7f8fa}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;color:var(--ink);
     margin:0;background:var(--bg)}
main{max-width:64rem;margin:0 auto;padding:1.5rem 1.5rem 3rem;background:#fff;min-height:100vh}
h1{font-size:1.55rem;margin:.2rem 0 .1rem}
h2{font-size:1.15rem;margin:2rem 0 .6rem;padding-bottom:.25rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
.sub{color:var(--muted);margin:0 0 1rem}
.cards{display:flex;flex-wrap:wrap;gap:.6rem;margin:1rem 0}
.card{flex:1 1 8rem;border:1px solid var(--line);border-radius:6px;padding:.5rem .8rem;background:var(--bg)}
.card b{display:block;font-size:1.45rem;line-height:1.2}
.card span{color:var(--muted);font-size:.85rem}
.card.warn b{color:var(--warn)}
figure{margin:.6rem 0}
img{max-width:100%;height:auto;display:block}
table{border-collapse:collapse;width:100%;font-size:.92rem;margin:.3rem 0 .8rem}
th,td{text-align:left;padding:.35rem .55rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;background:var(--bg)}
td.num,th.num{text-align:right;white-space:nowrap}
td.id{white-space:nowrap}
td.fb{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.82rem;word-break:break-word}
.bar{display:inline-block;height:.55rem;background:var(--pass);border-radius:2px;vertical-align:middle;margin-left:.4rem}
.none{color:var(--muted);font-style:italic}
.more{color:var(--muted);font-size:.82rem}
.missing{color:#b00020;font-weight:600}
footer{margin-top:2.5rem;color:var(--muted);font-size:.82rem}
"""

# Marks each image loaded or not once the page has loaded; a missing one says which file.
SCRIPT = """
window.addEventListener("load", function () {
  for (const img of document.images) {
    const ok = img.complete && img.naturalWidth > 0;
    img.dataset.loaded = ok ? "yes" : "no";
    if (!ok) {
      const note = document.createElement("p");
      note.className = "missing";
      note.textContent = "Missing figure: " + img.getAttribute("src") + " (keep the PNG files beside this page).";
      img.after(note);
    }
  }
  document.body.dataset.ready = "yes";
});
"""

# Every text the page shows goes through one escape: students are named by their files, and
# feedback quotes what their code returned and raised.
e = html_text


def _g(x: float) -> str:
    return f"{round(x, 3):g}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _cell(key: str, value, shown: str, cls: str = "num") -> str:
    return f'<td class="{cls}" data-key="{e(key)}" data-value="{e(str(value))}">{shown}</td>'


def _card(key: str, value, label: str, warn: bool = False) -> str:
    return (f'<div class="card{" warn" if warn else ""}"><b data-key="{key}" data-value="{e(str(value))}">'
            f'{e(str(value) if not isinstance(value, float) else _g(value))}</b><span>{e(label)}</span></div>')


def _cases_table(key: str, hits, graded: int, with_criteria: bool = False) -> str:
    head = "<tr><th>case</th>" + ("<th>criteria</th>" if with_criteria else "") + \
           '<th class="num">students</th><th>the feedback it gave</th></tr>'
    rows = []
    for h in hits:
        name = h.case if h.visibility == "public" else f"hidden {h.case.split(':', 1)[1]} ({h.family})"
        more = (f'<br><span class="more">and {h.more} more case{"s" if h.more > 1 else ""} the same '
                f'students failed</span>' if h.more else "")
        width = max(2, round(60 * h.share))
        rows.append("<tr>" + f"<td>{e(name)}{more}</td>"
                    + (f"<td>{e(', '.join(h.criteria))}</td>" if with_criteria else "")
                    + _cell(f"{key}:{h.case}", h.students,
                            f'{h.students} of {graded}<span class="bar" style="width:{width}px"></span>')
                    + f'<td class="fb">{e(h.feedback)}</td></tr>')
    return f"<table>{head}{''.join(rows)}</table>"


def render(numbers, *, gradebook: str, figures: dict[str, str]) -> str:
    n = numbers
    d = n.distribution
    title = f"{n.lesson}: {n.title}"
    mixed = n.mixed()
    sub = [f"{n.students} students in the gradebook ({e(gradebook)})"]
    if n.graded_between:
        a, b = n.graded_between
        sub.append(f"graded {a}" + (f" to {b}" if b != a else ""))
    sub.append("rubric version" + ("s " if len(n.rubric_versions) > 1 else " ")
               + ", ".join(map(str, n.rubric_versions)))
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{e(title)}: class report</title><style>{STYLE}</style>",
           f"<script>{SCRIPT}</script></head><body><main>",
           f"<h1>{e(title)}</h1>", f'<p class="sub">Class report: {"; ".join(sub)}.</p>',
           *([f'<p class="warn"><strong>Not one grading:</strong> {e(mixed)}.</p>'] if mixed else []),
           '<div class="cards">',
           _card("graded", n.graded, f"graded of {n.students}"),
           _card("mean", d["mean"] if n.scores else "-", f"mean score of {_g(n.max_score)}"),
           _card("median", d["median"] if n.scores else "-", "median score"),
           _card("full_marks", n.full_marks, "at full marks"),
           _card("problems", len(n.problems), "students to look at", warn=bool(n.problems)),
           "</div>",
           "<h2>Scores</h2>",
           f'<figure><img src="{e(figures["scores"])}" alt="Histogram of the scores of the graded '
           f'students" width="880" height="396"></figure>',
           "<h2>Criteria</h2>",
           f'<figure><img src="{e(figures["criteria"])}" alt="Pass rate and mean score of each criterion" '
           f'width="880"></figure>',
           '<table><tr><th>criterion</th><th></th><th class="num">points</th>'
           '<th class="num">passed</th><th class="num">pass rate</th><th class="num">mean score</th></tr>']
    for c in n.criteria:
        out.append(f"<tr><td class='id'>{e(c.id)}</td><td>{e(c.title)}</td><td class='num'>{_g(c.max_score)}</td>"
                   + _cell(f"passed:{c.id}", c.passed, f"{c.passed} of {c.graded}")
                   + _cell(f"pass_rate:{c.id}", c.pass_rate, _pct(c.pass_rate))
                   + _cell(f"mean_score:{c.id}", c.mean_score, f"{_g(c.mean_score)} / {_g(c.max_score)}")
                   + "</tr>")
    out.append("</table>")

    out.append("<h2>Where points were lost</h2>")
    out.append('<p class="sub">The cases most students failed, per criterion (a report keeps the first '
               '20 failing cases of each criterion).</p>')
    failing = [c for c in n.criteria if c.passed < c.graded]
    if not failing:
        out.append('<p class="none">Every graded student passed every criterion.</p>')
    for c in failing:
        out.append(f"<h3>{e(c.id)}: {e(c.title)} "
                   f"<span class='sub'>({c.graded - c.passed} of {c.graded} did not pass)</span></h3>")
        if c.failing_cases:
            out.append(_cases_table(f"failing:{c.id}", c.failing_cases, n.graded))
        if c.failed_uncited:
            out.append(f'<p class="sub" data-key="uncited:{e(c.id)}" data-value="{c.failed_uncited}">'
                       f'{c.failed_uncited} did not pass without a failing case to name: their file did '
                       f'not load, or the criterion judges whole runs.</p>')

    out.append("<h2>Students to look at</h2>")
    if n.problems:
        out.append("<table><tr><th>student</th><th>what happened</th><th>detail</th></tr>")
        out += [f'<tr data-key="problem:{e(p.student)}" data-value="{e(p.kind)}"><td>{e(p.student)}</td>'
                f'<td>{e(p.kind)}</td><td class="fb">{e(p.detail)}</td></tr>' for p in n.problems]
        out.append("</table>")
    else:
        out.append('<p class="none">Every submission loaded and ran within its time.</p>')

    out.append("<h2>Hardest hidden cases</h2>")
    if n.hardest_hidden:
        out.append('<p class="sub">Hidden cases are named by the digest of their inputs, as reports name them.</p>')
        out.append(_cases_table("hidden", n.hardest_hidden, n.graded, with_criteria=True))
    else:
        out.append('<p class="none">No graded student failed a hidden case.</p>')

    out += [f"<footer><p>{e(COST_MODEL_NOTE)}</p><p>Written by <code>grader report {e(n.lesson)}"
            f"</code>; <code>--json</code> prints the same numbers.</p></footer>",
            "</main></body></html>", ""]
    return "\n".join(out)
