"""Relays for the Nostr tests: ``snap-spark relay`` as a separate process, and a scripted
misbehaving relay (a few lines of WebSocket over asyncio) for failures a real relay does
not produce on demand: stalling, dropping the connection, closing a subscription, sending
forged events.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import re
import selectors
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import snap_spark
from snap_spark.nostr.relay import free_port

#: The checkout holding the snap_spark under test: the relay process imports the same code.
CODE_ROOT = str(Path(snap_spark.__file__).resolve().parent.parent)
#: Seconds a relay process may take to print its ready line, and to stop.
START_SECONDS = 30.0
STOP_SECONDS = 10.0


def cli_env() -> dict[str, str]:
    """The environment for a ``python -m snap_spark.cli`` child running this checkout."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": CODE_ROOT + (os.pathsep + path if path else "")}


@dataclass
class RelayProcess:
    """``snap-spark relay`` running in a child process (stop it with :meth:`stop`)."""

    url: str
    port: int
    process: subprocess.Popen[str]
    ready_line: str
    database: str | None = None

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM, then SIGKILL after :data:`STOP_SECONDS`: ``(exit status, out, err)``."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            out, err = self.process.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
        return self.process.returncode, out, err


def start_relay_process(*, database: str | None = None, extra: Sequence[str] = (),
                        port: int | None = None) -> RelayProcess:
    """Start ``snap-spark relay`` on ``port`` (default: a free port) of 127.0.0.1 and wait
    for its ready line.

    Raises:
        RuntimeError: it exited or printed nothing within :data:`START_SECONDS` (it is
            killed first; the message holds its stderr).
    """
    port = free_port() if port is None else port
    command = [sys.executable, "-m", "snap_spark.cli", "relay", "--port", str(port), *extra]
    if database is not None:
        command += ["--database", database]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=cli_env(), cwd=CODE_ROOT)
    assert process.stdout is not None
    line = ""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if selector.select(timeout=START_SECONDS):
            line = process.stdout.readline()
    if not line.startswith("relay listening on "):
        if process.poll() is None:
            process.kill()
        _, err = process.communicate()
        raise RuntimeError(f"relay did not start (ready line {line!r}): {err.strip()}")
    return RelayProcess(f"ws://127.0.0.1:{port}", port, process, line.rstrip("\n"), database)


# --------------------------------------------------------------------------------------
# A scripted relay
# --------------------------------------------------------------------------------------

_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

Behaviour = Literal[
    "serve", "stall", "drop", "close_subscription", "no_handshake", "drop_on_publish",
    "silent", "no_eose",
]
#: In a text of :attr:`ScriptedRelay.frames`, replaced by the ``REQ``'s subscription id (a
#: JSON string).
SUB: str = "<sub>"


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readexactly(2)
    size = head[1] & 0x7F
    if size == 126:
        size = struct.unpack("!H", await reader.readexactly(2))[0]
    elif size == 127:
        size = struct.unpack("!Q", await reader.readexactly(8))[0]
    mask = await reader.readexactly(4) if head[1] & 0x80 else bytes(4)
    data = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(size)))
    return head[0] & 0x0F, data


def _frame(opcode: int, data: bytes) -> bytes:
    size = len(data)
    if size < 126:
        head = bytes([0x80 | opcode, size])
    elif size < 1 << 16:
        head = bytes([0x80 | opcode, 126]) + struct.pack("!H", size)
    else:
        head = bytes([0x80 | opcode, 127]) + struct.pack("!Q", size)
    return head + data


@dataclass
class ScriptedRelay:
    """A relay on a free port of 127.0.0.1 that answers every ``REQ`` with ``events`` (raw
    JSON texts, sent as they are) and then behaves as told:

    - ``serve``: ``EOSE``;
    - ``stall``: nothing more (a relay too slow to finish);
    - ``drop``: closes the TCP connection;
    - ``close_subscription``: ``CLOSED`` with ``closed_reason``;
    - ``no_handshake``: never answers the WebSocket handshake;
    - ``drop_on_publish``: closes the connection on the first ``EVENT`` it receives;
    - ``silent``: completes the WebSocket handshake, then never sends a frame (no event,
      no ``EOSE``, no pong) while it reads what the client sends;
    - ``no_eose``: no ``EOSE``, ever, but goes on reading (and answering every ``REQ``
      with ``events`` and ``frames``);

    ``frames`` are raw texts sent after ``events`` on every ``REQ`` (before its ``EOSE``
    or ``CLOSED``), each as one text frame, as they are except that :data:`SUB` is replaced
    by the subscription id: not JSON, ``NOTICE``, ``AUTH``, ``CLOSED``, an event twice ...
    ``connections`` counts the TCP connections accepted; :meth:`push` sends an event on
    the first subscription of every open connection (as a relay forwards a new event).

    Runs in a thread of its own: ``with ScriptedRelay(...) as url:``.
    """

    behaviour: Behaviour
    events: Sequence[str] = ()
    closed_reason: str = "auth-required: log in first"
    frames: Sequence[str] = ()
    url: str = ""
    connections: int = 0
    received: list[str] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stop: asyncio.Event | None = None
    _first_subs: dict[asyncio.StreamWriter, str] = field(default_factory=dict)

    def push(self, event: str) -> int:
        """Send ``event`` (raw JSON text) on the first subscription of every connection;
        how many connections it was sent to."""
        assert self._loop is not None
        done = threading.Event()
        sent: list[int] = []

        def send() -> None:
            for writer, sub in list(self._first_subs.items()):
                if not writer.is_closing():
                    writer.write(_frame(1, f'["EVENT",{sub},{event}]'.encode()))
                    sent.append(1)
            done.set()

        self._loop.call_soon_threadsafe(send)
        assert done.wait(10)
        return len(sent)

    def __enter__(self) -> str:
        port = free_port()
        self.url = f"ws://127.0.0.1:{port}"
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._handle, "127.0.0.1", port)
            ready.set()
            async with server:
                await self._stop.wait()

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        assert ready.wait(10), "scripted relay did not start"
        return self.url

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._converse(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the relay is stopping
        finally:
            self._first_subs.pop(writer, None)
            writer.close()

    async def _converse(self, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        request = await reader.readuntil(b"\r\n\r\n")
        if self.behaviour == "no_handshake":
            await asyncio.sleep(3600)
        match = re.search(rb"(?i)sec-websocket-key:\s*(\S+)", request)
        assert match is not None
        accept = base64.b64encode(hashlib.sha1(match.group(1) + _WS_GUID).digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        while True:
            opcode, data = await _read_frame(reader)
            if opcode == 8:  # close
                return
            if self.behaviour == "silent":
                self.received.append(data.decode(errors="replace"))
                continue
            if opcode == 9:  # ping
                writer.write(_frame(10, data))
                continue
            if opcode != 1:
                continue
            message = json.loads(data)
            self.received.append(data.decode())
            if message[0] == "EVENT" and self.behaviour == "drop_on_publish":
                return
            if message[0] != "REQ":
                continue
            sub = json.dumps(message[1])
            self._first_subs.setdefault(writer, sub)
            for event in self.events:
                writer.write(_frame(1, f'["EVENT",{sub},{event}]'.encode()))
            for text in self.frames:
                writer.write(_frame(1, text.replace(SUB, sub).encode()))
            if self.behaviour == "serve":
                writer.write(_frame(1, f'["EOSE",{sub}]'.encode()))
            elif self.behaviour == "close_subscription":
                writer.write(_frame(1, json.dumps(["CLOSED", message[1],
                                                   self.closed_reason]).encode()))
            await writer.drain()
            if self.behaviour == "drop":
                await asyncio.sleep(0.2)  # let the events arrive before the close
                return
            if self.behaviour == "stall":
                await asyncio.sleep(3600)
