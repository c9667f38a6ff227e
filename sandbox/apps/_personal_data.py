"""Synthetic personal data planted in the sandbox apps (never real people).

Every value is made up from a seeded generator: Chinese resident ID numbers
with a valid check digit, Luhn-valid bank cards, phone numbers in reserved or
plausible ranges and example.com addresses. Apps list what they plant in
`state["_planted_pii"]` so that a PII filter can be tested against it.
"""

from __future__ import annotations

import random

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"

# (region code of the ID number, province, city, district, roads)
CN_REGIONS = [
    ("110105", "北京市", "北京市", "朝阳区", ["建国路", "朝阳北路", "望京街"]),
    ("310115", "上海市", "上海市", "浦东新区", ["世纪大道", "张杨路", "陆家嘴环路"]),
    ("440305", "广东省", "深圳市", "南山区", ["科技南路", "深南大道", "后海大道"]),
    ("330106", "浙江省", "杭州市", "西湖区", ["文三路", "天目山路", "学院路"]),
    ("510107", "四川省", "成都市", "武侯区", ["人民南路", "科华北路", "武侯祠大街"]),
    ("420106", "湖北省", "武汉市", "武昌区", ["中南路", "中北路", "友谊大道"]),
]

EN_STREETS = [
    "Maple Avenue",
    "Harbor Street",
    "Oak Lane",
    "Cedar Road",
    "Willow Drive",
    "Elm Street",
    "Lakeview Terrace",
    "Pine Court",
]
EN_CITIES = [
    ("Springfield", "IL", "627"),
    ("Riverside", "CA", "925"),
    ("Fairview", "OR", "970"),
    ("Madison", "WI", "537"),
    ("Georgetown", "TX", "786"),
]

CN_MOBILE_PREFIXES = ["138", "139", "136", "158", "186", "188", "150", "177", "199"]


def id_check_digit(first17: str) -> str:
    """The check character of a GB 11643 resident ID number."""
    if len(first17) != 17 or not first17.isdigit():
        raise ValueError(f"need 17 digits, got {first17!r}")
    total = sum(int(d) * w for d, w in zip(first17, _ID_WEIGHTS))
    return _ID_CHECK[total % 11]


def is_valid_cn_id(value: str) -> bool:
    return len(value) == 18 and value[:17].isdigit() and id_check_digit(value[:17]) == value[17].upper()


def luhn_check_digit(partial: str) -> str:
    """The digit that makes `partial + digit` pass the Luhn check."""
    total = 0
    for i, d in enumerate(reversed(partial)):
        n = int(d)
        if i % 2 == 0:  # these get doubled once the check digit is appended
            n *= 2
            if n > 9:
                n -= 9
        total += n
    return str((10 - total % 10) % 10)


def is_luhn_valid(value: str) -> bool:
    digits = value.replace(" ", "")
    if not digits.isdigit() or len(digits) < 12:
        return False
    return luhn_check_digit(digits[:-1]) == digits[-1]


def cn_id_number(rng: random.Random, region: str | None = None) -> str:
    region = region or rng.choice(CN_REGIONS)[0]
    year = rng.randint(1965, 2002)
    birth = f"{year}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    first17 = f"{region}{birth}{rng.randint(0, 999):03d}"
    return first17 + id_check_digit(first17)


def bank_card(rng: random.Random, lang: str) -> str:
    """A Luhn-valid card number: UnionPay-style 19 digits (zh) or Visa 16 (en)."""
    if lang == "zh":
        partial = rng.choice(["622202", "622848", "621700", "622588"]) + "".join(
            str(rng.randint(0, 9)) for _ in range(12)
        )
    else:
        partial = "4" + "".join(str(rng.randint(0, 9)) for _ in range(14))
    return partial + luhn_check_digit(partial)


def cn_mobile(rng: random.Random) -> str:
    return rng.choice(CN_MOBILE_PREFIXES) + "".join(str(rng.randint(0, 9)) for _ in range(8))


def us_phone(rng: random.Random) -> str:
    # 555-01xx is reserved for fiction
    return f"({rng.choice(['415', '312', '206', '617'])}) 555-01{rng.randint(0, 99):02d}"


def cn_address(rng: random.Random) -> str:
    _, province, city, district, roads = rng.choice(CN_REGIONS)
    prefix = province if province == city else province + city
    return f"{prefix}{district}{rng.choice(roads)}{rng.randint(1, 999)}号"


def en_address(rng: random.Random) -> str:
    city, state, zip3 = rng.choice(EN_CITIES)
    return f"{rng.randint(10, 4999)} {rng.choice(EN_STREETS)}, {city}, {state} {zip3}{rng.randint(0, 99):02d}"


def phone(rng: random.Random, lang: str) -> str:
    return cn_mobile(rng) if lang == "zh" else us_phone(rng)


def address(rng: random.Random, lang: str) -> str:
    return cn_address(rng) if lang == "zh" else en_address(rng)


class Planted:
    """Collects planted values with the state path where each one lives."""

    def __init__(self):
        self.items: list[dict] = []

    def add(self, kind: str, value: str, where: str) -> str:
        self.items.append({"kind": kind, "value": value, "where": where})
        return value


def resolve_path(state: dict, where: str):
    """The value at a dotted path such as `mails.3.body` (list indices as numbers)."""
    node = state
    for part in where.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node
