"""The X server side of a desktop session: screenshots and XTEST input (python-xlib).

- Screenshots: the root window's pixels (GetImage, 24-bit ZPixmap in BGRX
  order) as a uint8 H x W x 3 RGB array.
- Pointer: motion, buttons 1 (click) and 3 (right click), 4/5 and 6/7 (the
  wheel, one press per notch), drags as a button held over several motions.
- Keys: a canonical key or chord (schemas.keys) as X keysyms, modifiers
  pressed first and released last.
- Text: a character the keyboard map has is typed with its keycode (and
  Shift when it sits on the shifted level); any other (Chinese, emoji) gets a
  spare keycode remapped to its Unicode keysym (0x01000000 + code point).
  A character keeps its keycode while the spare codes last, so a key event is
  never read under a mapping meant for a later character.
"""

from __future__ import annotations

import time

import numpy as np
from Xlib import XK, X, display
from Xlib.ext import xtest

from schemas.keys import KeyNameError, parse_chord

_MODIFIER_KEYSYMS = {"ctrl": "Control_L", "alt": "Alt_L", "shift": "Shift_L", "meta": "Super_L"}
_NAMED_KEYSYMS = {
    "enter": "Return",
    "tab": "Tab",
    "space": "space",
    "backspace": "BackSpace",
    "delete": "Delete",
    "escape": "Escape",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "pageup": "Prior",
    "pagedown": "Next",
    "move_home": "Home",
    "end": "End",
    "insert": "Insert",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "printscreen": "Print",
    "pause": "Pause",
    "contextmenu": "Menu",
    "menu": "Menu",
    "plus": "plus",
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
}
_WHEEL = {"up": 4, "down": 5, "left": 6, "right": 7}
_REMAP_SETTLE_S = 0.05  # clients re-read the keyboard map on MappingNotify
_REUSE_SETTLE_S = 0.3  # before a keycode takes another character


class InputError(ValueError):
    """An input the X server cannot be given (an unknown key)."""


class XScreen:
    """One connection to a session's X server: its pixels and its input."""

    def __init__(self, display_name: str):
        self.d = display.Display(display_name)
        if not self.d.has_extension("XTEST"):
            self.d.close()
            raise InputError(f"the X server {display_name} has no XTEST extension")
        self.root = self.d.screen().root
        geom = self.root.get_geometry()
        self.width, self.height = geom.width, geom.height
        self._spare = self._spare_keycodes()
        self._assigned: dict[str, int] = {}  # character -> its spare keycode, in use order

    def close(self) -> None:
        try:
            self.d.close()
        except Exception:  # noqa: BLE001 - the server is gone already
            pass

    # ------------------------------------------------------------------ pixels
    def screenshot(self) -> np.ndarray:
        """The screen as uint8 H x W x 3 (RGB)."""
        img = self.root.get_image(0, 0, self.width, self.height, X.ZPixmap, 0xFFFFFFFF)
        raw = np.frombuffer(img.data, dtype=np.uint8)
        bgrx = raw.reshape(self.height, -1, 4)[:, : self.width, :]
        return np.ascontiguousarray(bgrx[:, :, 2::-1])

    # ------------------------------------------------------------------ pointer
    def move(self, x: int, y: int) -> None:
        xtest.fake_input(self.d, X.MotionNotify, x=int(x), y=int(y))
        self.d.sync()

    def button(self, number: int, down: bool) -> None:
        xtest.fake_input(self.d, X.ButtonPress if down else X.ButtonRelease, number)
        self.d.sync()

    def click(self, x: int, y: int, *, button: int = 1, count: int = 1, hold_s: float = 0.03) -> None:
        self.focus_at(x, y)
        self.move(x, y)
        for i in range(count):
            if i:
                time.sleep(0.06)  # well inside the toolkit's double-click time
            self.button(button, True)
            time.sleep(hold_s)
            self.button(button, False)

    def drag(self, x0: int, y0: int, x1: int, y1: int, *, ms: int = 300) -> None:
        self.focus_at(x0, y0)
        self.move(x0, y0)
        self.button(1, True)
        n = max(2, min(20, ms // 30))
        for i in range(1, n + 1):
            time.sleep(ms / 1000 / n)
            self.move(round(x0 + (x1 - x0) * i / n), round(y0 + (y1 - y0) * i / n))
        time.sleep(0.05)
        self.button(1, False)

    def wheel(self, x: int, y: int, direction: str, notches: int) -> None:
        self.move(x, y)
        for _ in range(notches):
            self.button(_WHEEL[direction], True)
            self.button(_WHEEL[direction], False)

    # ------------------------------------------------------------------ windows
    # There is no window manager: what one does for a user is done here, minimally.
    def toplevels(self) -> list[tuple]:
        """(window, x, y, w, h) of the mapped top-level windows that are not menus or
        tooltips, bottom to top (the server's stacking order)."""
        out = []
        for win in self.root.query_tree().children:
            try:
                attrs = win.get_attributes()
                if attrs.map_state != X.IsViewable or attrs.override_redirect:
                    continue
                g = win.get_geometry()
            except Exception:  # noqa: BLE001 - the window went away
                continue
            out.append((win, g.x, g.y, g.width, g.height))
        return out

    def stacking_titles(self) -> list[str]:
        """The titles of the top-level windows, bottom to top."""
        out = []
        for win, *_ in self.toplevels():
            try:
                out.append(win.get_wm_name() or "")
            except Exception:  # noqa: BLE001 - the window went away
                out.append("")
        return out

    def fit_windows(self) -> bool:
        """Move (and shrink) every top-level window into the screen; whether one moved.
        A dialog centred on its parent can start above the screen's top-left corner."""
        moved = False
        for win, x, y, w, h in self.toplevels():
            nw, nh = min(w, self.width), min(h, self.height)
            nx, ny = min(max(x, 0), self.width - nw), min(max(y, 0), self.height - nh)
            if (nx, ny, nw, nh) != (x, y, w, h):
                win.configure(x=nx, y=ny, width=nw, height=nh)
                moved = True
        if moved:
            self.d.sync()
        return moved

    def maximise_first(self) -> None:
        """The app's first window fills the screen, with the keyboard focus."""
        wins = self.toplevels()
        if not wins:
            return
        win, x, y, w, h = wins[0]
        if (x, y, w, h) != (0, 0, self.width, self.height):
            win.configure(x=0, y=0, width=self.width, height=self.height)
        win.set_input_focus(X.RevertToParent, X.CurrentTime)
        self.d.sync()

    def focus_at(self, x: int, y: int) -> None:
        """Click to focus: the topmost window under the point is raised and takes the keys."""
        for win, wx, wy, w, h in reversed(self.toplevels()):
            if wx <= x < wx + w and wy <= y < wy + h:
                win.configure(stack_mode=X.Above)
                win.set_input_focus(X.RevertToParent, X.CurrentTime)
                self.d.sync()
                return

    # ------------------------------------------------------------------ keys
    def key(self, name: str) -> None:
        """Press a canonical key or chord ('ctrl+s', 'enter', 'a')."""
        try:
            mods, main = parse_chord(name, keyboard=True)
        except KeyNameError as e:
            raise InputError(str(e)) from None
        codes = [self._keycode_of(XK.string_to_keysym(_MODIFIER_KEYSYMS[m]))[0] for m in mods]
        code, shifted = self._main_keycode(main)
        if shifted and "shift" not in mods:
            codes.append(self._keycode_of(XK.string_to_keysym("Shift_L"))[0])
        for c in codes:
            xtest.fake_input(self.d, X.KeyPress, c)
        xtest.fake_input(self.d, X.KeyPress, code)
        xtest.fake_input(self.d, X.KeyRelease, code)
        for c in reversed(codes):
            xtest.fake_input(self.d, X.KeyRelease, c)
        self.d.sync()

    def _main_keycode(self, main: str) -> tuple[int, bool]:
        if main in _MODIFIER_KEYSYMS:
            return self._keycode_of(XK.string_to_keysym(_MODIFIER_KEYSYMS[main]))
        if main in _NAMED_KEYSYMS:
            return self._keycode_of(XK.string_to_keysym(_NAMED_KEYSYMS[main]))
        if len(main) == 1:
            found = self._keycode_of(_char_keysym(main))
            if found[0]:
                return found
        raise InputError(f"no X key for {main!r}")

    def _keycode_of(self, keysym: int) -> tuple[int, bool]:
        """(keycode, needs Shift) of a keysym on the keyboard map; (0, False) if absent."""
        for code, index in self.d.keysym_to_keycodes(keysym):
            if index in (0, 1):
                return code, index == 1
        return 0, False

    def type_text(self, text: str) -> None:
        """Type `text` (any script): see the module doc."""
        pending: list[str] = []
        for ch in text:
            if ch == "\n":
                self._type_remapped(pending)
                pending = []
                self.key("enter")
                continue
            if ch == "\t":
                self._type_remapped(pending)
                pending = []
                self.key("tab")
                continue
            code, shifted = self._keycode_of(_char_keysym(ch))
            if code:
                self._type_remapped(pending)
                pending = []
                self._press(code, shifted)
            else:
                pending.append(ch)
        self._type_remapped(pending)

    def _press(self, code: int, shifted: bool) -> None:
        shift = self._keycode_of(XK.string_to_keysym("Shift_L"))[0] if shifted else 0
        if shift:
            xtest.fake_input(self.d, X.KeyPress, shift)
        xtest.fake_input(self.d, X.KeyPress, code)
        xtest.fake_input(self.d, X.KeyRelease, code)
        if shift:
            xtest.fake_input(self.d, X.KeyRelease, shift)
        self.d.sync()

    def _type_remapped(self, chars: list[str]) -> None:
        """Characters the keyboard lacks, through spare keycodes mapped to their keysyms.

        A character keeps its keycode while codes last (`_assigned`, least recently
        used first out): a code is remapped only after a pause long enough for the
        apps to have read the key events sent under its previous keysym."""
        if not chars:
            return
        if not self._spare:
            raise InputError("the X keyboard map has no spare keycode to type non-ASCII text")
        for ch in chars:
            code = self._assigned.pop(ch, None)
            if code is None:
                code = self._remap(ch)
            self._assigned[ch] = code  # most recently used last
            xtest.fake_input(self.d, X.KeyPress, code)
            xtest.fake_input(self.d, X.KeyRelease, code)
            self.d.sync()

    def _remap(self, ch: str) -> int:
        if len(self._assigned) < len(self._spare):
            code = self._spare[len(self._assigned)]
        else:
            oldest = next(iter(self._assigned))
            code = self._assigned.pop(oldest)
            time.sleep(_REUSE_SETTLE_S)  # what was typed with this code is read first
        width = len(self.d.get_keyboard_mapping(code, 1)[0]) or 2
        self.d.change_keyboard_mapping(code, [[_char_keysym(ch)] * width])
        self.d.sync()
        time.sleep(_REMAP_SETTLE_S)
        return code

    def _spare_keycodes(self) -> list[int]:
        """Keycodes with no keysym at all (Xvfb's map leaves many free)."""
        first = self.d.display.info.min_keycode
        count = self.d.display.info.max_keycode - first + 1
        mapping = self.d.get_keyboard_mapping(first, count)
        free = [first + i for i, syms in enumerate(mapping) if not any(syms)]
        return free[-64:]


def _char_keysym(ch: str) -> int:
    """The keysym of one character: Latin-1 is its code point, the rest 0x01000000 + it."""
    cp = ord(ch)
    if 0x20 <= cp <= 0x7E or 0xA0 <= cp <= 0xFF:
        return cp
    return 0x01000000 + cp
