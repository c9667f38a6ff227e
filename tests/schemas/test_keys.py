"""schemas.keys: one canonical spelling for keys and chords, and each platform's syntax."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from selenium.webdriver.common.keys import Keys

from schemas.keys import (
    MODIFIERS,
    NAMED_KEYS,
    KeyNameError,
    canonical_key,
    canonical_or_raw,
    parse_chord,
    same_key,
    to_android,
    to_ios,
    to_playwright,
    to_w3c,
)


@pytest.mark.parametrize(
    "name, canonical",
    [
        ("ctrl+c", "ctrl+c"),
        ("Ctrl+Shift+T", "ctrl+shift+t"),
        ("shift+ctrl+t", "ctrl+shift+t"),
        ("Ctrl + Shift + T", "ctrl+shift+t"),
        ("ctrl+F", "ctrl+f"),  # AgentNet's hotkey
        ("cmd+v", "meta+v"),
        ("command+v", "meta+v"),
        ("Control+C", "ctrl+c"),  # GUIAct's copy
        ("win", "meta"),
        ("Meta", "meta"),
        ("alt", "alt"),
        ("option+tab", "alt+tab"),
        ("Enter", "enter"),
        ("return", "enter"),
        ("KEYCODE_ENTER", "enter"),
        ("go", "enter"),
        ("\n", "enter"),
        ("tab", "tab"),
        ("Tab", "tab"),
        ("esc", "escape"),
        ("Escape", "escape"),
        ("pagedown", "pagedown"),
        ("PageDown", "pagedown"),
        ("Page Down", "pagedown"),
        ("KEYCODE_PAGE_DOWN", "pagedown"),
        ("space", "space"),
        (" ", "space"),
        ("Backspace", "backspace"),
        ("KEYCODE_DEL", "backspace"),
        ("del", "backspace"),
        ("Delete", "delete"),
        ("KEYCODE_FORWARD_DEL", "delete"),
        ("ArrowUp", "up"),
        ("KEYCODE_DPAD_UP", "up"),
        ("F5", "f5"),
        ("KeyA", "a"),
        ("Digit7", "7"),
        ("ctrl++", "ctrl+plus"),
        ("+", "plus"),
        ("a", "a"),
        ("A", "A"),
        ("ctrl+A", "ctrl+a"),
        ("home", "home"),
        ("KEYCODE_HOME", "home"),
        ("ctrl+home", "ctrl+move_home"),
        ("recent_apps", "app_switch"),
        ("KEYCODE_APP_SWITCH", "app_switch"),
        ("volume-up", "volume_up"),
        ("back", "back"),
        ("search", "search"),
        ("ctrl+alt+Delete", "ctrl+alt+delete"),
        ("ctrl+shift", "ctrl+shift"),
    ],
)
def test_canonical_names(name, canonical):
    assert canonical_key(name) == canonical
    assert canonical_key(canonical) == canonical  # canonical names are fixed points


def test_keyboard_home_from_desktop_data():
    # pyautogui.press('home') is the keyboard's Home key, not the phone's Home button.
    assert canonical_key("home", keyboard=True) == "move_home"
    assert canonical_key("home") == "home"


@pytest.mark.parametrize(
    "name, message",
    [
        ("NoSuchKey", "unknown key 'NoSuchKey'"),
        ("foo+c", "'foo' is not a modifier"),
        ("ctrl+back", "cannot be part of a chord"),
        ("", "unknown key ''"),
        ("ctrl+", "an empty part"),
    ],
)
def test_unknown_names_are_errors_naming_the_key(name, message):
    with pytest.raises(KeyNameError, match=message):
        canonical_key(name)
    assert canonical_or_raw(f" {name} ") == name.strip()  # importers keep what they cannot read


@pytest.mark.parametrize(
    "name, playwright",
    [
        ("ctrl+shift+t", "Control+Shift+T"),
        ("meta+v", "Meta+v"),
        ("ctrl+a", "Control+a"),
        ("enter", "Enter"),
        ("space", " "),
        ("shift+space", "Shift+Space"),
        ("pagedown", "PageDown"),
        ("up", "ArrowUp"),
        ("ctrl+move_home", "Control+Home"),
        ("ctrl+plus", "Control++"),
        ("f12", "F12"),
        ("search", "Enter"),
        ("escape", "Escape"),
        ("backspace", "Backspace"),
    ],
)
def test_playwright_syntax(name, playwright):
    assert to_playwright(name) == playwright


def test_w3c_keys_are_seleniums():
    assert to_w3c("ctrl+c") == [Keys.CONTROL, "c"]
    assert to_w3c("ctrl+shift+t") == [Keys.CONTROL, Keys.SHIFT, "T"]
    assert to_w3c("meta+v") == [Keys.META, "v"]
    assert to_w3c("enter") == [Keys.ENTER] and to_w3c("pagedown") == [Keys.PAGE_DOWN]
    assert to_w3c("move_home") == [Keys.HOME] and to_w3c("f5") == [Keys.F5]
    with pytest.raises(KeyNameError, match="no 'volume_up' key"):
        to_w3c("volume_up")


def test_android_keycodes_and_meta_state():
    assert to_android("enter") == (66, 0) and to_android("back") == (4, 0)
    assert to_android("home") == (3, 0) and to_android("app_switch") == (187, 0)
    assert to_android("ctrl+c") == (31, 0x1000)  # KEYCODE_C, META_CTRL_ON
    assert to_android("ctrl+shift+t") == (48, 0x1001)
    assert to_android("meta+v") == (50, 0x10000)
    assert to_android("move_home") == (122, 0) and to_android("backspace") == (67, 0)
    with pytest.raises(KeyNameError, match="unknown Android key 'f13'"):
        to_android("f13")


def test_ios_types_text_keys_presses_buttons_and_refuses_chords():
    assert to_ios("enter") == ("text", "\n") and to_ios("home") == ("button", "home")
    assert to_ios("volume_up") == ("button", "volumeUp") and to_ios("x") == ("text", "x")
    with pytest.raises(KeyNameError, match="iOS cannot press the chord 'ctrl\\+c'"):
        to_ios("ctrl+c")
    with pytest.raises(KeyNameError, match="iOS has no back button"):
        to_ios("back")
    with pytest.raises(KeyNameError, match="unknown iOS key 'pagedown'"):
        to_ios("pagedown")


def test_same_key_compares_spellings():
    assert same_key("Enter", "KEYCODE_ENTER") and same_key("Control+C", "ctrl+c")
    assert not same_key("ctrl+c", "ctrl+v")


_mods = st.lists(
    st.sampled_from(["ctrl", "Control", "alt", "Option", "shift", "Shift", "cmd", "win", "meta"]), max_size=4
)
_mains = st.sampled_from(
    sorted(
        NAMED_KEYS
        - {
            "back",
            "home",
            "menu",
            "search",
            "app_switch",
            "volume_up",
            "volume_down",
            "volume_mute",
            "power",
            "camera",
        }
    )
) | st.sampled_from(list("abcXYZ019/.,"))


@given(mods=_mods, main=_mains, sep=st.sampled_from(["+", " + "]))
def test_canonical_form_is_ordered_lower_case_and_idempotent(mods, main, sep):
    c = canonical_key(sep.join([*mods, main]))
    assert canonical_key(c) == c
    *got_mods, got_main = c.split("+")
    if got_mods:
        assert got_mods == [m for m in MODIFIERS if m in got_mods]  # fixed order, no repeats
        assert c == c.lower()
    assert parse_chord(c) == (tuple(got_mods), got_main)
    to_playwright(c)  # every canonical keyboard chord has a Playwright form
