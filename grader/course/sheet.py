"""The design sheet: read it safely, validate it, and turn it into what the worker runs.

A sheet is one YAML file the learner keeps across the course (``assignments/design_sheet.yaml``
is the template; ``rubrics/design_sheet.schema.json`` its schema). Reading is for hostile
input: bounded size, UTF-8, no YAML anchors or aliases (an alias bomb expands to gigabytes
when a validator walks it), and every problem comes back as a ``Problem`` (where in the
file, what was expected), never as an exception. The same reader serves lesson 6's
``diagnosis.yaml``.

After the schema (where an integer is an int: ``30720.0`` is not a page count), a few
checks no schema can say: byte sizes in binary units, the worked numbers agree with the
section's own model, worker and cost model (``grader.course.worked``), the contract's
rules are listed in the order they are tested, numbers are finite, names are unique, and
every diff in the change record names a knob the sheet has. A blank answer is no problem:
``unfilled`` lists it as not yet filled, for each section that has no problem.

``policy_sheet`` keeps only the knobs ``reference.knobs.with_knobs`` reads (the
contract's ``reasons`` become its ``enforce``), so two sheets that differ only in words
replay as the same design.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from grader.course import worked
from grader.engine.files import Unreadable, read_regular
from grader.engine.layout import YAML_VALUE_ERRORS, nesting_depth, short_text
from reference import yaml_words
from reference.knobs import KNOBS as REFERENCE_KNOBS
from reference.shapes import CONTRACT_REASONS
from reference.sizing import Geometry, pool_too_large
from reference.units import UnitError, parse_bytes
from reference.workload import UniqueKeys

MAX_BYTES = 256 * 1024       # a sheet or a diagnosis is a page of YAML; this is generous
MAX_DEPTH = 32               # a sheet nests five levels; deeper is an attack on the walkers
SECTIONS = ("request_contract", "admission_ledger", "chunk_rule", "cancellation",
            "release_criteria", "change_record")
POLICY_SECTIONS = SECTIONS[:4]
# The knobs reference.knobs.with_knobs reads, per section a sheet holds by name (the
# contract's reasons become its enforce; load shedding is no section of the sheet).
KNOBS = {section: tuple(REFERENCE_KNOBS[section])
         for section in ("admission_ledger", "chunk_rule", "cancellation")}
SHEET_SCHEMA = "design_sheet.schema.json"


WHOLE_FILE = "(file)"        # a Problem's path when it is about the file, not a place in it


@dataclass(frozen=True)
class Problem:
    path: str          # where in the file, e.g. chunk_rule.rule or causes[1].evidence
    message: str       # what is wrong and what was expected
    line: int | None = None   # the line it is on (a missing key: the mapping it belongs in)
    # A worked number that disagrees with the section's own model, worker or cost model: a
    # replay never reads one (policy_sheet keeps the knobs only), so it does not stop one.
    worked: bool = False

    def __str__(self) -> str:
        # A problem of the whole file has no place in it to name: "(file): " before its
        # message read as a placeholder left in ("diagnosis.yaml is not usable: (file): ...").
        where = "" if self.path == WHOLE_FILE else f"{self.path}: "
        return (f"line {self.line}: " if self.line else "") + where + self.message

    def to_dict(self) -> dict:
        """The problem in --json: the same place the text names (line None: no line of its own)."""
        return {"path": self.path, "line": self.line, "message": self.message}


def blocking(problems) -> list[Problem]:
    """The problems that stop a replay: all but the wrong worked numbers."""
    return [p for p in problems if not p.worked]


# ---- reading -------------------------------------------------------------------------------
# YAML 1.1 reads some numbers as other numbers than a person reads them: 010 is the octal
# 8, and 4:05 (a time, a ratio) is the base-60 245. A seed, a count or a rate written so
# would replay another design than the one written: refused, with the number it was read as.
_OTHER_NUMBER = re.compile(r"[-+]?(0[0-7_]+|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?)")


class _NoAliases(UniqueKeys, yaml.SafeLoader):
    """safe_load without anchors and aliases, without silently dropping a repeated key, and
    without octal or base-60 numbers."""

    def construct_yaml_int(self, node):
        return self._as_written(node, super().construct_yaml_int(node))

    def construct_yaml_float(self, node):
        return self._as_written(node, super().construct_yaml_float(node))

    def _as_written(self, node, value):
        if _OTHER_NUMBER.fullmatch(node.value) and node.value.strip("+-0_"):
            kind = "octal" if ":" not in node.value else "base-60"
            raise yaml.constructor.ConstructorError(
                None, None, f"YAML reads {node.value} as the {kind} number {value:g}; write the "
                            f"number in decimal digits without a leading 0 or a colon, or quote it "
                            f"as text", node.start_mark)
        return value

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (*name) are not allowed",
                                              mark)
        event = self.peek_event()
        if getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(None, None, "anchors (&name) are not allowed",
                                              event.start_mark)
        return super().compose_node(parent, index)


# PyYAML keeps the constructor functions in a table, not looked up by name: registered anew.
_NoAliases.add_constructor("tag:yaml.org,2002:int", _NoAliases.construct_yaml_int)
_NoAliases.add_constructor("tag:yaml.org,2002:float", _NoAliases.construct_yaml_float)


def read_yaml(raw: bytes, limit: int = MAX_BYTES) -> tuple[Any, list[Problem]]:
    """(data, problems) of YAML bytes; data is None when there are problems."""
    where = WHOLE_FILE
    if len(raw) > limit:
        # "more than": the bytes were read only up to a bound, so their count is not the file's.
        return None, [Problem(where, f"more than {limit} bytes, the limit")]
    if b"\x00" in raw:
        return None, [Problem(where, "a binary file, not YAML text")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, [Problem(where, f"not UTF-8 text (byte {e.start})")]
    try:
        data = yaml.load(text, Loader=_NoAliases)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        return None, [Problem(where, f"{line}not valid YAML ({getattr(e, 'problem', None) or e})")]
    except RecursionError:
        return None, [Problem(where, "nested too deeply")]
    except YAML_VALUE_ERRORS as e:
        return None, [Problem(where, f"not valid YAML (a value that cannot be read: {short_text(e)})")]
    depth = nesting_depth(data)
    if depth is None or depth > MAX_DEPTH:        # None: shared, which _NoAliases rules out
        return None, [Problem(where, f"nested too deeply (more than {MAX_DEPTH} levels)")]
    return data, []


def read_bytes(path: Path, limit: int = MAX_BYTES) -> tuple[bytes | None, list[Problem]]:
    """A file's bytes, up to limit + 1; a missing, linked or unreadable file is a problem."""
    if path.is_symlink():
        return None, [Problem(WHOLE_FILE, f"{path.name} is a symbolic link; submit the file itself")]
    try:
        raw = read_regular(path, limit, follow_links=False)
    except FileNotFoundError:
        return None, [Problem(WHOLE_FILE, f"there is no {path.name}")]
    except Unreadable as e:
        return None, [Problem(WHOLE_FILE, f"{path.name} {e}")]
    return raw, []


def read_file(path: Path, limit: int = MAX_BYTES) -> tuple[Any, list[Problem]]:
    """read_yaml of a file; a missing, linked or unreadable file is a problem, not an error."""
    raw, problems = read_bytes(path, limit)
    return (None, problems) if problems else read_yaml(raw, limit)


# ---- the schemas ---------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _validator(path: str):
    # jsonschema is imported here, not at the top: it costs a `grader check` about 0.15 s
    # (its format checkers import their libraries), and a check that validates no sheet
    # should not pay for it.
    import jsonschema

    def pattern(validator, wanted, instance, schema):
        if validator.is_type(instance, "string") and not re.search(ecma_anchors(wanted), instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {wanted!r}")
    # JSON Schema counts 30720.0 as an integer; a count in the sheet must be an int.
    strict = jsonschema.validators.extend(
        jsonschema.Draft202012Validator, {"pattern": pattern},
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
            "integer", lambda checker, x: isinstance(x, int) and not isinstance(x, bool)))
    return strict(json.loads(Path(path).read_text(encoding="utf-8")))


def ecma_anchors(pattern: str) -> str:
    """A schema pattern with `$` as JSON Schema means it (ECMA-262: the end of the text),
    not as Python's re does (also before a final newline): under re, 'C4\n' was a change id
    and 'R41\n' a release, and the feedback then said "there is no change C4 (it has ...,
    C4, ...)". Every `$` outside a character class becomes \\Z."""
    out, escaped, in_class = [], False, False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        elif ch == "$" and not in_class:
            out.append(r"\Z")
            continue
        out.append(ch)
    return "".join(out)


def schema_path(course, name: str = SHEET_SCHEMA) -> Path:
    return Path(course.rubrics) / name


def dotted(parts) -> str:
    return yaml_words.dotted(parts)


def short(value: Any, n: int = 60) -> str:
    """A value's repr, cut to n characters (a hostile value must not flood a feedback line)."""
    return yaml_words.short(value, n)


def schema_of(schema: Path) -> dict:
    """The schema itself, as its validator read it (once a process)."""
    return _validator(str(schema)).schema


def schema_problems(data: Any, schema: Path) -> list[Problem]:
    errors = sorted(_validator(str(schema)).iter_errors(data),
                    key=lambda e: ([str(p) for p in e.absolute_path], e.validator))
    out, seen = [], set()
    for e in errors:
        parts, message = yaml_words.explain(e)
        path = dotted(parts)
        if (path, message) not in seen:
            seen.add((path, message))
            out.append(Problem(path, message))
    return out


def with_lines(raw: bytes, problems) -> list[Problem]:
    """The problems with the line each is on in the file's text (``raw``), where known, in
    the file's order: a learner reads them top down, and by path (the schema's order) line
    74's chunk_rule came before line 47's request_contract, and causes[10] before causes[2].
    A problem of no line comes last."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(problems)
    problems = list(problems)
    placed = [p.line is not None or p.path == WHOLE_FILE for p in problems]
    lines = iter(yaml_words.lines_of(text, [yaml_words.undotted(p.path)
                                            for p, done in zip(problems, placed) if not done]))
    lined = [p if done else replace(p, line=next(lines)) for p, done in zip(problems, placed)]
    return sorted(lined, key=lambda p: (p.line is None, p.line or 0))


# ---- what no schema says -------------------------------------------------------------------------
def _numbers(value: Any, path: list) -> Iterator[Problem]:
    if isinstance(value, float) and not math.isfinite(value):
        yield Problem(dotted(path), f"expected a finite number; got {value}")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _numbers(v, path + [k])
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, path + [i])


def _contract_problems(rc: Mapping) -> Iterator[Problem]:
    sizes = {}
    for part, key in (("model", "weight_bytes"), ("worker", "device_bytes"), ("worker", "reserved_bytes")):
        where = f"request_contract.{part}.{key}"
        try:
            sizes[key] = parse_bytes(rc[part][key], where)
        except UnitError as e:
            yield Problem(where, str(e).split(": ", 1)[-1])
    order = [r for r in CONTRACT_REASONS if r in rc["reasons"]]
    if rc["reasons"] != order:
        yield Problem("request_contract.reasons",
                      f"listed out of the order check_contract tests them (in CONTRACT_REASONS' order: "
                      f"{', '.join(order)})")
    if len(sizes) < 3:
        return
    g = Geometry.of(*machine_of({"request_contract": rc}))
    too_large = pool_too_large(g)
    if too_large:
        yield Problem("request_contract.worker.device_bytes", too_large)
    if g.pool_pages == 0:
        # Valid by the schema, and `sheet run` rejected every request without saying why.
        left = sizes["device_bytes"] - sizes["weight_bytes"] - sizes["reserved_bytes"]
        yield Problem("request_contract.worker.device_bytes", (
            f"the pool would hold no page: device_bytes less the model's weight_bytes and "
            f"reserved_bytes leaves {left:,} bytes, and one page is {g.page_bytes:,}"))
    for path, message in worked.contract_problems(rc, g):
        yield Problem(path, message, worked=True)


def _known_path(schema: dict, parts: list[str]) -> bool:
    """Does the dotted path name a key the sheet schema defines (list items by index)?"""
    defs = schema["$defs"]
    node = schema

    def resolve(n):
        while isinstance(n, dict) and "$ref" in n:
            n = defs[n["$ref"].rsplit("/", 1)[-1]]
        return n
    for part in parts:
        node = resolve(node)
        if node.get("type") == "array" and part.isdigit():
            node = node.get("items", {})
        elif part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            return False
    return True


def sheet_problems(sheet: Mapping, schema: Path) -> list[Problem]:
    """Problems beyond the schema (call when the schema passed)."""
    nonfinite = list(_numbers(sheet, []))
    out = list(nonfinite)
    rc = sheet.get("request_contract")
    chunk = sheet.get("chunk_rule") or {}
    if rc:
        out += _contract_problems(rc)
        if "min_chunk_tokens" in chunk and chunk["min_chunk_tokens"] % rc["page_tokens"]:
            out.append(Problem("chunk_rule.min_chunk_tokens",
                               f"{chunk['min_chunk_tokens']} is not a whole number of "
                               f"{rc['page_tokens']}-token pages"))
    if chunk and not any(p.path.startswith("chunk_rule.") for p in nonfinite):     # no NaN to time
        page = rc["page_tokens"] if rc else worked.PAGE_TOKENS
        out += [Problem(path, message, worked=True) for path, message in worked.chunk_problems(chunk, page)]
    classes = [c["name"] for c in (sheet.get("release_criteria") or {}).get("slo_classes", [])]
    for name in sorted({n for n in classes if classes.count(n) > 1}):
        out.append(Problem("release_criteria.slo_classes", f"class {name!r} is listed twice"))
    raw = json.loads(schema.read_text(encoding="utf-8"))
    releases = []
    for i, entry in enumerate(sheet.get("change_record") or []):
        at = f"change_record[{i}]"
        if entry["release"] in releases:
            out.append(Problem(f"{at}.release", f"release {entry['release']!r} is recorded twice"))
        releases.append(entry["release"])
        ids = [c["id"] for c in entry["changes"]]
        for j, change in enumerate(entry["changes"]):
            if ids.count(change["id"]) > 1 and ids.index(change["id"]) != j:
                out.append(Problem(f"{at}.changes[{j}].id", f"change {change['id']!r} appears twice"))
            for k, d in enumerate(change["diff"]):
                if not _known_path(raw, d["path"].split(".")):
                    out.append(Problem(f"{at}.changes[{j}].diff[{k}].path",
                                       f"{d['path']!r} is not a key of the design sheet"))
    return out


def validate_sheet(sheet: Any, course) -> list[Problem]:
    """Every problem of a parsed sheet: the schema's, then the checks beyond it."""
    schema = schema_path(course)
    problems = schema_problems(sheet, schema)
    return problems or sheet_problems(sheet, schema)


def unfilled(sheet: Any, problems) -> list[Problem]:
    """The blank answers of every section that has no problem: not yet filled."""
    if not isinstance(sheet, Mapping):
        return []
    broken = {p.path.split(".")[0].split("[")[0] for p in problems}
    sections = [s for s in SECTIONS if s in sheet and s not in broken]
    return [Problem(path, message) for path, message in worked.unfilled(sheet, sections)]


def load_sheet(path: Path, course) -> tuple[Any, list[Problem]]:
    raw, problems = read_bytes(Path(path))
    if problems:
        return None, problems
    data, problems = read_yaml(raw)
    if problems:
        return None, problems
    if data is None:
        # Lesson 6's stub is comments only; "expected a mapping; got nothing" named no next step.
        return None, [Problem(WHOLE_FILE, f"{Path(path).name} holds no sheet yet (nothing but comments): "
                                          "start from assignments/design_sheet.yaml, or for an incident "
                                          "from your bundle's sheets/R42.yaml")]
    problems = with_lines(raw, validate_sheet(data, course))
    return (None if blocking(problems) else data), problems


# ---- what the worker runs ---------------------------------------------------------------------
def policy_sheet(sheet: Mapping) -> dict:
    """The knobs with_knobs reads, and nothing else (words and worked numbers dropped;
    fixed_tokens too unless the rule is fixed, the only rule that reads it)."""
    out = {}
    rc = sheet.get("request_contract") or {}
    if "reasons" in rc:
        out["request_contract"] = {"enforce": list(rc["reasons"])}
    for section, keys in KNOBS.items():
        values = {k: v for k, v in (sheet.get(section) or {}).items() if k in keys}
        if section == "chunk_rule" and values.get("rule", "budget") != "fixed":
            values.pop("fixed_tokens", None)
        if values:
            out[section] = values
    return out


def machine_of(sheet: Mapping):
    """(ModelSpec, WorkerSpec) of the sheet's request contract (the default cost model)."""
    from reference.specs import model_from, worker_from
    rc = sheet["request_contract"]
    worker = {k: v for k, v in rc["worker"].items() if k != "name"}
    return (model_from(rc["model"], "request_contract.model"),
            worker_from({**worker, "page_tokens": rc["page_tokens"]}, "request_contract.worker"))


def get_path(sheet: Mapping, path: str, default: Any = None) -> Any:
    node: Any = sheet
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return default
    return node
