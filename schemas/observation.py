"""What an environment shows a policy at each step (BrowserGym's shape).

Web and mobile environments return the same Observation, so policies,
recorders and filters never care which one produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .records import Element


@dataclass
class Observation:
    screenshot: bytes  # encoded image (PNG by default)
    image_format: str  # "png" | "jpeg"
    width: int  # screenshot pixel size
    height: int
    url: str  # URL, Android activity or iOS bundle id
    a11y_tree: str  # text form of the accessibility tree
    elements: list[Element] = field(default_factory=list)  # with normalised boxes
    last_action_error: str | None = None
    # The app's exit status when the last action closed it (a desktop app's Quit or a
    # dialog's Cancel): the episode ends there and its verifier judges what is left.
    app_exit: int | None = None

    def find(self, name: str | None = None, role: str | None = None, *, exact: bool = False) -> list[Element]:
        """Elements whose role matches and whose name equals/contains `name`."""
        out = []
        for e in self.elements:
            if role is not None and e.role != role:
                continue
            if name is not None:
                if exact and e.name != name:
                    continue
                if not exact and name.lower() not in e.name.lower():
                    continue
            out.append(e)
        return out
