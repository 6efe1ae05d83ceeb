"""A stand-in kubelet that serves container logs, so a Pod's log can be read through
the real API server (``GET .../pods/NAME/log``) in the component tier, which has no
kubelet.

``LogKubelet`` listens with TLS on a loopback port; ``node_body()`` is the Node whose
status points the API server there (InternalIP 127.0.0.1, the kubelet endpoint's port).
The API server calls ``/containerLogs/<namespace>/<pod>/<container>`` as it would call a
kubelet (it verifies no kubelet certificate unless told a CA, as here) and passes
``tailLines``; the stand-in answers from ``logs[(namespace, pod, container)]`` and counts
the calls it got.
"""

from __future__ import annotations

import http.server
import ssl
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from tests.harness import certs


class LogKubelet:
    def __init__(self) -> None:
        self.logs: dict[tuple[str, str, str], str] = {}
        self.calls: list[str] = []
        folder = Path(tempfile.mkdtemp(prefix="ichor-kubelet-"))
        files = certs.write_serving_certificate(folder, hosts=("127.0.0.1",))
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                stand_in.calls.append(self.path)
                pieces = parts.path.strip("/").split("/")
                text = None
                if len(pieces) == 4 and pieces[0] == "containerLogs":
                    text = stand_in.logs.get((pieces[1], pieces[2], pieces[3]))
                if text is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                tail = urllib.parse.parse_qs(parts.query).get("tailLines")
                if tail:
                    text = "".join(text.splitlines(keepends=True)[-int(tail[0]) :])
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(files.cert), str(files.key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def node_body(self, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
        }

    def node_status(self) -> dict[str, Any]:
        return {
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            }
        }

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
