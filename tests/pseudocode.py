"""What a learner-facing file must not hold: a graded function's algorithm as code,
pseudo-code or numbered steps.

The course teaches the concepts (what a footprint, a fence or a noise band is), tells the
failure stories and works calculations with real numbers. It does not assemble the
graded functions for the learner. These detectors find the forms an assembled answer
takes, in any lesson:

- ``comparison``: a condition between two named quantities (``need <= available``,
  ``token_times[0] > D1``): the test a decision makes, written out. A comparison with a
  number on one side (``8 < 9``, ``L = 32 < 64``) is a worked calculation and passes.
- ``arithmetic``: a formula over named quantities of a graded function's inputs or its
  answer (``footprint - prefix_hit_pages``, ``noise_k × s / √n``). The course's cost model
  (``step_fixed + per_token × T ...``) is given, not graded, and passes.
- ``closed-form``: the solution of the chunk rule's inequality (a square root of named
  quantities, ``b² + 4a``, "solve the quadratic").
- ``method``: a named way of computing a graded answer (binary search, a length-prefixed
  or JSON encoding, a named hash function).
- ``steps``: a numbered list of two or more steps outside a worked calculation.
- ``transition``: a state-machine move stated as an instruction (``go to cancelling``,
  ``-> 'done'``) outside a worked timeline.
- ``code``: Python that defines a graded function or computes with its inputs (a binary
  operation or comparison between names, a call of a helper that encodes, hashes or
  searches).

Files are read into ``Fragment``s (one line or one code block, with where it is and whether
it sits in a worked section of a README); ``findings`` runs every detector on them.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

ROOT = Path(__file__).resolve().parent.parent


SCALARS = ("int", "float", "str", "bool", "tuple")


def _stubs(root: Path) -> tuple[frozenset, frozenset]:
    """The graded functions of every lesson's stub, and their parameters' names."""
    functions, params = set(), set()
    for stub in sorted(root.glob("assignments/lesson*/exercise.py")):
        for node in ast.walk(ast.parse(stub.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                functions.add(node.name)
                params |= {a.arg for a in node.args.args            # values, not whole objects
                           if a.annotation is None or ast.unparse(a.annotation) in SCALARS}
    return frozenset(functions), frozenset(params)


def _fields() -> frozenset:
    """The field names of every value that crosses to a learner's function."""
    import dataclasses

    import reference.shapes as shapes
    values = [getattr(shapes, name) for name in shapes.__all__ if name != "CostModel"]    # given, not graded
    names = {f.name for v in values if dataclasses.is_dataclass(v) for f in dataclasses.fields(v)}
    return frozenset(names - {"id", "name", "cls", "seed", "index", "ok", "cost"})


# The graded functions (read from the stubs, so a new lesson's are known), the names of
# their inputs (parameters, and the fields of reference.shapes' values), and the words the
# READMEs use for the decisive quantities of the answers.
# The words the READMEs use for the decisive quantities of the answers.
QUANTITIES = frozenset({
    # lesson 1
    "layers", "kv_heads", "head_dim", "dtype_bytes", "device_bytes", "weight_bytes",
    "reserved_bytes", "page_bytes", "free_bytes", "max_context", "page_tokens",
    "prompt_tokens", "max_new_tokens", "prompt", "max_new", "p", "m",
    # lesson 2
    "prefix_hit_pages", "prefix_hit_active", "total_pages", "unallocated_pages",
    "evictable_pages", "reserved_pages", "reserve_pages", "footprint", "reserve", "need",
    "available", "capacity", "hits", "active", "inactive",
    # lesson 3
    "gap_budget_s", "prefill_done", "prefill_remaining", "min_chunk_tokens",
    "decode_contexts", "decode_only", "slack", "added", "L", "budget",
    # lesson 4
    "scope", "parent", "parent_key", "block", "block_tokens", "written_tokens", "published",
    "step_in_flight",
    # lesson 5
    "token_times", "arrival_s", "ttft_s", "gap_s", "cancel_s", "window_s", "D1",
    "noise_k", "min_gain", "max_class_drop", "max_rejection_rise", "band", "gain",
    "attainment", "good", "requests", "excluded", "rejected", "d̄", "n",
})


def vocabulary(root: Path) -> tuple[frozenset, frozenset]:
    """(graded functions, names of their inputs and answers) of the course at ``root``."""
    functions, params = _stubs(root)
    return functions, functions | params | _fields() | QUANTITIES


GRADED_FUNCTIONS, GRADED_NAMES = vocabulary(ROOT)
UNITS = frozenset({"s", "ms", "µs", "B", "KiB", "MiB", "GiB", "pages", "page", "tokens",
                   "req", "×"})
STATES = ("waiting", "admitted", "running", "cancelling", "done")
METHODS = ("binary search", "bisect", "bisection", "quadratic", "length-prefix", "length prefix",
           "json.dumps", "blake2", "sha256", "sha1", "md5", "hashlib", "zlib.crc32")
# README sections whose numbered lists and transitions are worked examples, not steps.
WORKED = re.compile(r"worked|timeline|calculation|what each mistake", re.I)
# Helpers whose call in example code computes a graded answer (an encoding, a hash, a search).
LOGIC_CALLS = ("json.dumps", "repr", "hashlib", "bisect", "math.sqrt", "math.isqrt", "math.ceil",
               "math.floor", "struct.pack")


@dataclass(frozen=True)
class Fragment:
    path: str
    line: int
    text: str
    kind: str            # prose | code | block | doc | comment | message | yaml | feedback
    worked: bool = False


@dataclass(frozen=True)
class Finding:
    fragment: Fragment
    detector: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.fragment.path}:{self.fragment.line}: {self.detector}: {self.excerpt!r}"


# ---- reading files into fragments -------------------------------------------------------
def markdown(path: Path, name: str) -> Iterator[Fragment]:
    section, fence, block, start = "", None, [], 0
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        worked = bool(WORKED.search(section))
        stripped = line.strip()
        if stripped.startswith("```"):
            if fence is None:
                fence, block, start = stripped[3:].strip() or "text", [], i + 1
            else:
                yield Fragment(name, start, "\n".join(block), "block", worked)
                fence = None
            continue
        if fence is not None:
            block.append(line)
            yield Fragment(name, i, line, "code", worked)
            continue
        if line.startswith("## "):
            section = line[3:]
        yield Fragment(name, i, line, "prose", bool(WORKED.search(section)))


def python_exercise(path: Path, name: str) -> Iterator[Fragment]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                first = node.body[0].lineno
                for j, line in enumerate(doc.splitlines()):
                    yield Fragment(name, first + j, line, "doc")
                yield from _indented_blocks(doc, name, first)
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for arg in node.exc.args:
                yield Fragment(name, node.lineno, _render(arg), "message")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield Fragment(name, tok.start[0], tok.string.lstrip("# "), "comment")


def _indented_blocks(doc: str, name: str, first: int) -> Iterator[Fragment]:
    """Docstring lines indented deeper than the text around them, as one code block each."""
    lines = doc.splitlines()
    base = min((len(l) - len(l.lstrip()) for l in lines[1:] if l.strip()), default=0)
    block, start = [], 0
    for j, line in enumerate(lines + [""]):
        deeper = line.strip() and len(line) - len(line.lstrip()) > base
        if deeper:
            block, start = (block or []) + [line.strip()], start if block else first + j
        elif block:
            yield Fragment(name, start, "\n".join(block), "block")
            block = []


def _render(node: ast.AST) -> str:
    """A string expression's text, with each formatted value shown as a number."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "0" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _render(node.left) + _render(node.right)
    return ""


def yaml_lines(path: Path, name: str) -> Iterator[Fragment]:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        yield Fragment(name, i, line, "yaml")


def feedback_strings(path: Path, name: str) -> Iterator[Fragment]:
    """The string literals of a grader module that are not docstrings: its feedback."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(n)}
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside |= {id(v) for v in node.values}
        if isinstance(node, ast.Raise):           # a course file's input error, not feedback
            inside |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in docs or id(node) in inside:
            continue
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            text = _render(node)
            if " " in text:            # words, not a key or an identifier
                yield Fragment(name, node.lineno, text, "feedback")


def learner_files(root: Path) -> list[Path]:
    """Every file a learner reads: the lessons' folders, the design sheet, the rubrics'
    criterion texts, the learner guide, and the lessons' grading modules (their feedback)."""
    out = sorted(p for p in (root / "assignments").rglob("*")
                 if p.is_file() and p.suffix in (".md", ".py", ".yaml"))
    out += sorted((root / "rubrics").glob("lesson*.yaml"))
    out += [p for p in [root / "docs" / "learners.md"] if p.exists()]
    out.append(root / "reference" / "shapes.py")      # what a submission imports, and reads
    out += sorted((root / "grader" / "lessons").glob("*.py"))
    return out


def fragments(path: Path, root: Path) -> Iterator[Fragment]:
    name = str(path.relative_to(root))
    if path.suffix == ".md":
        yield from markdown(path, name)
    elif path.suffix == ".yaml":
        yield from yaml_lines(path, name)
    elif name.startswith("grader/"):
        yield from feedback_strings(path, name)
    elif name.startswith("reference/"):              # its docstrings and comments, not its code
        yield from (f for f in python_exercise(path, name) if f.kind != "message")
    else:
        yield from python_exercise(path, name)


# ---- the detectors ----------------------------------------------------------------------
_OPERAND = r"[\w\u0300-\u036f\[\]().'\"]*[\w\u0300-\u036f\])]"
_COMPARE = re.compile(r"(?<![-=<>!])(<=|>=|==|!=|≤|≥|≠|<|>)(?![-=>])")
_ARITH = re.compile(r"(?<![-*/])(\+|−|-|\*|//|/|×|·|÷|(?<= )x(?= ))(?![->=*/])")
_ROOT = re.compile(r"(√|sqrt)\s*\(?\s*[A-Za-z_]|b\s*(²|\*\*\s*2|\^\s*2)|4\s*[·*×]?\s*a\b|\(\s*[−-]\s*b\b")
_STEP = re.compile(r"^\s*(\d+)[.)]\s+\S")
_MOVE = re.compile(r"(\bgo(?:es)? to|->|→)\s*[`'\"]?(" + "|".join(STATES) + r")\b")


def _left(text: str, at: int) -> str:
    i = at
    while i > 0 and text[i - 1] in " \t`*":
        i -= 1
    m = re.search(_OPERAND + r"$", text[:i])
    return m.group(0) if m else ""


def _right(text: str, at: int) -> str:
    i = at
    while i < len(text) and text[i] in " \t`*(√-−[":
        i += 1
    m = re.match(r"[\w\u0300-\u036f.\[\]'\"]+", text[i:])
    return m.group(0) if m else ""


def _core(operand: str) -> str:
    """The name an operand starts with: ``token_times[0]`` -> ``token_times``."""
    m = re.match(r"[A-Za-z_][\w\u0300-\u036f]*(\.[A-Za-z_]\w*)*", operand.lstrip("('\"[").rstrip("'\""))
    return m.group(0) if m else ""


def _symbolic(operand: str) -> bool:
    core = _core(operand)
    return bool(core) and core not in UNITS and not operand.startswith(("'", '"'))


def _graded(operand: str, names: frozenset) -> bool:
    core = _core(operand)
    return core in names or core.split(".")[-1] in names


def comparison(text: str, names: frozenset = GRADED_NAMES) -> str:
    for m in _COMPARE.finditer(text):
        left, right = _left(text, m.start()), _right(text, m.end())
        if _symbolic(left) and _symbolic(right) and (_graded(left, names) or _graded(right, names)):
            return text[max(0, m.start() - 40):m.end() + 40].strip()
    return ""


def arithmetic(text: str, words: bool = False, names: frozenset = GRADED_NAMES) -> str:
    """``words``: the text is prose, where ``*`` is emphasis, ``a/b`` a pair of words and
    ``-`` a dash (unless a definition ``x = a - b`` precedes it)."""
    for m in _ARITH.finditer(text):
        op, before = m.group(1), text[max(0, m.start() - 40):m.start()]
        spaced = text[m.start() - 1:m.start()].isspace() and text[m.end():m.end() + 1].isspace()
        if op == "-" and not spaced:
            continue                    # a hyphen: prompt-only, first-token
        if words and (op == "*" or op == "/" and not spaced or op == "-" and "=" not in before):
            continue                    # emphasis, n/a and req/s, a dash unless after "x = ..."
        left, right = _left(text, m.start()), _right(text, m.end())
        if _symbolic(left) and _symbolic(right) and (_graded(left, names) or _graded(right, names)):
            return text[max(0, m.start() - 40):m.end() + 40].strip()
    return ""


def closed_form(text: str) -> str:
    m = _ROOT.search(text)
    if m or re.search(r"solve the quadratic|closed.form|the root\b", text, re.I):
        return text.strip()[:100]
    return ""


def method(text: str) -> str:
    low = text.lower()
    for name in METHODS:
        if name in low:
            return name
    return ""


def transition(text: str) -> str:
    m = _MOVE.search(text)
    return m.group(0) if m else ""


def code(block: str, functions: frozenset = GRADED_FUNCTIONS) -> str:
    """Python in an example that defines a graded function or computes with names."""
    try:
        tree = ast.parse(block)
    except SyntaxError:
        try:
            tree = ast.parse(block.strip().strip("`"), mode="eval")
        except SyntaxError:
            return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            return f"def {node.name}"
        if isinstance(node, ast.BinOp) and _names(node.left) and _names(node.right):
            return ast.unparse(node)[:80]
        if isinstance(node, ast.Compare) and _names(node.left) and all(_names(c) for c in node.comparators):
            return ast.unparse(node)[:80]
        if isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            if any(called == c or called.startswith(c + ".") for c in LOGIC_CALLS):
                return ast.unparse(node)[:80]
        if isinstance(node, ast.JoinedStr) and sum(isinstance(v, ast.FormattedValue) for v in node.values) > 1:
            return ast.unparse(node)[:80]
    return ""


def _names(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) for n in ast.walk(node))


_INLINE = re.compile(r"`([^`]+)`")
# An inline span worth parsing as code: an operator between spaces, a comparison, a floor
# division or a format string (a path like a/b.yaml or a name like long-prompts is not).
_FORMULA = re.compile(r"\s[-+*/%−×·]\s|//|==|<=|>=|!=|\s[<>≤≥]\s|\{")


def findings(frags: Iterable[Fragment], vocab: tuple[frozenset, frozenset] | None = None) -> list[Finding]:
    """Every form of an assembled answer in the fragments; ``vocab`` is a course's
    ``vocabulary`` (this course's by default)."""
    functions, names = vocab or (GRADED_FUNCTIONS, GRADED_NAMES)
    out: list[Finding] = []
    run: list[Fragment] = []

    def close_run():
        if len(run) >= 2:
            out.append(Finding(run[0], "steps", " / ".join(f.text.strip()[:40] for f in run)))
        run.clear()

    for f in frags:
        if f.kind == "block":
            hit = code(f.text, functions)
            if hit:
                out.append(Finding(f, "code", hit))
            continue
        line = f.text
        words = f.kind in ("prose", "yaml", "feedback")
        for name, hit in (("comparison", comparison(line, names)), ("arithmetic", arithmetic(line, words, names)),
                          ("closed-form", closed_form(line)), ("method", method(line))):
            if hit:
                out.append(Finding(f, name, hit))
        if not f.worked:
            hit = transition(line)
            if hit:
                out.append(Finding(f, "transition", hit))
        if words:
            for span in _INLINE.findall(line):
                if not _FORMULA.search(span):
                    continue
                hit = code(span, functions) or arithmetic(span, names=names)
                if hit:
                    out.append(Finding(f, "code", hit))
        step = _STEP.match(line)
        if step and not f.worked and f.kind != "feedback":
            if run and (run[-1].path != f.path or int(_STEP.match(run[-1].text).group(1)) + 1 != int(step.group(1))):
                close_run()
            run.append(f)
        elif line.strip() and not (run and line.startswith((" ", "\t"))):
            close_run()
    close_run()
    return out


def stub_messages(path: Path) -> list[str]:
    """NotImplementedError messages of a stub that say more than what is not implemented."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                text = " ".join(_render(a) for a in node.exc.args)
                if text != f"{fn.name} is not implemented yet":
                    out.append(f"{path.name}: {fn.name}: {text!r}")
    return out
