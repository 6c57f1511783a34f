"""Bearer-token check for the mutating endpoints: secure by default, constant-time comparison."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status

from components import contract


class TokenGuard:
    """A FastAPI dependency: the request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, token: str | None) -> None:
        self._token = token.encode() if token else None

    def __call__(self, request: Request) -> None:
        """Raise 503 when no token is configured, 401 when the request's token is missing or wrong."""
        if self._token is None:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"control endpoints are disabled: set {contract.CONTROL_TOKEN_ENV} to enable them",
            )
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self._token):
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "a valid bearer token is required",
                                headers={"WWW-Authenticate": "Bearer"})
