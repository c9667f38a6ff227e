"""Is a text Chinese? The share of CJK characters among its letters.

Used by the Chinese GUI set: a zh task's thought must be written in Chinese,
not English with a Chinese button name in it. Text inside quotation marks is
left out by default: quoted element names and typed values are page data, so
they say nothing about the language the thought was written in.
"""

from __future__ import annotations

import re

# CJK Unified Ideographs (+ extension A, compatibility ideographs).
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# “…”, "…", 「…」, 『…』 and '…' when it wraps a whole name (not an apostrophe in "don't").
_QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|「[^」]*」|『[^』]*』|(?<![A-Za-z])'[^']*'(?![A-Za-z])")


def cjk_ratio(text: str, ignore_quoted: bool = True) -> float:
    """CJK characters / letters (str.isalpha); 0.0 for a text without letters."""
    if ignore_quoted:
        text = _QUOTED.sub(" ", text)
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for c in letters if _CJK.match(c)) / len(letters)


def is_chinese(text: str, min_ratio: float = 0.5, ignore_quoted: bool = True) -> bool:
    """True when at least `min_ratio` of the letters are CJK.

    A Latin word counts one per letter, a Chinese character once: "点击按钮 OK"
    is 4 of 6. 0.5 passes natural Chinese with a few Latin names and fails an
    English sentence with a Chinese word in it.
    """
    if not 0.0 <= min_ratio <= 1.0:
        raise ValueError(f"min_ratio={min_ratio} is not in [0, 1]")
    return cjk_ratio(text, ignore_quoted) >= min_ratio and bool(text.strip())
