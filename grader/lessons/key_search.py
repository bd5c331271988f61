"""Lesson 4's search for prefix-key collisions, against the submission's own encoding.

The fixed probe pairs catch the encodings their authors thought of. An encoding can also be
ambiguous only on some inputs: a scope written raw before a length-prefixed parent, tokens
joined after a raw parent, a length written in digits with nothing after it. Such a key
collides only on inputs built for its own framing, so the grader searches for them:

1. scouting: a few inputs with distinctive text are asked first. The learner's keys become
   parents (a parent is always a key in the worker), and where a key is readable text, the
   glue between its fields (what the encoding writes between scope, parent and tokens)
   joins the material of the next round;
2. construction: pairs of inputs that share one encoded form under a family of framings,
   built from boundary material (the glue seen, separators, NUL, digits, the length of each
   field written as 1, 2, 4 or 8 bytes either way or as digits with each terminator, empty
   and one-token blocks, scopes that are prefixes of each other): a field moved across a
   boundary, a separator escaped in each field while the escape is not (or written as a
   code the name may hold), a raw field before a length-prefixed one, a one-byte length
   that wraps at 256,
   tokens moved between the parent and the block, token texts that join alike, blocks
   with the same length, ends and sum, page-long blocks one token apart, and scopes
   that a lossy mapping of the name merges (a character outside ASCII replaced or dropped,
   punctuation a sanitiser rewrites, a long name cut short);
3. a seeded sample of inputs composed from the same material, for what no family names.

Every input is asked once, in one batch, and bounded (BUDGET inputs in all). A collision is
any two different inputs that got the same usable key, found among all the answers (the
probes' and the search's), not only within the pairs built to collide; its kind is the
rule it breaks: two scopes, else two positions (parent or block).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable, Iterable

BUDGET = 1500              # search inputs asked at most, per submission
SCOUTS = (("scope7", "parent8", (12345, 678)), ("tenant", "", (9, 10, 11)),
          ("acme", "9b8a7f", (1, 2, 3)), ("", "", (4,)))
GLUE = ("", "\x00", "|", ":", ",", ";", " ", "\n", "\t", "/", "#", "-", "_", ".", "=", "\x1f", "\x1e",
        "||", "::", "\r\n", "\\", "'", '"', "), (", "][")
ESCAPES = ("\\", "%")     # what an escaping encoding writes before a separator in a field
# Separators beyond GLUE a key may join its fields with, one forgery each (they hide
# inside a hash): the rest of ASCII's punctuation, controls, and a few written as words or
# doubled. ASCII only: the forgery puts the separator in a parent, and two parents one
# character apart outside ASCII would charge a transcoding of the scope (key_ascii_replace)
# to key-position as well.
SEPARATORS = tuple("!$%&()*+<>?@[]^`{}~") + ("\x01", "\x02", "\x1c", "\x1d", "\x7f") + (
    "<sep>", "<SEP>", "[SEP]", "<|>", "=>", "__", "--", "##", "~~", "$$", "@@", "|||", ", ", "; ", " | ", "::=",
    "<>", "%%")
JOINS = (",", "", " ", "|", ":", ";", "-", "_", ".", "\x00", "\n", "/")
Triple = tuple             # (scope, parent_key, block_tokens)
LOSSY = (("caf\u00e9", "caf\u00e8"), ("caf\u00e9", "caf?"), ("caf\u00e9", "caf"),
         ("tenant-\u03b1", "tenant-\u03b2"), ("\u682a\u5f0f", "\u4f1a\u793e"),
         ("\U0001f642", "\U0001f643"), ("acme.corp", "acme_corp"), ("acme corp", "acme-corp"),
         ("acme/eu", "acme_eu"), ("s" * 80 + "x", "s" * 80 + "y"), ("s" * 300 + "x", "s" * 300 + "y"))


def _formats() -> list[Callable[[int], str]]:
    """Each length framing as a function of the length (the same framing for both fields)."""
    out = []
    for w in (1, 2, 4, 8):
        for order in ("little", "big"):
            out.append(lambda n, w=w, order=order: n.to_bytes(w, order).decode("ascii"))
    for t in GLUE:
        if t not in ("'", '"', "), (", "]["):
            out.append(lambda n, t=t: f"{n}{t}")
    return out


def _text(block: tuple, sep: str) -> str:
    return sep.join(map(str, block))


@dataclass(frozen=True)
class Material:
    scopes: tuple[str, ...]
    parents: tuple[str, ...]
    blocks: tuple[tuple, ...]
    glue: tuple[str, ...]


def readable_glue(inputs: Iterable[Triple], keys: Iterable[str]) -> list[str]:
    """The text a readable key writes around and between its fields, where its fields show."""
    found = []
    for (scope, parent, block), key in zip(inputs, keys):
        if not isinstance(key, str):
            continue
        marks = sorted((key.find(text), text) for text in (scope, parent, *map(str, block))
                       if text and key.find(text) >= 0)
        at = 0
        for pos, text in marks:
            if pos >= at:
                found.append(key[at:pos])
                at = pos + len(text)
        found.append(key[at:])
    return [g for g in dict.fromkeys(found) if len(g) <= 8]


def material(keys: list[str], glue: list[str]) -> Material:
    # The learner's own keys come fifth on: a parent is always a key in the worker.
    own = [k for k in dict.fromkeys(keys) if isinstance(k, str) and 0 < len(k) <= 100][:4]
    parents = ["", "abc", "9b8a7f", "a" * 40] + (own or ["0f1e2d3c4b5a6978"])
    scopes = ["", "a", "ab", "abc", "acme", "a" * 8, "a" * 9, "a" * 16, "a" * 17, "b" * 32 + "x", "b" * 32 + "y"]
    blocks = [(), (0,), (1,), (7,), (12,), (0, 0), (1, 2), (1, 23), (12, 3), (7, 8, 9), (256,), (31999,)]
    return Material(tuple(scopes), tuple(dict.fromkeys(parents)), tuple(blocks),
                    tuple(dict.fromkeys([*glue, *GLUE])))


def pairs(m: Material) -> list[tuple[Triple, Triple]]:
    """Inputs that share one encoded form under some framing: each pair must get two keys."""
    out: list[tuple[Triple, Triple]] = []
    b0 = (7, 8, 9)
    # A field moved across the scope/parent boundary (raw concatenation, any separator).
    for g in m.glue:
        out.append((("a" + g + "b", "c", b0), ("a", "b" + g + "c", b0)))
        out.append((("a" + g, "c", b0), ("a", g + "c", b0)))
        out.append((("a" + g + "7", "", b0[1:]), ("a", "", b0)))        # scope runs into the tokens
    # A separator escaped in each field, the escape itself not: a field that ends in the
    # escape turns the separator after it into an escaped one ("a\" then "|" reads as "a|"),
    # and a separator replaced by a code ("%7C") reads as the code written in the name.
    for g in m.glue:
        if not g:
            continue
        for e in ESCAPES:
            out.append((("a" + e, "b" + g + "c", b0), ("a" + g + "b" + e, "c", b0)))
        if len(g) == 1:
            for code in dict.fromkeys((f"%{ord(g):02X}", f"%{ord(g):02x}", f"\\x{ord(g):02x}", f"&#{ord(g)};")):
                out.append((("a" + g + "b", "", b0), ("a" + code + "b", "", b0)))
    # A raw field (then a terminator t) before a length-prefixed parent: the scope swallows
    # the parent's length, the parent carries its own framing inside.
    for fmt in _formats():
        for t in ("", "\x00", "|", ":", ","):
            for p in m.parents[1:2] + m.parents[4:5]:
                q = t + fmt(len(p)) + p
                if len(q) < 128:
                    out.append((("a", q, b0), ("a" + t + fmt(len(q)), p, b0)))
    # Lengths in digits with nothing after them are ambiguous themselves: "1" "2" reads as
    # "12", so a one-character scope "2" can pass for the first digits of a 12-character one.
    for m_ in (2, 3, 5):
        p1 = "x" * (8 + m_) + "0"
        out.append(((str(m_), p1, b0), (str(9 + m_) + p1[:-1], "", b0)))
    # Tokens moved between the parent and the block, joined by each separator (and the
    # empty block, which takes them all), and digits that run from the parent into a token.
    for p in m.parents[:1] + m.parents[2:3] + m.parents[4:5]:
        for sep in JOINS:
            out.append((("acme", p + "7" + sep, (8, 9)), ("acme", p, (7, 8, 9))))
            out.append((("acme", p + _text((7, 8, 9), sep), ()), ("acme", p, (7, 8, 9))))
            out.append((("acme", p + sep + "7", (8, 9)), ("acme", p, (7, 8, 9))))
        for d in ("1", "12"):
            out.append((("acme", p + d, (23,)), ("acme", p, (int(d + "23"),))))
        for w in (1, 2, 4, 8):                                         # tokens packed as ints
            for order in ("little", "big"):
                packed = (7).to_bytes(w, order).decode("ascii")
                out.append((("acme", p + packed, (8,)), ("acme", p, (7, 8))))
                out.append((("acme", p + packed, ()), ("acme", p, (7,))))
    for sep in JOINS:                                                  # the same from the scope
        out.append((("acme7" + sep, "", (8, 9)), ("acme", "", (7, 8, 9))))
        out.append((("acme" + _text((7, 8), sep), "", ()), ("acme", "", (7, 8))))
    # Token texts that join alike, tokens past one byte, and blocks that agree in their
    # length, ends and sum (a block summarised instead of counted token by token).
    for x, y in (((1, 23), (12, 3)), ((0,), (0, 0)), ((), (0,)), ((1, 2), (12,)), ((10,), (1, 0)),
                 ((256,), (0,)), ((257,), (1,)), ((31999,), (31999 % 256,)), ((1, 0), (1,)),
                 ((1, 2, 3, 4), (1, 3, 2, 4)), ((1, 5, 5, 9), (1, 4, 6, 9))):
        out.append((("acme", "", x), ("acme", "", y)))
        out.append((("acme", "9b8a7f", x), ("acme", "9b8a7f", y)))
    # Scopes a lossy mapping of the name merges: one character for another outside ASCII
    # (a transcoding that replaces or drops what it cannot encode), punctuation a sanitiser
    # rewrites, names cut at a length.
    for a, b in LOSSY:
        out.append(((a, "", b0), (b, "", b0)))
    # A length written in one byte that wraps at 256: a 256-character field reads as an
    # empty one, so the scope's tail passes for the parent.
    tail = "b" * 255
    out.append((("a\x00" + tail, "", b0), ("a", tail + "\x00", b0)))
    # Every token counts: a block of one page (16 tokens) and of two against the same block
    # with one token changed, at each place (a key that reads the last few tokens, every
    # other one, all but one, one page's worth; the other families' blocks are short).
    for length in (16, 32):
        block = tuple(range(101, 101 + length))
        for i in range(length):
            out.append((("acme", "", block), ("acme", "", block[:i] + (block[i] + 1000,) + block[i + 1:])))
    # Scopes that are prefixes of each other, and scope/parent swaps.
    for a in m.scopes:
        for b in m.scopes:
            if a < b:
                out.append(((a, "", b0), (b, "", b0)))
                out.append(((a, b, b0), (b, a, b0)))
    # Separators no glue shows: a hashed key hides its separator, and a rare one ("~", "^",
    # "<sep>") breaks as "|" does. Last, so the families above keep the budget.
    for g in SEPARATORS:
        if g not in m.glue:
            out.append((("a" + g + "b", "c", b0), ("a", "b" + g + "c", b0)))
    return out


def sample(m: Material, count: int, seed: int = 4) -> list[Triple]:
    """Inputs composed at random from the material: for framings no family above names."""
    g = random.Random(seed)
    pieces = list(m.scopes) + list(m.glue)
    out = []
    for _ in range(count):
        scope = "".join(g.choice(pieces) for _ in range(g.randint(0, 3)))
        parent = g.choice(m.parents) + "".join(g.choice(m.glue) for _ in range(g.randint(0, 2)))
        out.append((scope, parent, g.choice(m.blocks)))
    return out


def inputs(scout_keys: list[str]) -> list[Triple]:
    """The search's inputs, built on the scouts' keys; at most BUDGET, in a fixed order."""
    m = material(scout_keys, readable_glue(SCOUTS, scout_keys))
    built = list(dict.fromkeys(t for pair in pairs(m) for t in pair))
    built = built[:BUDGET]
    fill = BUDGET - len(built)
    if fill > 0:
        built = list(dict.fromkeys(built + sample(m, fill)))
    return built[:BUDGET]


def kind(a: Triple, b: Triple) -> str:
    """The rule two inputs with one key break."""
    if a[0] != b[0]:
        return "scope"
    return "parent" if a[1] != b[1] else "block"


# Alphabets a digest is written in, smallest first: a key drawn from one, at most so many
# characters long, takes at most so many values, whatever function made it.
# Decimal first: a 56-bit hash written in digits (17 of them) read as 17 hexadecimal
# characters, 2^68 keys, and passed.
ALPHABETS = (("decimal", "0123456789"), ("hexadecimal", "0123456789abcdef"), ("hexadecimal", "0123456789ABCDEF"),
             ("hexadecimal", "0123456789abcdefABCDEF"),
             ("base64", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_"),
             ("printable ASCII", "".join(map(chr, range(32, 127)))))
MIN_BITS = 64              # below it, a cache of 10^5 blocks meets a chance collision
# Distinct keys that must agree on a character before it counts as shared by every key (a
# tag, a separator) rather than agreeing by chance: 16 keys of even one hexadecimal digit
# agree on a place by chance once in 2^60.
SHARED_AFTER = 16


def shared_characters(keys: Iterable[str]) -> tuple[int, int]:
    """(head, places): how many characters every key holds alike, at the same place from its
    start ("blk:", "v1-"), and in all how many places every key holds alike (the head, the
    tail, a separator between fields of keys of one length). (0, 0) when too few distinct
    keys were seen to tell a shared character from one met by chance."""
    head, places, _ = _shared([k for k in keys if isinstance(k, str) and k])
    return head, places


def _shared(keys: list[str]) -> tuple[int, int, list[bool]]:
    """shared_characters of non-empty keys, and for keys of one length which places are
    alike (for keys of several lengths the shared places are the head and the tail)."""
    distinct = sorted(set(keys))
    if len(distinct) < SHARED_AFTER:
        return 0, 0, []
    alike = [len(set(column)) == 1 for column in zip(*distinct)]    # up to the shortest key
    head = next((i for i, same in enumerate(alike) if not same), len(alike))
    if len({len(k) for k in distinct}) == 1:
        return head, sum(alike), alike
    tails = [len(set(column)) == 1 for column in zip(*(k[::-1] for k in distinct))]
    tail = next((i for i, same in enumerate(tails) if not same), len(tails))
    return head, min(head + tail, min(map(len, distinct))), []


def varying(keys: Iterable[str]) -> tuple[list[str], int]:
    """The keys without the places every key holds alike (a tag, a separator), and how many
    places those are: what is left is what can tell two keys apart."""
    keys = [k for k in keys if isinstance(k, str) and k]
    head, places, alike = _shared(keys)
    if alike:
        keys = ["".join(c for c, same in zip(k, alike) if not same) for k in keys]
    elif places:
        keys = [k[head:len(k) - (places - head)] for k in keys]
    return [k for k in keys if k], places


def key_space(keys: Iterable[str]) -> tuple[str, int, float] | None:
    """(alphabet, longest key, bits) when every key, or every key of one length (see
    space_of), is a short string of one small alphabet and so can take fewer than
    2^MIN_BITS values; None when the keys may take more.

    Different inputs then share a key by chance, on inputs no search can aim at (a
    birthday collision among the blocks a busy cache holds), so it is judged on the key
    space the answers show, not on a pair found. What every key holds alike at one place
    (a tag, a separator) takes no values: "blk:" before 8 hexadecimal digits is 2^32 keys,
    and counted as 12 printable characters it read as 2^78 and passed. The longest key and
    the alphabet are then of the characters that vary (``varying``)."""
    return space_of(varying(keys)[0])


def space_of(keys: list[str]) -> tuple[str, int, float] | None:
    """key_space of keys already cut to what varies: of all the keys, then of each length
    the keys come in (shortest first) that SHARED_AFTER distinct keys show.

    A digest judged by its longest key alone hid a short one: 8 hexadecimal characters for
    every page-long block (every block a run asks about) and 32 elsewhere passed as 2^128
    keys. The inputs that get keys of one length can share no more values than that length
    holds, so each such class is judged on its own characters and length, unless the next
    length holds at least a share of one in the alphabet's size: a number written without
    its leading zeros (a 64-bit hash in decimal) has about ten times more keys at each next
    length, and its 19 digits are no short key of its own."""
    if not keys:
        return None
    fit = _fit(keys)
    if fit is not None:
        return fit[0]
    by_length: dict[int, set[str]] = {}
    for k in keys:
        by_length.setdefault(len(k), set()).add(k)
    if len(by_length) == 1:
        return None                 # one length: judged above
    for length, same in sorted(by_length.items()):
        fit = _fit(list(same)) if len(same) >= SHARED_AFTER else None
        if fit is not None and len(by_length.get(length + 1, ())) * fit[1] < len(same):
            return fit[0]
    return None


def _fit(keys: list[str]) -> tuple[tuple[str, int, float], int] | None:
    """((alphabet's name, longest key, bits), the alphabet's size) of keys that can take
    fewer than 2^MIN_BITS values, else None."""
    chars, longest = set().union(*map(set, keys)), max(map(len, keys))
    for name, alphabet in ALPHABETS:
        if chars <= set(alphabet):
            n = len(alphabet)
            bits = math.log2(sum(n ** i for i in range(1, longest + 1)))
            return ((name, longest, bits), n) if bits < MIN_BITS else None
    return None


def collisions(answers: Iterable[tuple[Triple, str]]) -> dict[str, tuple[Triple, Triple, str]]:
    """The first pair of different inputs per kind that got one key."""
    first: dict[str, Triple] = {}
    found: dict[str, tuple[Triple, Triple, str]] = {}
    for triple, key in answers:
        seen = first.setdefault(key, triple)
        if seen != triple:
            found.setdefault(kind(seen, triple), (seen, triple, key))
    return found
