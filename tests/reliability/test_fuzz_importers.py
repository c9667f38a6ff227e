"""Fuzz: the dataset importers on mutated records, damaged bytes and bad images.

Each format's real sample file (tests/importers/samples) is mutated: records
with fields dropped, added or set to NaN, negatives, huge numbers, wrong
types; bytes truncated or replaced by invalid UTF-8. `import_path` must
never raise: each record is imported whole or quarantined with the file,
record, field and reason, and the store stays whole (conftest.check_store_whole).
The hand-picked bad records of each format are in tests/importers/.
"""

from __future__ import annotations

import io
import itertools
import json
import shutil
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajforge.importers import import_path
from trajforge.store.raw import RawStore

from .conftest import check_store_whole
from .test_fuzz_records import mutated

SAMPLES = Path(__file__).resolve().parents[1] / "importers" / "samples"
# format -> (a real sample file, the screen size its format needs when it ships no image)
FORMATS = {
    "aitz": ("aitz/GOOGLE_APPS-523638528775825151.json", None),
    "android_control": (
        "android_control/derived_uis1_android_control_train_example.first2.jsonl",
        (1080, 2400),
    ),
    "gui_odyssey": ("gui_odyssey/derived_osatlas_gui_odyssey_test.jsonl", (1080, 2400)),
    "guiact": ("guiact/quoted_native_web_multi_records.json", (1280, 720)),
    "agentnet": ("opencua_agentnet/cot_raw_example/raw_example.jsonl", (1920, 1080)),
    "mind2web": ("mind2web_and_multimodal_mind2web/seeact_query_step.truncated.json", None),
    "android_world": ("android_world/task_metadata.sample.json", None),
    "os_genesis": ("os_genesis/aw_instructions.first3.json", None),
    "autoglm": ("open_autoglm/constructed_conversation.json", None),
}
FUZZ = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_runs = itertools.count()
TRIED: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def report_tried():
    yield
    print(f"\n[fuzz importers] imports per target: {dict(sorted(TRIED.items()))}")


def records_of(path: Path) -> list:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, list) else [data]


def write_records(path: Path, records: list, as_list: bool) -> None:
    if path.suffix == ".jsonl":
        text = "\n".join(json.dumps(r, ensure_ascii=False, default=repr) for r in records) + "\n"
    else:
        text = json.dumps(records if as_list else records[0], ensure_ascii=False, default=repr)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")


def workdir(tmp_path: Path, fmt: str) -> tuple[Path, Path]:
    """A fresh folder holding a copy of the sample's folder (its images too)."""
    sample = SAMPLES / FORMATS[fmt][0]
    d = tmp_path / f"run{next(_runs)}"
    shutil.copytree(sample.parent, d / "in")
    return d, d / "in" / sample.name


def import_checked(fmt: str, file: Path, root: Path) -> dict:
    """import_path must return; every quarantined record names file, record, field, reason."""
    store = RawStore(root / "raw")
    qpath = root / "quarantine.jsonl"
    result = import_path(fmt, file, store, quarantine_path=qpath, screen_size=FORMATS[fmt][1])
    # split("\n"), not splitlines(): a record id may hold U+0085 or U+2028
    lines = [x for x in qpath.read_text(encoding="utf-8").split("\n") if x] if qpath.exists() else []
    assert len(lines) == result.quarantined
    for line in lines:
        q = json.loads(line)
        assert q["source"] and q["record"] is not None and q["field"] and q["reason"], q
    if (store.root / result.collection).is_dir() and result.tasks_path is None:
        check_store_whole(store, result.collection)
    TRIED[fmt] = TRIED.get(fmt, 0) + 1
    return {"imported": result.imported, "quarantined": result.quarantined}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@FUZZ
@given(data=st.data())
def test_mutated_records_import_or_are_quarantined(tmp_path, fmt, data):
    d, file = workdir(tmp_path, fmt)
    records = records_of(file)
    as_list = isinstance(json.loads(file.read_text()), list) if file.suffix == ".json" else True
    i = data.draw(st.integers(0, len(records) - 1))
    records[i] = data.draw(mutated([records[i]]))
    write_records(file, records, as_list)
    import_checked(fmt, file, d)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@FUZZ
@given(data=st.data())
def test_damaged_bytes_import_or_are_quarantined(tmp_path, fmt, data):
    d, file = workdir(tmp_path, fmt)
    raw = file.read_bytes()
    at = data.draw(st.integers(0, len(raw)))
    how = data.draw(st.sampled_from(["truncate", "invalid_utf8", "garble"]))
    if how == "truncate":
        raw = raw[:at]
    elif how == "invalid_utf8":
        raw = (
            raw[:at]
            + data.draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\xfe\xff"]))
            + raw[at:]
        )
    else:
        raw = raw[:at] + data.draw(st.binary(min_size=1, max_size=16)) + raw[at + 16 :]
    file.write_bytes(raw)
    import_checked(fmt, file, d)


def png_header(w: int, h: int) -> bytes:
    """A PNG whose header claims w x h pixels, with no pixel data."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def _truncated(fmt: str, cut: float) -> bytes:
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    px = np.random.default_rng(1).integers(0, 256, (300, 200, 3), dtype=np.uint8)
    Image.fromarray(px).save(buf, format=fmt)
    data = buf.getvalue()
    return data[: int(len(data) * cut)]


BAD_IMAGES = {
    "zero_bytes": b"",
    "zero_size_header": png_header(0, 0),
    "huge_header_30000x30000": png_header(30000, 30000),  # a decompression bomb
    "truncated_png_half": _truncated("PNG", 0.5),
    "truncated_png_no_end": _truncated("PNG", 0.999),
    "truncated_jpeg": _truncated("JPEG", 0.9),
    "random_bytes": bytes(range(256)) * 4,
    "text": "这不是图片 not an image".encode(),
}


@pytest.mark.parametrize("name", sorted(BAD_IMAGES))
def test_a_bad_screenshot_quarantines_its_episode(tmp_path, name):
    d, file = workdir(tmp_path, "aitz")
    [image] = list(file.parent.glob("*.png"))
    image.write_bytes(BAD_IMAGES[name])
    result = import_checked("aitz", file, d)
    assert result == {"imported": 0, "quarantined": 1}
    [q] = [json.loads(x) for x in (d / "quarantine.jsonl").read_text().splitlines()]
    assert q["field"].endswith("image") and "not a readable image" in q["reason"], q
    assert q["source"] == str(file)
    TRIED["bad_images"] = TRIED.get("bad_images", 0) + 1
