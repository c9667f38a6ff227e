"""Shared by the VLM and judge tests: the tiny model (built once per process),
PIL-made screenshots, and a real local OpenAI-compatible HTTP server."""

from __future__ import annotations

import atexit
import base64
import io
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from PIL import Image, ImageDraw

# Set by tests/conftest.py in the pytest process that starts the xdist workers: a
# directory they share for the session, so the tiny model is built once, not per worker.
SHARED_DIR_ENV = "TRAJFORGE_TEST_SHARED_DIR"


@cache
def tiny_model_path() -> Path:
    """The tiny model, built once per test session: under $TRAJFORGE_DATA/models when
    that is set (kept between runs), else in the session's shared directory (one
    worker builds under a lock, the others wait and reuse it), else in a temporary
    directory of this process."""
    from trajforge.vlm.tiny import build_tiny_vlm

    if os.environ.get("TRAJFORGE_DATA"):
        return build_tiny_vlm(Path(os.environ["TRAJFORGE_DATA"]) / "models" / "tiny-qwen2vl")
    shared = os.environ.get(SHARED_DIR_ENV)
    if shared and Path(shared).is_dir():
        import fcntl

        # build_tiny_vlm replaces a directory it finds without a marker, so two
        # workers must not build at once: the second waits and finds it done.
        with open(Path(shared) / "tiny-qwen2vl.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return build_tiny_vlm(Path(shared) / "tiny-qwen2vl")
    root = Path(tempfile.mkdtemp(prefix="tiny-vlm-"))
    atexit.register(shutil.rmtree, root, True)
    return build_tiny_vlm(root / "tiny-qwen2vl")


@cache
def tiny_backend(batch_size: int = 4):
    from trajforge.vlm.transformers_backend import TransformersBackend

    return TransformersBackend(tiny_model_path(), batch_size=batch_size)


def screenshot(width: int, height: int, label: str, seed: int = 0, fmt: str = "PNG") -> bytes:
    """A small screen: a header bar, a few buttons, a label."""
    img = Image.new("RGB", (width, height), (250, 250, 250))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, width, height // 8], fill=(30 + seed * 20 % 200, 90, 160))
    for k in range(3):
        y = height // 4 + k * height // 6
        d.rectangle([width // 10, y, width // 2 + 10 * k, y + height // 12], fill=(60, 60 + 40 * k, 60))
    d.text((width // 10, height - 20), label, fill=(0, 0, 0))
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


class FakeOpenAIServer:
    """POST /v1/chat/completions on a real socket. Records each request (headers, names
    lowercased, and JSON body) and answers with `answer(body) -> list[str]` (one text per choice)."""

    def __init__(self, answer: Callable[[dict], list[str]], status: int = 200):
        self.requests: list[dict] = []
        self.answer = answer
        self.status = status
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                if self.path != "/v1/chat/completions" or outer.status != 200:
                    self._send(
                        outer.status if outer.status != 200 else 404,
                        {"error": {"message": "nope", "type": "invalid_request_error"}},
                    )
                    return
                texts = outer.answer(body)
                self._send(
                    200,
                    {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": i,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": t},
                            }
                            for i, t in reversed(list(enumerate(texts)))
                        ],  # out of order on purpose
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def user_texts(body: dict) -> str:
    """All text parts of a recorded chat body's user messages, joined."""
    out = []
    for msg in body["messages"]:
        if msg["role"] == "user":
            content = msg["content"]
            out += (
                [content] if isinstance(content, str) else [p["text"] for p in content if p["type"] == "text"]
            )
    return "\n".join(out)


def image_urls(body: dict) -> list[str]:
    return [
        p["image_url"]["url"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]


def decode_data_url(url: str) -> tuple[str, bytes]:
    head, b64 = url.split(",", 1)
    return head, base64.b64decode(b64)
