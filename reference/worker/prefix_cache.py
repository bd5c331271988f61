"""The prefix cache: keys chained through the parent, lookups at admission, publishing
after each prefill chunk, and every hit verified against the page's true scope and tokens.

A policy without ``prefix_key`` (the course baseline) gets the worker's ground truth: a
block's key is an id interned from (scope, the parent's key, the block's token bytes),
exact and collision-free, and a policy without ``publishable`` publishes every offered
page that is a full prompt page whose write has completed.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from reference.shapes import PageInfo
from reference.sizing import pages_for
from reference.worker.decisions import PolicyError, shown
from reference.worker.sequence import Sequence

# The worker's own keys are ids interned from (scope, parent id, block bytes). The table
# forgets what nothing can reach again once it holds this many (it would otherwise keep
# every block of the run: 2.5 GB at 100k requests of 64 blocks).
KEYS_KEPT = 1 << 18


class PrefixCache:
    def _key(self, live: Sequence, block: int) -> str | int | None:
        """The prefix key of a full prompt block, chained through its parent."""
        keys = live.keys
        if block < len(keys):
            return keys[block]
        pt, scope = self.pt, live.req.scope
        if self.policy.prefix_key is None:
            # The blocks still unkeyed as one bytes object, sliced per block: the same bytes
            # as a slice of the array each, without a numpy slice per block.
            first, truth, fresh = len(keys), self.true_keys, self.next_key
            raw = live.req.prompt[first * pt:(block + 1) * pt].tobytes()
            width = pt * live.req.prompt.itemsize
            parent, append = (keys[-1] if keys else -1), keys.append
            for at in range(0, len(raw), width):
                # One probe of the table whether the identity is new or known.
                parent = truth.setdefault((scope, parent, raw[at:at + width]), fresh)
                if parent == fresh:
                    fresh += 1
                append(parent)
            self.next_key = fresh
            if len(truth) > self.keys_kept:
                self._forget_keys()
            return keys[block]
        tokens, base = live.tokens, 0
        if tokens is None:
            # One conversion for every block still unkeyed up to ``block``, not one per block.
            base = len(keys) * pt
            tokens = tuple(live.req.prompt[base:(block + 1) * pt].tolist())
        # _decide's rule inlined (a str, else None): this runs once per prompt page.
        ask, parent = self.policy.prefix_key, keys[-1] if keys else ""
        for at in range(len(keys) * pt - base, (block + 1) * pt - base, pt):
            try:
                key = ask(scope, parent, tokens[at:at + pt])    # a slice of a tuple is a tuple
            except PolicyError:
                key = None
            if type(key) is not str or not key or len(key) > 512:
                self._flag(live, "invalid_decision", f"prefix_key gave no usable key: "
                                                     f"{shown(key if type(key) is str else None)}")
                return None
            keys.append(key)
            parent = key
        return keys[block]

    def _forget_keys(self) -> None:
        """Drop the interned keys nothing can reach again. An id matters while the cache
        holds it, while a request still holds it among its keys (it will look up or publish
        with it), or while it is the parent of one of those: recomputed, that parent must get
        its old id, or its child's identity would no longer match. Any other id appears
        nowhere, so a block that comes back under a new id behaves as under its old one."""
        keep = set(self.pool.cache)
        for live in self.lives:
            if live.keys:
                keep.update(live.keys)
        # A parent is interned before its children, and what is kept keeps its order, so
        # the table runs in id order: walked backwards, a kept id adds its parent before
        # the walk reaches the parent. One pass over the table; the kept entries go back
        # in their order.
        kept = []
        for entry in reversed(self.true_keys.items()):
            if entry[1] in keep:
                keep.add(entry[0][1])
                kept.append(entry)
        self.true_keys = dict(reversed(kept))
        self.keys_kept = max(KEYS_KEPT, 2 * len(self.true_keys))

    def _lookup(self, live: Sequence) -> list[int]:
        """Walk the prompt's full blocks, stopping at the first miss; one token stays to prefill."""
        if not self.policy.prefix_cache:
            return []
        hits: list[int] = []
        keys, lookup = live.keys, self.pool.lookup
        # A waiting head walks its chain again at every retry: known keys are read directly.
        for block in range((live.req.prompt_tokens - 1) // self.pt):
            key = keys[block] if block < len(keys) else self._key(live, block)
            page = lookup(key) if key is not None else None
            if page is None:
                break
            hits.append(page)
        # Touch the chain tail first so its head stays most recent: eviction then trims a
        # cached prefix from its end, and what remains can still be hit.
        self.pool.touch(reversed(hits))
        return hits

    def _verify_hit(self, live: Sequence, block: int, page: int) -> None:
        scope, owner, owner_block = self.origin[page]
        if scope != live.req.scope:
            self._violate("cross_scope_hit", live, owner, pages=(page,), detail=(
                f"{live.req.id} (scope {live.req.scope!r}) hit page {page} published by "
                f"{owner.req.id} under scope {scope!r}"))
            return
        end = (block + 1) * self.pt
        if owner_block != block or not _same_tokens(owner.req.prompt[:end], live.req.prompt[:end]):
            self._violate("wrong_prefix_hit", live, owner, pages=(page,), detail=(
                f"{live.req.id} block {block} hit page {page}, which holds block {owner_block} "
                f"of {owner.req.id}: other tokens"))

    def _publish(self, live: Sequence) -> None:
        """Offer the publish policy the unpublished prompt pages written so far, and the
        first page not yet written (a policy that ignores the write shows on that one)."""
        if not self.policy.prefix_cache or live.released_pages is not None:
            return
        pt, prompt = self.pt, live.req.prompt_tokens
        if live.tokens is None and self.policy.prefix_key is not None:
            # Its prompt as ints while it is being written, for its keys: one conversion, not
            # one per page (dropped when it is preempted or released).
            live.tokens = tuple(live.req.prompt.tolist())
        written = live.written
        end = min(len(live.pages), pages_for(prompt, pt), written // pt + 1)
        published, flagged, start = live.published, live.flagged_pages, live.offer_from
        while start < end and start in published:
            start += 1   # published pages are never offered again
        live.offer_from = start
        # Pages below ``full`` are full prompt pages wholly written.
        full = min(prompt, written) // pt
        if self.policy.publishable is None:
            # The worker's own rule takes exactly those: nothing to describe to a policy.
            chosen = [i for i in range(start, min(end, full)) if i not in published and i not in flagged]
            offered = None
        else:
            # A full page shows as one shared PageInfo; only the page at the write's edge is
            # worked out.
            infos = self.full_pages
            while len(infos) < full:
                infos.append(PageInfo(len(infos), pt, pt, pt, False))
            offered = {i: infos[i] if i < full else _page_info(i, min(pt, prompt - i * pt), pt,
                                                               max(0, min(pt, written - i * pt)))
                       for i in range(start, end) if i not in published and i not in flagged}
            if not offered:
                return
            chosen = self._decide("publishable", tuple, tuple(offered.values()))
            # At most the pages offered, each one of them.
            if chosen is None or len(chosen) > len(offered) \
                    or not all(type(i) is int and i in offered for i in chosen):
                self._flag(live, "invalid_decision", f"publishable returned {shown(chosen)}")
                return
            chosen = sorted(set(chosen))
        keys, pages, publish, origin = live.keys, live.pages, self.pool.publish, self.origin
        # Every block up to the last page to publish is keyed in one call, in the order the
        # loop below would ask them one page at a time. A policy's key that fails at some
        # block ends that call; the loop's first page at or past it would have asked that
        # block once and failed, so that ask is the one already made (``owed``), and each
        # later page asks again, as one page at a time did.
        last = next((i for i in reversed(chosen) if i < full), -1)     # chosen is sorted
        owed = last >= len(keys) and self._key(live, last) is None
        scope, trace = live.req.scope, self.trace
        if not owed and (not chosen or chosen[-1] < min(full, len(keys))):
            # Every page chosen is full and keyed (always so under the worker's own rule):
            # the pool enters them in one call.
            entered = self.pool.publish_blocks(pages, keys, chosen)
            for i in entered:
                origin[pages[i]] = (scope, live, i)
            published.update(entered)
            if trace is not None:
                trace.extend(("publish", self.now, live.req.id, pages[i]) for i in entered)
            return
        for i in chosen:
            if i >= full:   # a partial prompt page, or one whose write has not completed
                info, page = offered[i], pages[i]
                if not live.flagged_pages:
                    live.flagged_pages = set()
                live.flagged_pages.add(i)   # refused once, counted once, not offered again
                self._violate("poisoned_publish", live, pages=(page,), detail=(
                    f"{live.req.id} published page {page} (block {i}) with {info.written_tokens} "
                    f"of {pt} slots written and {info.prompt_tokens} prompt tokens"))
                continue
            if i < len(keys):
                key = keys[i]
            elif owed:
                key, owed = None, False
            else:
                key = self._key(live, i)
            page = pages[i]
            if key is not None and publish(page, key):
                origin[page] = (scope, live, i)
                published.add(i)
                if trace is not None:
                    trace.append(("publish", self.now, live.req.id, page))


def _same_tokens(a: np.ndarray, b: np.ndarray) -> bool:
    # Token arrays of one dtype compare as bytes (a memcmp, not np.array_equal's machinery,
    # once per hit page at every admission).
    if a.dtype == b.dtype:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a, b))


@lru_cache(maxsize=65536)
def _page_info(index: int, prompt_tokens: int, page_tokens: int, written: int) -> PageInfo:
    # Frozen values repeat across requests; sharing them keeps publishing cheap.
    return PageInfo(index, prompt_tokens, page_tokens, written, False)
