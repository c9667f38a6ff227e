"""Near-duplicate screenshots: the nearest earlier same-key hash within a Hamming radius.

`nearest_earlier` is multi-index hashing (Norouzi et al.) done with numpy sorts:

1. identical (key, hash) pairs are collapsed first, so a screen seen 10,000
   times is one entry (its repeats point at its first occurrence, distance 0);
2. the 64 bits are cut into max_distance + 1 chunks; two hashes within
   max_distance differ in at most max_distance chunks, so (pigeonhole) they are
   equal on at least one: for each chunk, entries are bucketed by
   (key, chunk value) with one stable argsort, and only pairs inside a bucket
   are compared (popcount of the xor);
3. per entry the best (distance, earliest index) over all chunks wins.

Exact for every distance <= max_distance (tests compare with brute force).
The work is the number of same-bucket pairs: small when keys split the data
(URL or activity plus the action's signature) and when max_distance is small
against log2(group size); a huge single-key group of unrelated hashes with a
wide radius is the bad case (chunks of few bits make big buckets).

faiss' IndexBinaryMultiHash does the probing in C++, but it has no notion of
keys or of "earlier": its answers would have to be filtered afterwards, which
costs more than the search here (see benchmarks/phash_neardup.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

# Calibrated on the sandbox's labelled pairs (sandbox/calibration_pages.py, filters/calibration.py,
# tests/filters/test_neardup_calibration.py; figures in docs/benchmarks.md): a
# 20-80 px scroll moves pHash by up to 24 bits, toasts by 4-16; with the screen
# signature as the second key no negative pair matches at any radius up to 24,
# so the radius is set by the scroll positives.
DEFAULT_MAX_DISTANCE = 24

_INDEX_BITS = 40  # score = distance << 40 | earlier index
_INDEX_MASK = (1 << _INDEX_BITS) - 1
_NONE = np.int64(np.iinfo(np.int64).max)
_PAIRS_PER_BATCH = 1 << 22  # bounds memory: ~4M candidate pairs at a time


def as_uint64(hashes) -> np.ndarray:
    """Hashes as a uint64 array (int64 input, Parquet's view, is reinterpreted)."""
    arr = np.asarray(hashes)
    if arr.dtype == np.uint64:
        return arr
    if arr.dtype == np.int64:
        return arr.view(np.uint64)
    if arr.dtype == object or arr.size == 0:
        return np.array([int(h) & 0xFFFF_FFFF_FFFF_FFFF for h in arr.ravel()], dtype=np.uint64)
    raise TypeError(f"hashes must be uint64 or int64, got {arr.dtype}")


def _key_codes(keys: Sequence[Hashable], n: int) -> np.ndarray:
    if len(keys) != n:
        raise ValueError(f"keys has {len(keys)} items, hashes has {n}")
    codes: dict = {}
    return np.fromiter((codes.setdefault(k, len(codes)) for k in keys), dtype=np.int64, count=n)


def chunk_widths(max_distance: int) -> list[int]:
    """Bit widths of the max_distance + 1 chunks (as even as 64 bits allow)."""
    m = min(max_distance + 1, 64)
    base, extra = divmod(64, m)
    return [base + (1 if c < extra else 0) for c in range(m)]


def _best_in_buckets(
    bucket: np.ndarray, h: np.ndarray, first: np.ndarray, max_distance: int, best: np.ndarray
) -> None:
    """Update best[u] with the closest earlier entry sharing u's bucket value.

    Entries are in order of first occurrence, so a stable sort keeps that order
    inside each bucket: an entry's candidates are the ones ranked before it.
    """
    order = np.argsort(bucket, kind="stable")
    sb = bucket[order]
    n = len(sb)
    starts_mask = np.empty(n, dtype=bool)
    starts_mask[0] = True
    np.not_equal(sb[1:], sb[:-1], out=starts_mask[1:])
    start_pos = np.flatnonzero(starts_mask)
    bucket_start = np.repeat(start_pos, np.diff(np.append(start_pos, n)))
    rank = np.arange(n) - bucket_start  # how many earlier entries share the bucket
    later_pos = np.flatnonzero(rank)
    if len(later_pos) == 0:
        return
    counts = rank[later_pos]
    cum = np.cumsum(counts)
    # batches of whole entries, each ~_PAIRS_PER_BATCH pairs
    cuts = np.searchsorted(cum, np.arange(_PAIRS_PER_BATCH, cum[-1], _PAIRS_PER_BATCH), side="left")
    bounds = np.unique(np.concatenate(([0], cuts + 1, [len(later_pos)])))
    bounds = bounds[bounds <= len(later_pos)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if lo >= hi:
            continue
        pos, cnt = later_pos[lo:hi], counts[lo:hi]
        seg = np.concatenate(([0], np.cumsum(cnt)[:-1]))
        total = int(cnt.sum())
        later = np.repeat(pos, cnt)
        earlier = np.repeat(bucket_start[pos], cnt) + (np.arange(total) - np.repeat(seg, cnt))
        lu, eu = order[later], order[earlier]
        dist = np.bitwise_count(h[lu] ^ h[eu]).astype(np.int64)
        score = np.where(dist <= max_distance, (dist << _INDEX_BITS) | first[eu], _NONE)
        seg_min = np.minimum.reduceat(score, seg)
        ids = order[pos]
        best[ids] = np.minimum(best[ids], seg_min)


def _pairs(bucket: np.ndarray) -> int:
    """Same-bucket pairs: the comparisons a pass over these buckets costs."""
    counts = np.unique(bucket, return_counts=True)[1].astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _buckets(u_hash: np.ndarray, u_key: np.ndarray, max_distance: int) -> list[np.ndarray]:
    """The passes to compare in: one per chunk (multi-index hashing), or the key alone.

    With a wide radius the chunks are a few bits each and their buckets hold most of
    a key group, so max_distance + 1 passes cost more than comparing each key group
    once; the cheaper plan is chosen from the actual bucket sizes (both are exact).
    """
    passes, shift = [], 0
    for width in chunk_widths(max_distance):
        val = (u_hash >> np.uint64(shift)) & np.uint64((1 << width) - 1)
        # key and chunk value in one sortable integer (keys < 2**(64 - width))
        if int(u_key.max()) < (1 << (64 - width)):
            passes.append((u_key << np.uint64(width)) | val)
        else:  # more keys than bits left: number the (key, value) pairs instead
            passes.append(np.unique(np.stack([u_key, val], axis=1), axis=0, return_inverse=True)[1].ravel())
        shift += width
    if _pairs(u_key) <= sum(_pairs(b) for b in passes):
        return [u_key]
    return passes


def nearest_earlier(
    hashes, keys: Sequence[Hashable], max_distance: int = DEFAULT_MAX_DISTANCE
) -> tuple[np.ndarray, np.ndarray]:
    """For each item (in order): the closest earlier item with the same key.

    Returns (dup_of int64, distance int16): the index of the earlier item with
    the smallest Hamming distance <= max_distance (ties: the earliest), or -1
    and -1 when there is none.
    """
    if max_distance < 0:
        raise ValueError(f"max_distance must be >= 0, got {max_distance}")
    h_all = as_uint64(hashes).ravel()
    n = len(h_all)
    kc = _key_codes(keys, n)
    dup_of = np.full(n, -1, dtype=np.int64)
    distance = np.full(n, -1, dtype=np.int16)
    if n == 0:
        return dup_of, distance

    # 1. collapse identical (key, hash): repeats point at the first occurrence
    order = np.lexsort((np.arange(n), h_all, kc))
    sk, sh = kc[order], h_all[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = (sk[1:] != sk[:-1]) | (sh[1:] != sh[:-1])
    group = np.cumsum(new) - 1
    first_of_group = order[new]
    first_idx = first_of_group[group]
    repeats = order[first_idx != order]
    dup_of[repeats] = first_idx[first_idx != order]
    distance[repeats] = 0

    # unique entries, in order of first occurrence
    by_first = np.argsort(first_of_group, kind="stable")
    first = first_of_group[by_first]
    u_hash = h_all[first]
    u_key = kc[first].astype(np.uint64)
    best = np.full(len(first), _NONE, dtype=np.int64)
    if max_distance > 0 and len(first) > 1:
        for bucket in _buckets(u_hash, u_key, max_distance):
            _best_in_buckets(bucket, u_hash, first.astype(np.int64), max_distance, best)
    found = best != _NONE
    dup_of[first[found]] = best[found] & _INDEX_MASK
    distance[first[found]] = (best[found] >> _INDEX_BITS).astype(np.int16)
    return dup_of, distance


def brute_force_nearest_earlier(
    hashes, keys: Sequence[Hashable], max_distance: int
) -> tuple[np.ndarray, np.ndarray]:
    """The O(n^2) reference for `nearest_earlier` (tests and the benchmark)."""
    h = as_uint64(hashes).ravel()
    kc = _key_codes(keys, len(h))
    dup_of = np.full(len(h), -1, dtype=np.int64)
    distance = np.full(len(h), -1, dtype=np.int16)
    for i in range(1, len(h)):
        d = np.bitwise_count(h[:i] ^ h[i]).astype(np.int64)
        d[kc[:i] != kc[i]] = 65
        j = int(np.argmin(d))  # argmin returns the first (earliest) of equal minima
        if d[j] <= max_distance:
            dup_of[i], distance[i] = j, d[j]
    return dup_of, distance


def distance_histogram(hashes, keys: Sequence[Hashable], max_distance: int = 16) -> dict[int, int]:
    """How many items have their nearest earlier same-key item at each distance.

    Keys 0..max_distance (all present, zeros included); -1 counts the items with
    no earlier same-key item within max_distance.
    """
    _, distance = nearest_earlier(hashes, keys, max_distance)
    counts = np.bincount(distance.astype(np.int64) + 1, minlength=max_distance + 2)
    hist = {d: int(counts[d + 1]) for d in range(max_distance + 1)}
    hist[-1] = int(counts[0])
    return hist
