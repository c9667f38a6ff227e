"""Personal data in text: detection and scrubbing (English and Chinese).

Detectors are generic patterns with validation, never a list of known values:

- email: local@domain.tld (ASCII; CJK punctuation around it is not eaten).
- phone: Chinese mobiles 1[3-9]x xxxx xxxx (optional +86, spaces or dashes),
  Chinese landlines 0xx(x)-xxxxxxx(x) (a separator, or a phone keyword just
  before an unseparated one), North American numbers with separators
  ((415) 555-0123, 415-555-0123, +1 415 555 0123) and other international
  numbers written with a leading +.
- cn_id: 18-character resident ID numbers (province code, plausible birth
  date, GB 11643 check digit); 15-digit old-style numbers have no check digit,
  so they count only with an ID keyword just before them.
- bank_card: 13-19 digits (optionally grouped by single spaces or dashes) that
  pass Luhn, start like a real card (2-6) and are not one repeated digit.
- address: English "number + street name + suffix" with optional unit, city,
  state and ZIP; Chinese province/city/district + road + 号 (plus 栋/单元/室),
  or a road/村/小区 with a number.

Digit runs are bounded by non-digits, so prices, order numbers, dates, times,
SKUs and 6-digit codes do not match any digit pattern. Overlapping candidates
resolve to the longest span. `scrub_text` replaces each match with a placeholder
([EMAIL], [PHONE], [CN_ID], [BANK_CARD], [ADDRESS]) that no detector matches,
so scrubbing twice equals scrubbing once. Curation does not use placeholders
for what it ships: real values get format-preserving surrogates
(filters/pii_surrogate.py) and values a source declares synthetic are kept
(filters/pii_sources.py); a placeholder in a training target would teach a
model to type "[EMAIL]".
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any

from schemas.records import Task

KINDS = ("email", "phone", "cn_id", "bank_card", "address")
PLACEHOLDERS = {k: f"[{k.upper()}]" for k in KINDS}
# When two candidates cover the same span, the more specific kind wins.
_PRIORITY = {"email": 0, "cn_id": 1, "bank_card": 2, "phone": 3, "address": 4}


@dataclass(frozen=True)
class PiiMatch:
    kind: str
    start: int
    end: int
    text: str


# ---------------------------------------------------------------- patterns
# A JSON-escaped newline ("\n" in an a11y tree name) counts as a boundary.
_NO_DIGIT_BEFORE = r"(?:(?<=\\n)|(?<![0-9]))"
_NO_ALNUM_BEFORE = r"(?:(?<=\\n)|(?<![0-9A-Za-z]))"

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)

_CN_MOBILE = re.compile(_NO_DIGIT_BEFORE + r"(?:(?:\+|00)?86[\s-]?)?1[3-9]\d(?:[\s-]?\d{4}){2}(?![0-9])")
_CN_LANDLINE_SEP = re.compile(
    _NO_DIGIT_BEFORE + r"(?:(?:\+86[\s-]?)?\(0\d{2,3}\)\s?|(?:\+86[\s-]?)?0\d{2,3}[\s-])"
    r"[2-9]\d{2,3}[\s-]?\d{4}(?![0-9])"
)
_CN_LANDLINE_BARE = re.compile(
    r"(?:电话|座机|固话|致电|tel|phone|call)\s*[:：]?\s*(?P<num>0\d{2,3}[2-9]\d{6,7})(?![0-9])", re.IGNORECASE
)
_NANP = re.compile(
    _NO_DIGIT_BEFORE + r"(?:(?:\+1|1)[\s.-]?)?(?:\([2-9]\d{2}\)\s?|[2-9]\d{2}[\s.-])"
    r"[2-9]\d{2}[\s.-]\d{4}(?![0-9])"
)
_INTL = re.compile(
    r"(?<![0-9A-Za-z+])\+[1-9]\d{0,2}"
    r"(?:[\s.-]?\(?\d{1,4}\)?)(?:[\s.-]?\d{2,4}){2,4}(?![0-9])"
)

_CN_ID18 = re.compile(_NO_ALNUM_BEFORE + r"(?P<num>\d{6}[\s-]?\d{8}[\s-]?\d{3}[0-9Xx])(?![0-9A-Za-z])")
_CN_ID15 = re.compile(
    r"(?:身份证|证件号|ID)[^0-9\n]{0,12}?" + r"(?<![0-9])(?P<num>\d{15})(?![0-9A-Za-z])", re.IGNORECASE
)

_CARD = re.compile(
    _NO_DIGIT_BEFORE + r"(?P<num>[2-6]\d{12,18}|[2-6]\d{3}(?P<sep>[ -])\d{3,6}(?:(?P=sep)\d{3,6}){1,4})"
    r"(?![0-9])"
)

_STREET_SUFFIX = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Drive|Dr|Court|Ct|Terrace|Ter|"
    r"Boulevard|Blvd|Way|Place|Pl|Circle|Cir|Parkway|Pkwy|Highway|Hwy|Square|Sq|"
    r"Trail|Trl|Alley|Row|Crescent|Close)"
)
# A letter may sit right before the number: accessibility text glues inline
# elements together ("Avery Johnson1636 Oak Lane, ..." from a name and a <br>).
_EN_ADDRESS = re.compile(
    _NO_DIGIT_BEFORE + r"\d{1,6}[A-Za-z]?\s+"
    r"(?:(?:N|S|E|W|NE|NW|SE|SW|North|South|East|West)\.?\s+)?"
    r"(?:(?:[A-Z][a-z'-]+|\d{1,3}(?:st|nd|rd|th))\s+){1,3}" + _STREET_SUFFIX + r"\b\.?"
    r"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Fl|Floor|#)\.?\s*#?[A-Za-z0-9-]+)?"
    r"(?:,\s*(?:[A-Z][a-z]+(?:\s[A-Z][a-z]+){0,2}),\s*(?:[A-Z]{2})(?:\s+\d{5}(?:-\d{4})?)?)?"
)

_CJK = r"[\u4e00-\u9fff]"
_PROVINCES = (
    "北京市|天津市|上海市|重庆市|河北省|山西省|辽宁省|吉林省|黑龙江省|江苏省|浙江省|"
    "安徽省|福建省|江西省|山东省|河南省|湖北省|湖南省|广东省|海南省|四川省|贵州省|云南省|"
    "陕西省|甘肃省|青海省|台湾省|内蒙古自治区|广西壮族自治区|西藏自治区|宁夏回族自治区|"
    "新疆维吾尔自治区|香港特别行政区|澳门特别行政区"
)
_CITY = rf"{_CJK}{{2,4}}?(?:市|自治州|州|盟|地区)"
_DISTRICT = rf"{_CJK}{{1,3}}?(?:区|县|旗)"
_ADMIN = rf"(?:{_PROVINCES})?(?:{_CITY})?(?:{_DISTRICT})?(?:{_CJK}{{1,4}}?(?:镇|乡|街道))?"
_ROAD = rf"{_CJK}(?:{_CJK}|\d){{0,9}}?(?:大道|大街|路|街|道|巷|弄|胡同)"
_NUMBER = r"\d{1,5}(?:-\d{1,5})?号"
_UNIT = r"(?:\d{1,4}(?:栋|幢|座|号楼))?(?:\d{1,3}单元)?(?:\d{1,4}(?:室|层|楼))?"
_COMMUNITY = rf"{_CJK}{{1,8}}?(?:村|小区|花园|公寓|大厦|苑)"
_ZH_ADDRESS = re.compile(
    rf"(?<![0-9]){_ADMIN}(?:{_ROAD}{_NUMBER}(?:{_COMMUNITY})?{_UNIT}"
    rf"|{_COMMUNITY}(?:\d{{1,4}}(?:栋|幢|座|号楼|号|组)){_UNIT})"
)
# A Chinese match can start early (no word boundaries): an address starts at its
# province when it names one, else after an address keyword, else after
# characters that are never part of a place name.
_ZH_PROVINCE = re.compile(_PROVINCES)
_ZH_ADMIN_HEAD = re.compile(rf"(?:{_CITY}|{_DISTRICT})")
_ZH_KEYWORD_LEAD = re.compile(r"^.*(?:地址|住址|地点|位于|住在|寄到|送到|搬到|自提|收件)[是为在：:]?")
_ZH_LEAD = re.compile(r"^[是在于到往至为的址住寄送收件货家我你他她请地点：]+")

_PROVINCE_CODES = {
    11,
    12,
    13,
    14,
    15,
    21,
    22,
    23,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
    41,
    42,
    43,
    44,
    45,
    46,
    50,
    51,
    52,
    53,
    54,
    61,
    62,
    63,
    64,
    65,
    71,
    81,
    82,
}
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


# ---------------------------------------------------------------- validators
def _digits(s: str) -> str:
    return re.sub(r"\D", "", s)


def _plausible_birth(yyyymmdd: str) -> bool:
    try:
        born = _dt.date(int(yyyymmdd[:4]), int(yyyymmdd[4:6]), int(yyyymmdd[6:8]))
    except ValueError:
        return False
    return _dt.date(1900, 1, 1) <= born <= _dt.date.today()


def valid_cn_id(value: str) -> bool:
    """An 18-character resident ID: province code, birth date and check digit."""
    v = re.sub(r"[\s-]", "", value).upper()
    if len(v) != 18 or not v[:17].isdigit() or int(v[:2]) not in _PROVINCE_CODES:
        return False
    if not _plausible_birth(v[6:14]):
        return False
    total = sum(int(d) * w for d, w in zip(v[:17], _ID_WEIGHTS))
    return _ID_CHECK[total % 11] == v[17]


def _valid_cn_id15(v: str) -> bool:
    return int(v[:2]) in _PROVINCE_CODES and _plausible_birth("19" + v[6:12])


def luhn_valid(value: str) -> bool:
    digits = _digits(value)
    if not digits:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d)
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _valid_card(raw: str) -> bool:
    digits = _digits(raw)
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    # Grouped numbers use one separator kind, in groups of 4 (or 4-6-5 / 4-6-4).
    seps = set(re.findall(r"[ -]", raw))
    if len(seps) > 1:
        return False
    if seps:
        groups = [len(g) for g in re.split(r"[ -]", raw)]
        if groups[0] != 4 or any(g < 3 or g > 6 for g in groups[1:]):
            return False
    return luhn_valid(digits)


# ---------------------------------------------------------------- detection
def _candidates(text: str) -> list[PiiMatch]:
    out: list[PiiMatch] = []

    def add(kind: str, start: int, end: int) -> None:
        out.append(PiiMatch(kind, start, end, text[start:end]))

    for m in _EMAIL.finditer(text):
        add("email", m.start(), m.end())
    for m in _CN_ID18.finditer(text):
        if valid_cn_id(m.group("num")):
            add("cn_id", m.start("num"), m.end("num"))
    for m in _CN_ID15.finditer(text):
        if _valid_cn_id15(m.group("num")):
            add("cn_id", m.start("num"), m.end("num"))
    for m in _CARD.finditer(text):
        raw = m.group("num")
        # A grouped number may run into a following number: drop trailing groups.
        while raw and not _valid_card(raw):
            cut = max(raw.rfind(" "), raw.rfind("-"))
            raw = raw[:cut] if cut > 0 else ""
        if raw:
            add("bank_card", m.start("num"), m.start("num") + len(raw))
    for rx in (_CN_MOBILE, _CN_LANDLINE_SEP, _NANP, _INTL):
        for m in rx.finditer(text):
            add("phone", m.start(), m.end())
    for m in _CN_LANDLINE_BARE.finditer(text):
        add("phone", m.start("num"), m.end("num"))
    for m in _EN_ADDRESS.finditer(text):
        add("address", m.start(), m.end())
    for m in _ZH_ADDRESS.finditer(text):
        start = m.start() + _zh_lead_length(m.group(0))
        if m.end() - start >= 4:
            add("address", start, m.end())
    return out


def _zh_lead_length(span: str) -> int:
    province = _ZH_PROVINCE.search(span)
    if province:
        return province.start()
    keyword = _ZH_KEYWORD_LEAD.match(span)
    cut = keyword.end() if keyword else 0
    # The first start from which the span still parses with a city or district.
    for k in range(cut, len(span) - 3):
        if _ZH_ADMIN_HEAD.match(span, k) and _ZH_ADDRESS.fullmatch(span, k):
            cut = k
            break
    lead = _ZH_LEAD.match(span[cut:])
    return cut + (lead.end() if lead else 0)


def find_pii(text: str) -> list[PiiMatch]:
    """Non-overlapping personal-data matches in `text`, in order of position."""
    if not text:
        return []
    cands = sorted(_candidates(text), key=lambda c: (-(c.end - c.start), _PRIORITY[c.kind], c.start))
    chosen: list[PiiMatch] = []
    for c in cands:
        if all(c.end <= k.start or c.start >= k.end for k in chosen):
            chosen.append(c)
    return sorted(chosen, key=lambda c: c.start)


def scrub_text(text: str) -> tuple[str, list[PiiMatch]]:
    """`text` with every match replaced by its kind's placeholder, and the matches."""
    matches = find_pii(text)
    if not matches:
        return text, []
    parts, pos = [], 0
    for m in matches:
        parts.append(text[pos : m.start])
        parts.append(PLACEHOLDERS[m.kind])
        pos = m.end
    parts.append(text[pos:])
    return "".join(parts), matches


def _scrub_value(value: Any, found: list[PiiMatch], scrub=scrub_text) -> Any:
    if isinstance(value, str):
        new, ms = scrub(value)
        found.extend(ms)
        return new
    if isinstance(value, list):
        return [_scrub_value(v, found, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_value(v, found, scrub) for k, v in value.items()}
    return value


def scrub_task(task: Task, surrogates=None) -> tuple[Task, list[PiiMatch]]:
    """A copy of `task` with its instruction and string parameters scrubbed: each value
    replaced by its surrogate (a filters.pii_surrogate.Surrogates) or, without one,
    by its kind's placeholder."""
    found: list[PiiMatch] = []
    scrub = scrub_text if surrogates is None else surrogates.scrub
    instruction = _scrub_value(task.instruction, found, scrub)
    params = _scrub_value(task.params, found, scrub)
    if not found:
        return task, []
    return task.model_copy(update={"instruction": instruction, "params": params}), found
