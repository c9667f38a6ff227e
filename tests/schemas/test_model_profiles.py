"""Model profiles: smart_resize against transformers' own, exact frames and points on odd
sizes (golden values), round trips, and the provenance a record and a set carry."""

from __future__ import annotations

import itertools
import re

import pytest

# The PIL image processor is the one this repo's trainer loads (no torchvision needed).
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as reference

from schemas.converters.qwen import smart_resize
from schemas.model_profiles import DEFAULT_PROFILE, PROFILES, manifest_profile, model_profile
from schemas.provenance import build_id, git_commit, pipeline_version
from schemas.records import PIPELINE_VERSION

ODD = [
    1,
    3,
    7,
    13,
    14,
    15,
    27,
    29,
    41,
    55,
    57,
    97,
    101,
    333,
    799,
    801,
    1079,
    1081,
    1279,
    1281,
    1439,
    1441,
    2339,
    2401,
    3119,
    3121,
    4097,
]
BOUNDS = [
    (28, 56 * 56, 28 * 28 * 1280),
    (28, 100 * 28 * 28, 16384 * 28 * 28),
    (32, 64 * 32 * 32, 1280 * 32 * 32),
    (28, 112 * 112, 28 * 28 * 1280),
    (28, 28 * 28 * 4, 28 * 28 * 16),
    (14, 14 * 14, 14 * 14 * 100),
]


@pytest.mark.parametrize("factor,min_pixels,max_pixels", BOUNDS)
def test_smart_resize_equals_transformers_on_odd_sizes(factor, min_pixels, max_pixels):
    n = 0
    for h, w in itertools.product(ODD, ODD):
        if max(h, w) / min(h, w) > 200:
            continue
        assert smart_resize(h, w, factor, min_pixels, max_pixels) == tuple(
            reference(h, w, factor, min_pixels, max_pixels)
        ), (h, w)
        n += 1
    assert n > 500


# Golden frames, worked by hand from the definition (and equal to transformers' above).
@pytest.mark.parametrize(
    "name,size,frame",
    [
        # 1441x3119 phone, 4.49 Mpx > 1003520: beta = sqrt(4494479/1003520) = 2.1163;
        # 1441/2.1163/28 = 24.32 -> 24*28 = 672; 3119/2.1163/28 = 52.64 -> 52*28 = 1456.
        ("qwen2.5-vl", (1441, 3119), (672, 1456)),
        ("gui-libra", (1441, 3119), (672, 1456)),
        # 1279x801: 45.68 -> 46, 28.61 -> 29 patches = 1288x812 = 1045856 > 1003520:
        # beta = 1.00963; 1279/1.00963/28 = 45.24 -> 45; 801/1.00963/28 = 28.33 -> 28.
        ("qwen2.5-vl", (1279, 801), (1260, 784)),
        # UI-TARS' bound is 12.8 Mpx: only rounding, 51.46 -> 51, 111.39 -> 111 patches.
        ("ui-tars", (1441, 3119), (1428, 3108)),
        ("ui-tars", (1279, 801), (1288, 812)),
        # Qwen3-VL, factor 32, cap 1310720: beta = sqrt(4494479/1310720) = 1.85176;
        # 1441/1.85176/32 = 24.32 -> 24*32 = 768; 3119/1.85176/32 = 52.64 -> 52*32 = 1664.
        ("qwen3-vl", (1441, 3119), (768, 1664)),
        # 1279x801: 39.97 -> 40, 25.03 -> 25 patches = 1280x800 = 1024000 <= 1310720.
        ("qwen3-vl", (1279, 801), (1280, 800)),
        # Open-AutoGLM: 97x55 is 5335 px < 112*112 = 12544: beta = sqrt(12544/5335) = 1.5334;
        # 97*1.5334/28 = 5.31 -> 6*28 = 168; 55*1.5334/28 = 3.01 -> 4*28 = 112.
        ("open-autoglm", (97, 55), (168, 112)),
        # A side under factor/2 rounds to 0 (transformers), so 0 px < 3136: scaled up from the
        # true size, beta = sqrt(3136/13013) = 0.49091; 1001*beta/28 = 17.55 -> 18*28 = 504,
        # 13*beta/28 = 0.23 -> 28 (rounding 13 up to one patch first would give 1008x28).
        ("qwen2.5-vl", (1001, 13), (504, 28)),
    ],
)
def test_golden_frames(name, size, frame):
    assert model_profile(name).frame(*size) == frame
    w, h = size
    assert (
        tuple(
            reversed(
                reference(
                    h,
                    w,
                    model_profile(name).factor,
                    model_profile(name).min_pixels,
                    model_profile(name).max_pixels,
                )
            )
        )
        == frame
    )


@pytest.mark.parametrize(
    "name,point,size,want",
    [
        # pixels of the 672x1456 frame: 0.5*672 = 336, 0.2501*1456 = 364.15 -> 364
        ("qwen2.5-vl", (0.5, 0.2501), (1441, 3119), [336, 364]),
        # round half to even on the frame: 0.25*1260 = 315.0, 0.5*784 = 392; 0.0625*1260 = 78.75 -> 79
        ("qwen2.5-vl", (0.0625, 0.5), (1279, 801), [79, 392]),
        ("ui-tars", (0.999, 0.001), (1441, 3119), [1427, 3]),  # 1426.57 -> 1427; 3.108 -> 3
        ("qwen3-vl", (0.5004, 0.9996), (1441, 3119), [500, 1000]),  # 0-1000 of the image
        ("open-autoglm", (0.5004, 0.9996), (1441, 3119), [500, 999]),  # 0-999: clamped
        ("open-autoglm", (0.0005, 0.0015), (97, 55), [0, 2]),  # 0.5 -> 0 and 1.5 -> 2: ties to even
    ],
)
def test_golden_points(name, point, size, want):
    p = model_profile(name)
    assert p.to_model(*point, *size) == want
    x, y = p.from_model(want, *size)
    # Back to normalised within half a unit of the frame (one unit at a clamped edge).
    unit = (1 / p.frame(*size)[0], 1 / p.frame(*size)[1]) if p.coords == "pixels" else (1e-3, 1e-3)
    assert abs(x - point[0]) <= unit[0] and abs(y - point[1]) <= unit[1]


def test_every_profile_round_trips_points_on_odd_sizes():
    for p, (w, h) in itertools.product(PROFILES.values(), [(1441, 3119), (1279, 801), (97, 55)]):
        fw, fh = p.frame(w, h)
        assert fw % p.factor == 0 and fh % p.factor == 0
        assert p.frame(fw, fh) == (fw, fh)  # the trainer's resize leaves a framed image alone
        for x, y in [(0.0, 0.0), (0.123, 0.987), (0.5, 0.5), (1.0, 1.0)]:
            bx, by = p.from_model(p.to_model(x, y, w, h), w, h)
            tol = (1 / min(fw, fh) if p.coords == "pixels" else 1e-3) + 1e-9
            assert abs(bx - x) <= tol and abs(by - y) <= tol


def test_profiles_by_name_alias_and_manifest():
    assert model_profile(None).name == DEFAULT_PROFILE == "qwen2.5-vl"
    assert model_profile("qwen25vl").name == "qwen2.5-vl"
    assert model_profile("autoglm").name == "open-autoglm"
    p = model_profile("ui-tars")
    assert model_profile(p.describe()) == p
    assert manifest_profile({"model_profile": p.describe()}) == p
    assert manifest_profile({}) is None
    with pytest.raises(ValueError, match="unknown model profile"):
        model_profile("llava")


def test_provenance_is_real():
    assert pipeline_version() not in ("", "unknown")
    commit = git_commit()
    assert commit == "unknown" or re.fullmatch(r"[0-9a-f]{40}", commit)
    assert PIPELINE_VERSION == build_id()
    if commit != "unknown":
        assert PIPELINE_VERSION == f"{pipeline_version()}+g{commit[:12]}"
