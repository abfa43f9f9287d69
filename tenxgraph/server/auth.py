"""Authentication: who is calling, which becomes the ``user_id`` of every run and store call.

The ``auth`` value of the config file selects it, as in 10xGraph's server:

* ``null`` / absent: no authentication; every caller is ``"anonymous"`` (a warning is logged
  at start, as 10xGraph does).
* ``"jwt"``: a bearer JWT verified with the shared secret ``JWT_SECRET_KEY`` and the algorithm
  ``JWT_ALGORITHM`` (environment variables, read when the app is built); the token's
  ``user_id`` claim is the subject. Needs PyJWT (the ``server`` extra).
* ``{"method": "custom", "path": "module:attr"}``: a :class:`BaseAuth` subclass (or instance)
  whose ``authenticate`` returns a dict with ``user_id``.
"""

from __future__ import annotations

import inspect
import logging
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tenxgraph.appconfig import import_attr
from tenxgraph.core.exceptions import ConfigError, TenxGraphError

from ._envelope import ApiError

logger = logging.getLogger("tenxgraph.server")

__all__ = ["BaseAuth", "Credentials", "JwtAuth", "authenticate", "build_auth"]


@dataclass(frozen=True)
class Credentials:
    """The ``Authorization`` header split as FastAPI's ``HTTPAuthorizationCredentials`` is.

    Attributes:
        scheme: ``"Bearer"`` (as sent).
        credentials: the token.
    """

    scheme: str
    credentials: str


class BaseAuth(ABC):
    """The authentication hook of 10xGraph's server: subclass and name it in the config."""

    @abstractmethod
    def authenticate(
        self, request: Request, response: Response, credential: Credentials | None
    ) -> dict[str, Any] | None:
        """Who sends ``request`` (may be ``async def`` too).

        Args:
            request: the Starlette request.
            response: headers set on it are copied to the answer (e.g. ``WWW-Authenticate``).
            credential: the bearer credential, or ``None`` when the request has none.

        Returns:
            A dict with at least ``"user_id"`` (str). ``None``, ``{}`` or a dict without
            ``user_id`` refuses the request with 403 ``INVALID_TOKEN`` (only a server
            without auth serves callers as ``"anonymous"``).

        Raises:
            Exception: any exception refuses the request with 403 (its ``error_code``
                attribute, when present, is the envelope's code; the message is a generic
                "authentication failed" unless it is a tenxgraph error, whose message is
                sent). 403, not 401: 10xGraph's
                server and its REST conventions page answer authentication failures so.
        """


class JwtAuth(BaseAuth):
    """Bearer JWTs signed with a shared secret (``JWT_SECRET_KEY``, ``JWT_ALGORITHM``).

    Args:
        secret: the key; default ``os.environ["JWT_SECRET_KEY"]``.
        algorithm: e.g. ``"HS256"``; default ``os.environ["JWT_ALGORITHM"]``.

    Raises:
        ConfigError: ``CONFIG_001`` when either is missing or PyJWT is not installed.
    """

    def __init__(self, secret: str | None = None, algorithm: str | None = None) -> None:
        self.secret = secret or os.environ.get("JWT_SECRET_KEY")
        self.algorithm = algorithm or os.environ.get("JWT_ALGORITHM")
        if not self.secret or not self.algorithm:
            raise ConfigError(
                'auth "jwt" needs the JWT_SECRET_KEY and JWT_ALGORITHM environment variables',
                context={"key": "auth"},
            )
        try:
            import jwt  # noqa: F401
        except ImportError:
            raise ConfigError(
                "auth \"jwt\" needs PyJWT: pip install 'tenxgraph[server]'",
                context={"key": "auth"},
            ) from None

    def authenticate(
        self, request: Request, response: Response, credential: Credentials | None
    ) -> dict[str, Any] | None:
        """Decode and verify the bearer token; its ``user_id`` claim is the subject.

        Raises:
            ApiError: 403 ``REVOKED_TOKEN`` (no token), ``EXPIRED_TOKEN``, ``INVALID_TOKEN``
                (bad signature or no ``user_id`` claim), 10xGraph's codes.
        """
        import jwt

        if credential is None:
            raise ApiError(403, "REVOKED_TOKEN", "Invalid token, please login again")
        assert self.secret is not None and self.algorithm is not None
        try:
            claims: dict[str, Any] = jwt.decode(
                credential.credentials, self.secret, algorithms=[self.algorithm]
            )
        except jwt.ExpiredSignatureError:
            raise ApiError(403, "EXPIRED_TOKEN", "Token has expired, please login again") from None
        except jwt.InvalidTokenError:
            raise ApiError(403, "INVALID_TOKEN", "Invalid token, please login again") from None
        if "user_id" not in claims:
            raise ApiError(403, "INVALID_TOKEN", "Invalid token, user_id missing")
        response.headers["WWW-Authenticate"] = 'Bearer realm="auth_required"'
        return claims


def build_auth(
    spec: str | dict[str, Any] | BaseAuth | None, folder: Path | None = None
) -> BaseAuth | None:
    """The authenticator a config's ``auth`` value names (``None``: no authentication).

    Raises:
        ConfigError: ``CONFIG_001`` for another shape, a class path that does not import or
            does not name a ``BaseAuth``, or JWT settings missing.
    """
    if spec is None or isinstance(spec, BaseAuth):
        return spec
    if spec == "jwt":
        return JwtAuth()
    if (
        isinstance(spec, dict)
        and spec.get("method") == "custom"
        and isinstance(spec.get("path"), str)
    ):
        obj = import_attr(spec["path"], folder)
        if inspect.isclass(obj) and issubclass(obj, BaseAuth):
            return obj()
        if isinstance(obj, BaseAuth):
            return obj
        raise ConfigError(
            f"auth.path {spec['path']!r} is not a BaseAuth subclass (tenxgraph.server.auth.BaseAuth)",
            context={"key": "auth"},
        )
    raise ConfigError(
        f'auth must be null, "jwt" or {{"method": "custom", "path": ...}}, got {spec!r}',
        context={"key": "auth"},
    )


async def authenticate(auth: BaseAuth | None, request: Request) -> dict[str, Any]:
    """The caller's identity: a dict with ``user_id`` (``"anonymous"`` without auth).

    Raises:
        ApiError: 403 when the authenticator refuses the request.
    """
    if auth is None:
        return {"user_id": "anonymous"}
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    credential = (
        Credentials(scheme=scheme, credentials=token.strip())
        if scheme.lower() == "bearer" and token.strip()
        else None
    )
    response = Response()
    try:
        user = auth.authenticate(request, response, credential)
        if inspect.isawaitable(user):
            user = await user
    except ApiError:
        raise
    except TenxGraphError as exc:
        raise ApiError(403, exc.error_code, exc.message) from None
    except Exception as exc:
        # an arbitrary exception's text may carry internals (a token, a key server's
        # answer): it goes to the log only
        logger.warning("authentication refused a request: %s", type(exc).__name__)
        code = getattr(exc, "error_code", None) or "UNAUTHORIZED"
        raise ApiError(403, str(code), "authentication failed") from None
    # only "no auth configured" means anonymous: an authenticator that names no user refuses
    if not isinstance(user, dict) or not isinstance(user.get("user_id"), (str, int)):
        raise ApiError(403, "INVALID_TOKEN", "the authenticator returned no user_id")
    return {**user, "user_id": str(user["user_id"])}
