"""What both session pools answer about their slots (DevicePool for Appium
devices, WebEnvPool for browsers): which slot holds an env, what env a slot holds."""
from __future__ import annotations


class SlotLookup:
    """Mixin over `self._slots` (objects with `.name` and `.env`), read under
    `self._slot_guard` (the pool's lock or condition)."""

    def slot_name(self, env) -> str:
        """The name of the slot holding `env` ("<device>#<session>", "browser#<n>")."""
        return self._slot_of(env).name

    def env_of(self, slot_name: str):
        """The env a slot holds now (None while it has none)."""
        with self._slot_guard:
            for s in self._slots:
                if s.name == slot_name:
                    return s.env
        raise KeyError(f"no slot named {slot_name!r}; slots: {[s.name for s in self._slots]}")

    def _slot_of(self, env):
        with self._slot_guard:
            for s in self._slots:
                if s.env is env and env is not None:
                    return s
        raise KeyError("that env is not held by this pool (was its lease returned?)")
