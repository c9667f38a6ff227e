"""OCR blur of personal data on screenshots without a tree: recall (EN, ZH) and throughput.

The sandbox's planted values (sandbox/planted_pii.planted_for: emails, phones,
resident IDs, cards, addresses) are drawn with PIL and Noto Sans CJK into
screenshots that have no accessibility tree and no elements (as most imports
ship them): rows of "label: value", values inside sentences, and distractor
rows (prices, order numbers, dates); sizes 14-24 px, dark on light and light
on dark, desktop 1280x800 and phone 412x915. Each screenshot is scrubbed as
curation scrubs real data (filters.pii_blur.scrub_step with Surrogates and the OCR
engine). A planted value counts as caught when the blurred boxes cover at
least 90% of its drawn box. Throughput: OCR scrubs per second against the
a11y-only scrub of the same screenshots given a tree that boxes every row
(what a crawl records), measured in the same run.

    .venv/bin/python benchmarks/pii_ocr.py [smoke|quick|full]
"""

from __future__ import annotations

import io
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, pick  # noqa: E402

FONT = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
SIZES = {"smoke": {"screens": 2}, "quick": {"screens": 8}, "full": {"screens": 24}}
LABELS = {
    "en": {
        "email": ["Email", "E-mail", "Contact"],
        "phone": ["Phone", "Mobile", "Tel"],
        "cn_id": ["ID number", "ID"],
        "bank_card": ["Card", "Card number"],
        "address": ["Address", "Ship to", "Home"],
    },
    "zh": {
        "email": ["邮箱", "电子邮件"],
        "phone": ["电话", "手机", "联系电话"],
        "cn_id": ["身份证", "身份证号"],
        "bank_card": ["银行卡", "卡号"],
        "address": ["地址", "收货地址", "住址"],
    },
}
SENTENCES = {
    "en": ["Please send the invoice to {v} today.", "Reach me at {v} after 5pm."],
    "zh": ["请把发票寄到{v}，谢谢。", "有问题请联系{v}。"],
}
DISTRACTORS = {
    "en": [
        "Order #20240315001 shipped",
        "Price $19.99 (save 20%)",
        "Delivered on 2024-03-15 at 14:30",
        "3 items, 12 reviews, 4.5 stars",
    ],
    "zh": ["订单号：202403151234567", "¥2,499.00 包邮", "2024年3月15日 18:45 送达", "已售 12000+ 件"],
}
COVER = 0.9


def planted_values(lang: str, n: int, seed: int = 0) -> list[dict]:
    """Distinct planted values of every sandbox app (kind, value), shuffled."""
    from sandbox.apps import APPS
    from sandbox.planted_pii import planted_for

    seen, out = set(), []
    for s in range(seed, seed + max(3, n)):
        for app in sorted(APPS):
            for p in planted_for(app, lang, s):
                if p["value"] not in seen:
                    seen.add(p["value"])
                    out.append({"kind": p["kind"], "value": p["value"]})
    random.Random(f"{lang}-{seed}").shuffle(out)
    return out


def render(lang: str, values: list[dict], rng: random.Random, phone: bool):
    """(PNG bytes, [(value, kind, (x0, y0, x1, y1))], rows as (text, box)) for one screen."""
    from PIL import Image, ImageDraw, ImageFont

    w, h = (412, 915) if phone else (1280, 800)
    dark = rng.random() < 0.3
    bg, fg = ((32, 33, 36), (232, 234, 237)) if dark else ((255, 255, 255), (32, 33, 36))
    img = Image.new("RGB", (w, h), bg)
    d = ImageDraw.Draw(img)
    drawn, rows, y = [], [], 16
    d.rectangle((0, 0, w, 48), fill=(26, 115, 232))
    d.text(
        (16, 12),
        "Account" if lang == "en" else "我的账户",
        fill=(255, 255, 255),
        font=ImageFont.truetype(FONT, 20, index=2),
    )
    y = 64
    items = list(values) + [None] * rng.randint(1, 3)
    rng.shuffle(items)
    for item in items:
        size = rng.choice([14, 16, 18, 20, 24] if not phone else [14, 16, 18])
        font = ImageFont.truetype(FONT, size, index=2)
        x = 16 if phone else rng.choice([24, 40, 320])
        if item is None:
            text, pre = rng.choice(DISTRACTORS[lang]), None
        else:
            v = item["value"]
            if rng.random() < 0.25:
                sentence = rng.choice(SENTENCES[lang])
                pre = sentence.split("{v}")[0]
                text = sentence.replace("{v}", v)
            else:
                sep = ": " if lang == "en" else "："
                pre = rng.choice(LABELS[lang][item["kind"]]) + sep
                text = pre + v
        box = d.textbbox((x, y), text, font=font)
        if box[2] > w - 8:  # too wide for this screen: a smaller font
            font = ImageFont.truetype(FONT, 12, index=2)
            box = d.textbbox((x, y), text, font=font)
        if box[3] > h - 8:
            break
        d.text((x, y), text, fill=fg, font=font)
        rows.append((text, box))
        if item is not None:
            start = x + d.textlength(pre, font=font)
            vbox = d.textbbox((start, y), item["value"], font=font)
            drawn.append((item["value"], item["kind"], vbox))
        y = box[3] + rng.randint(14, 30)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue(), drawn, rows, (w, h)


def covered(box, blur_boxes) -> float:
    """The share of `box` (pixels) that the union of `blur_boxes` (pixels) covers."""
    import numpy as np

    x0, y0, x1, y1 = (int(round(c)) for c in box)
    if x1 <= x0 or y1 <= y0:
        return 1.0
    mask = np.zeros((y1 - y0, x1 - x0), bool)
    for bx0, by0, bx1, by1 in blur_boxes:
        a, b = max(int(bx0) - x0, 0), max(int(by0) - y0, 0)
        c, e = min(int(np.ceil(bx1)) - x0, x1 - x0), min(int(np.ceil(by1)) - y0, y1 - y0)
        if c > a and e > b:
            mask[b:e, a:c] = True
    return float(mask.mean())


def _step(image: bytes, size, tree: str = "", tid: str = "bench"):
    from schemas.actions import Action
    from schemas.records import Step

    return Step(
        trajectory_id=tid,
        index=0,
        screenshot="",
        image_format="png",
        width=size[0],
        height=size[1],
        a11y_tree=tree,
        action=Action.tap(0.5, 0.5),
    )


def _tree(rows, size) -> str:
    import json

    return "\n".join(
        f"- text {json.dumps(t, ensure_ascii=False)} [box={b[0]},{b[1]},{b[2] - b[0]},{b[3] - b[1]}]"
        for t, b in rows
    )


def measure(lang: str, screens: int, engine=None) -> dict:
    """Recall and timings of the OCR scrub (and the a11y-only scrub) on `screens` screens."""
    from filters.pii_blur import scrub_step
    from filters.pii_ocr import default_engine
    from filters.pii_surrogate import Surrogates

    engine = engine or default_engine()
    engine.lines(render(lang, [], random.Random(0), False)[0])  # load the models first
    rng = random.Random(f"screens-{lang}")
    values = planted_values(lang, screens)
    per = 7
    caught = total = 0
    misses, ocr_s, a11y_s = [], 0.0, 0.0
    for k in range(screens):
        chunk = values[(k * per) % len(values) : (k * per) % len(values) + per]
        png, drawn, rows, size = render(lang, chunk, rng, phone=k % 3 == 2)
        t0 = time.perf_counter()
        res = scrub_step(_step(png, size), png, surrogates=Surrogates(f"bench-{k}"), ocr=engine)
        ocr_s += time.perf_counter() - t0
        boxes = [
            (r["box"][0] * size[0], r["box"][1] * size[1], r["box"][2] * size[0], r["box"][3] * size[1])
            for r in res.records
            if r.get("box_source") == "ocr"
        ]
        for value, kind, vbox in drawn:
            total += 1
            share = covered(vbox, boxes)
            if share >= COVER:
                caught += 1
            else:
                misses.append({"kind": kind, "value": value, "covered": round(share, 2)})
        t0 = time.perf_counter()
        scrub_step(_step(png, size, _tree(rows, size)), png, surrogates=Surrogates(f"bench-{k}"))
        a11y_s += time.perf_counter() - t0
    return {
        "lang": lang,
        "screens": screens,
        "values": total,
        "caught": caught,
        "recall": caught / total if total else None,
        "misses": misses[:10],
        "ocr_s": ocr_s,
        "a11y_s": a11y_s,
    }


def run(mode: str) -> list[Row]:
    n = pick(mode, SIZES)["screens"]
    rows, timing = [], {"ocr_s": 0.0, "a11y_s": 0.0, "screens": 0}
    for lang in ("en", "zh"):
        m = measure(lang, n)
        for k in ("ocr_s", "a11y_s", "screens"):
            timing[k] += m[k]
        rows.append(
            Row(
                "pii_ocr",
                f"OCR blur recall on planted values, {lang.upper()} "
                f"(no tree, {m['screens']} screens, {m['values']} values)",
                m["recall"],
                1.0,
                "share",
                "every planted value",
                target=">= 0.95",
                note=f"caught = blur covers >= {COVER:.0%} of the drawn value; misses {m['misses'][:3]}",
                extra={"misses": m["misses"]},
            )
        )
    ocr_rate = timing["screens"] / timing["ocr_s"]
    a11y_rate = timing["screens"] / timing["a11y_s"]
    rows.append(
        Row(
            "pii_ocr",
            "PII scrub with OCR (RapidOCR PP-OCRv4 ONNX, CPU): screenshots/s",
            ocr_rate,
            a11y_rate,
            "screens/s",
            "a11y-box scrub of the same screens",
            note=f"{timing['screens']} screens, 1280x800 and 412x915; OCR runs only on "
            f"screens without a tree",
        )
    )
    return rows


if __name__ == "__main__":
    for r in run(sys.argv[1] if len(sys.argv) > 1 else "quick"):
        print(f"{r.name}: {r.figure} vs {r.baseline} {r.unit} (ratio {r.ratio}) {r.note}")
