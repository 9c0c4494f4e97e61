"""The dashboard: static HTML and JS served as they are (no build step): static/dashboard.js the
page, static/charts.js the charts, drawn by the vendored uPlot (static/vendor, MIT, its license
beside it). It reads /v1/events for live snapshots (each with its chart point, points.py) and the
/v1 API for lookups and the top-entries table."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).parent / "static"


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", index)
    app.router.add_get("/dashboard", index)
    app.router.add_static("/static/", STATIC, append_version=False)
