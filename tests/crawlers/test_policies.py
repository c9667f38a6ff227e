"""Policies on hand-built observations: the pure decision logic (no browser needed).

That they drive a real browser through the sandbox is tested in test_runner.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from crawlers.guard import SafetyGuard
from crawlers.policies import VOCABULARY, Policy, RandomWalkPolicy, ReplayPolicy
from sandbox.oracle_policy import OraclePolicy
from sandbox.tasks.base import Fill, Finish, OracleError, Tap, Target, TaskTemplate
from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import Element, Task


def obs_of(*elements: Element) -> Observation:
    return Observation(
        screenshot=b"",
        image_format="png",
        width=1280,
        height=800,
        url="http://127.0.0.1/x",
        a11y_tree="",
        elements=list(elements),
    )


def el(role, name, y=0.5, x=0.5, h=0.04, w=0.1):
    return Element(role=role, name=name, bbox=(x - w / 2, y - h / 2, x + w / 2, y + h / 2))


PAGE = obs_of(
    el("heading", "Shop", y=0.05),
    el("link", "Home", y=0.1, x=0.1),
    el("link", "Cart", y=0.1, x=0.3),
    el("button", "Add to cart", y=0.4),
    el("button", "Pay now", y=0.5),
    el("checkbox", "Gift wrap", y=0.6),
    el("searchbox", "Search", y=0.2),
    el("link", "Below the fold", y=1.4),  # off screen: never tapped
    el("paragraph", "Free delivery", y=0.7),  # not a control
    Element(role="button", name="No box"),  # no bbox
)


def test_random_walk_is_reproducible_from_its_seed():
    def run(seed):
        p = RandomWalkPolicy(seed, max_steps=25)
        return [p.act(PAGE) for _ in range(25)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_random_walk_taps_only_visible_unguarded_controls_and_ends_with_done():
    p = RandomWalkPolicy(3, max_steps=60)
    actions, targets = [], []
    for _ in range(60):
        actions.append(p.act(PAGE))
        targets.append(p.last_target)
    assert actions[-1].type == ActionType.DONE
    assert all(a.type != ActionType.DONE for a in actions[:-1])
    tapped = {t.name for a, t in zip(actions, targets) if a.type == ActionType.TAP}
    assert tapped <= {"Home", "Cart", "Add to cart", "Gift wrap", "Search"}
    assert len(tapped) >= 4  # it spreads over the page
    kinds = Counter(a.type for a in actions)
    assert kinds[ActionType.SCROLL] >= 1 and kinds[ActionType.TYPE] >= 1
    for a, t in zip(actions, targets):  # every tap aims at the centre of its target
        if a.type == ActionType.TAP:
            assert t.contains(a.x, a.y) and (a.x, a.y) == pytest.approx(t.centre())


def test_a_tapped_textbox_is_typed_into_with_a_word_of_the_task_language():
    box = el("textbox", "搜索", y=0.3)
    for lang in ("en", "zh"):
        p = RandomWalkPolicy(1, max_steps=10, lang=lang, p_scroll=0.0, p_back=0.0)
        first = p.act(obs_of(box))
        assert first.type == ActionType.TAP and p.last_target == box
        typed = p.act(obs_of(box))
        assert typed.type == ActionType.TYPE and typed.text in VOCABULARY[lang]
        assert p.last_target is None  # typing goes to the focused field


def test_random_walk_dismisses_a_distraction_first_and_scrolls_when_nothing_is_tappable():
    popup = obs_of(el("button", "Add to cart", y=0.4), el("button", "Close offer", y=0.6))
    dismissed = sum(
        RandomWalkPolicy(s, max_steps=5, p_scroll=0.0, p_back=0.0).act(popup)
        == Action.tap(*el("button", "Close offer", y=0.6).centre(), description="Dismiss 'Close offer'")
        for s in range(50)
    )
    assert dismissed >= 30  # 80% of the time
    empty = obs_of(el("paragraph", "Nothing here"), el("button", "Pay now"))
    a = RandomWalkPolicy(0, max_steps=5, p_scroll=0.0, p_back=0.0).act(empty)
    assert a.type == ActionType.SCROLL


def test_random_walk_uses_the_guard_it_is_given():
    strict = SafetyGuard({"cart": [r"\bcart\b"]})
    p = RandomWalkPolicy(0, max_steps=40, guard=strict, p_scroll=0.0, p_back=0.0)
    for _ in range(39):
        p.act(PAGE)
        assert p.last_target is None or "cart" not in p.last_target.name.lower()
    with pytest.raises(ValueError, match="max_steps"):
        RandomWalkPolicy(0, max_steps=0)


def test_replay_plays_the_actions_back_then_says_done():
    recorded = [Action.tap(0.1, 0.2), Action.type_text("hi"), Action.key("Enter")]
    p = ReplayPolicy(recorded)
    assert [p.act(PAGE) for _ in range(3)] == recorded
    assert p.act(PAGE).type == ActionType.DONE
    assert p.last_target is None


class _SearchTemplate(TaskTemplate):
    template_id = "test_search"
    app = "shop"

    def plan(self, params, lang):
        return [
            Fill(Target("Search", role="searchbox"), params["query"], submit=True),
            Tap(Target("Cart", role="link")),
            Finish(),
        ]


def _task() -> Task:
    return Task(
        task_id="test_search:en:0",
        instruction="Search for mugs",
        language="en",
        app="shop",
        template_id="test_search",
        params={"query": "mug", "seed": 0},
    )


def test_oracle_policy_follows_the_plan_and_exposes_its_target():
    p = OraclePolicy(_SearchTemplate(), _task())
    assert isinstance(p, Policy) and p.name == "oracle"
    a = p.act(PAGE)
    assert a.type == ActionType.TAP and p.last_target.name == "Search"
    assert p.act(PAGE) == Action(type=ActionType.TYPE, text="mug", description="Type 'mug'")
    assert p.last_target is None
    assert p.act(PAGE).text == "Enter"
    assert p.act(PAGE).type == ActionType.TAP and p.last_target.name == "Cart"
    assert p.act(PAGE).type == ActionType.DONE


def test_oracle_policy_raises_oracle_error_when_the_target_never_appears():
    p = OraclePolicy(_SearchTemplate(), _task())
    nothing = obs_of(el("heading", "Empty"))
    with pytest.raises(OracleError, match="Search"):
        for _ in range(10):
            p.act(nothing)
