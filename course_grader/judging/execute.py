"""nbgrader's Execute step, hardened for learners' notebooks.

`SandboxedExecute` replaces nbgrader's `Execute` in `course grade`. The kernel itself runs in the
sandbox (see sandbox.py); this class adds what only the grading side can do:

- a canary: every autograded test cell is sent with one extra line that prints a random token. A
  test cell whose code did not run to its end without the token being printed (because an input
  transformer rewrote it, or an exception was swallowed) is failed and reported, whatever the
  kernel claims;
- the hidden tests: the hidden part of every test cell is run by the judge in this process (judge.py),
  which asks the kernel guard questions about the learner's objects; it never enters the kernel;
- the visible tests' references: before a test cell the kernel guard restores what learner code
  replaced, and after it says what changed while the cell ran (learner code called by the test). A
  visible test before which something could not be undone is failed with the reason (see
  kernel_guard.py); the grader speaks to the guard with messages of its own, not with code run in the
  notebook's namespace;
- a dead kernel (os._exit, a crash, a limit) no longer aborts the whole notebook: the cells already
  run keep their results, every later cell fails with the reason, and the grade is partial and honest;
- two timeouts in a row mean the kernel no longer listens to interrupts: it is stopped and the
  remaining cells fail at once instead of waiting out their timeouts one by one;
- a size limit on the outputs kept from any one cell (the kernel guard limits them first);
- at the end, the kernel guard's tripwire report (what learner code replaced).

Everything it learns goes to an `ExecutionReport` (messages.py), a JSON file next to the grading logs.
"""

from __future__ import annotations

import json
import os
import secrets
import time

from nbclient.exceptions import DeadKernelError
from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, List, Unicode

from ..ground.messages import (
    GUARD_REPLY,
    GUARD_REQUEST,
    CellReport,
    ExecutionReport,
    GuardReply,
    Integrity,
    KernelStatus,
    MessageError,
)

TIMEOUT_ERROR = "CellTimeoutError"
JUDGED_NOTE = "# (hidden tests: run by the grader outside this notebook)"


def split_hidden(source: str) -> tuple[str, str | None]:
    """(visible part, hidden part) of a test cell, or (source, None) if it cannot be split cleanly."""
    import ast

    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "### BEGIN HIDDEN TESTS" and line == line.lstrip()]
    if len(starts) != 1:
        return source, None
    visible, hidden = "\n".join(lines[: starts[0]]), "\n".join(lines[starts[0] :])
    try:
        ast.parse(visible)
        ast.parse(hidden)
    except SyntaxError:
        return source, None
    return visible, hidden


def _error_output(name: str, message: str):
    return new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])


class RemoveJudgedHiddenTests(Preprocessor):
    """Last of the autograde steps: the judge ran the hidden tests outside the kernel, and their code
    leaves the autograded notebook too (the grades are saved by then); the cell keeps its visible part
    and a line that says where the rest ran. The source notebook in solutions/ keeps them."""

    enabled = Bool(True)  # nbconvert's preprocessors are off until enabled

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {}) if cell.cell_type == "code" else {}
        if meta.get("grade") and not meta.get("solution"):
            visible, hidden = split_hidden(cell.source)
            if hidden is not None:
                cell.source = visible.rstrip() + "\n\n" + JUDGED_NOTE
        return cell, resources


class SandboxedExecute(Execute):
    report_path = Unicode("", help="Where to write the execution report (JSON).").tag(config=True)
    status_path = Unicode("", help="The sandbox supervisor's status file for this kernel.").tag(config=True)
    cell_output_chars = Integer(3_000_000, help="Characters of output kept per cell.").tag(config=True)
    judge_forbidden = List(
        Unicode(), help="Names the exercise forbids: a judged test fails when what ran in the kernel shows one."
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        from nbclient.client import NotebookClient

        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._nonce = secrets.token_hex(12)
        self._dead_reason = None
        self._consecutive_timeouts = 0
        self._report = ExecutionReport()
        started = time.time()
        try:
            with self.setup_kernel():
                info = self.wait_for_reply(self.kc.kernel_info())
                self._report.kernel_start_s = round(time.time() - started, 3)  # sandbox start to first reply
                self.nb.metadata["language_info"] = info["content"]["language_info"]
                for index, cell in enumerate(self.nb.cells):
                    self.preprocess_cell(cell, resources, index)
                if self._dead_reason is None:
                    self._report.integrity = self._integrity_report()
        finally:
            self._report.seconds = round(time.time() - started, 3)
            self._write_report()
        self.set_widgets_metadata()
        return self.nb, self.resources

    # ------------------------------------------------------------------------------------------
    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, self.resources
        meta = cell.metadata.get("nbgrader", {})
        label = meta.get("grade_id") or f"cell {index}"
        is_test = bool(meta.get("grade")) and not meta.get("solution")
        record = self._report.cells.setdefault(label, CellReport())
        if self._dead_reason is not None:
            cell.outputs = [_error_output("KernelDied", f"not run: the kernel {self._dead_reason}")]
            record.not_run = True
            return cell, self.resources
        original = cell.source
        canary = f"[grader-canary {self._nonce} {index}]"
        started = time.time()
        try:
            if is_test:
                self._run_test_cell(cell, index, original, canary, record)
            else:
                self.execute_cell(cell, index, store_history=True)
        except DeadKernelError:
            self._dead_reason = self._kernel_ending()
            cell.outputs.append(_error_output("KernelDied", f"the kernel {self._dead_reason} while running this cell"))
            record.kernel_died = True
        finally:
            cell.source = original
            record.seconds = round(time.time() - started, 2)
        errors = [output for output in cell.outputs if output.output_type == "error"]
        if is_test:
            record.canary = self._remove_canary(cell, canary)
            if not record.canary and not errors:
                cell.outputs.append(
                    _error_output(
                        "GraderCheckFailed", "the test code did not run to its end (it was changed or skipped)"
                    )
                )
                record.canary_missing_without_error = True
        if any(output.get("ename") == TIMEOUT_ERROR for output in errors):
            record.timeout = True
            self._consecutive_timeouts += 1
            if self._consecutive_timeouts >= 2 and self._dead_reason is None:
                self._dead_reason = "stopped answering interrupts after two cell timeouts"
                self._stop_kernel()
        else:
            self._consecutive_timeouts = 0
        guard_cut = any(
            "output cut by the grader" in str(output.get("text", ""))
            or "removed by the grader" in json.dumps(output.get("data", {}))[:2000]
            for output in cell.outputs
        )
        if self._limit_outputs(cell) or guard_cut:
            record.output_cut = True
        return cell, self.resources

    def _run_test_cell(self, cell, index: int, original: str, canary: str, record: CellReport) -> None:
        """The visible part in the kernel (after the guard undid learner tampering), then the hidden part in
        the judge, here (judge.py): it never enters the kernel. A test cell without a hidden part runs whole,
        with the canary at its end, and the guard says whether anything changed while it ran."""
        visible, hidden = split_hidden(original)
        if self._consecutive_timeouts == 0 and not self._restore_kernel_state(cell, record):
            return
        if hidden is None:
            cell.source = original + f"\nprint({canary!r})\n"
            self.execute_cell(cell, index, store_history=True)
            self._verify_kernel_state(cell, record)
            return
        cell.source = visible
        self.execute_cell(cell, index, store_history=True)
        visible_outputs = list(cell.outputs)
        if any(output.output_type == "error" for output in visible_outputs):
            return  # the cell fails at its visible part, as it would in one piece
        cell.outputs = visible_outputs + self._judge(hidden, index, canary, record)
        self._note_changes_during_judging(cell, record)

    def _judge(self, hidden: str, index: int, canary: str, record: CellReport) -> list:
        """The hidden part run by the judge in this process (judge.py); its outputs for the cell: what
        it printed, then the canary if it ran to its end, or the error that failed it (message only)."""
        from .judge import ForReview, Judge, JudgeError, JudgeTimeout, failure_output

        # The kernel's share of one test: all its answers together within the cell's time limit, as when
        # the hidden part ran in the kernel (the judge's own work, the references, is not counted).
        budget, spent = self.timeout, [0.0]

        def run_in_kernel(verb: str, request: str) -> str:
            left = budget - spent[0] if budget else None
            if left is not None and left <= 0:
                raise JudgeTimeout("the notebook's code took longer than the time limit of a cell for this test")
            started = time.time()
            answer = self._ask_guard("judge", timeout=left, verb=verb, request=request)
            spent[0] += time.time() - started
            if answer is None and self._judge_timed_out:
                raise JudgeTimeout("the notebook's code took longer than the time limit of a cell for this test")
            if answer is None:
                raise JudgeError("the notebook's kernel gave no answer to the grader's question")
            return answer.answer

        try:
            judge = Judge(run_in_kernel, passthrough=(DeadKernelError,), forbidden=tuple(self.judge_forbidden))
            printed, error = judge.run(hidden)
        except JudgeTimeout as failure:  # counted with the cell timeouts (two in a row stop the kernel)
            return [_error_output(TIMEOUT_ERROR, str(failure))]
        except JudgeError as failure:
            printed, error = "", failure
        outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
        if isinstance(error, ForReview):
            record.for_review = str(error)[:500]
        if error is not None:
            # Under a visible part's "looks right", say that what follows is a further check, not a contradiction.
            further = "The checks above passed; the grader's further checks of this part found a problem:\n"
            return outputs + [new_output("stream", name="stderr", text=further), failure_output(error)]
        return outputs + [new_output("stream", name="stdout", text=canary + "\n")]

    def _note_changes_during_judging(self, cell, record: CellReport) -> None:
        """What the learner's code changed while the judge called it is reported for review; it
        cannot change the verdict, which the judge reached outside the kernel."""
        try:
            answer = self._ask_guard("verify")
        except DeadKernelError:
            return
        if answer is None or not (answer.changed or answer.not_undone):
            return
        changed = list(answer.changed) + list(answer.not_undone)  # the guard's report lists them for review
        shown = ", ".join(changed[:5]) + (f" and {answer.changed_count - 5} more" if answer.changed_count > 5 else "")
        note = (
            f"while this test ran, the notebook's code changed what the test relies on ({shown}); the grader "
            "checked the results outside the notebook, and your instructor will review it.\n"
        )
        cell.outputs.append(new_output("stream", name="stderr", text=note))

    def _ask_guard(self, command: str, timeout: float | None = None, **details) -> GuardReply | None:
        """Send the kernel guard a request of its own message type; its answer, or None. A request that
        runs past ``timeout`` (default: the cell's time limit) interrupts the kernel (``_judge_timed_out``
        says so) and gets None."""
        nonce = secrets.token_hex(8)
        message = self.kc.session.msg(GUARD_REQUEST, {"command": command, "nonce": nonce, **details})
        started, cell_timeout = time.time(), self.timeout
        limit = cell_timeout if timeout is None else max(1, int(timeout + 0.999))
        self._judge_timed_out = False
        try:
            self.kc.shell_channel.send(message)
            self.timeout = limit  # nbclient's wait reads it
            try:
                reply = self.wait_for_reply(message["header"]["msg_id"])
            finally:
                self.timeout = cell_timeout
            self._judge_timed_out = reply is None and bool(limit) and time.time() - started >= limit
        except DeadKernelError:
            raise
        except Exception as error:  # a timeout: the test cell will say what state the kernel is in
            self.log.warning("the kernel guard did not answer %r: %s", command, error)
            return None
        if not reply or reply.get("msg_type") != GUARD_REPLY:
            return None
        try:
            answer = GuardReply.from_dict(reply.get("content"), f"the kernel guard's answer to {command!r}")
        except MessageError as error:
            self.log.warning("%s", error)
            return None
        return None if answer.nonce != nonce or answer.error else answer

    def _restore_kernel_state(self, cell, record: CellReport) -> bool:
        """Before a test part: the guard undoes learner tampering. False (and the test failed) when it
        could not, so that the test never runs on references the grader knows are wrong."""
        try:
            answer = self._ask_guard("restore")
        except DeadKernelError:
            return True  # the test cell will find the dead kernel and say so
        if answer is None:
            record.restore_failed = True
            reason = "the grader could not reset the kernel before this test (tampering suspected)"
        elif answer.not_undone:
            record.restore_failed = True
            record.not_undone = list(answer.not_undone)[:10]
            reason = "the grader could not undo what the notebook changed before this test: " + "; ".join(
                record.not_undone
            )
        else:
            return True
        cell.outputs.append(
            _error_output(
                "GraderCheckFailed", reason + ". The test scores 0 and your instructor will review the notebook."
            )
        )
        return False

    def _verify_kernel_state(self, cell, record: CellReport) -> None:
        """After a test part: did anything the tests rely on change while it ran? Then it fails."""
        try:
            answer = self._ask_guard("verify")
        except DeadKernelError:
            return
        if answer is None:
            problem = "the grader could not check the kernel after this test (tampering suspected)"
            record.verify_failed = True
        elif answer.changed or answer.not_undone:
            changed = list(answer.changed) + list(answer.not_undone)
            count = answer.changed_count
            record.changed_during_test = changed[:10]
            shown = ", ".join(changed[:5]) + (f" and {count - 5} more" if count > 5 else "")
            problem = (
                f"while this test ran, the notebook's code changed what the test relies on ({shown}), "
                "so its result cannot be trusted"
            )
        else:
            return
        cell.outputs.append(
            _error_output(
                "GraderCheckFailed", problem + ". The test scores 0 and your instructor will review the notebook."
            )
        )

    def _remove_canary(self, cell, canary: str) -> bool:
        """Take the canary line out of the cell's stdout; True if it was there."""
        streams = [output for output in cell.outputs if output.output_type == "stream" and output.name == "stdout"]
        text = "".join(output.text for output in streams)
        if canary not in text:
            return False
        text = text.replace(canary + "\n", "", 1).replace(canary, "", 1)
        kept = []
        for output in cell.outputs:
            if any(output is stream for stream in streams):
                if output is streams[0] and text:
                    output.text = text
                    kept.append(output)
            else:
                kept.append(output)
        cell.outputs = kept
        return True

    def _limit_outputs(self, cell) -> bool:
        size = sum(len(json.dumps(output, default=str)) for output in cell.outputs)
        if size <= self.cell_output_chars:
            return False
        kept, budget, cut_stderr = [], self.cell_output_chars, False
        for output in cell.outputs:
            piece = len(json.dumps(output, default=str))
            if output.output_type == "error" or piece <= budget:
                kept.append(output)
                budget -= min(piece, budget)
            elif output.output_type == "stream" and output.name == "stderr":
                cut_stderr = True
        note = f"[outputs cut by the grader: {size} characters in this cell]\n"
        kept.append(new_output("stream", name="stderr" if cut_stderr else "stdout", text=note))
        cell.outputs = kept
        return True

    # ------------------------------------------------------------------------------------------
    def _kernel_ending(self) -> str:
        """How the kernel ended, from the sandbox supervisor's status file (it may take a moment)."""
        deadline = time.time() + 3
        while self.status_path and time.time() < deadline:
            try:
                status = KernelStatus.read(self.status_path)
                self._report.kernel_ending = status
                return status.ending
            except (OSError, ValueError):  # not written yet (or not completely)
                time.sleep(0.1)
        return "died"

    def _stop_kernel(self) -> None:
        try:
            self.km.shutdown_kernel(now=True)
        except Exception as error:  # the kernel may already be gone
            self.log.warning("could not stop the kernel: %s", error)

    def _integrity_report(self) -> Integrity:
        """Ask the kernel guard what learner code replaced or tried (see kernel_guard.py)."""
        try:
            answer = self._ask_guard("report")
        except DeadKernelError:
            return Integrity(ok=False, problems=["the kernel died while the grader checked it"])
        if answer is None:
            return Integrity(ok=False, problems=["the kernel guard did not answer"])
        problems = [str(problem) for problem in answer.problems]
        return Integrity(ok=not problems, problems=problems)

    def _write_report(self) -> None:
        if not self.report_path:
            return
        os.makedirs(os.path.dirname(self.report_path), exist_ok=True)
        self._report.write(self.report_path, indent=1)
