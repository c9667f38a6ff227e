"""WebEnv presses canonical keys and chords, right-clicks and scrolls by an amount (real Chromium)."""

from __future__ import annotations

import pytest

from schemas.actions import SCROLL_NOTCH_PX, Action
from schemas.records import DeviceProfile

DESKTOP = DeviceProfile(name="desktop", viewport_width=1280, viewport_height=800)

pytestmark = pytest.mark.slow


def S(env, key):
    return env.page.evaluate(f"S.{key}")


@pytest.fixture
def page(web_env, pages_url):
    obs = web_env.reset(f"{pages_url}/keys_clicks.html", DESKTOP)
    assert obs.last_action_error is None
    return web_env, obs


def _centre(obs, name, role=None):
    return obs.find(name, role, exact=True)[0].centre()


def test_chords_from_imported_data_replay(page):
    env, obs = page
    x, y = _centre(obs, "Field", "textbox")
    env.step(Action.tap(x, y))
    # AgentNet's hotkey(['ctrl', 'a']) and the canonical form; "Ctrl+A" as another dataset spells it.
    obs = env.step(Action.key("ctrl+a"))
    assert obs.last_action_error is None
    env.step(Action.type_text("x"))
    assert env.page.input_value("#field") == "x"  # everything was selected, then replaced
    for name in (
        "Ctrl+Shift+T",
        "ctrl+F",
        "shift+ctrl+End",
        "command+v",
        "Enter",
        "return",
        "KEYCODE_DEL",
        "esc",
        "pagedown",
    ):
        obs = env.step(Action.key(name))
        assert obs.last_action_error is None, (name, obs.last_action_error)
    keys = S(env, "keys")
    assert "ctrl+a" in keys
    assert "ctrl+shift+T" in keys  # Shift held: the page sees the capital letter
    assert "ctrl+f" in keys  # no Shift: the letter a keyboard sends
    assert "ctrl+shift+End" in keys and "meta+v" in keys
    assert keys[-5:] == ["Enter", "Enter", "Backspace", "Escape", "PageDown"]


def test_unknown_key_and_system_button_are_clear_errors(page):
    env, _ = page
    obs = env.step(Action.key("NoSuchKey"))
    assert obs.last_action_error == "unknown key 'NoSuchKey'"
    obs = env.step(Action.key("volume_up"))
    assert obs.last_action_error == "the web has no 'volume_up' key"


def test_right_click_uses_the_secondary_button_not_a_long_press(page):
    env, obs = page
    x, y = _centre(obs, "Menu target")
    obs = env.step(Action.right_click(x, y))
    assert obs.last_action_error is None
    assert S(env, "buttons") == [2] and S(env, "menus") == [2]
    assert S(env, "clicks") == 0  # no primary click
    assert S(env, "held")[0] < 300  # pressed and released, not held
    assert "Menu open" in obs.a11y_tree


def test_scroll_by_amount_and_by_default(page):
    env, _ = page
    env.step(Action.scroll("down", amount=3))
    assert env.page.evaluate("scrollY") == pytest.approx(3 * SCROLL_NOTCH_PX, abs=2)
    env.step(Action.scroll("down"))  # no amount: 0.6 of the viewport, as before
    assert env.page.evaluate("scrollY") == pytest.approx(3 * SCROLL_NOTCH_PX + 0.6 * 800, abs=2)
    env.step(Action.scroll("up", amount=1.5))
    assert env.page.evaluate("scrollY") == pytest.approx(1.5 * SCROLL_NOTCH_PX + 0.6 * 800, abs=2)
