"""ms-swift's own Qwen2-VL template encodes the converted rows as its trainer will
(.venv-trainers, which has torchvision and qwen_vl_utils): the labels decode to the set's
answer, the image is fed at the frame the answer's pixels are in, and the grounding
`objects` put the same box where a lab's prompt uses `<ref-object>` / `<bbox>`."""

from __future__ import annotations

import json
import re

import pytest

from schemas.model_profiles import model_profile
from synthesis.grounding_writer import write_grounding_set
from synthesis.set_options import SetOptions
from tests.convert.trainer_venvs import ROOT, TRAINERS, run_in_venv
from tests.synthesis.grounding_fixtures import build_grounding_store
from trajforge.convert import convert

ENCODE = """
import json, os, sys
from pathlib import Path
from PIL import Image
full = Path(sys.argv[1])
from swift import get_processor, get_template, load_dataset
proc = get_processor(str(full), model_type="qwen2_vl")
tpl = get_template(proc, template_type="qwen2_vl")
tpl.set_mode("train")
patch = proc.image_processor.patch_size
out = {}
for path in sys.argv[2:]:
    rows, _ = load_dataset([path], split_dataset_ratio=0.0)
    got = []
    for row in rows:
        enc = tpl.encode(dict(row))
        labels = proc.tokenizer.decode([t for t in enc["labels"] if t != -100])
        _, gh, gw = (int(x) for x in enc["image_grid_thw"][0])
        stored = Image.open(Path(os.environ["ROOT_IMAGE_DIR"]) / row["images"][0]["path"]).size
        r = {"labels": labels, "fed": [gw * patch, gh * patch], "stored": list(stored)}
        if row.get("objects") and row["objects"].get("ref"):  # the placeholders a lab writes
            msgs = [dict(m) for m in row["messages"]]
            msgs[1]["content"] = "<image>Find the <ref-object>."
            msgs[2]["content"] = "<bbox>"
            enc = tpl.encode({**dict(row), "messages": msgs})
            r["placeholder_labels"] = proc.tokenizer.decode([t for t in enc["labels"] if t != -100])
            r["placeholder_prompt"] = proc.tokenizer.decode(enc["input_ids"])
        got.append(r)
    out[path] = got
print(json.dumps(out))
"""

END = "<|im_end|>\n"


def _profile_set(tmp_path, profile: str):
    b = build_grounding_store(tmp_path / f"curated-{profile}")
    write_grounding_set(
        b.store, tmp_path / f"set-{profile}", options=SetOptions(profile, splits=(("train", 1.0),))
    )
    return tmp_path / f"set-{profile}"


def _rows(out):
    return [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_swift_template_trains_on_the_answer_in_the_frame_it_feeds(
    reasoning_dir, tmp_path, full_checkpoint, monkeypatch
):
    """Reasoning set (qwen2.5-vl: pixels of the frame) and a grounding set written for
    qwen3-vl (0-1000 grid) through swift's template; MAX_PIXELS is the profile's cap."""
    outs = {"reasoning": tmp_path / "r", "grounding": tmp_path / "g"}
    convert(reasoning_dir, "swift", outs["reasoning"])
    convert(_profile_set(tmp_path, "qwen3-vl"), "swift", outs["grounding"])
    files = {name: str(next(out.glob("train.jsonl"))) for name, out in outs.items()}
    results = {}
    for name, out in outs.items():  # images are relative: swift opens them from ROOT_IMAGE_DIR
        monkeypatch.setenv("ROOT_IMAGE_DIR", str(out))
        monkeypatch.setenv("MAX_PIXELS", str(model_profile("qwen2.5-vl").max_pixels))
        results[name] = run_in_venv(TRAINERS, ENCODE, ROOT, str(full_checkpoint), files[name], timeout=300)[
            files[name]
        ]

    reasoning, want = results["reasoning"], _rows(outs["reasoning"])
    assert len(reasoning) == len(want) > 0
    for got, row in zip(reasoning, want):
        answer = row["messages"][2]["content"]
        assert got["labels"] == answer + END  # exactly the answer is trained on
        assert got["fed"] == got["stored"]  # pixels of the answer = pixels the model sees

    grounding, want = results["grounding"], _rows(outs["grounding"])
    assert len(grounding) == len(want) > 0
    for got, row in zip(grounding, want):
        assert got["labels"] == row["messages"][2]["content"] + END
        grid_box = json.loads(row["messages"][2]["content"])["bbox_2d"]  # qwen3-vl: 0-1000
        m = re.fullmatch(
            r"<\|box_start\|>\((\d+),(\d+)\),\((\d+),(\d+)\)<\|box_end\|>" + re.escape(END),
            got["placeholder_labels"],
        )
        assert m, got["placeholder_labels"]
        from_objects = [int(v) for v in m.groups()]  # swift's norm1000 from objects' norm1 box
        assert max(abs(a - b) for a, b in zip(from_objects, grid_box)) <= 1, (from_objects, grid_box)
        ref = row["objects"]["ref"][0]
        assert f"<|object_ref_start|>{ref}<|object_ref_end|>" in got["placeholder_prompt"]
