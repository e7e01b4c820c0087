"""The service's HTTP server: `/metrics` (tablestore.service.metrics), `/healthz`, and the status page (`/` and
`/table/<db>.<table>`, tablestore.service.page), on 127.0.0.1 by default.

Routes are a table (`routes` of `ServiceServer`, exact paths); `/table/<name>` is the one route with a parameter."""
from __future__ import annotations

import logging
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Callable

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from tablestore.service.metrics import registry_for
from tablestore.service.page import overview, table_page

if TYPE_CHECKING:
    from tablestore.service.runner import Service

log = logging.getLogger(__name__)

Route = Callable[["Service"], tuple[int, str, bytes]]
"""service -> (HTTP status, content type, body)."""


def _metrics(registry_of: Callable[[], bytes]) -> Route:
    return lambda service: (200, CONTENT_TYPE_LATEST, registry_of())


def _health(service: "Service") -> tuple[int, str, bytes]:
    body = f"ok {service.owner} tables={len(service.tables)} held={len(service.held())}\n"
    return 200, "text/plain; charset=utf-8", body.encode()


class ServiceServer:
    """Serves one service over HTTP in a thread of its own; `close()` stops it."""

    def __init__(self, service: "Service", port: int, host: str = "127.0.0.1") -> None:
        registry = registry_for(service)
        self.routes: dict[str, Route] = {"/metrics": _metrics(lambda: generate_latest(registry)),
                                         "/healthz": _health, "/": overview}
        routes, owner = self.routes, service

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                route = routes.get(path)
                if route is None and path.startswith("/table/"):
                    name = urllib.parse.unquote(path[len("/table/"):])
                    route = lambda service: table_page(service, name)  # noqa: E731
                if route is None:
                    status, kind, body = 404, "text/plain; charset=utf-8", b"not found: try / or /metrics\n"
                else:
                    try:
                        status, kind, body = route(owner)
                    except Exception as e:  # noqa: BLE001 - a failed page is a 500, never the server's end
                        log.warning("GET %s failed: %s", self.path, e)
                        status, kind, body = 500, "text/plain; charset=utf-8", f"error: {e}\n".encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="tablestore-service-http",
                                        daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
