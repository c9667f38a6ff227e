"""MobileEnv: canonical key names and chords per platform, right clicks refused on touch."""

from __future__ import annotations

from schemas.actions import Action

from .test_mobile_env import _phone_env


def _keycodes(driver):
    driver.press_keycode = lambda code, meta=0: driver.calls.append(("keycode", code, meta))


def test_android_presses_canonical_names_and_chords_with_a_meta_state(monkeypatch):
    env, driver = _phone_env(monkeypatch, "android")
    env.reset("settings")
    _keycodes(driver)
    for name, code, meta in (
        ("KEYCODE_ENTER", 66, 0),
        ("return", 66, 0),
        ("recent_apps", 187, 0),
        ("ctrl+c", 31, 0x1000),
        ("Ctrl+Shift+T", 48, 0x1001),
        ("command+v", 50, 0x10000),
        ("pagedown", 93, 0),
        ("esc", 111, 0),
    ):
        driver.calls.clear()
        obs = env.step(Action.key(name))
        assert obs.last_action_error is None, (name, obs.last_action_error)
        assert driver.calls == [("keycode", code, meta)], name
    assert env.step(Action.key("F13")).last_action_error == (
        "key: unknown Android key 'F13' (Android has no keycode for 'f13')"
    )
    assert env.step(Action.key("NoSuchKey")).last_action_error == ("key: unknown Android key 'NoSuchKey'")


def test_right_click_is_refused_on_a_touch_screen(monkeypatch):
    env, driver = _phone_env(monkeypatch, "android")
    env.reset("settings")
    driver.calls.clear()
    obs = env.step(Action.right_click(0.5, 0.5))
    assert obs.last_action_error.startswith("right_click: a touch screen cannot right-click")
    assert not [c for c in driver.calls if c[0] == "actions"]  # nothing was pressed, no long press


def test_ios_refuses_chords_and_types_text_keys(monkeypatch):
    env, driver = _phone_env(monkeypatch, "ios")
    env.reset("settings")
    driver.calls.clear()
    assert env.step(Action.key("KEYCODE_ENTER")).last_action_error is None
    assert env.step(Action.key("volume-up")).last_action_error is None
    assert driver.calls == [("send_keys", "\n"), ("script", "mobile: pressButton", {"name": "volumeUp"})]
    obs = env.step(Action.key("ctrl+c"))
    assert obs.last_action_error == (
        "key: iOS cannot press the chord 'ctrl+c' (no keyboard shortcuts on a phone)"
    )
    assert env.step(Action.key("back")).last_action_error.startswith("key: iOS has no back button")
    assert env.step(Action.key("NoSuchKey")).last_action_error.startswith(
        "key: unknown iOS key 'NoSuchKey'; known: "
    )


def test_chromium_chord_selects_all_then_typing_replaces(mobile_env, pages_url):
    obs = mobile_env.reset(f"{pages_url}/touch.html")
    box = obs.find("Query", role="textbox")[0]
    assert mobile_env.step(Action.type_text("hello", *box.centre())).last_action_error is None
    obs = mobile_env.step(Action.key("ctrl+a"))
    assert obs.last_action_error is None
    mobile_env.step(Action.type_text("x"))
    assert mobile_env.driver.execute_script("return document.getElementById('q').value") == "x"
    assert mobile_env.step(Action.right_click(*box.centre())).last_action_error.startswith(
        "right_click: a touch screen cannot right-click"
    )
