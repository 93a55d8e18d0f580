"""nbgrader's Execute step, hardened for learners' notebooks.

`SandboxedExecute` replaces nbgrader's `Execute` in `course grade`. The kernel itself runs in the
sandbox (see sandbox.py); this class adds what only the grading side can do:

- a canary: every autograded test cell is sent with one extra line that prints a random token. A
  test cell whose code did not run to its end without the token being printed (because an input
  transformer rewrote it, or an exception was swallowed) is failed and reported, whatever the
  kernel claims;
- a dead kernel (os._exit, a crash, a limit) no longer aborts the whole notebook: the cells already
  run keep their results, every later cell fails with the reason, and the grade is partial and honest;
- two timeouts in a row mean the kernel no longer listens to interrupts: it is stopped and the
  remaining cells fail at once instead of waiting out their timeouts one by one;
- a size limit on the outputs kept from any one cell (the kernel guard limits them first);
- at the end, the kernel guard's tripwire report (what learner code replaced).

Everything it learns goes to a JSON "execution report" next to the grading logs.
"""
from __future__ import annotations

import json
import os
import secrets
import time

from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_code_cell, new_output
from traitlets import Integer, Unicode

from nbgrader.preprocessors import Execute

TIMEOUT_ERROR = "CellTimeoutError"


def split_hidden(source: str) -> tuple[str, str | None]:
    """(visible part, hidden part) of a test cell, or (source, None) if it cannot be split cleanly."""
    import ast

    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "### BEGIN HIDDEN TESTS" and line == line.lstrip()]
    if len(starts) != 1:
        return source, None
    visible, hidden = "\n".join(lines[:starts[0]]), "\n".join(lines[starts[0]:])
    try:
        ast.parse(visible)
        ast.parse(hidden)
    except SyntaxError:
        return source, None
    return visible, hidden


def _error_output(name: str, message: str):
    return new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])


class SandboxedExecute(Execute):
    report_path = Unicode("", help="Where to write the execution report (JSON).").tag(config=True)
    status_path = Unicode("", help="The sandbox supervisor's status file for this kernel.").tag(config=True)
    cell_output_chars = Integer(3_000_000, help="Characters of output kept per cell.").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        from nbclient.client import NotebookClient

        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._nonce = secrets.token_hex(12)
        self._dead_reason = None
        self._consecutive_timeouts = 0
        self._report = {"cells": {}, "kernel_ending": None, "integrity": None, "started": time.time()}
        try:
            with self.setup_kernel():
                info = self.wait_for_reply(self.kc.kernel_info())
                self.nb.metadata["language_info"] = info["content"]["language_info"]
                for index, cell in enumerate(self.nb.cells):
                    self.preprocess_cell(cell, resources, index)
                if self._dead_reason is None:
                    self._report["integrity"] = self._integrity_report()
        finally:
            self._report["seconds"] = round(time.time() - self._report.pop("started"), 3)
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
        record = self._report["cells"].setdefault(label, {})
        if self._dead_reason is not None:
            cell.outputs = [_error_output("KernelDied", f"not run: the kernel {self._dead_reason}")]
            record["not_run"] = True
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
            record["kernel_died"] = True
        finally:
            cell.source = original
            record["seconds"] = round(time.time() - started, 2)
        errors = [output for output in cell.outputs if output.output_type == "error"]
        if is_test:
            record["canary"] = self._remove_canary(cell, canary)
            if not record["canary"] and not errors:
                cell.outputs.append(_error_output(
                    "GraderCheckFailed", "the test code did not run to its end (it was changed or skipped)"))
                record["canary_missing_without_error"] = True
        if any(output.get("ename") == TIMEOUT_ERROR for output in errors):
            record["timeout"] = True
            self._consecutive_timeouts += 1
            if self._consecutive_timeouts >= 2 and self._dead_reason is None:
                self._dead_reason = "stopped answering interrupts after two cell timeouts"
                self._stop_kernel()
        else:
            self._consecutive_timeouts = 0
        guard_cut = any("output cut by the grader" in str(output.get("text", "")) or
                        "removed by the grader" in json.dumps(output.get("data", {}))[:2000] for output in cell.outputs)
        if self._limit_outputs(cell) or guard_cut:
            record["output_cut"] = True
        return cell, self.resources

    def _run_test_cell(self, cell, index: int, original: str, canary: str, record: dict) -> None:
        """Visible part, then (after another reset) the hidden part with the canary at its end.

        Learner code called by the visible checks could patch what the hidden checks use; resetting
        the kernel in between means the hidden checks always start from a clean state.
        """
        visible, hidden = split_hidden(original)
        if self._consecutive_timeouts == 0 and not self._restore_kernel_state():
            record["restore_failed"] = True
        if hidden is None:
            cell.source = original + f"\nprint({canary!r})\n"
            self.execute_cell(cell, index, store_history=True)
            return
        cell.source = visible
        self.execute_cell(cell, index, store_history=True)
        visible_outputs = list(cell.outputs)
        if any(output.output_type == "error" for output in visible_outputs):
            return  # the cell fails at its visible part, as it would in one piece
        if not self._restore_kernel_state():
            record["restore_failed"] = True
        cell.source = hidden + f"\nprint({canary!r})\n"
        self.execute_cell(cell, index, store_history=True)
        cell.outputs = visible_outputs + list(cell.outputs)

    def _restore_kernel_state(self) -> bool:
        """Ask the kernel guard to undo learner tampering before a test cell (see kernel_guard.py)."""
        try:
            message_id = self.kc.execute('__import__("sys").modules["course_grader_guard"].restore()',
                                         silent=True, store_history=False)
            reply = self.wait_for_reply(message_id)
        except DeadKernelError:
            return False
        except Exception as error:  # a timeout: the test cell will tell what state the kernel is in
            self.log.warning("restoring the kernel state failed: %s", error)
            return False
        return bool(reply) and reply.get("content", {}).get("status") == "ok"

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
                with open(self.status_path) as handle:
                    status = json.load(handle)
                self._report["kernel_ending"] = status
                return status.get("ending", "died")
            except (OSError, ValueError):
                time.sleep(0.1)
        return "died"

    def _stop_kernel(self) -> None:
        try:
            self.km.shutdown_kernel(now=True)
        except Exception as error:  # the kernel may already be gone
            self.log.warning("could not stop the kernel: %s", error)

    def _integrity_report(self) -> dict:
        """Ask the kernel guard what learner code replaced (see kernel_guard.py)."""
        probe = new_code_cell(f"import course_grader_guard as _course_grader_guard\n"
                              f"_course_grader_guard.report({self._nonce!r})")
        self.nb.cells.append(probe)
        try:
            self.execute_cell(probe, len(self.nb.cells) - 1, store_history=False)
        except DeadKernelError:
            return {"ok": False, "problems": ["the kernel died while the grader checked it"]}
        finally:
            self.nb.cells.pop()
        text = "".join(output.get("text", "") for output in probe.outputs if output.output_type == "stream")
        for line in text.splitlines():
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict) and answer.get("course_grader_guard") == self._nonce:
                problems = [str(problem) for problem in answer.get("problems", [])]
                return {"ok": not problems, "problems": problems}
        errors = [f"{output.get('ename')}: {output.get('evalue')}" for output in probe.outputs
                  if output.output_type == "error"]
        return {"ok": False, "problems": ["the kernel guard did not answer" + (f" ({errors[0]})" if errors else "")]}

    def _write_report(self) -> None:
        if not self.report_path:
            return
        os.makedirs(os.path.dirname(self.report_path), exist_ok=True)
        with open(self.report_path, "w") as handle:
            json.dump(self._report, handle, indent=1, default=str)
