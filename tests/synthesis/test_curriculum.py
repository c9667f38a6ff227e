"""The curriculum sampler: eligibility, weights and the per-epoch update, by hand."""

from __future__ import annotations

from collections import Counter

import pytest

from synthesis.curriculum import CurriculumSampler, CurriculumSettings

TASKS = {"c": 1.0, "a": 0.0, "b": 0.5}


def test_unknown_tasks_start_eligible_with_weights_around_the_frontier():
    s = CurriculumSampler(TASKS, seed=1)
    # No rollouts: estimate = (0 + 0.5*2) / (0 + 2) = 0.5, inside [0.3, 0.7].
    assert [s.success_estimate(t) for t in "abc"] == [0.5, 0.5, 0.5]
    assert s.eligible() == ["a", "b", "c"]
    # Frontier starts at the easiest difficulty, 0.0. Weight = max(0.05, 1 - |d - 0| / 0.5):
    # a: 1 - 0/0.5 = 1;  b: 1 - 0.5/0.5 = 0 -> 0.05;  c: 1 - 1/0.5 = -1 -> 0.05.  Sum 1.1.
    assert s.frontier == 0.0
    assert s.probabilities() == pytest.approx({"a": 1 / 1.1, "b": 0.05 / 1.1, "c": 0.05 / 1.1})


def test_update_reestimates_success_and_moves_the_frontier():
    s = CurriculumSampler(TASKS, seed=1)
    s.update([("a", True)] * 4 + [("b", True)] + [("b", False)] * 3)
    # a: (4 + 1) / (4 + 2) = 5/6 = 0.833 > 0.7: mastered, out.
    # b: (1 + 1) / (4 + 2) = 1/3 = 0.333: still learnable.  c: no data, 0.5.
    assert s.success_estimate("a") == pytest.approx(5 / 6)
    assert s.success_estimate("b") == pytest.approx(1 / 3)
    assert s.eligible() == ["b", "c"]
    # Mean success 5/8 = 0.625: frontier 0 + 0.5 * (0.625 - 0.5) = 0.0625.
    assert s.frontier == pytest.approx(0.0625)
    # b: 1 - 0.4375/0.5 = 0.125;  c: 1 - 0.9375/0.5 < 0 -> 0.05.  b: 0.125/0.175, c: 0.05/0.175.
    assert s.probabilities() == pytest.approx({"b": 0.125 / 0.175, "c": 0.05 / 0.175})

    s.update([("b", False), ("b", False)])
    # Old counts halve first: a 2/2, b 0.5/2; then b gets 0 of 2 more -> 0.5/4.
    # a: (2 + 1) / (2 + 2) = 0.75 (still out); b: (0.5 + 1) / (4 + 2) = 0.25 (now too hard).
    assert s.success_estimate("a") == pytest.approx(0.75)
    assert s.success_estimate("b") == pytest.approx(0.25)
    assert s.eligible() == ["c"]
    # Mean 0: frontier 0.0625 + 0.5 * (0 - 0.5) = -0.1875, clipped to 0.
    assert s.frontier == 0.0

    s.update([])
    # Undrawn for an epoch, both drift back to the prior and are checked again:
    # a 1/1 -> (1 + 1) / (1 + 2) = 0.667;  b 0.25/2 -> (0.25 + 1) / (2 + 2) = 0.3125.
    assert s.success_estimate("a") == pytest.approx(2 / 3)
    assert s.success_estimate("b") == pytest.approx(0.3125)
    assert s.eligible() == ["a", "b", "c"]
    with pytest.raises(KeyError, match="'zz'"):
        s.update([("zz", True)])


def test_epochs_are_seeded_distinct_and_follow_the_weights():
    a = CurriculumSampler(TASKS, seed=7, batch_size=2)
    b = CurriculumSampler(TASKS, seed=7, batch_size=2)
    runs = [[a.epoch() for _ in range(5)], [b.epoch() for _ in range(5)]]
    assert runs[0] == runs[1]  # same seed, same batches
    assert all(len(batch) == len(set(batch)) == 2 for batch in runs[0])
    assert a.epoch(batch_size=10) and len(a.history[-1].batch) == 3  # capped at the eligible count
    assert a.history[-1].eligible == 3 and a.history[-1].epoch == 5

    # Single draws follow the probabilities: b 0.125/0.175 = 0.714, c 0.286 (see above).
    s = CurriculumSampler(TASKS, seed=3, batch_size=1)
    s.update([("a", True)] * 4 + [("b", True)] + [("b", False)] * 3)
    counts = Counter(s.epoch()[0] for _ in range(3000))
    assert set(counts) == {"b", "c"}
    assert counts["b"] / 3000 == pytest.approx(0.125 / 0.175, abs=0.03)


def test_no_eligible_task_gives_an_empty_batch_and_bad_input_is_refused():
    s = CurriculumSampler({"x": 0.2}, CurriculumSettings(memory=1.0), seed=0)
    s.update([("x", True)] * 10)  # (10 + 1) / (10 + 2) = 0.917
    assert s.eligible() == [] and s.epoch() == []
    with pytest.raises(ValueError, match="'y'.*1.5"):
        CurriculumSampler({"y": 1.5})
    with pytest.raises(ValueError, match="low"):
        CurriculumSampler({"y": 0.5}, CurriculumSettings(low=0.8, high=0.2))
