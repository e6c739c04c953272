"""OpenAI's error responses: an HTTP status and the error object
``{"error": {"message", "type", "param", "code"}}`` (the REST API's; Realtime errors reuse the
messages)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kettle.streaming.protocols import fields


class OpenAIError(Exception):
    """An error response: HTTP status, OpenAI's error object, and extra headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def to_json(self) -> str:
        return json.dumps(self.body(), ensure_ascii=False)


def bad_request(message: str, param: str | None = None, code: str = "invalid_value") -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


def field_refusal(
    exc: fields.FieldError, param: str, kind: str | None = None
) -> tuple[str, str, str]:
    """OpenAI's message, param and code for a field its table refused (``param``: the field's path,
    e.g. ``session.audio.input.turn_detection.threshold``; ``kind``: its row's, which tells
    an integer's range codes from a decimal's). The codes and messages are those OpenAI's
    API answers with (``missing_required_parameter``, ``invalid_type``,
    ``decimal_above_max_value``, ..., ``invalid_value``)."""
    reason = exc.reason
    number = "integer" if kind == fields.INT else "decimal"
    if reason == fields.MISSING:
        return f"Missing required parameter: '{param}'.", param, "missing_required_parameter"
    if reason == fields.TYPE:
        return f"Invalid type for '{param}': {exc}.", param, "invalid_type"
    if reason in (fields.TOO_LOW, fields.TOO_HIGH):
        side = "below_min" if reason == fields.TOO_LOW else "above_max"
        return f"Invalid '{param}': {exc}.", param, f"{number}_{side}_value"
    if reason == fields.LENGTH:
        return f"Invalid '{param}': {exc}.", param, "string_above_max_length"
    if reason == fields.TOO_MANY:
        return f"Invalid '{param}': {exc}.", param, "array_above_max_length"
    return f"Invalid value for '{param}': {exc}.", param, "invalid_value"


def field_error(exc: fields.FieldError, param: str, kind: str | None = None) -> OpenAIError:
    """The 400 for a refused form field (see field_refusal)."""
    message, _, code = field_refusal(exc, param, kind)
    return bad_request(message, param, code)


class FieldRefused(Exception):
    """A message field refused (a Realtime event's): OpenAI's message, param and code."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


def check_object(table: fields.FieldTable, obj: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The fields of ``obj`` that ``table`` names, each checked against its row (present ones
    only; a required one missing is refused). ``path``: the object's param, e.g.
    ``session.audio.input`` ("" for an event's top level). Raises FieldRefused."""
    checked: dict[str, Any] = {}
    for spec in table.fields:
        param = f"{path}.{spec.name}" if path else spec.name
        try:
            if spec.name not in obj:
                if spec.required:
                    raise fields.FieldError(spec.name, f"{spec.name} is required", fields.MISSING)
                continue
            checked[spec.name] = spec.check_json(obj[spec.name])
        except fields.FieldError as exc:
            raise FieldRefused(*field_refusal(exc, param, spec.kind)) from None
    return checked


def unauthorized() -> OpenAIError:
    return OpenAIError(401, "Incorrect API key provided.", code="invalid_api_key")


def model_not_found(model: str) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model '{model}' does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


def too_large(limit_bytes: int) -> OpenAIError:
    return OpenAIError(
        413,
        f"Maximum content size limit ({limit_bytes} bytes) exceeded.",
        param="file",
        code="request_too_large",
    )


def busy(retry_after_s: int, *, unavailable: bool = False) -> OpenAIError:
    """429 while the upload slots are full; 503 while kettle cannot take work at all."""
    headers = {"Retry-After": str(retry_after_s)}
    if unavailable:
        return OpenAIError(
            503,
            "The server is not ready (loading its model or shutting down); retry later.",
            type="server_error",
            code="service_unavailable",
            headers=headers,
        )
    return OpenAIError(
        429,
        "The server is transcribing as many uploads as it takes; retry later.",
        type="requests",
        code="rate_limit_exceeded",
        headers=headers,
    )
