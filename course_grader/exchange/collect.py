"""`nbgrader collect`, with the exchange's inbound folder read as data.

Every learner can write to the exchange's inbound folder, and nbgrader's own collect copies what it
finds there with `shutil.copytree`, which follows links: an absolute link placed there brought the
instructor's source notebook into submitted/ as if the learner had written it. A FIFO stops the
copy, a malformed folder name or an oversized folder stops the whole collect.

`SafeExchangeCollect` keeps nbgrader's collect (which submission is newest, `--update`, due dates,
the ignore and include globs, the size limits) and replaces the copy with `untrusted.copy_tree`: folders
and regular files only, reached without following any link. Links, hard links to outside files,
FIFOs, sockets and devices stay in the exchange, and what was left there is listed in
submitted/<learner>/<assignment>/collect_refused.json, which `course grade` turns into findings (and
into an error row when no notebook is left). A submission whose folder is itself a link, or which is
too large, is collected as that list alone. An entry whose name or learner id is malformed is
skipped with a warning; the others are collected.

`course collect` and `pipeline.collect` always use it; the course's nbgrader_config.py makes the
formgrader's collect button and `nbgrader collect` use it too.
"""

from __future__ import annotations

import datetime
import os

from nbgrader.exchange.default.collect import ExchangeCollect

from ..ground import untrusted
from ..ground.layout import STUDENT_ID_PATTERN


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect whose copy never follows a link or opens anything but a regular file."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.refusals: list[str] = []  # one line per thing left in the exchange, for the caller

    def _refuse(self, message: str) -> None:
        self.refusals.append(message)
        self.log.warning(message)

    def _path_to_record(self, path):
        """nbgrader's record of an inbound entry; a malformed name no longer stops the whole collect."""
        filename = os.path.basename(path)
        try:
            return super()._path_to_record(path)
        except Exception as error:  # nbgrader's self.fail (ExchangeError) or the date parser
            return {
                "username": filename.split("+", 1)[0],
                "filename": filename,
                "timestamp": datetime.datetime.min,
                "malformed": f"{error}".splitlines()[0] if str(error) else "malformed",
            }

    def copy_files(self):
        kept = []
        for record in self.src_records:
            shown = untrusted.display(record["filename"])
            if record.get("malformed"):
                self._refuse(
                    f"{shown}: not a submission name nbgrader can read ({untrusted.display(record['malformed'])}); "
                    "left in the exchange"
                )
            elif not STUDENT_ID_PATTERN.match(record["username"]):
                self._refuse(
                    f"{shown}: the learner id {untrusted.display(record['username'])!r} is not allowed; "
                    "left in the exchange"
                )
            else:
                kept.append(record)
        self.src_records = kept
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        """The learner's folder into submitted/, as data (see untrusted.copy_tree)."""
        result = untrusted.copy_tree(
            src,
            dest,
            exclude=self.coursedir.ignore,
            include=self.coursedir.include,
            max_file_bytes=1000 * self.coursedir.max_file_size,
            max_total_bytes=1000 * self.coursedir.max_dir_size,
        )
        source_name = os.path.basename(src)
        if result.refused:
            untrusted.write_refusals(dest, source_name, result.refused)
            for item in result.refused:
                self._refuse(f"{untrusted.display(source_name)}: {item['reason']}")
        if not result.copied:
            # nbgrader's --update compares this timestamp with newer submissions: keep it even when nothing was copied.
            parts = source_name.rsplit("+", 3)
            timestamp = os.path.join(dest, "timestamp.txt")
            if len(parts) >= 3 and not os.path.exists(timestamp):
                with open(timestamp, "w", encoding="utf-8", errors="backslashreplace") as handle:
                    handle.write(parts[2])
        if self.coursedir.groupshared:
            for folder, _, files in os.walk(dest):
                os.chmod(folder, (os.stat(folder).st_mode | 0o2770) & 0o2777)
                for name in files:
                    path = os.path.join(folder, name)
                    os.chmod(path, (os.stat(path).st_mode | 0o660) & 0o777)
