"""One REST API's upload of the same FLAC, as the drain and slow-upload tests post it: how to
post the audio, read its transcript, and check a 503 in the API's own error shape."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx

KEY = "drain-key"  # the servers' API key, which every request sends
FLAC = (Path(__file__).resolve().parents[2] / "data" / "jfk.flac").read_bytes()
RETRY_AFTER = 7


@dataclass(frozen=True)
class Api:
    """One REST API's upload: how to post the audio and read its answer."""

    name: str
    path: str

    def request(self, url: str) -> httpx.Request:
        if self.name == "openai":
            files = {"file": ("jfk.flac", FLAC, "audio/flac")}
            data = {"model": "whisper-1"}
            headers = {"Authorization": f"Bearer {KEY}"}
            return httpx.Request("POST", url + self.path, files=files, data=data, headers=headers)
        headers = {"Authorization": f"Token {KEY}"}
        return httpx.Request("POST", url + self.path, content=FLAC, headers=headers)

    def transcript(self, answer: httpx.Response) -> str:
        body = answer.json()
        if self.name == "openai":
            return str(body["text"])
        return str(body["results"]["channels"][0]["alternatives"][0]["transcript"])

    def assert_unavailable(self, answer: httpx.Response) -> None:
        """503 + Retry-After, in the API's own error shape."""
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == str(RETRY_AFTER)
        body = answer.json()
        if self.name == "openai":
            assert body["error"]["code"] == "service_unavailable"
            assert body["error"]["type"] == "server_error" and body["error"]["message"]
        else:
            assert body["err_code"] == "SERVICE_UNAVAILABLE" and body["err_msg"]
            assert body["request_id"]
