"""OpenAI's error body, ``{"error": {"message", "type", "param", "code"}}``, and the exception that
carries it from anywhere in a request's handling to its HTTP status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# status -> OpenAI's error type for it
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "server_error",
    504: "timeout_error",
}


@dataclass
class APIError(Exception):
    """A request that ends in an HTTP error: its status and OpenAI's error fields."""

    status: int
    message: str
    param: str | None = None
    code: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def type(self) -> str:
        return ERROR_TYPES.get(self.status, "invalid_request_error" if self.status < 500 else "server_error")

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param, code)


def upstream_error(error: BaseException) -> APIError:
    """A model client's failure as the gateway error a client should see: 504 for a timeout,
    502 for an upstream that failed or could not be reached, 400 for a request the upstream
    refused, 500 for anything else."""
    import openai

    from kate.llm.openai import UpstreamError, UpstreamRejected

    if isinstance(error, UpstreamRejected):
        return APIError(400, f"the upstream model server refused the request: {error}", code="upstream_rejected")
    if isinstance(error, UpstreamError):
        status = 504 if error.kind == "timeout" else 502
        return APIError(status, f"the upstream model server failed: {error}",
                        code="upstream_timeout" if status == 504 else "upstream_failed")  # fmt: skip
    if isinstance(error, openai.APITimeoutError):
        return APIError(504, f"the upstream model server did not answer in time: {error}", code="upstream_timeout")
    if isinstance(error, TimeoutError):
        return APIError(504, f"the model did not answer in time: {error}", code="timeout")
    if isinstance(error, (openai.APIConnectionError, openai.APIStatusError)):
        status = getattr(error, "status_code", None)
        where = f" (status {status})" if status else ""
        return APIError(502, f"the upstream model server failed{where}: {error}", code="upstream_failed")
    return APIError(500, f"{type(error).__name__}: {error}", code="internal_error")
