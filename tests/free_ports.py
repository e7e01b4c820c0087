"""Free local ports for a test's own broker."""
from __future__ import annotations

import socket


def free_port_pair() -> int:
    """A free port whose successor (a broker's controller port) is free too: on a busy machine the port after an
    ephemeral one is often some client's."""
    while True:
        with socket.socket() as sock, socket.socket() as controller:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
            try:
                controller.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
