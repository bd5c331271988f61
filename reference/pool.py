"""The paged KV pool: refcounted pages, the prefix cache and its evictable set.

Every page is in exactly one place: referenced (refcount > 0), unallocated (the free
stack) or evictable (published, refcount 0, kept for prefix hits but counted as free
capacity). Reservations are not here: they are promises, kept by the worker's ledger.
"""
from __future__ import annotations

from collections import OrderedDict


class PagePool:
    def __init__(self, total: int):
        self.total = total
        self.refcount = [0] * total
        # A stack, so a page released is the first one handed out again: if a policy frees
        # a page too early, the very next allocation reuses it and the fault shows.
        self.free = list(range(total - 1, -1, -1))
        self.evictable: OrderedDict[int, None] = OrderedDict()  # LRU first
        self.cache: dict[str, int] = {}          # prefix key -> page
        self.key_of: dict[int, str] = {}         # page -> prefix key, for published pages
        self.evictions = 0
        # Bumped by every change to what a page lookup, a ledger or the eviction order could
        # show: equal versions mean an identical pool (a waiting head asks again only then).
        self.version = 0

    @property
    def capacity(self) -> int:
        """Pages an allocation could obtain now: unallocated plus evictable."""
        return len(self.free) + len(self.evictable)

    def take(self) -> int | None:
        """A page with refcount 0 for new content, evicting the LRU cached page if needed."""
        self.version += 1
        if self.free:
            page = self.free.pop()
        elif self.evictable:
            page, _ = self.evictable.popitem(last=False)
            del self.cache[self.key_of.pop(page)]
            self.evictions += 1
        else:
            return None
        self.refcount[page] = 1
        return page

    def take_many(self, count: int) -> list[int]:
        """The ``count`` pages that as many take() calls would give, in that order; the
        caller has checked ``count <= capacity``."""
        self.version += 1
        free, refcount = self.free, self.refcount
        n = min(count, len(free))
        pages = free[len(free) - n:]
        pages.reverse()               # take() pops the stack's top first
        del free[len(free) - n:]
        if n < count:
            evict, cache, key_of = self.evictable.popitem, self.cache, self.key_of
            for _ in range(count - n):
                page, _ = evict(last=False)
                del cache[key_of.pop(page)]
                pages.append(page)
            self.evictions += count - n
        for page in pages:
            refcount[page] = 1
        return pages

    def ref(self, page: int) -> None:
        """Reference a cached page: a hit on an inactive page takes it out of the evictable set."""
        self.version += 1
        if self.refcount[page] == 0:
            del self.evictable[page]
        self.refcount[page] += 1

    def unref(self, page: int) -> bool:
        """Drop one reference; True when the page is no longer referenced by anyone."""
        self.version += 1
        count = self.refcount[page] - 1
        self.refcount[page] = count
        if count:
            return False
        if page in self.key_of:
            self.evictable[page] = None
        else:
            self.free.append(page)
        return True

    def unref_all(self, pages) -> None:
        """unref() each page, in order, when no caller needs to know which came free."""
        self.version += 1
        refcount, key_of, evictable, free = self.refcount, self.key_of, self.evictable, self.free
        for page in pages:
            count = refcount[page] - 1
            refcount[page] = count
            if not count:
                if page in key_of:
                    evictable[page] = None
                else:
                    free.append(page)

    def publish(self, page: int, key: str) -> bool:
        """Enter a referenced page into the prefix cache; False if the key is already taken."""
        if key in self.cache or page in self.key_of:
            return False
        self.cache[key] = page
        self.key_of[page] = key
        self.version += 1
        return True

    def publish_blocks(self, pages: list[int], keys: list, blocks) -> list[int]:
        """publish(pages[i], keys[i]) for each block i, in order: the blocks it entered."""
        cache, key_of, entered = self.cache, self.key_of, []
        for i in blocks:
            page, key = pages[i], keys[i]
            if key in cache or page in key_of:
                continue
            cache[key] = page
            key_of[page] = key
            entered.append(i)
        if entered:
            self.version += 1
        return entered

    def lookup(self, key: str) -> int | None:
        return self.cache.get(key)

    def touch(self, pages) -> None:
        """A hit is a use: refresh the LRU order of cached pages, the last one most recent."""
        self.version += 1
        for page in pages:
            if self.refcount[page] == 0:
                self.evictable.move_to_end(page)

    def conserved(self) -> bool:
        """allocated + unallocated + evictable == total, and no refcount below zero."""
        allocated = sum(1 for c in self.refcount if c > 0)
        return (min(self.refcount, default=0) >= 0
                and allocated + len(self.free) + len(self.evictable) == self.total
                and all(self.refcount[p] == 0 for p in self.evictable)
                and all(self.refcount[p] == 0 for p in self.free))
