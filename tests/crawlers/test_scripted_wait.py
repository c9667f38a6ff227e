"""A demonstration's `wait` that names an element: it waits for it, then acts at once."""

from __future__ import annotations

import pytest

from crawlers.policy_errors import PolicyError
from crawlers.scripted import ScriptedPolicy
from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.records import Element

DOC = Element(role="textbox", name="hello", bbox=(0.0, 0.1, 1.0, 1.0))
DIALOG = Element(role="dialog", name="Save As", bbox=(0.2, 0.2, 0.8, 0.8))
FIELD = Element(role="textbox", name="", bbox=(0.3, 0.3, 0.7, 0.35))


def screen(*elements: Element) -> Observation:
    return Observation(b"", "png", 100, 100, "desktop://m/x", "", list(elements))


SCRIPT = [{"key": "ctrl+s"}, {"wait": {"role": "dialog", "name": "Save As"}}, {"key": "enter"}]


def test_a_wait_for_an_element_waits_while_it_is_absent_then_costs_no_step():
    policy = ScriptedPolicy(SCRIPT)
    assert policy.act(screen(DOC)).text == "ctrl+s"
    waits = [policy.act(screen(DOC)) for _ in range(2)]  # the dialog is not up yet
    assert [(a.type, a.duration_ms) for a in waits] == [(ActionType.WAIT, 500)] * 2
    # It is up: the next step is played on this screen, no wait recorded for it.
    after = policy.act(screen(DOC, DIALOG, FIELD))
    assert (after.type, after.text) == (ActionType.KEY, "enter")
    assert policy.act(screen(DOC)).type == ActionType.DONE


def test_a_wait_present_at_once_adds_nothing_and_one_that_never_comes_names_its_step():
    policy = ScriptedPolicy(SCRIPT)
    policy.act(screen(DOC))
    assert policy.act(screen(DOC, DIALOG)).text == "enter"
    policy = ScriptedPolicy(SCRIPT, patience=1)
    policy.act(screen(DOC))
    assert policy.act(screen(DOC)).type == ActionType.WAIT
    with pytest.raises(PolicyError, match=r"script step 1 \(wait\): no element .*Save As"):
        policy.act(screen(DOC))


def test_a_plain_wait_still_sleeps():
    policy = ScriptedPolicy([{"wait": 800}])
    first = policy.act(screen(DOC))
    assert (first.type, first.duration_ms, policy.act(screen(DOC)).type) == (
        ActionType.WAIT,
        800,
        ActionType.DONE,
    )


def test_an_element_below_the_fold_is_scrolled_to_then_tapped_and_one_that_stays_out_names_its_step():
    below = Element(role="button", name="Save", bbox=(0.4, 1.4, 0.6, 1.5))
    shown = Element(role="button", name="Save", bbox=(0.4, 0.4, 0.6, 0.5))
    policy = ScriptedPolicy([{"tap": {"role": "button", "name": "Save"}}])
    first = policy.act(screen(below))
    assert (first.type, first.direction) == (ActionType.SCROLL, "down")
    tap = policy.act(screen(shown))
    assert (
        tap.type == ActionType.TAP and 0.4 < tap.y < 0.5 and policy.act(screen(shown)).type == ActionType.DONE
    )
    stuck = ScriptedPolicy([{"tap": {"role": "button", "name": "Save"}}])
    with pytest.raises(PolicyError, match="script step 0: button 'Save' stays out of view after 4 scrolls"):
        for _ in range(6):
            stuck.act(screen(below))


def test_typing_clicks_the_field_where_at_says_else_its_centre():
    """Where the caret lands decides what typed text joins: pcmanfm's new-folder dialog
    holds "New Folder", and a click at its end appends rather than replaces a word."""
    name = Element(role="textbox", name="Name", bbox=(0.2, 0.4, 0.6, 0.5))
    for step, point in (
        ({"type": "s", "into": {"role": "textbox", "name": "Name"}, "at": [0.9, 0.5]}, (0.56, 0.45)),
        ({"type": "s", "into": {"role": "textbox", "name": "Name"}}, (0.4, 0.45)),
    ):
        policy = ScriptedPolicy([step])
        tap = policy.act(screen(name))
        assert tap.type == ActionType.TAP and (round(tap.x, 3), round(tap.y, 3)) == point
        assert (policy.act(screen(name)).type, policy.act(screen(name)).type) == (
            ActionType.TYPE,
            ActionType.DONE,
        )
