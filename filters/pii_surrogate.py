"""Format-preserving surrogates for real personal data, consistent within a trajectory.

A surrogate looks like the value it replaces, so a model trained on the text
learns to type an email where an email goes, never a `[EMAIL]` token:

- email: the local part redrawn character by character (letters stay letters,
  digits digits, dots and dashes where they were), the domain one of the
  reserved example.com / example.net / example.org (RFC 2606).
- phone: digits redrawn, separators, brackets and the country code kept; a
  Chinese mobile keeps its 3-digit carrier prefix (1[3-9]x), a Chinese
  landline its area code, a North American number its area code and an
  exchange that starts 2-9.
- cn_id: the province code kept, the rest of the region, the birth date
  (1950-2005) and the sequence redrawn with the sex digit's parity kept, and
  the GB 11643 / ISO 7064 mod 11-2 check character computed anew.
- bank_card: the 6-digit issuer prefix kept, the account digits redrawn and
  the Luhn check digit computed anew; grouping kept.
- address: house, unit and ZIP digits redrawn, the street (or road,
  community) name drawn from a fixed list, the suffix (Street, 路, 小区...)
  and the city, state or province/city/district kept.

Every surrogate is checked with the detectors of filters/pii.py (it must be
found as the same kind) and differs from the original. It is drawn from a
generator seeded by (key, kind, the value normalised: digits only for
numbers, case-folded for emails), with the trajectory id as the key: the
same value gets the same surrogate in the instruction, the typed text, the
answer, the thought and the accessibility text of one trajectory, whatever
its separators, and a re-run gives the same bytes. Another trajectory gets
another surrogate.
"""

from __future__ import annotations

import hashlib
import random
import re

from filters.pii import (
    _CARD,
    _CN_ID15,
    _CN_LANDLINE_SEP,
    _CN_MOBILE,
    _EMAIL,
    _ID_CHECK,
    _ID_WEIGHTS,
    _INTL,
    _NANP,
    _STREET_SUFFIX,
    PiiMatch,
    _valid_card,
    find_pii,
    luhn_valid,
    valid_cn_id,
)

EXAMPLE_DOMAINS = ("example.com", "example.net", "example.org")
EN_STREET_NAMES = (
    "Birch",
    "Chestnut",
    "Sycamore",
    "Juniper",
    "Aspen",
    "Hawthorn",
    "Magnolia",
    "Poplar",
    "Laurel",
    "Spruce",
    "Alder",
    "Linden",
)
ZH_ROAD_NAMES = ("幸福", "和平", "建设", "解放", "光明", "新华", "长江", "东风", "青年", "团结")
ZH_COMMUNITY_NAMES = ("阳光", "翠苑", "金桂", "锦绣", "丽景", "春晖", "碧水", "枫林")
_TRIES = 40
_LANDLINE_BARE = re.compile(r"0\d{2,3}[2-9]\d{6,7}")
_ZH_ROAD_SUFFIX = re.compile(r"(大道|大街|胡同|路|街|道|巷|弄)")
_ZH_COMMUNITY_SUFFIX = re.compile(r"(小区|花园|公寓|大厦|村|苑)")
_ZH_ADMIN_END = re.compile(r"^.*(?:省|自治区|特别行政区|市|自治州|州|盟|地区|区|县|旗|镇|乡|街道)")
_EN_SUFFIX = re.compile(r"^" + _STREET_SUFFIX + r"\.?$")
_EN_DIRECTION = {"N", "S", "E", "W", "NE", "NW", "SE", "SW", "North", "South", "East", "West"}


def _rng(key: str, kind: str, norm: str, attempt: int) -> random.Random:
    seed = hashlib.sha256(f"{key}\x1f{kind}\x1f{norm}\x1f{attempt}".encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def normalise(kind: str, value: str) -> str:
    """What makes two spellings the same value: digits for numbers, case-folded emails."""
    if kind == "email":
        return value.casefold()
    if kind in ("phone", "bank_card"):
        d = re.sub(r"\D", "", value)
        if kind == "phone":  # +86 138..., 0086 138... and 138... are one mobile
            m = re.fullmatch(r"(?:0086|86)(1[3-9]\d{9})", d)
            d = m.group(1) if m else d
        return d
    if kind == "cn_id":
        return re.sub(r"[\s-]", "", value).upper()
    return " ".join(value.split()).casefold()


def _redigit(template: str, digits: str) -> str:
    """`template` with its digits replaced, in order, by `digits` (separators kept)."""
    it = iter(digits)
    return re.sub(r"\d", lambda _m: next(it), template)


def _draw_digits(rng: random.Random, n: int, first_nonzero: bool = False) -> str:
    out = [str(rng.randint(1 if (first_nonzero and i == 0) else 0, 9)) for i in range(n)]
    return "".join(out)


# ---------------------------------------------------------------- kinds
def _email(value: str, rng: random.Random) -> str:
    local, _, _domain = value.rpartition("@")
    out = []
    for ch in local:
        if ch.isdigit():
            out.append(str(rng.randint(0, 9)))
        elif "a" <= ch.lower() <= "z":
            c = chr(rng.randint(ord("a"), ord("z")))
            out.append(c.upper() if ch.isupper() else c)
        else:
            out.append(ch)
    return "".join(out) + "@" + rng.choice(EXAMPLE_DOMAINS)


def _phone(value: str, rng: random.Random) -> str:
    digits = re.sub(r"\D", "", value)
    core = normalise("phone", value)
    lead = len(digits) - len(core)  # a +86 / 0086 before a Chinese mobile
    if re.fullmatch(r"1[3-9]\d{9}", core):
        keep, must = 3, ()  # carrier prefix
    elif core.startswith("0"):  # Chinese landline: 0 + area code
        keep = 3 if core[1] in "12" else 4
        must = (keep,)
    elif core.startswith("86") and len(core) > 2 and core[2] == "0":
        keep = 5 if core[3] in "12" else 6
        must = (keep,)
    else:
        m = re.fullmatch(r"(1?)([2-9]\d{2})([2-9]\d{2})(\d{4})", core)
        if m:  # North American: keep +1 and the area code
            keep = len(m.group(1)) + 3
            must = (keep,)
        else:  # other international: keep the country code
            cc = re.match(r"\s*\+\s*(\d{1,3})", value)
            keep, must = (len(cc.group(1)) if cc else 0), ()
    new = list(core[:keep])
    for i in range(keep, len(core)):
        new.append(str(rng.randint(2 if i in must else 0, 9)))
    return _redigit(value, digits[:lead] + "".join(new))


def _cn_id(value: str, rng: random.Random) -> str:
    v = normalise("cn_id", value)
    if len(v) == 15:
        yymmdd = f"{rng.randint(50, 99):02d}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
        parity = int(v[14]) % 2
        seq = f"{rng.randint(0, 99):02d}{rng.choice([d for d in range(10) if d % 2 == parity])}"
        new = (
            v[:2]
            + f"{rng.randint(1, 9)}{rng.randint(0, 9)}{rng.randint(1, 9)}{rng.randint(0, 9)}"
            + yymmdd
            + seq
        )
        return _redigit(value, new)
    region = v[:2] + f"{rng.randint(0, 9)}{rng.randint(1, 9)}{rng.randint(0, 9)}{rng.randint(1, 9)}"
    birth = f"{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    parity = int(v[16]) % 2  # the 17th digit's parity is the holder's sex
    seq = f"{rng.randint(0, 99):02d}{rng.choice([d for d in range(10) if d % 2 == parity])}"
    first17 = region + birth + seq
    check = id_check_char(first17)
    if value.rstrip()[-1:] == "x":
        check = check.lower()
    # The template: the original with its last character (digit or X) as a digit slot.
    template = value[:-1] + "0"
    return _redigit(template, first17 + "0")[:-1] + check


def id_check_char(first17: str) -> str:
    """The ISO 7064 mod 11-2 check character of a resident ID's first 17 digits."""
    return _ID_CHECK[sum(int(d) * w for d, w in zip(first17, _ID_WEIGHTS)) % 11]


def luhn_digit(partial: str) -> str:
    """The digit that makes `partial` + digit pass Luhn."""
    for d in "0123456789":
        if luhn_valid(partial + d):
            return d
    raise AssertionError("unreachable")


def _card(value: str, rng: random.Random) -> str:
    digits = re.sub(r"\D", "", value)
    keep = min(6, len(digits) - 4)
    partial = digits[:keep] + _draw_digits(rng, len(digits) - keep - 1)
    return _redigit(value, partial + luhn_digit(partial))


def _address(value: str, rng: random.Random) -> str:
    if re.search(r"[\u4e00-\u9fff]", value):
        return _zh_address(value, rng)
    return _en_address(value, rng)


def _digits_redrawn(text: str, rng: random.Random) -> str:
    return re.sub(r"\d+", lambda m: _draw_digits(rng, len(m.group()), m.group()[0] != "0"), text)


def _en_address(value: str, rng: random.Random) -> str:
    tokens = re.findall(r"\d+|[A-Za-z][A-Za-z'-]*|[^\dA-Za-z]+", value)
    suffix_at = next((i for i, t in enumerate(tokens) if _EN_SUFFIX.match(t)), None)
    number_at = next((i for i, t in enumerate(tokens) if t.isdigit()), None)
    out = []
    names = list(EN_STREET_NAMES)
    rng.shuffle(names)
    for i, t in enumerate(tokens):
        if t.isdigit():
            out.append(_draw_digits(rng, len(t), t[0] != "0"))
        elif (
            suffix_at is not None
            and number_at is not None
            and number_at + 1 < i < suffix_at
            and t[:1].isupper()
            and t not in _EN_DIRECTION
        ):  # "221B": the B stays
            out.append(names.pop() if names else t)
        else:
            out.append(t)
    return "".join(out)


def _zh_address(value: str, rng: random.Random) -> str:
    admin = _ZH_ADMIN_END.match(value)
    # The administrative part (province/city/district) ends before the road's name.
    head_end = 0
    road = _ZH_ROAD_SUFFIX.search(value)
    community = _ZH_COMMUNITY_SUFFIX.search(value)
    if admin:
        # The last admin suffix that comes before the road (or community) suffix.
        stop = (road or community).start() if (road or community) else len(value)
        for m in re.finditer(r"(?:省|自治区|特别行政区|市|自治州|州|盟|地区|区|县|旗|镇|乡|街道)", value):
            if m.end() <= stop - 1:
                head_end = m.end()
    head, rest = value[:head_end], value[head_end:]
    out = head
    road = _ZH_ROAD_SUFFIX.search(rest)
    if road and not re.fullmatch(r"[\d\-号栋幢座楼单元室层组]*", rest[: road.start()]):
        name = rng.choice(ZH_ROAD_NAMES)
        out += name + road.group(1)
        rest = rest[road.end() :]
    community = _ZH_COMMUNITY_SUFFIX.search(rest)
    if community:
        before = rest[: community.start()]
        lead = re.match(r"^[\d\-]+号", before)
        pre = lead.group(0) if lead else ""
        out += _digits_redrawn(pre, rng) + rng.choice(ZH_COMMUNITY_NAMES) + community.group(1)
        rest = rest[community.end() :]
    return out + _digits_redrawn(rest, rng)


_MAKERS = {"email": _email, "phone": _phone, "cn_id": _cn_id, "bank_card": _card, "address": _address}


def is_valid(kind: str, text: str) -> bool:
    """Whether `text` is a well-formed value of `kind` as the detectors see it."""
    if kind == "email":
        return bool(_EMAIL.fullmatch(text))
    if kind == "phone":
        return any(rx.fullmatch(text) for rx in (_CN_MOBILE, _CN_LANDLINE_SEP, _NANP, _INTL, _LANDLINE_BARE))
    if kind == "cn_id":
        v = re.sub(r"[\s-]", "", text)
        return valid_cn_id(text) or (len(v) == 15 and bool(_CN_ID15.search("ID " + v)))
    if kind == "bank_card":
        return bool(_CARD.fullmatch(text)) and _valid_card(text)
    if kind == "address":
        return any(m.kind == "address" and m.start == 0 and m.end == len(text) for m in find_pii(text))
    raise ValueError(f"unknown kind {kind!r}")


def surrogate(kind: str, value: str, key: str) -> str:
    """A valid value of `kind` that looks like `value`, the same for the same (key, value)."""
    if kind not in _MAKERS:
        raise ValueError(f"unknown kind {kind!r}; known: {sorted(_MAKERS)}")
    norm = normalise(kind, value)
    check = is_valid(kind, value)  # a value found only in context (a bare landline...) is
    for attempt in range(_TRIES):  # checked in the same form it was found in
        out = _MAKERS[kind](value, _rng(key, kind, norm, attempt))
        if normalise(kind, out) != norm and (not check or is_valid(kind, out)):
            return out
    # Nothing valid drawn (an odd spelling): every digit and letter redrawn, never the value.
    rng = _rng(key, kind, norm, _TRIES)
    if kind == "address":
        if re.search(r"[\u4e00-\u9fff]", value):
            return f"{rng.choice(ZH_ROAD_NAMES)}路{rng.randint(1, 999)}号"
        return f"{rng.randint(10, 9999)} {rng.choice(EN_STREET_NAMES)} Street"
    return re.sub(
        r"[0-9]",
        lambda _m: str(rng.randint(0, 9)),
        re.sub(r"[A-Za-z]", lambda _m: chr(rng.randint(97, 122)), value),
    )


class Surrogates:
    """The surrogate of every personal value in one trajectory (key: its id).

    `learn(text)` remembers the values found in a field (the instruction, the
    typed text) so that `scrub` also replaces them where the detectors would
    not find them on their own (a value glued into a longer token of the
    accessibility text); `scrub(text)` replaces each value by its surrogate.
    """

    def __init__(self, key: str):
        self.key = key
        self.known: dict[str, str] = {}  # value as written -> kind
        self._cache: dict[tuple[str, str], str] = {}

    def learn(self, text: str | None) -> None:
        for m in find_pii(text or ""):
            if len(m.text) >= 6:
                self.known.setdefault(m.text, m.kind)

    def value(self, kind: str, text: str) -> str:
        k = (kind, text)
        if k not in self._cache:
            self._cache[k] = surrogate(kind, text, self.key)
        return self._cache[k]

    def find(self, text: str) -> list[PiiMatch]:
        """The detectors' matches plus the known values they missed, in order."""
        matches = find_pii(text)
        for value, kind in self.known.items():
            start = text.find(value)
            while start >= 0:
                end = start + len(value)
                if all(end <= m.start or start >= m.end for m in matches):
                    matches.append(PiiMatch(kind, start, end, value))
                start = text.find(value, end)
        return sorted(matches, key=lambda m: m.start)

    def scrub(self, text: str | None) -> tuple[str | None, list[PiiMatch]]:
        if not text:
            return text, []
        matches = self.find(text)
        if not matches:
            return text, []
        parts, pos = [], 0
        for m in matches:
            parts.append(text[pos : m.start])
            parts.append(self.value(m.kind, m.text))
            pos = m.end
        parts.append(text[pos:])
        return "".join(parts), matches
