"""PagePool: refcounted pages, the free stack, the prefix cache and its LRU evictable set."""
from __future__ import annotations

from reference.pool import PagePool


def test_fresh_pool_hands_out_pages_in_order_and_runs_dry():
    pool = PagePool(3)
    assert pool.capacity == 3 and pool.conserved()
    assert [pool.take(), pool.take(), pool.take()] == [0, 1, 2]
    assert pool.take() is None and pool.capacity == 0
    assert pool.refcount == [1, 1, 1] and pool.conserved()


def test_released_pages_are_reused_last_in_first_out():
    pool = PagePool(8)
    pages = [pool.take() for _ in range(5)]
    for p in (1, 3, 2):
        assert pool.unref(p) is True
    # The page released last is the first handed out again (an early release shows at once).
    assert [pool.take(), pool.take(), pool.take()] == [2, 3, 1]
    assert pool.take() == 5
    assert pages == [0, 1, 2, 3, 4] and pool.conserved()


def test_refcount_counts_holders_and_unref_frees_at_zero():
    pool = PagePool(4)
    p = pool.take()
    pool.ref(p)
    pool.ref(p)
    assert pool.refcount[p] == 3
    assert pool.unref(p) is False and pool.unref(p) is False
    assert p not in pool.free and pool.conserved()
    assert pool.unref(p) is True
    assert pool.refcount[p] == 0 and pool.free[-1] == p and pool.conserved()


def test_published_page_becomes_evictable_not_free_and_counts_as_capacity():
    pool = PagePool(3)
    a, b = pool.take(), pool.take()
    assert pool.publish(a, "ka")
    pool.unref(a)
    pool.unref(b)
    assert list(pool.evictable) == [a] and a not in pool.free and b in pool.free
    assert pool.capacity == 3 and pool.conserved()
    assert pool.lookup("ka") == a


def test_free_pages_are_used_before_evicting():
    pool = PagePool(3)
    a = pool.take()
    pool.publish(a, "ka")
    pool.unref(a)
    assert pool.take() == 1 and pool.take() == 2
    assert pool.evictions == 0 and pool.lookup("ka") == a


def test_eviction_is_least_recently_used_first_and_forgets_the_key():
    pool = PagePool(3)
    pages = [pool.take() for _ in range(3)]
    for p, key in zip(pages, ("k0", "k1", "k2")):
        assert pool.publish(p, key)
    for p in (1, 0, 2):                # released in this order: LRU first
        pool.unref(p)
    assert list(pool.evictable) == [1, 0, 2]
    assert pool.take() == 1
    assert pool.evictions == 1 and pool.lookup("k1") is None and 1 not in pool.key_of
    assert pool.refcount[1] == 1 and pool.conserved()
    assert [pool.take(), pool.take()] == [0, 2] and pool.take() is None
    assert pool.cache == {} and pool.evictions == 3 and pool.conserved()


def test_touch_refreshes_lru_order_and_lookup_does_not():
    pool = PagePool(3)
    pages = [pool.take() for _ in range(3)]
    for p, key in zip(pages, ("k0", "k1", "k2")):
        pool.publish(p, key)
        pool.unref(p)
    assert pool.lookup("k0") == 0 and list(pool.evictable) == [0, 1, 2]
    pool.touch([1, 0])                 # a hit chain, touched tail first
    assert list(pool.evictable) == [2, 1, 0]
    assert pool.take() == 2 and pool.take() == 1 and pool.take() == 0


def test_touch_of_a_referenced_page_leaves_the_evictable_set_alone():
    pool = PagePool(3)
    a, b = pool.take(), pool.take()
    pool.publish(a, "ka")
    pool.publish(b, "kb")
    pool.unref(b)
    pool.touch([a])
    assert pool.lookup("ka") == a and list(pool.evictable) == [b]
    assert pool.lookup("missing") is None


def test_ref_of_an_inactive_hit_takes_it_out_of_the_evictable_set():
    pool = PagePool(2)
    a = pool.take()
    pool.publish(a, "ka")
    pool.unref(a)
    assert pool.capacity == 2
    pool.ref(a)
    assert pool.refcount[a] == 1 and a not in pool.evictable and pool.capacity == 1
    assert pool.conserved()
    pool.unref(a)                      # still published: back to the evictable set
    assert list(pool.evictable) == [a] and pool.conserved()


def test_publish_refuses_a_taken_key_and_a_published_page():
    pool = PagePool(3)
    a, b = pool.take(), pool.take()
    assert pool.publish(a, "k") is True
    assert pool.publish(b, "k") is False          # the key is taken: the first owner keeps it
    assert pool.cache == {"k": a} and b not in pool.key_of
    assert pool.publish(a, "other") is False      # a page has one key
    assert pool.key_of == {a: "k"} and "other" not in pool.cache
    pool.unref(b)
    assert b in pool.free                          # unpublished, so freed, not cached


def test_conserved_detects_broken_books():
    pool = PagePool(4)
    a, b = pool.take(), pool.take()
    pool.publish(a, "ka")
    pool.unref(a)
    assert pool.conserved()

    lost = PagePool(4)
    lost.take()
    lost.free.pop()                                # a page nowhere
    assert not lost.conserved()

    negative = PagePool(2)
    p = negative.take()
    negative.unref(p)
    negative.refcount[p] = -1
    assert not negative.conserved()

    twice = PagePool(2)
    p = twice.take()
    twice.free.append(p)                           # referenced and free at once
    assert not twice.conserved()

    cached = PagePool(2)
    p = cached.take()
    cached.publish(p, "k")
    cached.unref(p)
    cached.refcount[p] = 1                         # referenced yet evictable
    assert not cached.conserved()


def test_conserved_audits_each_place_even_when_the_counts_balance():
    """A page on the free stack or in the evictable set while referenced breaks the books
    even if a lost page elsewhere makes the three counts add up to the total."""
    free_but_held = PagePool(2)
    a, b = free_but_held.take(), free_but_held.take()
    free_but_held.free.append(a)           # referenced and free at once ...
    free_but_held.refcount[b] = 0          # ... while b is nowhere: 1 + 1 + 0 == 2
    assert sum(c > 0 for c in free_but_held.refcount) + len(free_but_held.free) == 2
    assert not free_but_held.conserved()

    cached_but_held = PagePool(2)
    a, b = cached_but_held.take(), cached_but_held.take()
    cached_but_held.publish(a, "ka")
    cached_but_held.evictable[a] = None    # referenced and evictable at once ...
    cached_but_held.refcount[b] = 0        # ... while b is nowhere: 1 + 0 + 1 == 2
    assert not cached_but_held.conserved()

    below_zero = PagePool(2)
    a, b = below_zero.take(), below_zero.take()
    below_zero.refcount[a] = -1            # released once too often, and nowhere ...
    below_zero.unref(b)
    below_zero.evictable[b] = None         # ... while b is counted twice: 0 + 1 + 1 == 2
    assert not below_zero.conserved()


def test_conserved_counts_each_page_once():
    """A page in two places at once (the free stack twice, or free and cached) is one page
    too many; and an empty pool is conserved."""
    assert PagePool(0).conserved() and PagePool(0).capacity == 0
    twice_free = PagePool(3)
    twice_free.free.append(twice_free.free[-1])
    assert not twice_free.conserved()
    free_and_cached = PagePool(3)
    free_and_cached.evictable[free_and_cached.free[-1]] = None
    assert not free_and_cached.conserved()


def _books(pool: PagePool) -> tuple:
    return (list(pool.free), list(pool.evictable), dict(pool.cache), dict(pool.key_of),
            list(pool.refcount), pool.evictions)


def test_take_many_and_unref_all_do_what_one_call_per_page_does():
    # Two pools with one history: one page at a time, and in batches. Free pages first (last
    # released first), then evictions in LRU order, then the same books after release.
    one, many = PagePool(10), PagePool(10)
    for pool in (one, many):
        pages = [pool.take() for _ in range(8)]
        for i, p in enumerate(pages[:5]):
            pool.publish(p, f"k{i}")
        for p in (pages[2], pages[6], pages[0], pages[4], pages[7]):
            pool.unref(p)
    taken = [one.take() for _ in range(6)]
    assert many.take_many(6) == taken and _books(many) == _books(one)
    assert one.evictions == 2 and many.conserved()   # four free pages, then two evicted
    for p in (taken[5], taken[0], taken[3]):
        one.unref(p)
    many.unref_all((taken[5], taken[0], taken[3]))
    assert _books(many) == _books(one) and many.conserved()
    assert many.take_many(0) == [] and _books(many) == _books(one)


def test_publish_blocks_does_what_one_publish_per_block_does():
    # Blocks 0..5 of one request's pages; block 1's key is taken by another page, block 3's
    # page is already published, block 5 is not asked: those are refused or left alone.
    one, many = PagePool(12), PagePool(12)
    for pool in (one, many):
        other = pool.take()
        pool.publish(other, "k1")
        pages = pool.take_many(6)
        pool.publish(pages[3], "elsewhere")
    keys = [f"k{i}" for i in range(6)]
    entered = [i for i in (0, 1, 2, 3, 4) if one.publish(pages[i], keys[i])]
    before = many.version
    assert many.publish_blocks(pages, keys, (0, 1, 2, 3, 4)) == entered == [0, 2, 4]
    assert _books(many) == _books(one) and many.conserved() and many.version != before
    # Nothing entered: nothing changed, so the version stands (a waiting head stays skipped).
    standing = many.version
    assert many.publish_blocks(pages, keys, (0, 1, 2, 3)) == [] and many.version == standing
    assert many.publish_blocks(pages, keys, ()) == [] and many.version == standing


def test_every_change_moves_the_version_and_no_reading_does():
    """A waiting head is skipped while the version stands still (reference/worker/
    admission.py), so every change to the pool must move it, and a reading must not."""
    pool = PagePool(6)
    seen = [pool.version]

    def moved():
        assert pool.version not in seen
        seen.append(pool.version)

    a = pool.take(); moved()
    b, c = pool.take_many(2); moved()
    assert pool.publish(a, "ka") and pool.publish(b, "kb"); moved()
    assert not pool.publish(a, "other"); assert pool.version == seen[-1]   # refused: no change
    pool.unref(a); moved()
    pool.unref_all([b, c]); moved()
    d = pool.take(); moved()
    assert pool.publish_blocks([d], ["kd"], [0]) == [0]; moved()
    pool.touch([a]); moved()
    pool.ref(a); moved()
    for read in (lambda: pool.capacity, lambda: pool.lookup("ka"), pool.conserved):
        read()
        assert pool.version == seen[-1]
