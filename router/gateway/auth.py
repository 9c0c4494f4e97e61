"""The bearer token on the REST API: with ``iqmesh.auth.token`` set, every route but the probes
(``/healthz``, ``/readyz``) needs it, else 401 in the gateway's error style.

A browser cannot put a header on a page load or an EventSource, so the dashboard is opened once
with ``?access_token=<token>``; the gateway then sets an HttpOnly, SameSite=Strict cookie that the
page's own requests carry.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Middleware

from kernel.security import Security, bearer
from router.gateway.errors import ApiError, Handler, error_response

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
COOKIE = "iqmesh_token"
QUERY_PARAM = "access_token"


def _refuse(message: str) -> web.Response:
    response = error_response(ApiError(401, "UNAUTHENTICATED", message))
    response.headers["WWW-Authenticate"] = 'Bearer realm="iqmesh"'
    return response


def auth_middleware(security: Security) -> Middleware:
    @web.middleware
    async def check_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not security.token or request.path in OPEN_PATHS:
            return await handler(request)
        from_query = request.query.get(QUERY_PARAM, "")
        presented = bearer(request.headers.get("Authorization", "")) or request.cookies.get(COOKIE, "") or from_query
        if not presented:
            return _refuse("a bearer token is required: send 'Authorization: Bearer <token>' "
                           f"(open the dashboard with ?{QUERY_PARAM}=<token>)")
        if not security.token_matches(presented):
            return _refuse("the bearer token is not the one this gateway expects")
        response = await handler(request)
        if from_query and not response.prepared:
            response.set_cookie(COOKIE, presented, httponly=True, samesite="Strict", secure=security.server_tls,
                                path="/")
        return response
    return check_token
