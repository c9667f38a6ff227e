"""Page-source normalisers: Android, iOS and browser HTML -> the web's a11y text + Elements.

The XML fixtures follow the formats UiAutomator2 and WebDriverAgent emit;
html_shop_zh.html is a real Chromium page source stamped by STAMP_BOXES_JS
(rebuilt by fixtures/make_html_fixture.py). The last tests run STAMP_BOXES_JS
in a real phone-sized Chromium and hold its boxes against getBoundingClientRect.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from crawlers.page_source import (
    ACTIONABLE_ROLES,
    STAMP_BOXES_JS,
    Node,
    PageSourceError,
    clean_text,
    normalise,
    normalise_box,
    render_tree,
)
from schemas.a11y import parse_snapshot
from schemas.records import Element

FIXTURES = Path(__file__).parent / "fixtures"
NBH = "\u2011"  # the non-breaking hyphen Android and iOS write in "Wi‑Fi"

# fixture, kind, screen size in the source's units
SCREENS = {
    "android_settings.xml": ("android", 1080, 2400),
    "android_shop_zh.xml": ("android", 1440, 3120),
    "ios_settings.xml": ("ios", 393, 852),
    "ios_shop_zh.xml": ("ios", 393, 852),
    "html_shop_zh.html": ("html", 412, 915),
}


def load(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def run(name: str) -> tuple[str, list[Element]]:
    kind, w, h = SCREENS[name]
    return normalise(kind, load(name), w, h)


def one(elements: list[Element], name: str, role: str | None = None) -> Element:
    found = [e for e in elements if e.name == name and (role is None or e.role == role)]
    assert len(found) == 1, f"{len(found)} elements named {name!r} ({role}): {found}"
    return found[0]


def lines(tree: str) -> list[str]:
    return [line.strip() for line in tree.splitlines()]


# ---------------------------------------------------------------- Android


def test_android_settings_roles_names_states_and_boxes():
    tree, els = run("android_settings.xml")
    got = lines(tree)
    assert '- button "Navigate up" [box=0,128,147,147]' in got
    assert '- heading "Network & internet" [box=189,170,511,63]' in got  # heading="true"
    assert (
        f'- switch "Use Wi{NBH}Fi" [checked] [id=com.android.settings:id/switch_widget] [box=0,1031,1080,168]'
    ) in got
    assert (
        f'- checkbox "Show Wi{NBH}Fi notifications" [checked] '
        "[id=com.android.settings:id/notify_checkbox] [box=42,1430,996,105]"
    ) in got
    assert '- button "Data Saver Off" [disabled] [box=0,1199,1080,189]' in got
    # The field is named by its hint; Android already masks the password text.
    assert (
        f'- textbox "Wi{NBH}Fi password" [password] [id=com.android.settings:id/password] '
        "[box=189,1808,849,126]: ••••••••"
    ) in got
    assert ("- list [scrollable] [id=com.android.settings:id/recycler_view] [box=0,275,1080,2062]:") in got

    # A clickable row is one button named by its TextViews (as TalkBack reads
    # it); the texts are not repeated, its switch stays below it.
    assert '- button "Internet HomeNet" [box=0,275,1080,189]' in got
    assert not any(line.startswith('- text "HomeNet"') for line in got)
    i = got.index('- button "Airplane mode" [box=0,653,1080,189]:')
    assert got[i + 1] == "- switch [id=android:id/switch_widget] [box=891,695,147,105]"

    # displayed="false" subtree, zero-area node, unnamed layouts: all gone.
    assert "Private DNS" not in tree and "Adaptive connectivity" not in tree
    assert "navigationBarBackground" not in tree and "FrameLayout" not in tree

    assert [e.role for e in els].count("button") == 7
    nav = one(els, "Navigate up")
    assert nav.role == "button"
    assert nav.bbox == pytest.approx((0, 128 / 2400, 147 / 1080, 275 / 2400))
    assert one(els, "Airplane mode").bbox == pytest.approx((0, 653 / 2400, 1, 842 / 2400))


def test_android_chinese_shop_search_tabs_and_goods():
    tree, els = run("android_shop_zh.xml")
    got = lines(tree)
    # EditText with a search id/hint: a searchbox named by its hint, typed text as value.
    assert (
        '- searchbox "搜索商品" [focused] [id=com.example.mall:id/search_input] '
        "[box=160,140,1020,120]: 蓝牙耳机"
    ) in got
    assert '- button "返回" [id=com.example.mall:id/back] [box=0,130,160,140]' in got
    # TabLayout$TabView (tag written TabLayout.TabView): tabs inside a tablist.
    assert '- tab "综合" [selected] [box=0,290,360,140]' in got
    assert '- tab "销量" [box=360,290,360,140]' in got
    assert (
        '- checkbox "仅看有货" [checked] [id=com.example.mall:id/only_in_stock] [box=40,450,440,90]'
    ) in got
    assert '- switch "包邮" [id=com.example.mall:id/free_shipping] [box=900,450,500,90]' in got
    # showing-hint="true": the text is the hint, not a value.
    assert '- textbox "输入优惠码" [id=com.example.mall:id/coupon_code] [box=40,2480,960,120]' in got

    goods = [e for e in els if e.role == "button" and "¥" in e.name]
    assert [e.name for e in goods] == [
        "华为 FreeBuds 5i 真无线蓝牙耳机 ¥399 月销1万+",
        "小米 Redmi Buds 4 青春版 ¥99 月销5万+",
        "漫步者 声迈X1 Pro 降噪耳机 ¥129 月销8000+",
        "OPPO Enco Air3 半入耳式 ¥199 月销3000+",
    ]
    # Each goods row keeps its own add-to-cart button below it.
    i = got.index(
        '- button "华为 FreeBuds 5i 真无线蓝牙耳机 ¥399 月销1万+" '
        "[id=com.example.mall:id/goods_item] [box=0,560,1440,440]:"
    )
    assert got[i + 1] == ('- button "加入购物车" [id=com.example.mall:id/add_cart] [box=1260,840,140,120]')
    assert len([e for e in els if e.name == "加入购物车"]) == 4
    # The not-displayed coupon popup is not on screen.
    assert "领取优惠券" not in tree and "立即领取" not in tree
    assert one(els, "购物车").bbox == pytest.approx((480 / 1440, 2960 / 3120, 960 / 1440, 1.0))


def test_android_uiautomator_dump_nodes_and_tabwidget():
    # `uiautomator dump` writes <node class=...>; TabWidget children are tabs;
    # a clickable ImageView is a button; a View with only content-desc a group.
    src = """<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0">
<node index="0" class="android.widget.TabWidget" bounds="[0,0][600,100]">
 <node index="0" class="android.widget.LinearLayout" clickable="true" selected="true"
       bounds="[0,0][300,100]"><node class="android.widget.TextView" text="Chats"
       bounds="[100,30][200,70]"/></node>
 <node index="1" class="android.widget.LinearLayout" clickable="true" bounds="[300,0][600,100]">
  <node class="android.widget.TextView" text="Calls" bounds="[400,30][500,70]"/></node>
</node>
<node class="android.widget.ImageView" content-desc="Profile photo" clickable="true"
      bounds="[0,100][100,200]"/>
<node class="android.view.View" content-desc="Map of Shanghai" bounds="[0,200][600,800]"/>
</hierarchy>"""
    tree, els = normalise("android", src, 600, 800)
    assert lines(tree) == [
        "- tablist [box=0,0,600,100]:",
        '- tab "Chats" [selected] [box=0,0,300,100]',
        '- tab "Calls" [box=300,0,300,100]',
        '- button "Profile photo" [box=0,100,100,100]',
        '- group "Map of Shanghai" [box=0,200,600,600]',
    ]
    assert [e.role for e in els] == ["tab", "tab", "button", "group"]


# ---------------------------------------------------------------- iOS


def test_ios_settings_navbar_cells_switches_alert():
    tree, els = run("ios_settings.xml")
    got = lines(tree)
    assert '- application "Settings" [box=0,0,393,852]:' in got
    assert '- region "Wi-Fi" [box=0,47,393,96]:' in got  # NavigationBar
    assert f'- heading "Wi{NBH}Fi" [box=140,62,113,22]' in got  # traits="Header"
    assert '- searchbox "Search" [box=16,143,361,36]' in got  # value == placeholder
    # A Cell without a label is named by its text, not by its identifier.
    assert (f'- listitem "Wi{NBH}Fi" [id=com.apple.settings.wifi.toggle] [box=0,199,393,52]:') in got
    assert f'- switch "Wi{NBH}Fi" [checked] [box=326,209,51,31]' in got  # value="1"
    assert '- switch "Ask to Join Networks" [box=326,389,51,31]' in got  # value="0"
    assert (
        '- listitem "HomeNet, Secure network, Signal strength 3 of 3 bars" [selected] '
        "[id=HomeNet] [box=0,271,393,44]:"
    ) in got
    # A cell's value leads its children (a line cannot hold both).
    i = got.index('- listitem "Auto-Join Hotspot" [disabled] [box=0,451,393,52]:')
    assert got[i + 1] == "- text: Ask to Join"
    assert '- alert "Enter Password" [box=41,301,311,250]:' in got
    assert '- textbox "Password" [focused] [password] [box=57,381,279,34]: ••••••' in got
    assert '- button "Join" [disabled] [box=197,507,155,44]' in got
    # visible="false" subtree and a zero-height node are gone.
    assert "Private Wi" not in tree and "footer" not in tree
    assert one(els, "Cancel").bbox == pytest.approx((41 / 393, 507 / 852, 196 / 393, 551 / 852))
    assert one(els, f"Wi{NBH}Fi", "switch").role == "switch"


def test_ios_chinese_shop_search_cells_tabbar():
    tree, els = run("ios_shop_zh.xml")
    got = lines(tree)
    # Named by its placeholder (label is empty, name is an identifier), value typed.
    assert '- searchbox "搜索商品" [focused] [id=searchBar] [box=16,95,300,36]: 蓝牙耳机' in got
    assert '- region "SearchResultView" [box=0,47,393,44]:' in got
    assert '- button "综合" [selected] [box=16,139,120,32]' in got
    assert '- switch "仅看有货" [checked] [id=onlyInStock] [box=16,183,160,31]' in got
    assert '- slider "价格上限" [box=200,183,177,31]: 50%' in got
    assert '- group "商品筛选" [id=筛选] [box=16,179,361,40]:' in got  # Other with a label
    assert '- heading "推荐商品" [box=16,227,120,24]' in got
    # TabBar buttons are tabs; a badge value stays with its tab.
    assert '- tab "购物车" [selected] [box=131,770,131,48]: 3 项' in got
    assert '- tab "首页" [box=0,770,131,48]' in got
    cells = [e for e in els if e.role == "listitem"]
    assert [c.name for c in cells] == [
        "Apple AirPods Pro（第二代） ¥1599 月销2万+",
        "索尼 WF-1000XM5 降噪耳机 ¥1699 月销5000+",
        "华为 FreeBuds Pro 3 ¥1199 月销1万+",
        "漫步者 Lolli Pro 3 ¥499 月销3000+",
    ]
    assert "goods_image" not in tree  # an image with only an identifier says nothing
    assert "小米 Buds 5" not in tree  # visible="false" cell
    assert [e.bbox for e in els if e.name == "加入购物车"][0] == pytest.approx(
        (333 / 393, 354 / 852, 377 / 393, 398 / 852)
    )


# ---------------------------------------------------------------- HTML


def test_html_roles_names_and_live_states():
    tree, els = run("html_shop_zh.html")
    got = lines(tree)
    assert "- banner [box=0,-60,412,39.8]:" in got
    assert '- heading "搜索结果" [level=1] [box=40.5,-52,68,23.8]' in got
    assert '- search "商品搜索" [box=0,-20.2,412,47]:' in got
    # label[for] names the field; the live value and focus come from the stamps
    # (the value attribute still says 耳机).
    assert '- searchbox "搜索商品" [focused] [box=12,-12.2,339.3,31]: 蓝牙耳机' in got
    # Ticked by the user: the checked attribute is absent, data-tf-checked says so.
    assert '- checkbox "仅看有货" [checked] [box=16,71.3,13,13]' in got
    assert '- switch "包邮" [box=157.4,67.8,40,22]' in got  # aria-labelledby
    assert '- combobox "配送至" [box=213.4,69.3,49,19]: 上海' in got
    # A key holding ": " and " #" is single-quoted, as Playwright does.
    assert "- 'heading \"限时优惠: 满300减50 #热卖\" [level=2] [box=0,112.5,412,31.5]'" in got
    assert '- img "华为 FreeBuds 5i" [box=12,172.6,80,80]' in got
    assert "- paragraph [box=102,193.6,223,21]: ¥399 ¥499" in got
    assert '- text "月销1万+" [box=102,214.6,61.7,21]' in got
    assert '- button "加入购物车：华为 FreeBuds 5i" [box=335,172.6,29.3,80]' in got
    assert '- button "加购" [box=289,273.6,51.2,80]' in got  # aria-hidden emoji left out
    assert '- button "已售罄" [disabled] [box=298.3,374.6,56,80]' in got
    assert '- button "已收藏" [pressed] [box=285.1,475.6,56,80]' in got
    assert '- textbox "给商家留言" [box=33.4,707.6,171,36]: 请尽快发货' in got
    assert '- textbox "支付密码" [box=63.4,764.6,177,21]: ••••••' in got  # never the password
    assert "123456" not in tree
    assert '- link "我的" [box=274.7,874,137.3,41]:' in got  # title, content hidden
    i = got.index('- link "综合" [box=0,26.8,58,37]:')
    assert got[i + 1] == "- /url: /s?sort=all"
    assert one(els, "购物车 3").role == "link"

    # alt="" images, hidden / aria-hidden / display:none / visibility:hidden /
    # opacity:0 subtrees, templates, scripts and styles are not in the tree.
    for absent in ("隐藏", "装饰", "不显示", "看不见", "透明", "模板", "__shop", "font:", "🛒"):
        assert absent not in tree, absent
    assert len([e for e in els if e.role == "img"]) == 3


def test_html_names_from_placeholder_value_svg_and_forgiving_markup():
    src = """<html data-tf-box="0,0,400,800"><body data-tf-box="0,0,400,800">
<input placeholder="Search goods" data-tf-box="0,0,200,30">
<input type="submit" value="Pay later" data-tf-box="200,0,100,30">
<input type="submit" data-tf-box="300,0,100,30">
<div style="display:contents"><button data-tf-box="0,40,80,30">Inside contents</button></div>
<table role="presentation" data-tf-box="0,80,400,40"><tr data-tf-box="0,80,400,40">
<td data-tf-box="0,80,400,40">Layout cell</td></tr></table>
<svg aria-label="Cart icon" data-tf-box="0,130,24,24"><path d="M0 0"/></svg>
<svg data-tf-box="30,130,24,24"><title>ignored</title></svg>
<p data-tf-box="0,160,400,20">first</p></div></span>
<p data-tf-box="0,180,400,20">second
<button class="x" class="y" data-tf-box="0,200,50,20" data-tf-box="9,9,9,9">dup</button>
<button data-tf-box="">Unrendered</button>"""
    tree, _ = normalise("html", src, 400, 800)
    assert tree.splitlines() == [
        '- textbox "Search goods" [box=0,0,200,30]',  # placeholder names a bare field
        '- button "Pay later" [box=200,0,100,30]',  # a submit button's value
        '- button "Submit" [box=300,0,100,30]',  # ... or its default
        '- button "Inside contents" [box=0,40,80,30]',  # a boxless parent steps aside
        "- row [box=0,80,400,40]:",  # role=presentation: no table
        '  - cell "Layout cell" [box=0,80,400,40]',
        '- img "Cart icon" [box=0,130,24,24]',  # a named svg; its paths unread
        "- paragraph [box=0,160,400,20]: first",  # stray end tags are ignored,
        "- paragraph [box=0,180,400,20]:",  # unclosed ones end at the end
        '  - text "second" [box=0,180,400,20]',
        '  - button "dup" [box=0,200,50,20]',  # a duplicate attribute: first wins
    ]
    assert "Unrendered" not in tree and "ignored" not in tree


def test_html_boxes_clipped_on_screen_and_kept_off_screen():
    _, els = run("html_shop_zh.html")
    # Wholly above the viewport (scrolled past): kept as is, for the oracle to scroll to.
    back = one(els, "返回")
    assert back.bbox == pytest.approx((12 / 412, -50.6 / 915, 32.5 / 412, -29.6 / 915))
    # Partly above: clipped to the screen.
    search = one(els, "搜索商品", "searchbox")
    assert search.bbox == pytest.approx((12 / 412, 0.0, 351.3 / 412, 18.8 / 915))
    # The fixed tab bar sits on the bottom edge.
    assert one(els, "首页").bbox == pytest.approx((0, 874 / 915, 137.3 / 412, 1.0))


def test_normalise_box_clips_only_what_overlaps_the_screen():
    assert normalise_box((-10, 10, 20, 20), 100, 100) == pytest.approx((0, 0.1, 0.1, 0.3))
    assert normalise_box((90, 95, 20, 20), 100, 100) == pytest.approx((0.9, 0.95, 1, 1))
    assert normalise_box((10, 150, 20, 20), 100, 100) == pytest.approx((0.1, 1.5, 0.3, 1.7))
    assert normalise_box((10, -40, 20, 40), 100, 100) == pytest.approx((0.1, -0.4, 0.3, 0))


# ---------------------------------------------------------------- every fixture


@pytest.mark.parametrize("fixture", sorted(SCREENS))
def test_tree_round_trips_through_parse_snapshot(fixture):
    kind, w, h = SCREENS[fixture]
    tree, els = run(fixture)
    nodes = parse_snapshot(tree)
    item_lines = [line for line in tree.splitlines() if not line.lstrip().startswith("- /")]
    assert len(nodes) == len(item_lines)  # every line reads back as a node
    again = [
        Element(role=n.role, name=n.name, bbox=normalise_box(n.box, w, h))
        for n in nodes
        if n.box and n.box[2] > 0 and n.box[3] > 0 and (n.role in ACTIONABLE_ROLES or n.name)
    ]
    # The tree text has no visibility record; the Elements carry it (issue 18).
    assert again == [e.model_copy(update={"visibility": None}) for e in els]
    assert len(els) >= 12
    assert isinstance(yaml.safe_load(tree), list)  # valid YAML, like Playwright's snapshot


@given(name=st.text(max_size=30), value=st.one_of(st.none(), st.text(max_size=30)))
def test_any_name_and_value_survive_rendering(name, value):
    name, value = clean_text(name), value and clean_text(value)  # as every parser hands names over
    tree = render_tree([Node("button", name=name, box=(1, 2, 3, 4), value=value or None, states=["checked"])])
    (node,) = parse_snapshot(tree)
    assert (node.role, node.box, node.attrs) == ("button", (1, 2, 3, 4), {"checked": ""})
    assert node.name == (name or value or "")
    if value and name:
        assert node.text == value
    (item,) = yaml.safe_load(tree)  # YAML reads the same strings back
    if value:
        assert list(item.values()) == [value]


# ---------------------------------------------------------------- bad input


def test_not_xml_is_a_clear_error():
    with pytest.raises(PageSourceError, match=r"android page source: not XML \(line 1, column"):
        normalise("android", "<hierarchy><android.widget.Button", 1080, 2400)
    with pytest.raises(PageSourceError, match=r"ios page source: not XML"):
        normalise("ios", "{'not': 'xml'}", 393, 852)


def test_bad_bounds_names_the_node_path_and_attribute():
    src = load("android_settings.xml").replace('bounds="[0,128][147,275]"', 'bounds="[0,128][wide]"')
    with pytest.raises(PageSourceError) as err:
        normalise("android", src, 1080, 2400)
    e = err.value
    assert e.attribute == "bounds" and e.value == "[0,128][wide]"
    assert e.path == (
        "/hierarchy/android.widget.FrameLayout[1]/android.widget.LinearLayout[1]/"
        "android.widget.FrameLayout[1]/android.widget.Toolbar[1]/"
        "android.widget.ImageButton[1]"
    )
    assert e.path in str(e) and "bounds='[0,128][wide]'" in str(e)
    # The path is a working locator: it finds the offending node.
    found = ET.fromstring(src.encode()).find("./" + e.path.removeprefix("/hierarchy/"))
    assert found.get("content-desc") == "Navigate up"

    backwards = load("android_settings.xml").replace('bounds="[0,128][147,275]"', 'bounds="[147,128][0,275]"')
    with pytest.raises(PageSourceError, match="end before they start"):
        normalise("android", backwards, 1080, 2400)


def test_bad_ios_coordinate_names_the_node_and_attribute():
    src = load("ios_shop_zh.xml").replace('x="324" y="95" width="53"', 'x="324" y="95" width="wide"')
    with pytest.raises(PageSourceError) as err:
        normalise("ios", src, 393, 852)
    assert err.value.attribute == "width"
    assert err.value.path.endswith("/XCUIElementTypeOther[1]/XCUIElementTypeButton[1]")


def test_bad_stamp_names_the_html_node_and_attribute():
    src = load("html_shop_zh.html").replace('data-tf-box="289,273.6,51.2,80"', 'data-tf-box="289,NaN"')
    with pytest.raises(PageSourceError) as err:
        normalise("html", src, 412, 915)
    assert err.value.attribute == "data-tf-box"
    assert err.value.path == "/html[1]/body[1]/main[1]/ul[1]/li[2]/button[1]"


def test_unknown_kind_and_empty_screen_are_rejected():
    with pytest.raises(ValueError, match="unknown page source kind 'windows'"):
        normalise("windows", "<a/>", 10, 10)
    with pytest.raises(ValueError, match="screen size must be positive"):
        normalise("ios", "<AppiumAUT/>", 0, 852)


# ---------------------------------------------------------------- real Chromium

PAGE = """<!doctype html><html><head><meta name="viewport" content="width=device-width">
<style>body{margin:0;font:16px sans-serif} .tall{height:1600px}
#abs{position:absolute;left:37.3px;top:501.6px;width:90.5px;height:33.3px}
#fixed{position:fixed;right:8px;bottom:12px}
#scaled{transform:scale(1.5);transform-origin:0 0;margin:20px;width:120px}
#box{height:80px;overflow:auto} #box div{height:60px}</style></head><body>
<h1 id="title">Phone page</h1>
<p><button id="go">Go now</button> <a id="more" href="/more">More details</a></p>
<input id="q" aria-label="Query" value="start">
<input id="agree" type="checkbox" aria-label="Agree">
<div id="scaled"><button id="big">Scaled</button></div>
<div id="box"><div>a</div><div><button id="inner">Inside scroller</button></div></div>
<button id="abs">Absolute</button><button id="fixed">Fixed</button>
<button id="later">Goes away</button><div class="tall"></div></body></html>"""

IDS = ["title", "go", "more", "q", "big", "inner", "abs", "fixed", "later"]
NAMES = {
    "title": "Phone page",
    "go": "Go now",
    "more": "More details",
    "q": "Query",
    "big": "Scaled",
    "inner": "Inside scroller",
    "abs": "Absolute",
    "fixed": "Fixed",
    "later": "Goes away",
}
RECTS_JS = """ids => ids.map(id => { const r = document.getElementById(id).getBoundingClientRect();
  return [r.x, r.y, r.width, r.height]; })"""


@pytest.fixture(scope="module")
def phone_page():
    from crawlers.browser import acquire_playwright, launch_chromium, release_playwright

    pw = acquire_playwright()  # shared with any WebEnv of this thread
    browser = launch_chromium(pw)
    try:
        ctx = browser.new_context(
            viewport={"width": 412, "height": 915}, device_scale_factor=2.625, is_mobile=True, has_touch=True
        )
        yield ctx.new_page()
    finally:
        browser.close()
        release_playwright(pw)


def _stamp_and_read(page):
    w, h = page.evaluate("() => {" + STAMP_BOXES_JS + "}")
    tree, els = normalise("html", page.evaluate("() => document.documentElement.outerHTML"), w, h)
    return (w, h), tree, els


def _assert_boxes_match(page, els, size):
    w, h = size
    rects = dict(zip(IDS, page.evaluate(RECTS_JS, IDS)))
    for el_id, (x, y, rw, rh) in rects.items():
        e = one(els, NAMES[el_id])
        # Stamps are rounded to 0.1 CSS px.
        expected = normalise_box((x, y, rw, rh), w, h)
        assert e.bbox == pytest.approx(expected, abs=0.06 / min(w, h)), el_id


def test_stamped_boxes_match_the_browser_at_a_phone_viewport(phone_page):
    page = phone_page
    page.set_content(PAGE)
    page.evaluate("() => document.getElementById('box').scrollTop = 30")
    size, tree, els = _stamp_and_read(page)
    assert size == (412, 915)
    _assert_boxes_match(page, els, size)
    assert one(els, "Scaled").bbox[2] - one(els, "Scaled").bbox[0] > 0  # transformed: 1.5x rect

    # Scrolled: boxes move up, the title leaves the screen (kept, negative), the
    # fixed button stays, and the stamps follow.
    page.evaluate("() => window.scrollTo(0, 260)")
    size, tree, els = _stamp_and_read(page)
    _assert_boxes_match(page, els, size)
    title = one(els, "Phone page")
    assert title.bbox[3] < 0
    fixed = one(els, "Fixed")
    assert fixed.bbox[3] == pytest.approx(1 - 12 / 915, abs=1e-3)


def test_stamps_follow_live_state_and_drop_stale_boxes(phone_page):
    page = phone_page
    page.set_content(PAGE)
    _, tree, els = _stamp_and_read(page)
    assert '- textbox "Query" [box=' in tree and tree.count(": start") == 1
    assert one(els, "Goes away").role == "button"

    page.fill("#q", "蓝牙耳机")
    page.check("#agree")
    page.focus("#q")
    page.evaluate("() => document.getElementById('later').hidden = true")
    _, tree, els = _stamp_and_read(page)
    assert '- textbox "Query" [focused] [box=' in tree and ": 蓝牙耳机" in tree
    assert '- checkbox "Agree" [checked] [box=' in tree
    assert not [e for e in els if e.name == "Goes away"]
    stale = page.evaluate("() => document.getElementById('later').getAttribute('data-tf-box')")
    assert stale is None

    # Stamping again without a change rewrites nothing (no DOM churn for the app).
    changes = page.evaluate(
        """() => new Promise(res => {
        const seen = []; const mo = new MutationObserver(m => seen.push(...m));
        mo.observe(document, {attributes: true, subtree: true});
        (() => {"""
        + STAMP_BOXES_JS
        + """})();
        setTimeout(() => { mo.disconnect(); res(seen.length); }, 0); })"""
    )
    assert changes == 0


def test_stamping_and_normalising_a_long_page_is_fast(phone_page):
    page = phone_page
    items = "".join(
        f"<li><a href='/p/{i}'>商品 {i}</a> <span>¥{i}</span> <button>加购</button></li>" for i in range(600)
    )
    page.set_content(f"<meta name=viewport content='width=device-width'><ul>{items}</ul>")
    t0 = time.perf_counter()
    _, tree, els = _stamp_and_read(page)
    elapsed = time.perf_counter() - t0
    assert len([e for e in els if e.role == "link"]) == 600
    # 0.2 s measured here (2 busy cores); the bound catches anything quadratic.
    assert elapsed < 5.0, f"stamp + page source + normalise took {elapsed:.2f}s for 2.4k elements"


def test_boxes_land_on_the_screenshot_pixels_also_when_zoomed(phone_page):
    import io

    from PIL import Image

    page = phone_page
    page.set_content(
        "<meta name=viewport content='width=device-width'><body style='margin:0'>"
        "<div style='height:3000px'><button style='margin:400px 0 0 100px;width:60px;"
        "height:40px;background:#f00;border:0;color:#f00'>Red</button></div>"
    )
    cdp = page.context.new_cdp_session(page)
    try:
        for scale in (1.0, 2.0):  # 2.0: pinch-zoomed, the screen shows a quarter of the page
            cdp.send("Emulation.setPageScaleFactor", {"pageScaleFactor": scale})
            page.evaluate("() => window.scrollTo(0, 250)")
            size, _, els = _stamp_and_read(page)
            assert size[0] == pytest.approx(412 / scale)
            x0, y0, x1, y1 = one(els, "Red").bbox
            assert (x1 - x0) * size[0] == pytest.approx(60)
            shot = Image.open(io.BytesIO(page.screenshot(scale="css"))).convert("RGB")
            w, h = shot.size
            for fx, fy, inside in (
                (0.1, 0.1, True),
                (0.9, 0.9, True),
                (-0.15, 0.5, False),
                (1.15, 0.5, False),
                (0.5, -0.15, False),
                (0.5, 1.15, False),
            ):
                px = shot.getpixel((int((x0 + fx * (x1 - x0)) * w), int((y0 + fy * (y1 - y0)) * h)))
                assert (px == (255, 0, 0)) is inside, (scale, fx, fy, px)
    finally:
        cdp.send("Emulation.setPageScaleFactor", {"pageScaleFactor": 1.0})
        cdp.detach()
