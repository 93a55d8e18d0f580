"""The kernel guard's output limits: every output message leaves the kernel through `Session.send`, and
the limiter caps each message and the total per cell, so that `print` in an endless loop cannot flood
the grader. Text beyond the cell's limit is dropped already when it is written to sys.stdout or
sys.stderr, so a printing loop cannot fill the kernel's memory between two flushes either. Errors are
always delivered (shortened if huge), and when stderr text is dropped a short stderr note is kept, so
that truncation never turns a failing cell into a passing one.

Part of the kernel guard (kernel_guard.py loads it by its path, with the guard's private builtins).
Standard library only.
"""

from __future__ import annotations

OUTPUT_MESSAGES = {"stream", "display_data", "execute_result", "update_display_data", "error"}


class OutputLimiter:
    """Caps every output message and the text of each cell (see the module's docstring)."""

    def __init__(self, message_chars: int, cell_chars: int):
        self.message_chars, self.cell_chars = message_chars, cell_chars
        self.used: dict[str, int] = {}
        self.noted: set[str] = set()
        self.written: dict[tuple[str, str], int] = {}  # (cell, stream name) -> characters buffered

    def wrap_stream(self, stream) -> None:
        """Drop text written past the cell's limit before the kernel buffers it.

        One character more than the limit is let through, so that `limit` below still sees the
        excess and adds its note to the cell's output.
        """
        original = getattr(stream, "write", None)
        if original is None or not hasattr(stream, "parent_header"):
            return
        limit = self.cell_chars + 1

        def write(text):
            parent = getattr(stream, "parent_header", None) or {}
            key = ((parent.get("header") or parent).get("msg_id", ""), getattr(stream, "name", ""))
            written = self.written.get(key, 0)
            if not isinstance(text, str) or written + len(text) <= limit:
                self.written[key] = written + (len(text) if isinstance(text, str) else 0)
                return original(text)
            kept = text[: max(limit - written, 0)]
            self.written[key] = limit
            if kept:
                original(kept)
            return len(text)

        stream.write = write

    def wrap(self, session) -> None:
        original = session.send
        limiter = self

        def send(
            stream,
            msg_or_type,
            content=None,
            parent=None,
            ident=None,
            buffers=None,
            track=False,
            header=None,
            metadata=None,
        ):
            if isinstance(msg_or_type, dict):
                message_type = msg_or_type.get("header", {}).get("msg_type")
                parent_id = msg_or_type.get("parent_header", {}).get("msg_id", "")
                body = msg_or_type.get("content")
            else:
                message_type = msg_or_type
                source = parent or {}
                parent_id = (source.get("header") or source).get("msg_id", "")
                body = content
            if message_type in OUTPUT_MESSAGES and isinstance(body, dict):
                replacement = limiter.limit(message_type, parent_id, body)
                if replacement is None:
                    return None
                if isinstance(msg_or_type, dict):
                    msg_or_type = dict(msg_or_type, content=replacement)
                else:
                    content = replacement
            return original(stream, msg_or_type, content, parent, ident, buffers, track, header, metadata)

        session.send = send

    def limit(self, message_type: str, parent_id: str, body: dict) -> dict | None:
        if message_type == "error":
            shortened = dict(body)
            shortened["evalue"] = str(body.get("evalue", ""))[:10_000]
            shortened["traceback"] = [str(line)[:10_000] for line in list(body.get("traceback", []))[:200]]
            return shortened
        used = self.used.get(parent_id, 0)
        left = max(self.cell_chars - used, 0)
        if message_type == "stream":
            text = str(body.get("text", ""))
            allowed = min(len(text), self.message_chars, left)
            self.used[parent_id] = used + allowed
            if allowed == len(text):
                return body
            kept = text[:allowed]
            note_key = f"{parent_id}:{body.get('name')}"
            if note_key not in self.noted:
                self.noted.add(note_key)
                kept += f"\n[output cut by the grader: more than {self.cell_chars} characters in this cell]\n"
            elif not kept:
                return None
            return dict(body, text=kept)
        data = body.get("data", {})
        size = sum(len(str(value)) for value in data.values()) if isinstance(data, dict) else 0
        if size <= min(self.message_chars, left):
            self.used[parent_id] = used + size
            return body
        self.used[parent_id] = self.cell_chars
        return dict(
            body, data={"text/plain": f"[display output of {size} characters removed by the grader]"}, metadata={}
        )
