"""The one error type the API answers with: an HTTP status and a message naming the fix."""

from __future__ import annotations


class ApiError(Exception):
    """A request the server cannot serve; answered as ``{"error": message}`` with ``status``.

    Example:
        >>> raise ApiError(404, "unknown model 'gpt3'; this server serves: attn-only-2l")
        Traceback (most recent call last):
        ...
        interp.serve.errors.ApiError: unknown model 'gpt3'; this server serves: attn-only-2l
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
