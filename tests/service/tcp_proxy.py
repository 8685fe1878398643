"""A pausable TCP proxy on loopback, for fault tests: pass traffic, refuse it, or hang.

``TcpProxy(upstream_port)`` listens on a free loopback port and forwards each connection to
``127.0.0.1:upstream_port``. Its ``mode`` can be changed at any time:

* ``"pass"``: bytes flow both ways;
* ``"refuse"``: new connections are reset at once and open ones are cut (a server that is down);
* ``"hang"``: new connections are accepted and their bytes read, but nothing is forwarded or
  answered, and open ones stop forwarding (a server that accepts and never answers).

Threads only, no event loop, so a test can use it beside any client. ``close()`` stops it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

MODES = ("pass", "refuse", "hang")


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP reset (SO_LINGER 0): the peer sees 'connection reset'."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    """A loopback TCP proxy to ``upstream_port`` whose ``mode`` a test switches."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.mode = "pass"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="tcp-proxy")
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: str) -> None:
        """Switch to ``mode``; ``refuse`` and ``hang`` also act on open connections."""
        assert mode in MODES, mode
        self.mode = mode
        if mode == "refuse":
            with self._lock:
                open_now = list(self._open)
                self._open.clear()
            for sock in open_now:
                _reset(sock)

    @contextlib.contextmanager
    def fault(self, mode: str) -> Iterator[None]:
        """``mode`` for the ``with`` block, then ``pass`` again."""
        self.set_mode(mode)
        try:
            yield
        finally:
            self.set_mode("pass")

    def close(self) -> None:
        """Stop accepting and cut every connection."""
        self._stopped.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            open_now = list(self._open)
            self._open.clear()
        for sock in open_now:
            _reset(sock)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.mode == "refuse":
                _reset(client)
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open.update(socks)

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        if self.mode == "refuse":  # switched between the accept and the tracking just above
            _reset(client)
            return
        if self.mode == "hang":
            self._swallow(client)
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            _reset(client)
            return
        upstream.settimeout(None)
        self._track(upstream)
        if self.mode == "refuse":
            _reset(client)
            _reset(upstream)
            return
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    def _swallow(self, client: socket.socket) -> None:
        """Read and drop what ``client`` sends until it goes away or the proxy stops."""
        client.settimeout(0.2)
        while not self._stopped.is_set():
            try:
                if not client.recv(65536):
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        _reset(client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Copy ``source`` to ``sink`` while the mode is ``pass``; stall in ``hang``."""
        source.settimeout(0.2)
        try:
            while not self._stopped.is_set():
                try:
                    data = source.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                while self.mode == "hang" and not self._stopped.is_set():
                    self._stopped.wait(0.05)
                if self.mode == "refuse":
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
