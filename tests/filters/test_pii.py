"""Detectors and text scrubbing on hand-written examples the sandbox generator never produces."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from filters.pii import find_pii, luhn_valid, scrub_task, scrub_text, valid_cn_id
from schemas.records import Task

# (text, kind, the exact span expected) -- EN and ZH, formats the generator does not use.
HELD_OUT = [
    ("Write to m.o'brien+news@mail.co.uk today", "email", None),
    ("Contact: Li.Na_88@corp-mail.cn.", "email", "Li.Na_88@corp-mail.cn"),
    ("请发到 zhao.min@163.com，谢谢", "email", "zhao.min@163.com"),
    ("联系邮箱：wang_lei2020@qq.com。", "email", "wang_lei2020@qq.com"),
    ("Call +1 650-253-0000 after 5pm", "phone", "+1 650-253-0000"),
    ("my cell is 650.253.0001", "phone", "650.253.0001"),
    ("Office: (212) 736-5000 ext 12", "phone", "(212) 736-5000"),
    ("London office +44 20 7946 0958", "phone", "+44 20 7946 0958"),
    ("手机：+86 139-1234-5678", "phone", "+86 139-1234-5678"),
    ("电话 186 0101 2345 找王经理", "phone", "186 0101 2345"),
    ("座机010-62751234转8", "phone", "010-62751234"),
    ("客服电话：075586013388", "phone", "075586013388"),
    ("身份证 11010519491231002X 请核对", "cn_id", "11010519491231002X"),
    ("ID no. 440524198001010013", "cn_id", "440524198001010013"),
    ("老身份证号码：110105491231002", "cn_id", "110105491231002"),
    ("Card 4111 1111 1111 1111 exp 12/27", "bank_card", "4111 1111 1111 1111"),
    ("Amex 3782-822463-10005 on file", "bank_card", "3782-822463-10005"),
    ("银行卡号6212260200012345670，开户行工商银行", "bank_card", "6212260200012345670"),
    ("Ship to 221B Baker Street, London", "address", "221B Baker Street"),
    ("I live at 1600 Pennsylvania Avenue NW", "address", "1600 Pennsylvania Avenue"),
    ("Office: 350 5th Ave, New York, NY 10118.", "address", "350 5th Ave, New York, NY 10118"),
    (
        "Mail it to 42 W Elm St., Apt 3B, Chicago, IL 60610-1234 please",
        "address",
        "42 W Elm St., Apt 3B, Chicago, IL 60610-1234",
    ),
    (
        "收货地址：江苏省南京市鼓楼区中山北路30号3栋2单元501室",
        "address",
        "江苏省南京市鼓楼区中山北路30号3栋2单元501室",
    ),
    ("我住在杭州市拱墅区莫干山路1188号", "address", "杭州市拱墅区莫干山路1188号"),
    ("快递放到朝阳区光华路9号就行", "address", "朝阳区光华路9号"),
    ("地址是上海市徐汇区衡山路12弄5号", "address", "上海市徐汇区衡山路12弄5号"),
    ("老家在河南省信阳市光山县文殊乡东岳村3组", "address", "河南省信阳市光山县文殊乡东岳村3组"),
]

# Sandbox-like text that holds no personal data.
NEGATIVES = [
    "Price ¥1999, now $19.99 (save 20%)",
    "¥2,499.00 包邮",
    "Order #20240315001 shipped",
    "订单号：202403151234567",
    "Order no. 7845123690",
    "Delivered on 2024-03-15 at 14:30",
    "2024年3月15日 18:45 送达",
    "SKU: AB-1029-XL",
    "Tracking number 1Z999AA10123456784",
    "运单号 SF1234567890123",
    "Your verification code is 482913",
    "验证码：093817，5分钟内有效",
    "3 items, 12 reviews, 4.5 stars",
    "已售 12000+ 件",
    "Storage: 128 GB of 256 GB used",
    "Version 17.4.1 (21E236)",
    "Screen 1280x800 @2x",
    "Call 911 in an emergency",
    "Up to 64GB Flash Drive for $12",
    "Model iPhone 15 Pro, IMEI hidden",
    "Flight CA1501 departs 08:05 from gate 23",
    "Room 1205, floor 12",
    "第2号线 3号出口",
    "Meet at Platform 9 3/4",
    "Balance: $1,234,567.89",
    "Timestamp 1710501234",
    "尾号 9113",
    "4403**********5670",
    "**** **** **** 1884",
    "Q3 revenue 4,500,000 RMB",
    "Route 66 road trip, 2 days",
    "3 Way Switch (pack of 2)",
    "Lot 4 Main Building",
    "周三去西安的高铁票 G87 次",
    "共 11 封，其中 未读邮件 5 封",
    "12 Days of Christmas",
]


@pytest.mark.parametrize("text,kind,span", HELD_OUT)
def test_held_out_examples_are_found(text, kind, span):
    ms = find_pii(text)
    assert [m.kind for m in ms] == [kind], (text, ms)
    if span is not None:
        assert ms[0].text == span
    assert text[ms[0].start : ms[0].end] == ms[0].text


@pytest.mark.parametrize("text", NEGATIVES)
def test_non_personal_text_is_not_flagged(text):
    assert find_pii(text) == []


def test_validators_reject_near_misses():
    assert valid_cn_id("11010519491231002X")
    assert not valid_cn_id("110105194912310021")  # wrong check digit
    assert not valid_cn_id("110105194913310029")  # month 13
    assert not valid_cn_id("990105194912310025")  # no such province
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    # A Luhn-invalid 16-digit run or an ID with a bad check digit is not flagged.
    assert find_pii("ref 4111111111111112") == []
    assert find_pii("编号110105194912310021") == []


def test_scrub_text_replaces_each_match_and_keeps_the_rest():
    text = "Hi, I'm at 12 Oak Lane; mail me: a.b@example.org or call (415) 555-0123. ¥59"
    out, ms = scrub_text(text)
    assert out == "Hi, I'm at [ADDRESS]; mail me: [EMAIL] or call [PHONE]. ¥59"
    assert [m.kind for m in ms] == ["address", "email", "phone"]
    zh, ms = scrub_text("身份证11010519491231002X，卡号6212260200012345670，手机13912345678")
    assert zh == "身份证[CN_ID]，卡号[BANK_CARD]，手机[PHONE]"


_FRAGMENTS = [h[0] for h in HELD_OUT] + NEGATIVES + ["[EMAIL]", "[PHONE]", " ", "，", "\n", "7", "号"]


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=6))
def test_scrub_is_idempotent(parts):
    once, _ = scrub_text("".join(parts))
    twice, again = scrub_text(once)
    assert twice == once and again == []


def test_scrub_task_cleans_instruction_and_string_params():
    task = Task(
        task_id="t",
        instruction="Send the invoice to li.wei@example.cn",
        language="en",
        app="mail",
        params={"seed": 4, "to": "li.wei@example.cn", "cc": ["(415) 555-0123"], "subject": "Invoice"},
    )
    clean, ms = scrub_task(task)
    assert clean.instruction == "Send the invoice to [EMAIL]"
    assert clean.params == {"seed": 4, "to": "[EMAIL]", "cc": ["[PHONE]"], "subject": "Invoice"}
    assert len(ms) == 3 and task.params["to"] == "li.wei@example.cn"  # the input is untouched
    same, none = scrub_task(clean)
    assert same == clean and none == []


def test_address_glued_to_a_name_by_the_accessibility_text():
    # A name and an address in separate inline elements read as one string.
    from filters.pii import scrub_text

    text = "Avery Johnson1636 Oak Lane, Riverside, CA 92599Phone: (415) 555-0101"
    out, matches = scrub_text(text)
    assert "Oak Lane" not in out and {m.kind for m in matches} == {"address", "phone"}
