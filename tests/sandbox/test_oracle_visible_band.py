"""The oracle scrolls a target out from under fixed bars (tab bar, keyboard, header)."""

from sandbox.tasks.base import Finish, PlanOracle, Tap, Target
from schemas.actions import ActionType
from schemas.observation import Observation
from schemas.records import Element

TAB_BAR = Element(role="navigation", name="Tabs", bbox=(0.0, 0.93, 1.0, 1.0))
KEYBOARD = Element(role="group", name="键盘", bbox=(0.0, 0.62, 1.0, 1.0))
HEADER = Element(role="banner", name="", bbox=(0.0, 0.028, 1.0, 0.09))


def _obs(*elements) -> Observation:
    return Observation(
        screenshot=b"",
        image_format="png",
        width=412,
        height=915,
        url="http://x/",
        a11y_tree="",
        elements=list(elements),
    )


MAIN = Element(role="main", name="Home", bbox=(0.0, 0.09, 1.0, 0.93))


def _first_action(target_box, *bars):
    """Document order as on a phone page: header, main content, tab bar, keyboard."""
    item = Element(role="button", name="Filler 7", bbox=target_box)
    oracle = PlanOracle([Tap(Target("Filler 7", role="button")), Finish()])
    head = [b for b in bars if b.role == "banner"]
    tail = [b for b in bars if b.role != "banner"]
    return oracle.next_action(_obs(*head, MAIN, item, *tail))


def test_a_target_behind_the_tab_bar_is_scrolled_to_not_tapped():
    # Its centre (0.96) is inside the old 1%-97% band but under the tab bar.
    assert _first_action((0.1, 0.936, 0.9, 0.987)).type == ActionType.TAP
    a = _first_action((0.1, 0.936, 0.9, 0.987), TAB_BAR)
    assert a.type == ActionType.SCROLL and a.direction == "down"


def test_a_target_under_the_soft_keyboard_is_scrolled_to():
    a = _first_action((0.1, 0.70, 0.9, 0.75), KEYBOARD)
    assert a.type == ActionType.SCROLL and a.direction == "down"
    assert _first_action((0.1, 0.40, 0.9, 0.45), KEYBOARD).type == ActionType.TAP


def test_a_target_behind_the_header_is_scrolled_up_to():
    a = _first_action((0.1, 0.03, 0.9, 0.08), HEADER)
    assert a.type == ActionType.SCROLL and a.direction == "up"


def test_controls_inside_the_bar_are_tapped_directly():
    tab = Element(role="link", name="Cart", bbox=(0.5, 0.94, 0.7, 0.99))
    home = Element(role="link", name="Home", bbox=(0.0, 0.94, 0.2, 0.99))
    oracle = PlanOracle([Tap(Target("Cart", role="link")), Finish()])
    assert oracle.next_action(_obs(MAIN, TAB_BAR, home, tab)).type == ActionType.TAP
    key = Element(role="button", name="发送", bbox=(0.8, 0.9, 0.98, 0.97))
    oracle = PlanOracle([Tap(Target("发送", role="button")), Finish()])
    assert oracle.next_action(_obs(MAIN, KEYBOARD, key)).type == ActionType.TAP


def test_a_menu_layered_over_the_tab_bar_is_tapped_directly():
    # Menus and sheets come after the tab bar in the document: drawn over it.
    cancel = Element(role="menuitem", name="Cancel", bbox=(0.03, 0.91, 0.97, 0.97))
    menu = Element(role="menu", name="Item actions", bbox=(0.0, 0.6, 1.0, 0.98))
    oracle = PlanOracle([Tap(Target("Cancel", role="menuitem")), Finish()])
    assert oracle.next_action(_obs(MAIN, TAB_BAR, menu, cancel)).type == ActionType.TAP


def test_a_tab_at_the_very_bottom_of_a_phone_is_tapped_not_scrolled_to():
    # A 58 px tab bar on a 1040 px screen: its links centre at 97.2%.
    bar = Element(role="navigation", name="底部导航", bbox=(0.0, 0.944, 1.0, 1.0))
    orders = Element(role="link", name="订单", bbox=(0.5, 0.945, 0.75, 1.0))
    oracle = PlanOracle([Tap(Target("订单", role="link")), Finish()])
    assert oracle.next_action(_obs(MAIN, bar, orders)).type == ActionType.TAP


def test_a_target_that_a_scroll_does_not_move_is_fixed_and_gets_tapped():
    # A buy bar with no landmark role, centred at 97.5% of a tall phone.
    add = Element(role="button", name="Add to cart", bbox=(0.5, 0.955, 0.95, 0.995))
    oracle = PlanOracle([Tap(Target("Add to cart", role="button")), Finish()])
    first = oracle.next_action(_obs(MAIN, add))
    assert first.type == ActionType.SCROLL and first.direction == "down"
    # Same box after the scroll: tap it rather than scroll eight times and give up.
    assert oracle.next_action(_obs(MAIN, add)).type == ActionType.TAP
    # A target that moved is still scrolled towards.
    oracle = PlanOracle([Tap(Target("Add to cart", role="button")), Finish()])
    oracle.next_action(_obs(MAIN, add))
    moved = Element(role="button", name="Add to cart", bbox=(0.5, 0.975, 0.95, 1.015))
    assert oracle.next_action(_obs(MAIN, moved)).type == ActionType.SCROLL
