"""Canonical key names and chords, and their translations to each platform's key syntax.

A `key` action's text is a key or a chord. Datasets, models and drivers spell
them every which way ("Ctrl+Shift+T", "ctrl-c" lists from pyautogui,
"command+v", "KEYCODE_ENTER", "Return", "PageDown"); `canonical_key` turns any
of those into one form, and `to_playwright`, `to_w3c`, `to_android` and
`to_ios` turn the canonical form into what each driver presses.

The canonical form (documented once, used by every importer):

- All lower case. A chord is its modifiers, in the fixed order
  ``ctrl, alt, shift, meta``, then one main key, joined with "+":
  ``ctrl+shift+t``, ``meta+v``, ``ctrl+alt+delete``. A modifier alone is a key
  too (``meta``: the Windows / Command key).
- Modifier aliases: control / ctl -> ctrl; option / opt -> alt;
  cmd / command / win / windows / super / os -> meta.
- A printable character is itself: ``a``, ``7``, ``/``. In a chord a letter is
  lower case (``ctrl+shift+t``, never ``T``); a lone character keeps its case.
  The "+" key is ``plus`` (so that a chord stays unambiguous).
- Named keys: enter, tab, space, backspace, delete, escape, up, down, left,
  right, pageup, pagedown, move_home, end, insert, f1 .. f24, capslock,
  numlock, scrolllock, printscreen, pause, contextmenu. "del" is backspace (as
  Android's KEYCODE_DEL is); the forward delete is ``delete``.
- System buttons: back, home, menu, search, app_switch, volume_up,
  volume_down, volume_mute, power, camera. ``home`` is always the system Home
  button (as a `key` action has meant so far); the keyboard's Home key is
  ``move_home`` (Android's KEYCODE_MOVE_HOME). In a chord, or when the name
  comes from a desktop keyboard (``keyboard=True``, e.g. pyautogui), "home"
  means the keyboard key: ``ctrl+home`` -> ``ctrl+move_home``.
- IME actions "go", "send", "done" and "return" are ``enter``; "search"
  stays ``search`` (Android has a key for it; the web presses Enter).

Anything that is not one of these is a `KeyNameError` naming the key; a
translation a platform cannot press is a `KeyNameError` too (the drivers turn
it into their ActionError), e.g. a chord on iOS or ``power`` on the web.
"""

from __future__ import annotations

import re

MODIFIERS = ("ctrl", "alt", "shift", "meta")

_MODIFIER_ALIASES = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "ctl": "ctrl",
    "controlleft": "ctrl",
    "controlright": "ctrl",
    "lctrl": "ctrl",
    "rctrl": "ctrl",
    "ctrlleft": "ctrl",
    "ctrlright": "ctrl",
    "strg": "ctrl",
    "alt": "alt",
    "option": "alt",
    "opt": "alt",
    "altleft": "alt",
    "altright": "alt",
    "lalt": "alt",
    "ralt": "alt",
    "menualt": "alt",
    "shift": "shift",
    "shiftleft": "shift",
    "shiftright": "shift",
    "lshift": "shift",
    "rshift": "shift",
    "meta": "meta",
    "cmd": "meta",
    "command": "meta",
    "win": "meta",
    "windows": "meta",
    "super": "meta",
    "os": "meta",
    "metaleft": "meta",
    "metaright": "meta",
    "lwin": "meta",
    "rwin": "meta",
    "winleft": "meta",
    "winright": "meta",
    "cmdleft": "meta",
    "cmdright": "meta",
    "⌘": "meta",
}

_NAMED = (
    "enter",
    "tab",
    "space",
    "backspace",
    "delete",
    "escape",
    "up",
    "down",
    "left",
    "right",
    "pageup",
    "pagedown",
    "move_home",
    "end",
    "insert",
    "capslock",
    "numlock",
    "scrolllock",
    "printscreen",
    "pause",
    "contextmenu",
    *(f"f{i}" for i in range(1, 25)),
)
SYSTEM_BUTTONS = (
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
)
NAMED_KEYS = frozenset(_NAMED) | frozenset(SYSTEM_BUTTONS)

# Aliases, looked up with case, spaces, "_" and "-" removed (see _norm).
_ALIASES = {
    "return": "enter",
    "ret": "enter",
    "go": "enter",
    "send": "enter",
    "done": "enter",
    "numpadenter": "enter",
    "kpenter": "enter",
    "newline": "enter",
    "⏎": "enter",
    "↵": "enter",
    "tabulator": "tab",
    "spacebar": "space",
    "backspace": "backspace",
    "bksp": "backspace",
    "bs": "backspace",
    "del": "backspace",
    "forwarddel": "delete",
    "forwarddelete": "delete",
    "delete": "delete",
    "esc": "escape",
    "escape": "escape",
    "arrowup": "up",
    "uparrow": "up",
    "dpadup": "up",
    "arrowdown": "down",
    "downarrow": "down",
    "dpaddown": "down",
    "arrowleft": "left",
    "leftarrow": "left",
    "dpadleft": "left",
    "arrowright": "right",
    "rightarrow": "right",
    "dpadright": "right",
    "pageup": "pageup",
    "pgup": "pageup",
    "prior": "pageup",
    "pagedown": "pagedown",
    "pgdn": "pagedown",
    "pgdown": "pagedown",
    "next": "pagedown",
    "movehome": "move_home",
    "homekey": "move_home",
    "moveend": "end",
    "end": "end",
    "insert": "insert",
    "ins": "insert",
    "capslock": "capslock",
    "caps": "capslock",
    "numlock": "numlock",
    "scrolllock": "scrolllock",
    "printscreen": "printscreen",
    "prtsc": "printscreen",
    "prtscr": "printscreen",
    "print": "printscreen",
    "sysrq": "printscreen",
    "pause": "pause",
    "break": "pause",
    "contextmenu": "contextmenu",
    "apps": "contextmenu",
    "back": "back",
    "goback": "back",
    "navigateback": "back",
    "browserback": "back",
    "home": "home",
    "gohome": "home",
    "navigatehome": "home",
    "menu": "menu",
    "search": "search",
    "appswitch": "app_switch",
    "recentapps": "app_switch",
    "recents": "app_switch",
    "recent": "app_switch",
    "appselect": "app_switch",
    "overview": "app_switch",
    "volumeup": "volume_up",
    "volup": "volume_up",
    "audiovolumeup": "volume_up",
    "volumedown": "volume_down",
    "voldown": "volume_down",
    "audiovolumedown": "volume_down",
    "volumemute": "volume_mute",
    "mute": "volume_mute",
    "audiovolumemute": "volume_mute",
    "power": "power",
    "camera": "camera",
    "plus": "plus",
    "add": "plus",
    "minus": "-",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "semicolon": ";",
    "quote": "'",
    "apostrophe": "'",
    "equal": "=",
    "equals": "=",
    "bracketleft": "[",
    "bracketright": "]",
    "backquote": "`",
    "grave": "`",
    "star": "*",
    "pound": "#",
    "at": "@",
}
_ALIASES.update({f"f{i}": f"f{i}" for i in range(1, 25)})
_ALIASES.update({n.replace("_", ""): n for n in NAMED_KEYS})
# Playwright / W3C codes: KeyA, Digit1, Numpad1.
_CODE = re.compile(r"^(?:key([a-z])|digit([0-9])|numpad([0-9]))$")


class KeyNameError(ValueError):
    """A key name nobody knows, or a key a platform cannot press; the message names it."""


def _norm(token: str) -> str:
    t = re.sub(r"[\s_\-]", "", token.lower())
    return t[len("keycode") :] if t.startswith("keycode") and len(t) > len("keycode") else t


def _main_key(token: str, *, in_chord: bool, keyboard: bool, original: str) -> str:
    if len(token) == 1:
        if token == "+":
            return "plus"
        if token == " ":
            return "space"
        return token.lower() if in_chord else token
    t = token.strip()
    if len(t) == 1:
        return _main_key(t, in_chord=in_chord, keyboard=keyboard, original=original)
    n = _norm(t)
    if n in _MODIFIER_ALIASES:
        return _MODIFIER_ALIASES[n]
    if m := _CODE.match(n):
        return next(g for g in m.groups() if g)
    if len(n) == 1:  # KEYCODE_A, "key_a" spelled with separators
        return n
    name = _ALIASES.get(n)
    if name is None:
        raise KeyNameError(f"unknown key {original!r}")
    if name == "home" and (in_chord or keyboard):
        return "move_home"
    return name


def _split(text: str) -> list[str]:
    """'ctrl+shift+t' -> tokens; a '+' that is a key itself ('ctrl++', '+') stays a token."""
    tokens, cur = [], ""
    for ch in text:
        if ch == "+" and cur.strip():
            tokens.append(cur)
            cur = ""
        else:
            cur += ch
    tokens.append(cur)
    return [t if len(t) == 1 else t.strip() for t in tokens]


def parse_chord(name: str, *, keyboard: bool = False) -> tuple[tuple[str, ...], str]:
    """(modifiers in canonical order, main key) of a key or chord name.

    A chord of modifiers only ("ctrl+shift") has its last modifier as the main
    key. `keyboard`: the name comes from a desktop keyboard (a lone "home" is
    the Home key, not the system button).
    """
    if not isinstance(name, str):
        raise KeyNameError(f"unknown key {name!r}")
    lone = {"\n": "enter", "\r": "enter", "\r\n": "enter", "\t": "tab", " ": "space", "\b": "backspace"}
    if name in lone:
        return (), lone[name]
    if not name.strip():
        raise KeyNameError(f"unknown key {name!r}")
    tokens = _split(name.strip())
    if any(t == "" for t in tokens):
        raise KeyNameError(f"unknown key {name!r} (an empty part in the chord)")
    chord = len(tokens) > 1
    mods: set[str] = set()
    for t in tokens[:-1]:
        m = _MODIFIER_ALIASES.get(_norm(t))
        if m is None:
            raise KeyNameError(
                f"unknown key {name!r}: {t.strip()!r} is not a modifier ({', '.join(MODIFIERS)})"
            )
        mods.add(m)
    main = _main_key(tokens[-1], in_chord=chord, keyboard=keyboard, original=name)
    if main in MODIFIERS:
        mods.discard(main)
    if chord and main in SYSTEM_BUTTONS:
        raise KeyNameError(f"{name!r}: the system button {main!r} cannot be part of a chord")
    return tuple(m for m in MODIFIERS if m in mods), main


def canonical_key(name: str, *, keyboard: bool = False) -> str:
    """The canonical form of a key or chord (see the module doc); KeyNameError if unknown.

    >>> canonical_key("Ctrl+Shift+T"), canonical_key("command+v"), canonical_key("KEYCODE_ENTER")
    ('ctrl+shift+t', 'meta+v', 'enter')
    """
    mods, main = parse_chord(name, keyboard=keyboard)
    return "+".join((*mods, main))


def canonical_or_raw(name: str, *, keyboard: bool = False) -> str:
    """`canonical_key(name)`, or the name stripped as given when it is no known key
    (importers keep what a dataset says rather than lose the step)."""
    try:
        return canonical_key(name, keyboard=keyboard)
    except KeyNameError:
        return name.strip() if isinstance(name, str) else name


def is_chord(name: str) -> bool:
    return bool(parse_chord(name)[0])


def same_key(a: str, b: str) -> bool:
    """Whether two key names press the same key (either side may be any accepted spelling)."""
    return canonical_or_raw(a).lower() == canonical_or_raw(b).lower()


# ---------------------------------------------------------------- Playwright
_PW_MODIFIERS = {"ctrl": "Control", "alt": "Alt", "shift": "Shift", "meta": "Meta"}
_PW_NAMES = {
    "enter": "Enter",
    "tab": "Tab",
    "space": "Space",
    "backspace": "Backspace",
    "delete": "Delete",
    "escape": "Escape",
    "up": "ArrowUp",
    "down": "ArrowDown",
    "left": "ArrowLeft",
    "right": "ArrowRight",
    "pageup": "PageUp",
    "pagedown": "PageDown",
    "move_home": "Home",
    "end": "End",
    "insert": "Insert",
    "capslock": "CapsLock",
    "numlock": "NumLock",
    "scrolllock": "ScrollLock",
    "printscreen": "PrintScreen",
    "pause": "Pause",
    "contextmenu": "ContextMenu",
    "search": "Enter",
    "plus": "+",
    **_PW_MODIFIERS,
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
}


def to_playwright(name: str) -> str:
    """Playwright's `keyboard.press` syntax: 'ctrl+shift+t' -> 'Control+Shift+T'.

    A letter is upper case when Shift is held and lower case otherwise
    ('meta+v' -> 'Meta+v'), so the page sees the `key` a real keyboard sends
    (Ctrl+A gives key "a"). System buttons other than search raise KeyNameError
    (back / home are navigation, which the web driver does itself).
    """
    mods, main = parse_chord(name)
    if main in _PW_NAMES:
        key = _PW_NAMES[main]
    elif len(main) == 1:
        key = main.upper() if "shift" in mods and main.isalpha() else main
    else:
        raise KeyNameError(f"the web has no {main!r} key")
    if not mods and key == "Space":
        return " "  # Playwright types a space for " "; "Space" is its code name
    return "+".join((*(_PW_MODIFIERS[m] for m in mods), key))


# ---------------------------------------------------------------- W3C / Selenium
# WebDriver's key code points (the W3C spec's table; selenium.webdriver.common.keys.Keys).
_W3C = {
    "ctrl": "\ue009",
    "alt": "\ue00a",
    "shift": "\ue008",
    "meta": "\ue03d",
    "enter": "\ue007",
    "tab": "\ue004",
    "space": "\ue00d",
    "backspace": "\ue003",
    "delete": "\ue017",
    "escape": "\ue00c",
    "up": "\ue013",
    "down": "\ue015",
    "left": "\ue012",
    "right": "\ue014",
    "pageup": "\ue00e",
    "pagedown": "\ue00f",
    "move_home": "\ue011",
    "end": "\ue010",
    "insert": "\ue016",
    "pause": "\ue00b",
    "search": "\ue007",
    "plus": "+",
    **{f"f{i}": chr(0xE031 + i - 1) for i in range(1, 13)},
}


def to_w3c(name: str) -> list[str]:
    """The WebDriver key values to press down in order (and release in reverse):
    'ctrl+c' -> [Keys.CONTROL, 'c']. KeyNameError for keys WebDriver has no value for."""
    mods, main = parse_chord(name)
    if main in _W3C:
        key = _W3C[main]
    elif len(main) == 1:
        key = main.upper() if "shift" in mods and main.isalpha() else main
    else:
        raise KeyNameError(f"WebDriver has no {main!r} key")
    return [*(_W3C[m] for m in mods), key]


# ---------------------------------------------------------------- Android
# android.view.KeyEvent codes and meta states.
ANDROID_KEYCODES = {
    "enter": 66,
    "tab": 61,
    "space": 62,
    "backspace": 67,
    "delete": 112,
    "escape": 111,
    "up": 19,
    "down": 20,
    "left": 21,
    "right": 22,
    "pageup": 92,
    "pagedown": 93,
    "move_home": 122,
    "end": 123,
    "insert": 124,
    "capslock": 115,
    "numlock": 143,
    "scrolllock": 116,
    "printscreen": 120,
    "pause": 121,
    "contextmenu": 82,
    "back": 4,
    "home": 3,
    "menu": 82,
    "search": 84,
    "app_switch": 187,
    "volume_up": 24,
    "volume_down": 25,
    "volume_mute": 164,
    "power": 26,
    "camera": 27,
    "ctrl": 113,
    "alt": 57,
    "shift": 59,
    "meta": 117,
    "plus": 81,
    ",": 55,
    ".": 56,
    "/": 76,
    ";": 74,
    "'": 75,
    "[": 71,
    "]": 72,
    "\\": 73,
    "-": 69,
    "=": 70,
    "`": 68,
    "@": 77,
    "*": 17,
    "#": 18,
    " ": 62,
    **{f"f{i}": 130 + i for i in range(1, 13)},
    **{chr(ord("a") + i): 29 + i for i in range(26)},
    **{str(d): 7 + d for d in range(10)},
}
ANDROID_META = {"shift": 0x1, "alt": 0x2, "ctrl": 0x1000, "meta": 0x10000}


def to_android(name: str) -> tuple[int, int]:
    """(keycode, metastate) for Appium's press_keycode: 'ctrl+c' -> (31, 0x1000)."""
    mods, main = parse_chord(name)
    low = main.lower() if len(main) == 1 else main
    meta = 0
    for m in mods:
        meta |= ANDROID_META[m]
    if len(main) == 1 and main.isalpha() and main.isupper() and not mods:
        meta |= ANDROID_META["shift"]
    if low not in ANDROID_KEYCODES:
        raise KeyNameError(f"unknown Android key {name!r} (Android has no keycode for {main!r})")
    return ANDROID_KEYCODES[low], meta


# ---------------------------------------------------------------- iOS
# XCUITest types keys as text into the focused field, and presses a few hardware buttons.
IOS_TEXT_KEYS = {"enter": "\n", "search": "\n", "backspace": "\b", "tab": "\t", "space": " "}
IOS_BUTTONS = {"home": "home", "volume_up": "volumeUp", "volume_down": "volumeDown"}


def to_ios(name: str) -> tuple[str, str]:
    """("button", XCUITest button name) or ("text", the text to type) for a key.

    iOS has no back button and takes no chords: KeyNameError saying so.
    """
    mods, main = parse_chord(name)
    if mods:
        raise KeyNameError(f"iOS cannot press the chord {name!r} (no keyboard shortcuts on a phone)")
    if main == "back":
        raise KeyNameError(
            "iOS has no back button: tap the app's own back control or swipe from the left edge"
        )
    if main in IOS_BUTTONS:
        return "button", IOS_BUTTONS[main]
    if main in IOS_TEXT_KEYS:
        return "text", IOS_TEXT_KEYS[main]
    if len(main) == 1:
        return "text", main
    raise KeyNameError(f"unknown iOS key {name!r}; known: {sorted({*IOS_BUTTONS, *IOS_TEXT_KEYS, 'back'})}")
