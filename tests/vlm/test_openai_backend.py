"""OpenAIBackend against a real local HTTP server; the API key never leaks."""

from __future__ import annotations

import logging
import pickle

import pytest

from trajforge.vlm.backend_config import backend_from_config
from trajforge.vlm.backends import VLMRequest
from trajforge.vlm.messages import image_part, text_part
from trajforge.vlm.openai_backend import OpenAIBackend

from .helpers import FakeOpenAIServer, decode_data_url, image_urls, screenshot, user_texts

KEY = "sk-test-7f3a9c-do-not-leak"


def echo(body: dict) -> list[str]:
    """Answers 'echo:<text>' so each answer names its request; n choices."""
    return [f"echo:{user_texts(body)}#{i}" for i in range(body.get("n", 1))]


def test_requests_images_auth_and_order(monkeypatch, caplog):
    monkeypatch.setenv("TRAJFORGE_TEST_KEY", KEY)
    png, jpeg = screenshot(200, 120, "a"), screenshot(90, 160, "b", fmt="JPEG")
    reqs = [
        VLMRequest(
            [
                {
                    "role": "user",
                    "content": [text_part(f"q{i}")] + ([image_part(png), image_part(jpeg)] if i % 2 else []),
                }
            ],
            key=f"k{i}",
        )
        for i in range(7)
    ]
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(echo) as server:
        backend = backend_from_config(
            {
                "kind": "openai",
                "base_url": server.base_url,
                "model": "judge-7b",
                "api_key_env": "TRAJFORGE_TEST_KEY",
                "max_concurrency": 3,
            }
        )
        answers = backend.generate(reqs, 32)
        samples = backend.generate(reqs[:2], 32, temperature=0.7, n=3, seed=5)

    assert answers == [f"echo:q{i}#0" for i in range(7)]  # caller's order despite 3 threads
    assert samples == [[f"echo:q{i}#{j}" for j in range(3)] for i in range(2)]  # choices by index
    assert backend.model_id == "judge-7b"
    assert len(server.requests) == 9
    for rec in server.requests:
        assert rec["path"] == "/v1/chat/completions"
        assert rec["headers"]["authorization"] == f"Bearer {KEY}"
        assert rec["body"]["model"] == "judge-7b" and rec["body"]["max_tokens"] == 32
    first_with_images = next(r["body"] for r in server.requests if user_texts(r["body"]) == "q1")
    urls = image_urls(first_with_images)
    assert [decode_data_url(u) for u in urls] == [
        ("data:image/png;base64", png),
        ("data:image/jpeg;base64", jpeg),
    ]
    assert server.requests[-1]["body"]["n"] == 3 and server.requests[-1]["body"]["seed"] == 5

    # The key is read at call time and kept nowhere on the backend.
    assert KEY not in repr(backend) and KEY not in str(backend)
    assert KEY not in repr(vars(backend)) and KEY.encode() not in pickle.dumps(backend)
    assert "request 'k1' answered" in caplog.text  # debug logs (ours, openai's, httpx's) were captured
    assert KEY not in caplog.text


def test_server_error_names_the_request_and_not_the_key(monkeypatch):
    monkeypatch.setenv("TRAJFORGE_TEST_KEY", KEY)
    with FakeOpenAIServer(echo, status=400) as server:
        backend = OpenAIBackend(server.base_url, "judge-7b", api_key_env="TRAJFORGE_TEST_KEY", max_retries=0)
        with pytest.raises(RuntimeError, match="request 'traj-42' failed") as err:
            backend.generate([VLMRequest([{"role": "user", "content": "hi"}], key="traj-42")], 8)
    assert KEY not in str(err.value)


def test_config_refuses_a_literal_key():
    with pytest.raises(ValueError, match="api_key_env"):
        backend_from_config({"kind": "openai", "base_url": "http://x/v1", "model": "m", "api_key": KEY})
