"""The grader's side of the sandbox: the launcher that jupyter_client starts as "the kernel", and the
questions the grader asks the manager (release a slot, is its next kernel warm)."""

from __future__ import annotations

import os
import signal
import socket

from ..ground.messages import TERMINATE, Event, Hello
from . import namespaces, wire

SOCKET_ENV, REQUEST_ENV = "COURSE_SANDBOX_SOCKET", "COURSE_SANDBOX_REQUEST"


def launch(connection_file: str) -> int:
    """Ask the manager for the kernel of this connection file and mirror its life; its exit status."""
    try:
        namespaces.prctl(namespaces.PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the grading process
    except OSError:
        pass
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(os.environ[SOCKET_ENV])
    hello = Hello("launch", connection_file=os.path.abspath(connection_file), request_file=os.environ[REQUEST_ENV])
    connection.sendall((hello.to_json() + "\n").encode())
    signal.signal(signal.SIGTERM, lambda *_: _forward(connection, TERMINATE))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts reach the kernel as Jupyter messages
    buffer = b""
    while True:
        chunk = connection.recv(4096)
        if not chunk:
            return 1
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            event = Event.from_json(line, "the sandbox manager's answer")
            if event.event == "exit":
                return event.code


def release(socket_path: str, slot: int, timeout_s: float = 60.0) -> bool:
    """Ask the manager to end whatever runs in `slot` and empty its runtime folder; True when done."""
    answer = wire.ask(socket_path, Hello("release", slot=slot), timeout_s)
    return answer is not None and answer.event == "released"


def is_warm(socket_path: str, slot: int) -> bool:
    """Has the slot's next kernel finished importing its libraries? (always False for forked kernels)"""
    answer = wire.ask(socket_path, Hello("warm", slot=slot), 10.0)
    return answer is not None and answer.ready


def _forward(connection: socket.socket, command: str) -> None:
    try:
        connection.sendall((command + "\n").encode())
    except OSError:
        pass
