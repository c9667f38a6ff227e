"""trajforge.publish.shards.ShardTarWriter writes the bytes webdataset's TarWriter writes
(the reference), and its sha256 and size are those of the file."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest
import webdataset as wds

from trajforge.publish.shards import ShardTarWriter, iter_tar_samples


def samples() -> list[dict]:
    out = []
    # Member sizes around the 512-byte block: empty, one byte short, exact, one over.
    for i, size in enumerate([0, 511, 512, 513, 150_000, 3]):
        out.append(
            {
                "__key__": f"traj-{i:03d}_s{i:04d}",
                "png": bytes([i]) * size,
                "json": json.dumps({"step": i, "text": "点击 Go"}, ensure_ascii=False).encode(),
            }
        )
    out.append({"__key__": "t_s0009", "json": b'{"as": "bytes"}', "jpg": bytearray(b"\xff\xd8" * 300)})
    out.append({"__key__": "k" * 120 + "_s0000", "json": b"{}"})  # past ustar's 100-char name
    out.append({"__key__": "clé_s0001", "webp": b"RIFF" * 10})  # not ASCII: tarfile's header
    return out


def reference_tar(records: list[dict]) -> bytes:
    buf = io.BytesIO()
    writer = wds.TarWriter(buf, encoder=False, mtime=0, mode=0o644, user="trajforge", group="trajforge")
    for r in records:
        writer.write(dict(r))
    writer.close()
    return buf.getvalue()


@pytest.mark.parametrize("hash_batch", [ShardTarWriter.HASH_BATCH, 700])
def test_same_bytes_as_webdataset_and_the_sha256_of_the_file(hash_batch):
    records = samples()
    buf = io.BytesIO()
    writer = ShardTarWriter(buf)
    writer.HASH_BATCH = hash_batch  # 700: many hand-overs to the hashing thread
    payload = [writer.write(r) for r in records]
    digest = writer.close()
    assert payload == [sum(len(v) for k, v in r.items() if k != "__key__") for r in records]
    data = buf.getvalue()
    assert data == reference_tar(records)
    assert digest == hashlib.sha256(data).hexdigest() and writer.size == len(data)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert all(m.mtime == 0 and m.mode == 0o644 and m.uname == "trajforge" for m in tar)


def test_written_shard_reads_back(tmp_path):
    path = tmp_path / "train-000000.tar"
    with open(path, "wb") as f:
        writer = ShardTarWriter(f)
        for r in samples()[:4]:
            writer.write(r)
        writer.close()
    back = list(iter_tar_samples(path))
    assert [k for k, _ in back] == [f"traj-{i:03d}_s{i:04d}" for i in range(4)]
    assert back[3][1]["png"] == bytes([3]) * 513 and back[3][1]["json"]["text"] == "点击 Go"


@pytest.mark.parametrize("value", [{"not": "encoded"}, "text"])
def test_a_member_that_is_not_bytes_is_refused_with_its_key(value):
    writer = ShardTarWriter(io.BytesIO())
    with pytest.raises(ValueError, match=f"sample k_s0000: member json is {type(value).__name__}"):
        writer.write({"__key__": "k_s0000", "json": value})
    writer.abort()
