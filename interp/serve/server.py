"""Running the app on uvicorn: in the foreground (``interp serve``) or in a background thread
(the notebook's ``dashboard``, the tests, the benchmark), on a socket bound before start so
the port is known and free again after ``stop()``.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    return sock


class BackgroundServer:
    """The app served by uvicorn in a daemon thread; ``stop()`` shuts it down and frees the
    port.

    Example:
        >>> from interp.serve import create_app
        >>> server = BackgroundServer(create_app({"attn-only-2l": model})).start()
        >>> server.url   # 127.0.0.1 (the default host) and a free port
        'http://127.0.0.1:.../'
        >>> server.stop(); server.running
        False
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app, self.host, self.requested_port = app, host, port
        self.port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        """Bind, start serving, and wait until the server answers."""
        if self.running:
            return self
        self._socket = bind_socket(self.host, self.requested_port)
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"The dashboard server did not start on {self.url}.")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop serving, wait for the thread, close the socket (the port is free again)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
