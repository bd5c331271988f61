"""Lesson 5's rule probes: paired-seed summaries built so that one clause of the rule decides.

The release suite's candidates are real designs run on the worker, and a real design moves
many numbers at once: a rule that ignores min_gain, pairs runs by position, or leaves the
rejected out of a class's attainment can still decide every one of them right. A rule probe
is a baseline and a candidate summarised per seed (RunSummary, what decide_release sees)
whose numbers are chosen so that exactly one clause decides, with margins wide enough that
every correct reading of the rule agrees, and so that a decision criterion can be judged on
both sides of its decision:

- ``clear-gain``: goodput up far beyond the noise band and min_gain, nothing else moves: ship;
- ``under-min-gain``: beyond the band but under min_gain: inconclusive;
- ``fall``: goodput down beyond the band, with every class's attainment inside the guard:
  rollback;
- ``paired``: seeds that differ a lot from each other, the candidate's runs listed in
  another order than the baseline's and one of them on a seed the baseline lacks; paired
  by seed the gain is far beyond its band, unpaired (or paired by position) it is not: ship;
- ``paired-small``: the same shape, with a gain inside the band and under min_gain: inconclusive;
- ``class-rejected``: one small class loses requests to rejections: its attainment counts
  them and falls beyond the guard, while the service's rejected share stays inside its
  allowance and goodput rises: rollback;
- ``class-inside``: one class dips, inside the guard, and goodput rises: ship;
- ``rejections-inside``: the rejected share rises, inside its allowance, and goodput rises: ship;
- ``tpot-worse``: the mean TPOT gets worse and goodput rises: ship (the TPOT decides nothing);
- ``fall-inside``: goodput falls, inside the noise band (by more than half of it), and no guard
  trips: inconclusive (a fall is a rollback only beyond the band);
- ``one-pair``: a clear gain on the one seed the two sides share: inconclusive (one pair has
  no spread, so its band is infinite);
- ``class-excluded``: one class has many more requests its clients cancelled before any miss
  (excluded), its attainment among the counted requests unchanged, and goodput rises: ship
  (excluded requests are out of the attainment's denominator);
- ``class-zero``: one class's attainment falls to zero while goodput rises: rollback (an
  attainment of 0.0 is a number, not a missing one);
- ``class-inside-low``: a large class with low attainment dips, inside its guard in points
  (but by more than the guard as a share of itself, and by more than the guard in good
  requests per second), while goodput rises: ship;
- ``rejections-one-class``: the rejected share rises inside its allowance, all of it in one
  small class whose own rejected share rises beyond it, its attainment unchanged: ship (the
  allowance is on the service's share);
- ``paired-stray``: the baseline has a run on a seed the candidate lacks, with a far higher
  goodput; the paired gain is beyond the band and min_gain: ship (a run without a pair is
  left out of the baseline's mean goodput too);
- ``gain-inside``: a gain well over min_gain, inside the noise band but by more than half of
  it: inconclusive (a band half as wide, s / n for s / sqrt(n), would ship it);
- ``rejections-fall``: the rejected share falls by more than the allowance, while goodput
  rises: ship (the guard is on a rise);
- ``class-rise``: one class's attainment rises by more than the guard, while goodput rises:
  ship (the guard is on a fall);
- ``rejections-high``: both sides reject 1.5 times the allowance, the candidate no more than
  the baseline, while goodput rises: ship (the guard is on the rise from the baseline, not on
  the candidate's share);
- ``class-one-seed``: one class dips by 1.5 times the guard on one seed and not on the others,
  inside the guard over the paired runs together, while goodput rises: ship (a class's
  attainment is taken over all its paired runs, not seed by seed);
- ``paired-windows``: seeds whose windows are far apart (one eight times the others), the same
  gain in good requests per second on each: ship (a run's goodput is per second of its own
  window: the good requests' differences, or the attainments', spread with the window).
- ``skewed``: one seed gains far more than the others, the paired differences' mean beyond the
  band and min_gain, their median inside the band: ship (the band is about the mean).

Near every threshold, so that a rule that reads a threshold as a number of its own (the
README's defaults written in, where the hidden rule's differ) decides one of them otherwise,
and so that every guard is seen to trip where goodput does not rise:

- ``class-flat``: the larger class falls by 1.2 times its guard while the other class wins
  those requests back, less a fall of goodput inside the band: rollback (a guard trips
  whatever goodput does; the class that pays is not the small one);
- ``rejections-flat``: the rejected share rises by 1.25 times its allowance, the requests
  refused being ones served late, and goodput falls inside the band: rollback;
- ``class-near``: the larger class dips by 0.75 times its guard, the other class gains more,
  goodput rises clearly: ship;
- ``rejections-near``: the rejected share rises by 0.75 times its allowance, goodput rises
  clearly: ship;
- ``gain-near-min``: a gain beyond the band of 0.7 to 0.8 times min_gain: inconclusive;
- ``gain-inside-near``: a gain of 1.6 min_gain at about 75% of its band: inconclusive.

And, drawn after those, the outcomes a class summary counts that no kind above moved:

- ``class-failed``: ``class-rejected`` with the small class's lost requests failed instead
  of rejected: rollback (a failed request counts against its class, as a rejected one does);
- ``fall-excluded``: goodput falls beyond the band while many more requests are cancelled
  before any miss: rollback (an excluded request is not a good one, in goodput as in
  attainment);
- ``tpot-better``: a gain under min_gain and inside the band (so that only a rule that trusts
  the TPOT ships it), with a mean TPOT far better than the baseline's: inconclusive (the TPOT
  does not break a tie).

And, drawn last, a run and a class told by what names them, the seed and the class's name,
not by where they stand, a band over more seeds than four, a rejection guard seed by seed,
and two sides that share no seed:

- ``paired-stray-rejects``: ``clear-gain`` with one more candidate run, on a seed the
  baseline lacks, that refuses 35% of its batch class's requests, ones it served late
  (the class's attainment does not move): ship (a run without a pair is left out of both
  guards, the rejection guard too);
- ``classes-reordered``: ``class-inside`` with the candidate's classes listed in the other
  order: ship (a class is its name: compared position by position, one class's attainment
  is held against the other's);
- ``many-seeds``: nine paired seeds and a gain of about 1.3 times their band: ship (the
  band is of the pairs there are: over four seeds, whatever their number, it is 1.5 times
  as wide and swallows the gain);
- ``rejections-one-seed``: ``clear-gain`` with one seed's candidate run refusing 1.5 times the
  allowance of its requests, ones its batch class served late, and no other seed refusing any:
  ship (the rejected share is taken over the paired runs together, 0.375 times the allowance
  here, not seed by seed);
- ``no-pair``: ``clear-gain`` with the candidate's runs on seeds the baseline never ran:
  inconclusive (no pair, nothing to compare: the rule leaves every unpaired run out, and
  with fewer than two pairs the band is infinite; a rule that compares the two sides' means
  instead ships it, and one that takes a mean of nothing raises);
- ``skewed-many``: nine paired seeds, one gaining eight spreads above the mean and the others
  one below: ship (the mean is beyond the band; without its highest and lowest seed, a
  trimmed mean, it is inside);
- ``gain-unequal-base``: baseline goodputs far apart from seed to seed and about the same gain
  on each, beyond the band: inconclusive (the gain is under min_gain of the baseline's mean
  goodput; as the mean of each seed's own ratio it is over).

A run without a pair (``paired``, ``paired-small``, ``paired-stray``) is on a seed below every
paired one, so it sorts first: pairing the two sides' runs sorted by seed, position by position,
misses each pair, as pairing them in the order given does.

Each class has the same number of requests in every run, so pooled and per-run attainment
are the same number; the other readings (sample or population deviation, each threshold
10% either way) are checked by ``robust``, and ``isolates`` checks that the kind's clause
alone decides (a fall with no class near its guard; a rejected-heavy class that would not
fall with its rejected left out; seeds spread so far that an unpaired band, or pairing by
position, would not ship), and that no other kind's mistake decides it otherwise (outside
the paired kinds, seeds so alike that a change beyond the paired band is beyond an unpaired
band too). A draw that fails either is drawn again.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import replace

import numpy as np

from grader.course import slo
from grader.engine.oracle import reference_solution
from reference.shapes import ClassSummary, ReleaseRule, RunSummary


def _reference():
    """Lesson 5's reference solution: probes are drawn where it is (the course; the learner
    edition has the public ones recorded with lesson 5's public cases)."""
    return reference_solution("lesson5")


SEEDS = 4
EXPECT = {"clear-gain": "ship", "under-min-gain": "inconclusive", "fall": "rollback", "paired": "ship",
          "paired-small": "inconclusive", "class-rejected": "rollback", "class-inside": "ship",
          "rejections-inside": "ship", "tpot-worse": "ship",
          # Drawn after the kinds above, so their draws stay what they were.
          "fall-inside": "inconclusive", "one-pair": "inconclusive", "class-excluded": "ship",
          "class-zero": "rollback", "class-inside-low": "ship", "rejections-one-class": "ship",
          "paired-stray": "ship",
          "gain-inside": "inconclusive", "rejections-fall": "ship", "class-rise": "ship",
          "paired-windows": "ship", "rejections-high": "ship", "class-one-seed": "ship",
          "skewed": "ship",
          # Near every threshold (drawn last, so the kinds above keep their draws).
          "class-flat": "rollback", "rejections-flat": "rollback", "class-near": "ship",
          "rejections-near": "ship", "gain-near-min": "inconclusive", "gain-inside-near": "inconclusive",
          "class-failed": "rollback", "fall-excluded": "rollback", "tpot-better": "inconclusive",
          # Drawn last: runs and classes by what names them, the band's n, a guard per seed.
          "paired-stray-rejects": "ship", "classes-reordered": "ship", "many-seeds": "ship",
          "rejections-one-seed": "ship", "no-pair": "inconclusive",
          # Drawn after every kind above: the mean over many seeds, and the gain relative to
          # the baseline's mean goodput.
          "skewed-many": "ship", "gain-unequal-base": "inconclusive"}
KINDS = tuple(EXPECT)
NOTES = {
    "clear-gain": "goodput up far beyond the noise band and min_gain; nothing else moves",
    "under-min-gain": "goodput up beyond the noise band, but by less than min_gain",
    "fall": "goodput down beyond the noise band; every class inside its guard",
    "paired": "seeds far apart, the candidate's runs in another order and one on a seed the baseline lacks",
    "paired-small": "seeds far apart, runs in another order and one on a seed the baseline lacks; "
                    "a gain inside the paired band",
    "class-rejected": "one small class loses requests to rejections; the service's rejected share barely moves",
    "class-inside": "one class dips, inside its guard, while goodput rises",
    "rejections-inside": "the rejected share rises, inside its allowance, while goodput rises",
    "tpot-worse": "the mean time per output token gets worse while goodput rises",
    "fall-inside": "goodput falls, inside the noise band; no guard trips",
    "one-pair": "a clear gain, on the one seed the baseline and the candidate share",
    "class-excluded": "one class has many more requests cancelled before any miss; its attainment "
                      "among the requests that count does not move; goodput rises",
    "class-zero": "one class loses every good request while goodput rises",
    "class-inside-low": "a large class with low attainment dips, inside its guard, while goodput rises",
    "rejections-one-class": "the rejected share rises, inside its allowance, all of it in one small class",
    "paired-stray": "the baseline has one more run, on a seed the candidate lacks, with a far higher goodput",
    "gain-inside": "a gain over min_gain, inside the noise band (by more than half of it)",
    "rejections-fall": "the rejected share falls by more than its allowance, while goodput rises",
    "class-rise": "one class's attainment rises by more than its guard, while goodput rises",
    "paired-windows": "seeds whose windows are far apart; the same gain per second on each",
    "rejections-high": "both sides reject more than the allowance, the candidate no more than the baseline",
    "class-one-seed": "one class dips beyond its guard on one seed, inside it over the paired runs, while goodput rises",
    "skewed": "one seed gains far more than the others; the mean gain is beyond the band, the median inside it",
    "class-flat": "the larger class falls beyond its guard, the other wins its requests back; goodput "
                  "falls a little, inside the noise band",
    "rejections-flat": "the rejected share rises beyond its allowance; goodput falls a little, inside the noise band",
    "class-near": "the larger class dips by three quarters of its guard while goodput rises",
    "rejections-near": "the rejected share rises by three quarters of its allowance while goodput rises",
    "gain-near-min": "goodput up beyond the noise band, by a little less than min_gain",
    "gain-inside-near": "a gain over min_gain, inside the noise band (by three quarters of it)",
    "class-failed": "one small class loses requests to failures while goodput rises",
    "fall-excluded": "goodput down beyond the noise band, while many more requests are cancelled before any miss",
    "tpot-better": "a gain too small or too noisy to ship, with a far better mean time per output token",
    "paired-stray-rejects": "a clear gain; the candidate has one more run, on a seed the baseline lacks, "
                            "that refuses many requests",
    "classes-reordered": "one class dips, inside its guard, while goodput rises; the candidate lists its "
                         "classes in another order",
    "many-seeds": "goodput up beyond the noise band of nine paired seeds, by about 1.3 times it",
    "rejections-one-seed": "a clear gain; one seed's candidate run refuses more than the allowance, "
                           "the others none",
    "no-pair": "a clear gain, the candidate's runs all on seeds the baseline never ran",
    "skewed-many": "nine paired seeds, one gaining far more than the others; the mean gain is beyond the band, "
                   "the mean without the highest and lowest seed inside it",
    "gain-unequal-base": "baseline goodputs far apart from seed to seed and the same gain on each: under min_gain "
                         "of the baseline's mean goodput, over it as the mean of the seeds' own ratios",
}
PATTERN = (1, -1, 1, -1)          # the paired differences' spread: sample deviation a * 2/sqrt(3)


def _readings(rule: ReleaseRule, n: int):
    """The rule, each threshold 10% either way, and the population deviation's band (the
    same band as the sample deviation's with noise_k scaled by sqrt((n - 1) / n)). With no
    pair there is no deviation of either kind to read."""
    yield rule
    for name in ("min_gain", "noise_k", "max_class_drop", "max_rejection_rise"):
        for f in (0.9, 1.1):
            yield replace(rule, **{name: getattr(rule, name) * f})
    if n:
        yield replace(rule, noise_k=rule.noise_k * math.sqrt((n - 1) / n))


def robust(baseline, candidate, rule: ReleaseRule, expect: str) -> bool:
    n = len(_reference().paired(baseline, candidate))
    return all(_reference().decide_release(baseline, candidate, r).decision == expect for r in _readings(rule, n))


def _cls(name: str, requests: int, good: int, rejected: int = 0) -> ClassSummary:
    return ClassSummary(name, requests, good=good, slow_tokens=requests - good - rejected, rejected=rejected)


class _Draw:
    """One service's shape: two classes, a window, seed effects; runs built from changes."""

    def __init__(self, g: np.random.Generator, seed0: int):
        self.g = g
        self.window = float(g.integers(40, 81))
        self.small = int(g.integers(50, 81))           # interactive requests per run
        self.large = int(g.integers(500, 801))         # batch requests per run
        self.small_good = int(round(self.small * g.uniform(0.75, 0.9)))
        self.large_good = int(round(self.large * g.uniform(0.45, 0.6)))
        self.seeds = tuple(seed0 + i for i in range(SEEDS))
        self.stray = seed0 - 1          # a seed without a pair: below the paired ones, it sorts first
        self.tpot = float(g.uniform(0.02, 0.05))

    def effects(self, spread: int) -> list[int]:
        return [int(x) for x in self.g.integers(-spread, spread + 1, size=SEEDS)]

    def run(self, seed: int, effect: int, *, small_lost: int = 0, small_rejected: int = 0,
            large_gain: int = 0, large_rejected: int = 0, tpot: float = 1.0) -> RunSummary:
        small = _cls("interactive", self.small, self.small_good - small_lost - small_rejected, small_rejected)
        large = _cls("batch", self.large, self.large_good + effect + large_gain, large_rejected)
        return RunSummary(seed=seed, window_s=self.window, classes=(small, large), mean_tpot_s=self.tpot * tpot)

    def gain(self, fraction: float) -> int:
        """Good requests per run that raise goodput by ``fraction``."""
        return max(1, int(round(fraction * (self.small_good + self.large_good))))


def _build(kind: str, d: _Draw, rule: ReleaseRule):
    g = d.g
    quiet = d.effects(max(1, int(d.large * 0.005)))      # seeds alike: pairing barely matters
    base = [d.run(s, e) for s, e in zip(d.seeds, quiet)]
    spread = int(g.integers(1, 4))                       # the paired differences' pattern size
    band = spread * 2 / math.sqrt(3) * rule.noise_k / math.sqrt(SEEDS)   # in good requests

    def cand(diffs, **kw):
        return [d.run(s, e, large_gain=x, **kw) for s, e, x in zip(d.seeds, quiet, diffs)]

    def around(mean: int):
        return [mean + spread * p for p in PATTERN]

    clear = max(d.gain(rule.min_gain * 3), int(4 * band) + 1)
    if kind == "clear-gain":
        return base, cand(around(clear))
    if kind == "under-min-gain":
        mean = d.gain(rule.min_gain * float(g.uniform(0.35, 0.6)))
        return base, [d.run(s, e, large_gain=mean) for s, e in zip(d.seeds, quiet)]
    if kind == "fall":
        drop = max(int(4 * band) + 1, int(d.large * 0.01))   # batch attainment falls ~1-2 points
        return base, cand(around(-drop))
    if kind in ("paired", "paired-small"):
        wide = d.effects(int(d.large * 0.15))
        base = [d.run(s, e) for s, e in zip(d.seeds, wide)]
        mean = clear if kind == "paired" else 0
        diffs = around(mean) if kind == "paired" else [spread * p for p in PATTERN]
        runs = [d.run(s, e, large_gain=x) for s, e, x in zip(d.seeds, wide, diffs)]
        order = [runs[i] for i in (2, 3, 1, 0)]         # no run at its baseline's position
        stray = d.run(d.stray, -int(d.large * 0.3))       # a seed the baseline never ran
        return base, order[:2] + [stray] + order[2:]
    if kind == "class-rejected":
        # Half the allowance of the service's rejected share, all of it in a class small
        # enough that losing those requests is 1.5 times its guard.
        most = max(1, int((d.small + d.large) * rule.max_rejection_rise * 0.5))
        d.small = min(d.small, int(most / (1.5 * rule.max_class_drop)))
        lost = min(most, math.ceil(1.5 * rule.max_class_drop * d.small))
        d.small_good = max(lost + 1, int(round(d.small * 0.8)))
        base = [d.run(s, e) for s, e in zip(d.seeds, quiet)]
        return base, cand(around(clear + lost), small_rejected=lost)
    if kind == "class-inside":
        lost = max(1, int(d.small * rule.max_class_drop * 0.4))         # 40% of the guard
        return base, cand(around(clear + lost), small_lost=lost)
    if kind == "rejections-inside":
        rejected = max(1, int((d.small + d.large) * rule.max_rejection_rise * 0.4))
        return base, cand(around(clear), large_rejected=rejected)
    if kind == "tpot-worse":
        return base, cand(around(clear), tpot=float(g.uniform(1.2, 1.6)))
    return _build_more(kind, d, rule, base, cand, around, clear, band)


def _build_more(kind: str, d: _Draw, rule: ReleaseRule, base, cand, around, clear: int, band: float):
    g = d.g
    if kind == "fall-inside":
        # A fall of about 63% of the band (see _inside), the band widened so that this is a
        # whole number of requests. The fall is small against min_gain: one over it would move
        # a class's attainment, as a share of itself, by about the guard.
        spread = int(g.integers(3, 6))
        band = spread * 2 / math.sqrt(3) * rule.noise_k / math.sqrt(SEEDS)
        fall = max(1, round(0.63 * band))
        return base, cand([-fall + spread * p for p in PATTERN])
    if kind == "one-pair":
        shared = int(g.integers(0, SEEDS))
        return base, [cand(around(clear))[shared]]
    if kind == "class-excluded":
        # A quarter of the class cancelled before any miss, taken from its good and its other
        # requests in proportion: among the requests that count, its attainment stays.
        gone = d.small // 4
        gone_good = round(gone * d.small_good / d.small)
        good, other = d.small_good - gone_good, d.small - d.small_good - (gone - gone_good)
        runs = cand(around(clear + gone_good))
        small = ClassSummary("interactive", d.small, good=good, slow_tokens=other, excluded=gone)
        return base, [replace(r, classes=(small,) + r.classes[1:]) for r in runs]
    if kind == "class-zero":
        return base, cand(around(clear + d.small_good), small_lost=d.small_good)
    if kind == "class-inside-low":
        # The dipping class is large (several requests a second) and mostly late: 40% of the
        # guard in points is more than the guard as a share of its attainment, and more than
        # the guard in good requests per second.
        d.small = int(g.integers(300, 401))
        d.small_good = int(round(d.small * g.uniform(0.2, 0.3)))
        d.window = float(g.integers(40, 61))
        lost = max(1, int(d.small * rule.max_class_drop * 0.4))
        clear = max(d.gain(rule.min_gain * 3), int(4 * band) + 1)
        return ([d.run(s, 0) for s in d.seeds],
                [d.run(s, 0, large_gain=x, small_lost=lost) for s, x in zip(d.seeds, around(clear + lost))])
    if kind == "rejections-one-class":
        # 1.5 times the allowance of the small class's own requests, under half the allowance
        # of the service's; the class keeps every good request it had.
        rejected = math.ceil(1.5 * rule.max_rejection_rise * d.small)
        runs = cand(around(clear))
        small = ClassSummary("interactive", d.small, good=d.small_good, rejected=rejected,
                             slow_tokens=d.small - d.small_good - rejected)
        return base, [replace(r, classes=(small,) + r.classes[1:]) for r in runs]
    if kind == "paired-stray":
        # A gain of 1.3 min_gain; a stray baseline run with five times the goodput (a fifth
        # of the window), counted in the baseline's mean, cuts it under min_gain.
        gain = max(d.gain(rule.min_gain * 1.3), int(4 * band) + 1)
        runs = cand(around(gain))
        stray = replace(d.run(d.stray, 0), window_s=d.window / 5)
        return base + [stray], runs
    return _build_last(kind, d, rule, around, clear, band)


def _build_last(kind: str, d: _Draw, rule: ReleaseRule, around, clear: int, band: float):
    g = d.g
    if kind == "gain-inside":
        return _inside(d, rule)
    if kind == "rejections-high":
        # Both sides reject 1.5 times the allowance of the service's requests: the share is
        # high and does not rise.
        rejected = math.ceil(1.5 * rule.max_rejection_rise * (d.small + d.large))
        quiet = d.effects(1)
        return ([d.run(s, e, large_rejected=rejected) for s, e in zip(d.seeds, quiet)],
                [d.run(s, e, large_rejected=rejected, large_gain=x) for s, e, x in zip(d.seeds, quiet, around(clear))])
    if kind == "rejections-fall":
        # The baseline rejects 1.5 times the allowance of the service's requests, all in the
        # batch class; the candidate serves them late, so a class's attainment moves only by
        # the gain, in a class of low attainment where the gain is a few points.
        d.large_good = int(round(d.large * g.uniform(0.2, 0.3)))
        rejected = math.ceil(1.5 * rule.max_rejection_rise * (d.small + d.large))
        gain = max(d.gain(rule.min_gain * 1.5), int(2 * band) + 1)
        quiet = d.effects(1)
        return ([d.run(s, e, large_rejected=rejected) for s, e in zip(d.seeds, quiet)],
                [d.run(s, e, large_gain=x) for s, e, x in zip(d.seeds, quiet, around(gain))])
    if kind == "class-rise":
        # The small class turns 1.5 times its guard of late requests into good ones.
        risen = math.ceil(1.5 * rule.max_class_drop * d.small)
        d.small_good = min(d.small_good, d.small - risen)
        quiet = d.effects(1)
        return ([d.run(s, e) for s, e in zip(d.seeds, quiet)],
                [d.run(s, e, small_lost=-risen, large_gain=x) for s, e, x in zip(d.seeds, quiet, around(clear))])
    if kind == "class-one-seed":
        lost = math.ceil(1.5 * rule.max_class_drop * d.small)
        dips = [0] * SEEDS
        dips[int(g.integers(0, SEEDS))] = lost
        quiet = d.effects(1)
        return ([d.run(s, e) for s, e in zip(d.seeds, quiet)],
                [d.run(s, e, small_lost=l, large_gain=x) for s, e, l, x in zip(d.seeds, quiet, dips, around(clear))])
    if kind == "paired-windows":
        # As many requests on every seed, one seed's window eight times the others' (its
        # arrivals sparser), and the same good requests per second gained on each seed: eight
        # times the good requests on the long one. Differences in good requests, or in
        # attainment, spread with the window, and their band swallows the gain.
        d.large_good = int(round(d.large * g.uniform(0.25, 0.35)))
        scale = [1, 1, 1, 8]
        g.shuffle(scale)
        base_rate = (d.small_good + d.large_good) * sum(1 / m for m in scale) / len(scale)
        gain = max(math.ceil(rule.min_gain * 1.5 * base_rate), int(4 * band) + 1)
        base, cand = [], []
        for s, m, x in zip(d.seeds, scale, around(gain)):
            window = d.window * m
            base.append(replace(d.run(s, 0), window_s=window))
            cand.append(replace(d.run(s, 0, large_gain=x * m), window_s=window))
        return base, cand
    if kind == "skewed":
        return _skewed(d, rule)
    return _build_near(kind, d, rule, around, clear, band)


def _build_near(kind: str, d: _Draw, rule: ReleaseRule, around, clear: int, band: float):
    """Near a threshold: 1.2 or 1.25 times a guard (beyond it under every reading, inside
    the README's default where the rule's is lower), 0.75 times one (inside it, beyond the
    default where the rule's is higher), 0.7 to 0.8 times min_gain, 0.75 of the band."""
    g = d.g
    if kind in ("class-flat", "class-near"):
        # The interactive class is as large as a class that wins the batch class's requests
        # back must be; the batch class, the larger, is the one that moves.
        d.small = int(g.integers(300, 401))
        d.small_good = int(round(d.small * g.uniform(0.3, 0.4)))
        quiet = d.effects(1)
        base = [d.run(s, e) for s, e in zip(d.seeds, quiet)]
        factor = 1.2 if kind == "class-flat" else 0.75
        lost = round(factor * rule.max_class_drop * d.large)
        if kind == "class-flat":
            spread = int(g.integers(3, 6))
            fall = max(1, round(0.35 * spread * 2 / math.sqrt(3) * rule.noise_k / math.sqrt(SEEDS)))
            won = [lost - fall + spread * p for p in PATTERN]
        else:
            won = [lost + x for x in around(clear)]
        return base, [d.run(s, e, small_lost=-w, large_gain=-lost) for s, e, w in zip(d.seeds, quiet, won)]
    if kind in ("rejections-flat", "rejections-near"):
        # The refused requests are ones the batch class served late: no class's attainment moves.
        factor = 1.25 if kind == "rejections-flat" else 0.75
        rejected = round(factor * rule.max_rejection_rise * (d.small + d.large))
        quiet = d.effects(1)
        if kind == "rejections-flat":
            spread = int(g.integers(3, 6))
            fall = max(1, round(0.35 * spread * 2 / math.sqrt(3) * rule.noise_k / math.sqrt(SEEDS)))
            diffs = [-fall + spread * p for p in PATTERN]
        else:
            diffs = around(clear)
        return ([d.run(s, e) for s, e in zip(d.seeds, quiet)],
                [d.run(s, e, large_rejected=rejected, large_gain=x) for s, e, x in zip(d.seeds, quiet, diffs)])
    if kind == "gain-near-min":
        mean = d.gain(rule.min_gain * float(g.uniform(0.7, 0.8)))
        quiet = d.effects(1)
        return ([d.run(s, e) for s, e in zip(d.seeds, quiet)],
                [d.run(s, e, large_gain=mean) for s, e in zip(d.seeds, quiet)])
    if kind == "gain-inside-near":
        return _inside(d, rule, at=0.75)
    if kind == "class-failed":
        # class-rejected's requests failed instead: the service's rejected share stays put.
        base, cand = _build("class-rejected", d, rule)
        failing = lambda c: replace(c, failed=c.rejected, rejected=0)      # noqa: E731
        return base, [replace(r, classes=tuple(failing(c) for c in r.classes)) for r in cand]
    if kind == "fall-excluded":
        # The batch class's good requests fall beyond the band; its clients cancel, before any
        # miss, as many requests again and a clear gain more, taken from its late ones.
        base, cand = _build("fall", d, rule)
        drop = sum(slo.run_goodput(b) - slo.run_goodput(c) for b, c in zip(base, cand)) * d.window / SEEDS
        gone = round(drop) + clear
        cancelled = lambda c: replace(c, excluded=gone, slow_tokens=c.slow_tokens - gone)   # noqa: E731
        return base, [replace(r, classes=(r.classes[0], cancelled(r.classes[1]))) for r in cand]
    if kind == "tpot-better":
        # A gain of 0.3 to 0.6 min_gain at about 40% of its band (inside half of it too), the
        # streams a quarter to two fifths faster.
        gain = d.gain(rule.min_gain * float(g.uniform(0.3, 0.6)))
        spread = max(1, round(gain / 0.4 * math.sqrt(3) / rule.noise_k))
        faster = float(g.uniform(0.6, 0.75))
        quiet = d.effects(1)
        return ([d.run(s, e) for s, e in zip(d.seeds, quiet)],
                [d.run(s, e, large_gain=gain + spread * p, tpot=faster) for s, e, p in zip(d.seeds, quiet, PATTERN)])
    return _build_late(kind, d, rule)


def _build_late(kind: str, d: _Draw, rule: ReleaseRule):
    """Drawn last. A run is its seed and a class its name: a clear gain beside an unpaired
    run that rejects, and a dip inside the guard with the classes listed in another order.
    And the band is of the pairs there are: a gain beyond the band of nine; and the rejected
    share is over the paired runs together: one seed refusing beyond the allowance. And two
    sides that share no seed compare nothing."""
    if kind == "paired-stray-rejects":
        # The stray refuses 35% of its batch requests, taken from the late ones (at most 55%
        # of them are good), so its classes' attainments are the baseline's: counted, it
        # moves the rejection guard alone, by about a fourteenth of the service's requests.
        base, cand = _build("clear-gain", d, rule)
        return base, cand + [d.run(d.stray, 0, large_rejected=int(d.large * 0.35))]
    if kind == "classes-reordered":
        base, cand = _build("class-inside", d, rule)
        return base, [replace(r, classes=r.classes[::-1]) for r in cand]
    if kind == "many-seeds":
        return _many_seeds(d, rule)
    if kind == "rejections-one-seed":
        # Taken from the batch class's late requests (at least 40% of them are late, less the
        # gain), so no class's attainment moves.
        base, cand = _build("clear-gain", d, rule)
        refused = math.ceil(1.5 * rule.max_rejection_rise * (d.small + d.large))
        one = int(d.g.integers(0, SEEDS))
        small, large = cand[one].classes
        cand[one] = replace(cand[one], classes=(small, replace(large, rejected=refused,
                                                                slow_tokens=large.slow_tokens - refused)))
        return base, cand
    if kind == "no-pair":
        base, cand = _build("clear-gain", d, rule)
        return base, [replace(r, seed=r.seed + SEEDS) for r in cand]
    if kind == "skewed-many":
        return _skewed_many(d, rule)
    if kind == "gain-unequal-base":
        return _unequal_base(d, rule)
    raise ValueError(kind)


SKEWED_MANY = (8, -1, -1, -1, -1, -1, -1, -1, -1)    # nine differences: a sample deviation of exactly 3


def _skewed_many(d: _Draw, rule: ReleaseRule):
    """Differences m + s * SKEWED_MANY, in some order: a band of noise_k * s on nine seeds. A
    mean of 1.2 bands is beyond it under every reading; without the highest and the lowest
    seed the mean is m - s, 1.2 bands less 1 / noise_k of one: inside it (noise_k <= 3.3),
    as the median is. The spread is wide enough for the mean to clear min_gain too."""
    spread = max(8, math.ceil(d.gain(rule.min_gain * 1.3) / (1.2 * rule.noise_k)))
    return _nine_seeds(d, round(1.2 * rule.noise_k * spread), spread, SKEWED_MANY)


def _unequal_base(d: _Draw, rule: ReleaseRule):
    """Baseline runs whose good requests are far apart (a run's good requests plus or minus
    about 0.65 of them, on alternate seeds) and about the same gain on each: 0.75 of min_gain
    of the baseline's mean goodput, beyond its band. Taken seed by seed, the gain is a larger
    share of the low seeds than it is a smaller one of the high: the mean of the seeds' ratios
    is about 1.7 times the ratio of the means, over min_gain."""
    total = d.small_good + d.large_good
    wide = min(int(0.65 * total), d.large_good - 10)
    gain = d.gain(rule.min_gain * 0.75)
    d.large += wide + gain + 2            # room in the batch class for the high seeds and the gain
    sides = [wide, -wide, wide, -wide]
    d.g.shuffle(sides)
    quiet = d.effects(1)
    return ([d.run(s, w + e) for s, w, e in zip(d.seeds, sides, quiet)],
            [d.run(s, w + e, large_gain=gain + p) for s, w, e, p in zip(d.seeds, sides, quiet, PATTERN)])


MANY = (1, -1, 1, -1, 1, -1, 1, -1, 0)   # nine differences' spread: a sample deviation of exactly 1


def _many_seeds(d: _Draw, rule: ReleaseRule):
    """Differences m + s * MANY, in some order: a band of noise_k * s / 3. A mean of 1.3 bands
    is beyond it under every reading (1.18 bands with noise_k 10% wider), and inside the band
    of four seeds, noise_k * s / 2 (0.87 of it). The spread is wide enough for the mean to
    clear min_gain by half again, and for a whole request to move it by a few percent."""
    spread = max(12, math.ceil(d.gain(rule.min_gain * 1.5) * 3 / (1.3 * rule.noise_k)))
    return _nine_seeds(d, round(1.3 * rule.noise_k * spread / 3), spread, MANY)


def _nine_seeds(d: _Draw, mean: int, spread: int, differences: tuple):
    """Baseline and candidate runs on consecutive seeds, one per difference, whose gains are
    mean + spread * each difference, shuffled, each run moved by a request or none."""
    pattern = list(differences)
    d.g.shuffle(pattern)
    seeds = [d.seeds[0] + i for i in range(len(pattern))]
    quiet = [int(x) for x in d.g.integers(-1, 2, size=len(pattern))]
    return ([d.run(s, e) for s, e in zip(seeds, quiet)],
            [d.run(s, e, large_gain=mean + spread * p) for s, e, p in zip(seeds, quiet, pattern)])


def _skewed(d: _Draw, rule: ReleaseRule):
    """Differences m + s * (3, -1, -1, -1), in some order: a sample deviation of 2s, so a band
    of noise_k * s on four seeds, and a median of m - s. A mean of 1.2 bands is beyond the
    band under every reading; the median, a spread less, is 1.2 bands less 1 / noise_k of
    one (at least 0.3 of a band, noise_k <= 3.3): inside it. The spread is wide enough for
    the mean to clear min_gain too, and for rounding to a whole request to move neither by
    more than a few percent."""
    g = d.g
    spread = max(8, math.ceil(d.gain(rule.min_gain * 1.3) / (1.2 * rule.noise_k)))
    mean = round(1.2 * rule.noise_k * spread)
    skew = [3, -1, -1, -1]
    g.shuffle(skew)
    quiet = d.effects(1)
    return ([d.run(s, e) for s, e in zip(d.seeds, quiet)],
            [d.run(s, e, large_gain=mean + spread * k) for s, e, k in zip(d.seeds, quiet, skew)])


def _inside(d: _Draw, rule: ReleaseRule, at: float = 0.63):
    """A gain of 1.6 min_gain at about ``at`` of a band widened to hold it: inside the band
    under every reading (the population deviation's band is 87% of the sample's). At 63%
    it is beyond half of the band (s / n for s / sqrt(n)); at 75%, beyond a band of
    noise_k 2 where the rule's is 3."""
    gain = d.gain(rule.min_gain * 1.6)
    spread = max(1, round(gain / at * math.sqrt(3) / rule.noise_k))
    quiet = d.effects(1)
    return ([d.run(s, e) for s, e in zip(d.seeds, quiet)],
            [d.run(s, e, large_gain=gain + spread * p) for s, e, p in zip(d.seeds, quiet, PATTERN)])


def _band(diffs: list[float], k: float) -> float:
    n = len(diffs)
    mean = sum(diffs) / n
    return k * math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) / math.sqrt(n)


def _share(runs, cls: str, *, rejected_counted: bool = True, failed_counted: bool = True) -> float:
    rows = [c for r in runs for c in r.classes if c.cls == cls]
    counted = sum(c.requests - c.excluded - (0 if rejected_counted else c.rejected)
                  - (0 if failed_counted else c.failed) for c in rows)
    return sum(c.good for c in rows) / counted


# The kinds whose change must be beyond the noise band to be decided as expected: beyond
# the band of the seeds' own spread too, or a band of two independent samples (the pairing
# mistake, which the paired kinds are about) would lose them on another kind's criterion.
BEYOND_ANY_BAND = ("clear-gain", "fall", "class-inside", "rejections-inside", "tpot-worse",
                   "class-excluded", "class-zero", "class-inside-low", "rejections-one-class",
                   "rejections-fall", "class-rise", "rejections-high", "class-one-seed",
                   "class-near", "rejections-near", "fall-excluded", "classes-reordered")


def _decided(baseline, candidate, rule: ReleaseRule) -> str:
    return _reference().decide_release(baseline, candidate, rule).decision


def _by_sorted_position(baseline, candidate):
    """The two sides' runs sorted by seed and paired position by position: each candidate run
    relabelled with the seed of the baseline run it meets (the extra runs of the longer side
    dropped), so the reference's pairing by seed pairs them so."""
    base, cand = (sorted(runs, key=lambda r: r.seed) for runs in (baseline, candidate))
    return base[:len(cand)], [replace(c, seed=b.seed) for b, c in zip(base, cand)]


def isolates(kind: str, baseline, candidate, rule: ReleaseRule) -> bool:
    """The clause the kind is about decides it alone: the other clauses stay far from
    deciding, and the mistake the kind is about would decide otherwise."""
    pairs = _reference().paired(baseline, candidate)
    if kind == "one-pair":                  # one pair: no spread, nothing else to isolate
        return len(pairs) == 1
    if kind == "no-pair":                   # no pair; compared side by side, the gain is clear
        return not pairs
    base, cand = [b for b, _ in pairs], [c for _, c in pairs]
    classes = [c.cls for c in base[0].classes]
    goods = lambda runs: [slo.run_goodput(r) for r in runs]
    mean = sum(goods(cand)) / len(cand) - sum(goods(base)) / len(base)
    var = lambda xs: sum((x - sum(xs) / len(xs)) ** 2 for x in xs) / (len(xs) - 1)
    unpaired = rule.noise_k * math.sqrt(var(goods(base)) / len(base) + var(goods(cand)) / len(cand))
    if kind in BEYOND_ANY_BAND and abs(mean) < 1.5 * unpaired:
        return False                        # an unpaired band would decide it otherwise
    if kind == "fall-excluded":             # counted as good, the excluded would make the fall a gain
        counting = [[replace(r, classes=tuple(replace(c, good=c.good + c.excluded) for c in r.classes))
                     for r in runs] for runs in (base, cand)]
        if _decided(*counting, rule) == "rollback":
            return False
    if kind in ("fall", "fall-excluded"):   # no class near its guard: the fall alone rolls back
        return max(_share(base, c) - _share(cand, c) for c in classes) <= 0.7 * rule.max_class_drop
    if kind in ("class-rejected", "class-failed"):   # without the rejected (failed) in it, no class falls
        leave_out = {"rejected_counted": False} if kind == "class-rejected" else {"failed_counted": False}
        blind = [_share(base, c, **leave_out) - _share(cand, c, **leave_out) for c in classes]
        return max(blind) <= 0.7 * rule.max_class_drop
    if kind in ("paired", "paired-stray") and _decided(*_by_sorted_position(baseline, candidate), rule) == "ship":
        return False                        # pairing the runs sorted by seed would ship it too
    if kind == "paired-stray":              # the stray in the baseline's mean would not ship
        everything = sum(goods(baseline)) / len(baseline)
        return mean / everything < 0.9 * rule.min_gain
    if kind in ("gain-inside", "fall-inside"):   # a band half as wide would decide it
        return _decided(baseline, candidate, replace(rule, noise_k=rule.noise_k / 2)) != EXPECT[kind]
    if kind == "rejections-high":           # the candidate's share alone is beyond the allowance
        return slo.rejected_share(cand) > 1.2 * rule.max_rejection_rise
    if kind == "rejections-fall":           # the share falls by more than the allowance; no class moves near its guard
        fall = slo.rejected_share(base) - slo.rejected_share(cand)
        moved = max(abs(_share(base, c) - _share(cand, c)) for c in classes)
        return fall > 1.2 * rule.max_rejection_rise and moved <= 0.7 * rule.max_class_drop
    if kind == "class-one-seed":            # one seed dips beyond the guard, the paired runs well inside it
        one = max(_share([b], c) - _share([n], c) for b, n in pairs for c in classes)
        together = max(_share(base, c) - _share(cand, c) for c in classes)
        return one > 1.2 * rule.max_class_drop and together <= 0.5 * rule.max_class_drop
    if kind == "class-rise":                # a class rises by more than its guard
        return max(_share(cand, c) - _share(base, c) for c in classes) > 1.2 * rule.max_class_drop
    if kind == "skewed":                    # the median of the differences, inside the band
        diffs = [slo.run_goodput(c) - slo.run_goodput(b) for b, c in pairs]
        return statistics.median(diffs) < _band(diffs, rule.noise_k)
    if kind in ("class-flat", "rejections-flat"):   # goodput falls, inside the band: the guard alone rolls back
        guard = {"class_guard": False} if kind == "class-flat" else {"rejection_guard": False}
        return mean < 0 and _reference().decide_release(base, cand, rule, **guard).decision == "inconclusive"
    if kind == "paired-windows":            # good requests (or attainments) for goodput would not ship
        per_request = [[replace(r, window_s=1.0) for r in runs] for runs in (base, cand)]
        return _decided(*per_request, rule) != "ship"
    if kind == "paired-stray-rejects":      # counted, the stray run trips the rejection guard
        return slo.rejected_share(candidate) - slo.rejected_share(baseline) > 1.5 * rule.max_rejection_rise
    if kind == "rejections-one-seed":       # one seed beyond the allowance, the paired runs well inside it
        one = max(slo.rejected_share([n]) - slo.rejected_share([b]) for b, n in pairs)
        together = slo.rejected_share(cand) - slo.rejected_share(base)
        return one > 1.2 * rule.max_rejection_rise and together <= 0.5 * rule.max_rejection_rise
    if kind == "many-seeds":                # a band over four seeds, whatever their number, swallows it
        diffs = [slo.run_goodput(c) - slo.run_goodput(b) for b, c in pairs]
        return sum(diffs) / len(diffs) < 0.9 * rule.noise_k * statistics.stdev(diffs) / 2
    if kind == "classes-reordered":         # compared position by position, a class falls beyond its guard
        def at(runs, i):
            return sum(r.classes[i].good for r in runs) / sum(r.classes[i].requests - r.classes[i].excluded
                                                              for r in runs)
        return max(at(base, i) - at(cand, i) for i in range(len(classes))) > 1.5 * rule.max_class_drop
    if kind == "skewed-many":               # without its extreme seeds, the mean is inside the band
        diffs = sorted(slo.run_goodput(c) - slo.run_goodput(b) for b, c in pairs)
        trimmed = diffs[1:-1]
        return sum(trimmed) / len(trimmed) < 0.9 * _band(diffs, rule.noise_k)
    if kind == "gain-unequal-base":         # the mean of the seeds' own ratios is over min_gain
        ratios = [(slo.run_goodput(c) - slo.run_goodput(b)) / slo.run_goodput(b) for b, c in pairs]
        return sum(ratios) / len(ratios) > 1.2 * rule.min_gain
    if kind == "paired":
        by_position = [slo.run_goodput(c) - slo.run_goodput(b) for b, c in zip(baseline, candidate)]
        position_ships = (sum(by_position) / len(by_position) > _band(by_position, rule.noise_k))
        return unpaired >= 1.5 * mean and not position_ships
    return True


def draw(kind: str, g: np.random.Generator, rule: ReleaseRule, seed0: int, tries: int = 64):
    """(baseline, candidate) of one rule probe: robust for its expected decision, and one
    that its clause alone decides."""
    for _ in range(tries):
        base, cand = _build(kind, _Draw(g, seed0), rule)
        if robust(base, cand, rule, EXPECT[kind]) and isolates(kind, base, cand, rule):
            return tuple(base), tuple(cand)
    raise AssertionError(f"no robust {kind} rule probe in {tries} draws")
