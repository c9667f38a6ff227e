"""The batched transformers path end to end on the tiny offline model: CoT, re-prediction,
box check and the trajectory judge on one backend. Random weights write noise, so the
test asserts shapes, labels and the bookkeeping: unparseable answers are counted, never
dressed up as results."""

from __future__ import annotations

from filters.judge import Judge, JudgeInput
from synthesis.alignment import AlignmentSettings, check_alignment
from synthesis.cot import StepItem, VLMCoT
from tests.vlm.helpers import screenshot, tiny_backend

from . import make_traj

PAGE = 120  # page text cut short: the CPU cost is the prompt length, the path is the same


class Counting:
    """The real backend, with the size of each generate call written down."""

    def __init__(self, backend):
        self.backend, self.calls = backend, []

    @property
    def model_id(self):
        return self.backend.model_id

    def generate(self, requests, max_new_tokens, **kw):
        self.calls.append((len(requests), kw.get("n", 1)))
        return self.backend.generate(requests, max_new_tokens, **kw)


def test_tiny_model_cot_alignment_and_judge():
    real = tiny_backend(4)
    backend = Counting(real)
    en, en_steps = make_traj("en")
    zh, zh_steps = make_traj("zh", tid="t-zh")
    images = {sid: screenshot(112, 84, sid, seed=k) for k, sid in enumerate(["en", "zh"])}
    # Short histories keep the CPU prompt small; both languages, tap / select / type.
    items = [
        StepItem(en, en_steps, 0, images["en"]),
        StepItem(en, en_steps, 2, images["en"]),
        StepItem(zh, zh_steps, 0, images["zh"]),
        StepItem(zh, zh_steps, 3, images["zh"]),
    ]

    cots = VLMCoT(backend, batch_size=8, max_new_tokens=12, max_page_chars=PAGE).generate_many(items)
    assert backend.calls == [(4, 1)]  # one batched call of 4 requests
    assert [(c.trajectory_id, c.index, c.language) for c in cots] == [
        ("t-en", 0, "en"),
        ("t-en", 2, "en"),
        ("t-zh", 0, "zh"),
        ("t-zh", 3, "zh"),
    ]
    assert all(c.backend == real.model_id and c.backend.startswith("tiny-qwen2vl@") for c in cots)
    assert all(isinstance(c.raw, str) and c.raw for c in cots)
    for c in cots:  # noise does not parse: counted as parsed=False with empty parts
        assert c.parsed or (c.observation, c.reflection, c.plan) == ("", "", "")
    # The action is always the recording's, parsed or not.
    assert [c.answer["point_2d"] for c in cots] == [[90, 220], [80, 175], [90, 220], [-100, -100]]
    assert [c.answer["action_type"] for c in cots] == ["Click", "Select", "Click", "Write"]

    backend.calls.clear()
    results = check_alignment(
        backend,
        items,
        AlignmentSettings(n=3, seed=11, max_new_tokens=12, box_max_new_tokens=10, max_page_chars=PAGE),
        cots=cots,
    )
    # One sampled call (4 requests x 3) and one greedy box call for the 3 steps with a point.
    assert backend.calls == [(4, 3), (3, 1)]
    assert all(r.n == 3 and r.match_rate in (0.0, 1 / 3, 2 / 3, 1.0) for r in results)
    assert all(0 <= r.unparsed <= 3 for r in results)
    for r in results[:3]:  # a point: the box check ran
        assert isinstance(r.point_in_box, bool)
        assert r.keep == (r.match_rate >= 0.3 and r.point_in_box)
        assert r.keep or r.reason in ("low_match", "point_outside_box", "box_unparsed")
    assert results[3].point_in_box is None and results[3].box is None  # type without a point

    backend.calls.clear()
    verdicts = Judge(backend, max_new_tokens=12, max_page_chars=PAGE).judge(
        [
            JudgeInput(en, en_steps[:2], [images["en"], images["en"]]),
            JudgeInput(zh, zh_steps[:2], [images["zh"], b""]),
        ]
    )
    assert backend.calls == [(2, 1)]
    assert [v.trajectory_id for v in verdicts] == ["t-en", "t-zh"]
    assert all(v.model_id == real.model_id for v in verdicts)
    assert all(v.parsed == (v.success is not None) for v in verdicts)
