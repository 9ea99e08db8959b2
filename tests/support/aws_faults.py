"""Fault injection for boto3 clients, at the HTTP boundary (botocore's `before-send` event).

- `throttle`: the next N requests of an operation get DynamoDB's ThrottlingException (or S3's
  503 SlowDown) without reaching the server.
- `lose`: the next N requests DO reach the server (they are sent for real), but their response
  is replaced by a 500, as when a response is lost on the way back; the client sends it again.
- `fail_all`: every request of the operation is throttled (a fault that outlasts the retries).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.httpsession import URLLib3Session


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def _response(url: str, status: int, body: bytes, content_type: str) -> AWSResponse:
    headers = HTTPHeaders()
    headers["Content-Type"] = content_type
    headers["x-amzn-RequestId"] = "injected-fault"
    return AWSResponse(url, status, headers, _Raw(body))


class Faults:
    def __init__(self, client: Any, operation: str) -> None:
        self.service = client.meta.service_model.service_name  # "dynamodb" | "s3"
        self.operation = operation
        self._lock = threading.Lock()
        self.throttle_left = 0
        self.lose_left = 0
        self.fail_all = False
        self.skip_left = 0
        self.wrong_echo_left = 0
        self.injected = 0
        self.sent_for_real = 0
        self._http = URLLib3Session()
        client.meta.events.register(f"before-send.{self.service}.{operation}", self._before_send)

    def throttle(self, n: int) -> Faults:
        self.throttle_left = n
        return self

    def lose(self, n: int) -> Faults:
        self.lose_left = n
        return self

    def skip(self, n: int) -> Faults:
        """Let the next n requests through untouched before injecting anything."""
        self.skip_left = n
        return self

    def wrong_echo(self, n: int) -> Faults:
        """S3: send for real, but the response echoes a checksum that is not the body's."""
        self.wrong_echo_left = n
        return self

    def _error(self, url: str, status: int, code: str) -> AWSResponse:
        self.injected += 1
        if self.service == "s3":
            xml = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
            return _response(url, status, xml, "application/xml")
        body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "injected"})
        return _response(url, status, body.encode(), "application/x-amz-json-1.0")

    def _before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        with self._lock:
            if self.skip_left > 0:
                self.skip_left -= 1
                return None
            if self.wrong_echo_left > 0:
                self.wrong_echo_left -= 1
                self.injected += 1
                real = self._http.send(request)
                headers = HTTPHeaders()
                for k, v in real.headers.items():
                    if k.lower() != "x-amz-checksum-sha256":  # HTTPHeaders appends, never replaces
                        headers[k] = v
                headers["x-amz-checksum-sha256"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
                return AWSResponse(request.url, real.status_code, headers, _Raw(real.content))
            if self.fail_all or self.throttle_left > 0:
                self.throttle_left = max(0, self.throttle_left - 1)
                slow = ("SlowDown", 503) if self.service == "s3" else ("ThrottlingException", 400)
                return self._error(request.url, slow[1], slow[0])
            lose = self.lose_left > 0
            self.lose_left = max(0, self.lose_left - 1)
        if lose:
            self._http.send(request)  # the write happens; only its answer is lost
            with self._lock:
                self.sent_for_real += 1
                code = "InternalError" if self.service == "s3" else "InternalServerError"
                return self._error(request.url, 500, code)
        return None
