"""The words of a person editing YAML, for every problem a course file can have.

A schema says "object", Python says "NoneType"; the person fixing design_sheet.yaml wrote
a mapping, a list, a number or nothing at all. Every reader of the course's YAML files
(workloads, model and worker specs, rubrics, design sheets, diagnoses) names values and
expectations with these words, and points at the line a problem is on.

    kind(None) == "nothing"            kind({"a": 1}) == "a mapping"
    explain(error) == (["chunk_rule", "rule"], "expected one of budget, fixed; got 'fast'")
    line_of(text, ["chunk_rule", "rule"]) == 14
"""
from __future__ import annotations

import math
from typing import Any, Sequence

TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "a string",
              "object": "a mapping", "array": "a list", "boolean": "true or false", "null": "nothing"}
_KINDS = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
          float: "a number", type(None): "nothing"}


def kind(value: Any) -> str:
    """What a YAML reader made of a value: a mapping, a list, a string, a number, nothing."""
    for t in type(value).__mro__:
        if t in _KINDS:
            return _KINDS[t]
    return "a value of another kind"


def short(value: Any, n: int = 60) -> str:
    """A value as it might be written, cut to n characters (hostile input must not flood a line)."""
    text = repr(value)
    return text if len(text) <= n else text[:n - 3] + "..."


def got(value: Any) -> str:
    """'a string 'fast'', 'nothing', 'a mapping': what was there instead."""
    if value is None or isinstance(value, (dict, list)):
        return kind(value)
    return f"{kind(value)} {short(value)}{number_as_text(value)}"


def number_as_text(value: Any) -> str:
    """For a number YAML read as text, how to write it as a number ("" for anything else).

    YAML 1.1 reads a float only with a decimal point and a signed exponent: 5e-2, 1e+3 and
    1.0e3 are strings, and "expected a number; got a string '5e-2'" alone reads as nonsense
    to a person who wrote a number."""
    if not isinstance(value, str) or len(value) > 40:
        return ""
    try:
        number = float(value.replace("_", ""))
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    if number.is_integer() and abs(number) < 1e15:
        written = str(int(number))
    else:
        mantissa, _, exponent = repr(number).partition("e")
        written = (mantissa if "." in mantissa else mantissa + ".0") + (f"e{exponent}" if exponent else "")
    return f" (YAML reads {value} as text; as a number write {written})"


def wanted(types: str | Sequence[str]) -> str:
    types = [types] if isinstance(types, str) else list(types)
    return " or ".join(TYPE_WORDS.get(t, t) for t in types)


def dotted(parts: Sequence) -> str:
    """chunk_rule.rule, causes[1].evidence: a place in the file as a person reads it."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) and not isinstance(p, bool) else (f".{p}" if out else str(p))
    return out or "(top level)"


def undotted(path: str) -> list:
    """The keys and indexes of a dotted place: 'causes[1].evidence' -> ['causes', 1, 'evidence']."""
    if path in ("", "(top level)"):
        return []
    parts: list = []
    for piece in path.split("."):
        name, *indexes = piece.split("[")
        if name:
            parts.append(name)
        parts += [int(i.rstrip("]")) for i in indexes if i.rstrip("]").isdigit()]
    return parts


_DISCRIMINATORS = ("const", "enum")


def _chosen_branch(error):
    """For an error inside one branch of a oneOf or anyOf whose branches are told apart by a
    constant (a credit's `rule: linear`): the error of the branch the value chose. The most
    relevant error is otherwise the other branch's "expected 'all_or_nothing'", which names
    what was right and not the missing `floor` that was wrong. The error itself when the
    value chose no branch, or more than one."""
    parent = error.parent
    if parent is None or parent.validator not in ("oneOf", "anyOf"):
        return error
    branches: dict = {}
    for e in parent.context:
        branches.setdefault(e.relative_schema_path[0], []).append(e)
    chosen = [errors for errors in branches.values()
              if not any(e.validator in _DISCRIMINATORS for e in errors)]
    if len(chosen) != 1:
        return error
    return min(chosen[0], key=lambda e: (-len(e.absolute_path), e.validator != "required"))


def explain(error) -> tuple[list, str]:
    """(path, message) of one JSON Schema error, in these words. A missing key's path ends
    with the key; an unknown key's names it."""
    error = _chosen_branch(error)
    path, v, arg, inst = list(error.absolute_path), error.validator, error.validator_value, error.instance
    if v in ("oneOf", "anyOf"):
        # No branch chosen: say what tells them apart (`rule: linar`), not "not valid under
        # any of the given schemas".
        if error.context and all(e.validator == "type" for e in error.context):
            kinds = list(dict.fromkeys(k for e in error.context for k in
                                       ([e.validator_value] if isinstance(e.validator_value, str)
                                        else e.validator_value)))
            return path, f"expected {wanted(kinds)}; got {got(inst)}"
        told = [e for e in error.context if e.validator == "const"]
        places = {tuple(e.absolute_path) for e in told}
        if told and len(places) == 1:
            where = list(next(iter(places)))
            choices = ", ".join(dict.fromkeys(str(e.validator_value) for e in told))
            return where, f"expected one of {choices}; got {got(told[0].instance)}"
    if v == "required":
        missing = [k for k in arg if isinstance(inst, dict) and k not in inst]
        return path + missing[:1], "missing key (required)"
    if v == "additionalProperties" and isinstance(inst, dict):
        known = sorted(error.schema.get("properties", {}))
        extra = [k for k in inst if k not in known]
        return (path + extra[:1], f"unknown key{' ' + short(extra[0]) if extra else ''}"
                + (f" (known here: {', '.join(known)})" if known else ""))
    if v == "enum":
        return path, f"expected one of {', '.join(map(str, arg))}; got {got(inst)}"
    if v == "const":
        return path, f"expected {arg!r}; got {got(inst)}"
    # A schema's examples say what a value looks like (an evidence id, E1) better than its
    # regular expression does.
    like = f" like {', '.join(map(str, error.schema['examples']))}" if error.schema.get("examples") else ""
    if v == "type":
        kinds = [arg] if isinstance(arg, str) else list(arg)
        # A blank answer of the design sheet (null) is allowed: it is not yet filled.
        blank = " (or a blank: not yet filled)" if "null" in kinds and len(kinds) > 1 else ""
        return path, f"expected {wanted([k for k in kinds if k != 'null'] or kinds)}{like}{blank}; got {got(inst)}"
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if v in bounds:
        return path, f"expected a number {bounds[v]} {arg}; got {short(inst)}"
    if v == "minItems":
        return path, f"expected a list of at least {arg} item{'s' if arg != 1 else ''}; got {len(inst)}"
    if v == "maxItems":
        return path, f"expected a list of at most {arg} items; got {len(inst)}"
    if v == "minLength":
        return path, "expected text; got an empty string" if arg == 1 else f"expected at least {arg} characters"
    if v == "maxLength":
        return path, f"expected at most {arg} characters; got {len(inst)}"
    if v == "pattern":
        if like:
            return path, f"{short(inst)} is not of the expected form: write it{like}"
        return path, f"{short(inst)} does not have the expected form ({arg})"
    if v == "uniqueItems":
        return path, "expected a list without repeated items"
    message = error.message
    return path, message if len(message) <= 200 else message[:197] + "..."


def line_of(text: str, parts: Sequence) -> int | None:
    """The line (from 1) of the deepest node of ``parts`` in the YAML text: the value at the
    path, or for a key that is not there, the mapping it belongs in. None for text that
    does not parse."""
    return lines_of(text, [parts])[0]


def lines_of(text: str, paths: Sequence[Sequence]) -> list[int | None]:
    """line_of of each path, the text composed once: composed once a path, a diagnosis of
    hundreds of causes (each a problem, in a file under the 256 KiB limit) took the grader
    half an hour to place its problems."""
    if not paths:
        return []
    import yaml                  # here only: the words themselves need no YAML parser
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return [None] * len(paths)
    return [None if root is None else _line_in(root, parts) for parts in paths]


def _line_in(node, parts: Sequence) -> int:
    import yaml
    line = node.start_mark.line + 1
    for part in parts:
        child = None
        if isinstance(node, yaml.MappingNode):
            child = next((value for key, value in node.value
                          if isinstance(key, yaml.ScalarNode) and key.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line


_PYTHON_KINDS = {"NoneType": "nothing", "dict": "a mapping", "list": "a list", "str": "a string",
                 "int": "an integer", "float": "a number", "bool": "a boolean", "tuple": "a list"}


def reading_problem(error: Exception) -> str:
    """What went wrong reading a course file's data by hand (a KeyError, TypeError or
    ValueError while taking it apart), in these words rather than Python's."""
    import re
    text = str(error)
    if isinstance(error, KeyError):
        return f"missing key {error.args[0]!r}" if error.args else "missing key"
    number = re.match(r"invalid literal for (int)\(\) with base \d+: (.*)|could not convert string to "
                      r"(float): (.*)", text)
    if number:
        return (f"expected {'an integer' if number.group(1) else 'a number'}; "
                f"got {number.group(2) or number.group(4)}")
    python = re.search(r"'(\w+)' object is not (subscriptable|iterable)|not '(\w+)'$", text)
    if python:
        what = python.group(1) or python.group(3)
        expected = {"subscriptable": "a mapping", "iterable": "a list"}.get(python.group(2) or "", "a number")
        return f"expected {expected}; got {_PYTHON_KINDS.get(what, what)}"
    return re.sub(r"'(\w+)'", lambda m: _PYTHON_KINDS.get(m.group(1), m.group(0)), text)
