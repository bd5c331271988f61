import copy
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.engine.secret import SecretError, derive_seed, instance_digest, load_secret
from reference.shapes import Slo
from reference.workload import (SCHEMA_PATH, VOCAB, WorkloadError, WorkloadSpec, generate, load_workload,
                                parse_workload, to_mapping, with_overrides)

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "assignments" / "lesson2" / "public"

BASE = {
    "name": "t",
    "seed": 7,
    "requests": 400,
    "arrival": {"process": "poisson", "rate": 4.0},
    "prompt": {"dist": "lognormal", "median": 1024, "sigma": 0.6, "min": 1, "max": 16384},
    "output": {"dist": "lognormal", "median": 128, "sigma": 0.8, "min": 1, "max": 2048},
    "max_new": {"slack": [1.0, 4.0]},
    "scopes": [
        {"name": "acme", "weight": 3, "prefix_groups": 2,
         "prefix_tokens": {"dist": "fixed", "value": 512}, "prefix_share": 0.7},
        {"name": "globex", "weight": 1},
    ],
    "cancel": {"probability": 0.1, "after_s": {"dist": "uniform", "min": 0.05, "max": 2.0}},
    "classes": [
        {"name": "interactive", "weight": 0.7, "ttft_s": 1.0, "gap_s": 0.1},
        {"name": "batch", "weight": 0.3, "ttft_s": 10.0, "gap_s": 0.5},
    ],
}


def make(**changes) -> WorkloadSpec:
    mapping = copy.deepcopy(BASE)
    mapping.update(changes)
    return parse_workload(mapping, "test.yaml")


def same(a, b) -> bool:
    return len(a) == len(b) and all(
        x.id == y.id and x.index == y.index and x.scope == y.scope and x.cls == y.cls
        and x.arrival_s == y.arrival_s and x.max_new_tokens == y.max_new_tokens
        and x.output_tokens == y.output_tokens and x.slo == y.slo
        and x.cancel_at_s == y.cancel_at_s and x.prompt.dtype == y.prompt.dtype
        and np.array_equal(x.prompt, y.prompt)
        for x, y in zip(a, b))


# --------------------------------------------------------------------------- reading

# Scenario files (*.scenario.yaml) sit next to the bare workloads they name.
@pytest.mark.parametrize("path", sorted(p for p in PUBLIC.glob("*.yaml")
                                        if not p.name.endswith(".scenario.yaml")),
                         ids=lambda p: p.name)
def test_public_workloads_load_and_generate(path):
    spec = load_workload(path)
    requests = generate(spec)
    assert len(requests) == spec.requests
    assert spec.source == str(path)


SCHEMAS = sorted([*(ROOT / "rubrics").glob("*.schema.json"), SCHEMA_PATH], key=lambda p: p.name)


def test_every_schema_is_checked():
    assert [p.name for p in SCHEMAS] == ["design_sheet.schema.json", "diagnosis.schema.json",
                                         "rubric.schema.json", "workload.schema.json"]


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_course_schemas_are_valid_draft_2020_12(path):
    # The workload reader no longer checks its schema at run time; this is where a broken
    # schema file shows.
    import json

    import jsonschema
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    broken = dict(schema, type="no-such-type")
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema(broken)


def test_spec_round_trips_through_mapping():
    spec = make()
    assert parse_workload(to_mapping(spec), "again") == spec
    assert hash(spec) == hash(parse_workload(to_mapping(spec), "again"))


def _set(path, value):
    def mutate(m):
        node = m
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return mutate


@pytest.mark.parametrize("mutate, message", [
    (_set(("arrival", "rate"), -1), "arrival.rate: must be > 0, got -1"),
    (_set(("arrival", "rate"), "fast"), "arrival.rate: must be a number, got a string 'fast'"),
    (_set(("arrival", "rate"), "5e+1"),
     "arrival.rate: must be a number, got a string '5e+1' (YAML reads 5e+1 as text; as a number write 50)"),
    (_set(("arrival", "process"), "gamma"), "arrival: missing key 'cv'"),
    (_set(("arrival", "process"), "weibull"), "arrival.process: must be one of poisson, gamma"),
    (_set(("prompt", "min"), 20000), "prompt.min: must be <= max (16384), got 20000"),
    (_set(("prompt", "mean"), 3), "prompt: unknown key 'mean'"),
    (_set(("prompt", "sigma"), KeyError), "prompt: missing key 'sigma'"),
    (_set(("cancel", "probability"), 1.5), "cancel.probability: must be <= 1, got 1.5"),
    (_set(("cancel", "probability"), -0.1), "cancel.probability: must be >= 0, got -0.1"),
    (_set(("scopes",), []), "scopes: must have at least 1 item, got 0"),
    (_set(("scopes",), KeyError), "missing key 'scopes'"),
    (_set(("scopes", 1, "name"), "acme"), "scopes[1].name: 'acme' is already used by scopes[0]"),
    (_set(("scopes", 0, "prefix_share"), KeyError),
     "scopes[0]: prefix_groups is 2, so prefix_share is required"),
    (_set(("classes",), [{"name": "a", "weight": 0, "ttft_s": 1, "gap_s": 1}]),
     "classes: weights are all zero"),
    (_set(("classes", 0, "ttft_s"), 0), "classes[0].ttft_s: must be > 0, got 0"),
    (_set(("output", "min"), 0), "output.min: must be >= 1, got 0"),
    (_set(("max_new",), {"slack": [3, 1]}), "max_new.slack: must be [lo, hi] with lo <= hi"),
    (_set(("max_new",), {}), "max_new: needs either slack"),
    (_set(("max_new",), {"dist": "choice", "values": [8, 9], "weights": [0, 0]}),
     "max_new.weights: are all zero"),
    (_set(("max_new",), {"dist": "choice", "values": [8, 9], "weights": [1]}),
     "max_new.weights: has 1 weights for 2 values"),
    (_set(("arrival", "rate"), float("nan")), "arrival.rate: must be a finite number, got nan"),
    (_set(("seed",), True), "seed: must be an integer, got a boolean True"),
    (_set(("requests",), 0), "requests: must be >= 1, got 0"),
    (_set(("surprise",), 1), "unknown key 'surprise'"),
])
def test_bad_specs_name_file_and_path(mutate, message):
    mapping = copy.deepcopy(BASE)
    mutate(mapping)
    with pytest.raises(WorkloadError) as info:
        parse_workload(mapping, "public/heavy.yaml")
    text = str(info.value)
    assert text.startswith("public/heavy.yaml: ")
    assert message in text
    assert "\n" not in text


@pytest.mark.parametrize("text, expected", [
    ("name: x\nseed: 1\narrival: {process: poisson\n rate: 3}\n", "bad.yaml:4: invalid YAML"),
    ("name: x\nseed: 1\nname: y\n",
     "bad.yaml:3: invalid YAML: duplicate key 'name' (first at line 1)"),
    ("- 1\n- 2\n", "bad.yaml: the top level must be a mapping, got a list"),
    ("", "bad.yaml: the top level must be a mapping, got nothing"),
])
def test_yaml_errors_name_file_and_line(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert str(info.value).startswith(str(tmp_path / expected))


def test_missing_file():
    with pytest.raises(WorkloadError, match="no such workload file"):
        load_workload("/nonexistent/w.yaml")


# --------------------------------------------------------------------------- overrides

def test_with_overrides_changes_one_thing_and_revalidates():
    spec = make()
    faster = with_overrides(spec, **{"arrival.rate": 8.0, "scopes[1].weight": 2, "requests": 50})
    assert faster.arrival.rate == 8.0 and faster.scopes[1].weight == 2.0 and faster.requests == 50
    assert faster.prompt == spec.prompt and spec.arrival.rate == 4.0
    assert with_overrides(spec, **{"scopes.1.weight": 2}).scopes[1].weight == 2.0
    bursty = with_overrides(spec, arrival={"process": "gamma", "rate": 4.0, "cv": 3.0})
    assert bursty.arrival.cv == 3.0
    with pytest.raises(WorkloadError, match=r"\(with overrides\): arrival.rate: must be > 0"):
        with_overrides(spec, **{"arrival.rate": -1})
    with pytest.raises(WorkloadError, match="scopes has no item 5"):
        with_overrides(spec, **{"scopes[5].weight": 1})
    with pytest.raises(WorkloadError, match="is not a key"):
        with_overrides(spec, **{"arrival..rate": 1})


# --------------------------------------------------------------------------- determinism

def test_same_seed_same_requests_and_other_seed_differs():
    spec = make()
    a, b = generate(spec), generate(spec)
    assert same(a, b)
    assert same(a, generate(spec, seed=spec.seed))
    c = generate(spec, seed=spec.seed + 1)
    assert not same(a, c)
    assert [r.arrival_s for r in a] != [r.arrival_s for r in c]


def test_adding_requests_keeps_earlier_ones():
    short, long = generate(make(requests=100)), generate(make(requests=300))
    assert same(short, long[:100])


# --------------------------------------------------------------------------- sanity

def test_requests_are_well_formed():
    spec = make(requests=4000, cancel={"probability": 0.2,
                                        "after_s": {"dist": "uniform", "min": 0.05, "max": 2.0}})
    requests = generate(spec)
    arrivals = [r.arrival_s for r in requests]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0
    assert [r.id for r in requests] == [f"r{i}" for i in range(len(requests))]
    assert [r.index for r in requests] == list(range(len(requests)))
    slos = {c.name: Slo(c.ttft_s, c.gap_s) for c in spec.classes}
    for r in requests:
        assert r.prompt.dtype == np.int32 and not r.prompt.flags.writeable
        assert 0 <= r.prompt.min() and r.prompt.max() < VOCAB
        assert 1 <= r.output_tokens <= r.max_new_tokens <= 4 * 2048
        assert 1 <= r.prompt_tokens <= 16384 + 512
        assert r.slo == slos[r.cls]
        if r.cancel_at_s is not None:
            assert 0.05 <= r.cancel_at_s - r.arrival_s <= 2.0 + 1e-9
    with pytest.raises(ValueError):
        requests[0].prompt[0] = 1
    cancelled = sum(r.cancel_at_s is not None for r in requests) / len(requests)
    assert abs(cancelled - 0.2) < 0.03
    mean_gap = arrivals[-1] / len(arrivals)
    assert abs(mean_gap * spec.arrival.rate - 1) < 0.1
    acme = sum(r.scope == "acme" for r in requests) / len(requests)
    assert abs(acme - 0.75) < 0.04


def test_no_cancel_section_means_no_cancellations():
    mapping = copy.deepcopy(BASE)
    del mapping["cancel"]
    assert all(r.cancel_at_s is None for r in generate(parse_workload(mapping)))


def test_max_new_distribution_caps_output():
    spec = make(max_new={"dist": "fixed", "value": 64})
    requests = generate(spec)
    assert all(r.max_new_tokens == 64 and 1 <= r.output_tokens <= 64 for r in requests)
    assert any(r.output_tokens == 64 for r in requests)


def _prefix_spec(shared: bool, share: float = 1.0):
    group = {"prefix_groups": 2, "prefix_tokens": {"dist": "fixed", "value": 64},
             "prefix_share": share}
    return make(requests=600, prompt={"dist": "fixed", "value": 10},
                scopes=[{"name": "acme", **group}, {"name": "globex", **group}],
                shared_text_across_scopes=shared)


def _heads(requests, scope):
    return {r.prompt[:64].tobytes() for r in requests if r.scope == scope}


def test_prefix_groups_share_within_scope_and_differ_across():
    requests = generate(_prefix_spec(shared=False))
    assert all(r.prompt_tokens == 64 + 10 for r in requests)
    acme, globex = _heads(requests, "acme"), _heads(requests, "globex")
    assert len(acme) == 2 and len(globex) == 2
    assert not acme & globex
    # own tokens after the prefix are fresh per request
    assert len({r.prompt[64:].tobytes() for r in requests}) == len(requests)


def test_shared_text_across_scopes_gives_identical_prefixes():
    requests = generate(_prefix_spec(shared=True))
    assert _heads(requests, "acme") == _heads(requests, "globex")
    assert len(_heads(requests, "acme")) == 2


def test_prefix_share_is_a_probability():
    requests = generate(_prefix_spec(shared=False, share=0.3))
    with_prefix = sum(r.prompt_tokens == 74 for r in requests) / len(requests)
    assert abs(with_prefix - 0.3) < 0.06
    assert all(r.prompt_tokens in (10, 74) for r in requests)


def _gap_cv(spec):
    arrivals = np.array([r.arrival_s for r in generate(spec)])
    gaps = np.diff(np.concatenate(([0.0], arrivals)))
    return gaps.std() / gaps.mean(), gaps.mean()


def test_gamma_arrivals_are_burstier_than_poisson():
    poisson_cv, poisson_mean = _gap_cv(make(requests=5000))
    gamma_cv, gamma_mean = _gap_cv(make(requests=5000,
                                        arrival={"process": "gamma", "rate": 4.0, "cv": 3.0}))
    assert 0.9 < poisson_cv < 1.1
    assert gamma_cv > 2.0
    assert abs(gamma_mean * 4.0 - 1) < 0.2


def test_generation_of_100k_requests_timing():
    spec = make(requests=100_000, prompt={"dist": "fixed", "value": 1024},
                scopes=[{"name": "acme"}])
    start = time.perf_counter()
    requests = generate(spec)
    elapsed = time.perf_counter() - start
    print(f"\ngenerate: 100,000 requests x 1,024 prompt tokens in {elapsed:.2f} s")
    assert len(requests) == 100_000


# --------------------------------------------------------------------------- properties

def _dists(low: int, high: int):
    bounds = st.tuples(st.integers(low, high), st.integers(low, high)).map(sorted)
    return st.one_of(
        st.builds(lambda v: {"dist": "fixed", "value": v}, st.integers(low, high)),
        bounds.map(lambda b: {"dist": "uniform", "min": b[0], "max": b[1]}),
        st.builds(lambda b, m, s: {"dist": "lognormal", "median": m, "sigma": s,
                                   "min": b[0], "max": b[1]},
                  bounds, st.floats(0.5, 5000), st.floats(0, 3)),
        st.lists(st.tuples(st.integers(low, high), st.floats(0.01, 5)), min_size=1, max_size=4)
        .map(lambda pairs: {"dist": "choice", "values": [v for v, _ in pairs],
                            "weights": [w for _, w in pairs]}),
    )


_scope = st.builds(
    lambda i, w, g, p, s: {"name": f"s{i}", "weight": w, "prefix_groups": g,
                           "prefix_tokens": p, "prefix_share": s},
    st.integers(), st.floats(0.01, 10), st.integers(0, 3), _dists(1, 300), st.floats(0, 1))

_valid = st.fixed_dictionaries({
    "name": st.text(min_size=1, max_size=5),
    "seed": st.integers(0, 2**64),
    "requests": st.integers(1, 150),
    "arrival": st.one_of(
        st.builds(lambda r: {"process": "poisson", "rate": r}, st.floats(0.01, 1000)),
        st.builds(lambda r, cv: {"process": "gamma", "rate": r, "cv": cv},
                  st.floats(0.01, 1000), st.floats(0.05, 20))),
    "prompt": _dists(0, 2000),
    "output": _dists(1, 500),
    "max_new": st.one_of(
        st.tuples(st.floats(0.1, 5), st.floats(0.1, 5)).map(lambda s: {"slack": sorted(s)}),
        _dists(1, 500)),
    "scopes": st.lists(_scope, min_size=1, max_size=3),
    "classes": st.lists(st.builds(lambda w, t, g: {"weight": w, "ttft_s": t, "gap_s": g},
                                  st.floats(0.01, 5), st.floats(0.01, 60), st.floats(0.001, 5)),
                        min_size=1, max_size=3),
    "cancel": st.builds(lambda p, a: {"probability": p, "after_s": a},
                        st.floats(0, 1), _dists(0, 100)),
    "shared_text_across_scopes": st.booleans(),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_valid)
def test_valid_random_specs_generate_valid_requests(mapping):
    for i, scope in enumerate(mapping["scopes"]):
        scope["name"] = f"scope{i}"
    for i, cls in enumerate(mapping["classes"]):
        cls["name"] = f"class{i}"
    spec = parse_workload(mapping, "random.yaml")
    requests = generate(spec)
    assert len(requests) == spec.requests
    last = 0.0
    for i, r in enumerate(requests):
        assert r.index == i and r.id == f"r{i}"
        assert math.isfinite(r.arrival_s) and r.arrival_s >= last
        last = r.arrival_s
        assert r.prompt.dtype == np.int32 and not r.prompt.flags.writeable
        assert r.prompt_tokens == 0 or (r.prompt.min() >= 0 and r.prompt.max() < VOCAB)
        assert 1 <= r.output_tokens <= r.max_new_tokens
        assert r.cancel_at_s is None or r.cancel_at_s >= r.arrival_s
        assert r.scope in {s.name for s in spec.scopes} and r.cls in {c.name for c in spec.classes}
    assert same(requests, generate(spec))


_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=6))
_junk = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(sorted(BASE) + ["dist", "value", "min", "max",
                                                               "slack", "rate", "process"]),
                              st.text(max_size=4), st.integers()),
                    inner, max_size=5)), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_junk)
def test_junk_gives_workload_error_only(junk):
    try:
        parse_workload(junk, "junk.yaml")
    except WorkloadError as exc:
        assert str(exc).startswith("junk.yaml: ") and "\n" not in str(exc)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["arrival", "prompt", "output", "max_new", "scopes",
                                 "cancel", "classes", "requests", "seed"]),
                min_size=1, max_size=3), _junk)
def test_junk_inside_a_valid_spec_gives_workload_error_only(keys, junk):
    mapping = copy.deepcopy(BASE)
    for key in keys:
        mapping[key] = junk
    try:
        spec = parse_workload(mapping, "junk.yaml")
    except WorkloadError as exc:
        assert str(exc).startswith("junk.yaml: ") and "\n" not in str(exc)
    else:
        assert isinstance(spec, WorkloadSpec)


# --------------------------------------------------------------------------- secret seeds

def test_derive_seed_is_stable_and_label_sensitive():
    secret = b"instructor secret"
    seed = derive_seed(secret, "lesson2", "heavy", "0")
    assert seed == derive_seed(secret, "lesson2", "heavy", "0")
    assert 0 <= seed < 2**63
    assert seed != derive_seed(secret, "lesson2", "heavy", "1")
    assert seed != derive_seed(b"other secret", "lesson2", "heavy", "0")
    assert derive_seed(secret, "a", "b") != derive_seed(secret, "ab")
    with pytest.raises(ValueError):
        derive_seed(secret, "a\x1fb")
    spec = make(requests=20)
    assert same(generate(spec, seed), generate(spec, derive_seed(secret, "lesson2", "heavy", "0")))


def test_load_secret_errors_name_the_file(tmp_path):
    good = tmp_path / "secret"
    good.write_bytes(b"s3cret of the course\n")
    assert load_secret(good) == b"s3cret of the course"
    empty = tmp_path / "empty"
    empty.write_bytes(b"  \n")
    for path, fragment in [(empty, "empty"), (tmp_path / "missing", "not found"),
                           (tmp_path, "directory")]:
        with pytest.raises(SecretError) as info:
            load_secret(path)
        assert str(info.value).startswith(str(path)) and fragment in str(info.value)


def test_instance_digest():
    digest = instance_digest('{"a": 1}')
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert digest != instance_digest('{"a": 2}')


def test_a_scenario_generates_its_requests_once_and_travels_without_them():
    import pickle
    from grader.course.scenario import load_scenario
    from grader.engine.layout import find_course
    root = Path(__file__).resolve().parent.parent
    s = load_scenario(root / "assignments/lesson2/public/bursts.scenario.yaml", find_course(str(root)))
    def same(a, b):       # Request compares by identity (eq=False): by their fields here
        return [(r.id, r.arrival_s, r.prompt.tobytes(), r.output_tokens) for r in a] == \
               [(r.id, r.arrival_s, r.prompt.tobytes(), r.output_tokens) for r in b]
    first = s.requests()
    assert s.requests() is first and same(first, generate(s.workload, s.seed))
    assert all(not r.prompt.flags.writeable for r in first)       # shared, so read-only
    # Two runs on the shared requests are the runs of fresh ones.
    from grader.engine.oracle import reference_policy
    runs = [s.run(reference_policy(s.sheet)).digest() for _ in range(2)]
    fresh = load_scenario(root / "assignments/lesson2/public/bursts.scenario.yaml", find_course(str(root)))
    assert runs == [fresh.run(reference_policy(fresh.sheet)).digest()] * 2
    back = pickle.loads(pickle.dumps(s))
    assert back == s and "_requests" not in back.__dict__ and len(pickle.dumps(s)) < 10_000
    assert same(back.requests(), first)


def test_the_worker_stands_alone_outside_the_course(tmp_path):
    """reference/ is the public worker: installed without the course around it (pip install
    without -e puts it in site-packages), it reads a workload and runs it. A path from the
    package to a course folder (the workload schema once lived in rubrics/) breaks that."""
    import shutil
    import subprocess
    import sys
    shutil.copytree(ROOT / "reference", tmp_path / "reference",
                    ignore=shutil.ignore_patterns("__pycache__", "solutions"))
    code = """
import reference, yaml
from reference.baselines import baseline_policy
from reference.specs import model_from, worker_from
from reference.workload import parse_workload, generate
from reference.worker import simulate
machines = yaml.safe_load(open(MACHINES))
spec = parse_workload({"name": "alone", "seed": 3, "requests": 20,
                       "arrival": {"process": "poisson", "rate": 4.0},
                       "prompt": {"dist": "fixed", "value": 300}, "output": {"dist": "fixed", "value": 20},
                       "scopes": [{"name": "a"}],
                       "classes": [{"name": "c", "weight": 1, "ttft_s": 10.0, "gap_s": 0.5}]}, "inline")
run = simulate(model_from(machines["models"]["gqa-8b-bf16"], "m"), worker_from(machines["workers"]["a80"], "w"),
               baseline_policy(), generate(spec))
print(reference.__file__, sum(r.outcome == "completed" for r in run.requests))
""".replace("MACHINES", repr(str(ROOT / "assignments" / "worker.yaml")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={**env, "PYTHONPATH": str(tmp_path)}, timeout=120)
    assert p.returncode == 0, p.stderr[-1500:]
    where, records = p.stdout.split()
    assert where.startswith(str(tmp_path)) and int(records) == 20
