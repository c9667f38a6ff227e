"""nearest_earlier: exact against brute force on random and clustered hashes."""

from __future__ import annotations

import numpy as np
import pytest

from filters.neardup import brute_force_nearest_earlier, distance_histogram, nearest_earlier
from schemas.screen_signature import screen_signature


def _clustered(rng, n, n_keys=3, random_frac=0.3):
    centers = rng.integers(0, 2**64, size=max(1, n // 15), dtype=np.uint64)
    h = centers[rng.integers(0, len(centers), n)]
    for _ in range(6):  # up to 6 random bit flips each
        flip = rng.random(n) < 0.5
        h ^= np.where(flip, np.uint64(1) << rng.integers(0, 64, n).astype(np.uint64), np.uint64(0))
    rand = rng.random(n) < random_frac
    h[rand] = rng.integers(0, 2**64, size=int(rand.sum()), dtype=np.uint64)
    keys = [f"/page/{k}|tap" for k in rng.integers(0, n_keys, n)]
    return h, keys


@pytest.mark.parametrize("seed", range(6))
def test_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    h, keys = _clustered(rng, int(rng.integers(50, 400)))
    for d in (0, 1, 4, 8, 16, 24):
        got = nearest_earlier(h, keys, d)
        want = brute_force_nearest_earlier(h, keys, d)
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"seed {seed} d {d}")
        np.testing.assert_array_equal(got[1], want[1])
        assert got[0].dtype == np.int64 and got[1].dtype == np.int16


def test_semantics_keys_order_ties_and_repeats():
    h = np.array([0b0000, 0b0001, 0b0011, 0b0001, 0b1111, 0b0000], dtype=np.uint64)
    keys = ["a", "a", "a", "a", "b", "b"]
    dup_of, dist = nearest_earlier(h, keys, 2)
    # 0: first; 1: d1 to 0; 2: d1 to 1 (closer than 0); 3: repeat of 1;
    # 4: other key, first; 5: key b, d4 to 4 > 2, and 0 is another key
    assert dup_of.tolist() == [-1, 0, 1, 1, -1, -1]
    assert dist.tolist() == [-1, 1, 1, 0, -1, -1]
    # int64 (Parquet) input is the same hashes
    assert nearest_earlier(h.view(np.int64), keys, 2)[0].tolist() == dup_of.tolist()
    with pytest.raises(ValueError, match="keys"):
        nearest_earlier(h, keys[:3], 2)


def test_distance_histogram_counts_every_item():
    rng = np.random.default_rng(7)
    h, keys = _clustered(rng, 300)
    hist = distance_histogram(h, keys, max_distance=16)
    assert sum(hist.values()) == 300 and set(hist) == set(range(-1, 17))
    _, dist = brute_force_nearest_earlier(h, keys, 16)
    assert hist[0] == int((dist == 0).sum()) and hist[-1] == int((dist == -1).sum())


def test_screen_signature_ignores_boxes_live_regions_and_digits():
    a = '- heading "Cart (3)" [box=0,0,10,10]\n- button "Pay" [box=1,2,3,4]\n'
    scrolled = '- heading "Cart (3)" [box=0,-40,10,-30]\n- button "Pay" [box=1,-38,3,-36]\n'
    toast = a + '- status:\n  - text "Saved"\n'
    clock = a.replace("(3)", "(4)")
    other = a + '- button "Remove" [box=5,5,6,6]\n'
    sig = screen_signature(a)
    assert screen_signature(scrolled) == sig == screen_signature(toast) == screen_signature(clock)
    assert screen_signature(other) != sig


def test_both_search_plans_are_exact_and_chosen_by_cost():
    """Small radius over one big key group: chunked (multi-index) passes are cheaper;
    a wide radius over many small groups: comparing each key group once is cheaper."""
    from filters.neardup import _buckets

    rng = np.random.default_rng(7)
    h, _ = _clustered(rng, 3000, n_keys=1)
    one_key = ["k"] * len(h)
    u_key = np.zeros(len(h), dtype=np.uint64)
    assert len(_buckets(h, u_key, 4)) == 5  # multi-index hashing
    h2, many = _clustered(rng, 3000, n_keys=300)
    codes = {k: i for i, k in enumerate(dict.fromkeys(many))}
    assert len(_buckets(h2, np.array([codes[k] for k in many], dtype=np.uint64), 24)) == 1
    for hashes, keys, d in ((h, one_key, 4), (h2, many, 24)):
        got = nearest_earlier(hashes, keys, d)
        want = brute_force_nearest_earlier(hashes, keys, d)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
