"""Every control an oracle could need has an accessible name, on every device.

A layout that hides a label on one screen size (icons only) must keep the
control's name (aria-label), or the oracle cannot find it there: this is what
broke `social.topic_like_top` on the tablet profile.
"""

import re

import pytest

from crawlers.randomise import DEVICE_PROFILES
from sandbox.apps import APPS
from sandbox.server import start_url

INTERACTIVE = {"link", "button", "textbox", "searchbox", "checkbox", "switch", "combobox", "tab"}
# A control line of the aria snapshot without a quoted name. Nodes marked
# [aria-hidden] (an avatar beside its named link) are out of the tree on purpose.
UNNAMED = re.compile(r"^\s*- (%s) (?!\")(?!.*\[aria-hidden\])" % "|".join(sorted(INTERACTIVE)))


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["tablet", "phone"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_home_page_controls_are_named_on_small_screens(server, env, profile, lang):
    unnamed = {}
    for i, app in enumerate(sorted(APPS)):
        url = start_url(server.url, sid=f"names-{app}-{lang}-{profile}", app=app, lang=lang, seed=0)
        if i == 0:
            obs = env.reset(url, device=DEVICE_PROFILES[profile])
        else:
            # Same device, so the same browser context: each app's /start opens its own
            # session and page, at half the cost of a new context per app.
            env.page.goto(url)
            obs = env.observe()
        assert f"/{app}/" in obs.url, obs.url
        controls = [e for e in obs.elements if e.role in INTERACTIVE]
        assert controls, f"{app}/{lang}/{profile}: no controls found"
        missing = [line.strip()[:80] for line in obs.a11y_tree.splitlines() if UNNAMED.match(line)]
        if missing:
            unnamed[app] = missing
    assert not unnamed, f"controls without an accessible name on {profile} ({lang}): {unnamed}"
