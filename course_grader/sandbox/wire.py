"""The sandbox's wire format: one message (messages.py) per JSON line over unix sockets, file descriptors
passed beside them."""

from __future__ import annotations

import socket

from ..ground.messages import Event, Hello, Message


def send(connection: socket.socket, message: Message, fds: list[int] = ()) -> bool:
    """Send one message (and `fds` with it); False if the peer is gone."""
    data = (message.to_json() + "\n").encode()
    try:
        if fds:
            socket.send_fds(connection, [data], list(fds))
        else:
            connection.sendall(data)
        return True
    except OSError:
        return False


def receive(connection: socket.socket, kind: type[Message], with_fds: bool = False):
    """One message of `kind` (and the fds sent with its first chunk); None when the peer is gone.
    MessageError when the line is not such a message."""
    data, fds = b"", []
    while not data.endswith(b"\n"):
        if with_fds and not data:
            chunk, received, _, _ = socket.recv_fds(connection, 1 << 20, 4)
            fds += received
        else:
            chunk = connection.recv(1 << 20)
        if not chunk:
            return (None, fds) if with_fds else None
        data += chunk
    message = kind.from_json(data, f"a {kind.__name__} message")
    return (message, fds) if with_fds else message


def ask(socket_path: str, question: Hello, timeout_s: float) -> Event | None:
    """One question to the sandbox manager, one answer (None if it did not answer)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(timeout_s)
    try:
        connection.connect(socket_path)
        connection.sendall((question.to_json() + "\n").encode())
        return receive(connection, Event)
    except (OSError, ValueError):
        return None
    finally:
        connection.close()
