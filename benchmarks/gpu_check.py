"""`make gpu-check`: the whole course on a CUDA GPU in one go, for an instructor's new GPU server.

    python benchmarks/gpu_check.py [--out DIR] [--jobs N]        # or: make gpu-check

1. Every chapter (notebooks/*.ipynb) and every source exercise (solutions/*/*.ipynb) is executed with
   nbclient, each in its own kernel and from its own folder, JOBS at a time (default 4), the longest
   first. Meanwhile pytest runs tests/test_flash.py and tests/test_bench.py (the kernels' GPU tests).
   The notebooks and the tests share one time limit (PHASE_LIMIT_S, with a limit per notebook).
2. Then the three grids of chapter 12 (gpu, memory, decode) run alone on the GPU, each under its own
   limit: `bash benchmarks/gpu_grid.sh --grids-only --results DIR`.
3. One summary, DIR/summary.md: per notebook ok or the error (the exception's last line and the
   cell's number, counted from 0 as in the notebook's JSON), the tests' results, the grids' tables.

At most about 10 minutes (limits of 250 s + 315 s, and the start) on an H100/H200; the H200 ran the
chapters in 13-152 s each, 4-6 at a time. DIR defaults to build/gpu-check/<GPU name>/; the grids' json/md/png land there too.
Exit status: 0 when everything passed, 1 when something failed or was cut off, 2 without a CUDA GPU
(nothing is run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASE_LIMIT_S = 250  # notebooks and tests together
NOTEBOOK_LIMIT_S = 220  # one notebook (its longest on the H200: 152 s, run 4-6 at a time)
TESTS_LIMIT_S = 240
GRIDS_LIMIT_S = 345  # gpu_grid.sh's own limits add up to 315 s
TESTS = ["tests/test_flash.py", "tests/test_bench.py"]
# Longest first, as measured on the H200 (measurements/nvidia-h200/notebooks_gpu*.md); the rest follow.
LONGEST_FIRST = (
    "05_encoder",
    "12_complexity_and_flash_attention",
    "09_vision_transformer",
    "04_positional_encoding",
    "01_rnn_to_transformer",
    "10_bert_vs_gpt",
    "06_decoder",
    "07_complete_transformer",
    "03_multi_head_attention",
    "ex5_attention_maps",
    "13_exercises_and_self_check",
)


# --------------------------------------------------------------------------------------------
# One notebook (in a child process, so that a hung kernel can be killed with it)
# --------------------------------------------------------------------------------------------


def failing_cell(nb) -> tuple[int | None, str]:
    """(index, "ExceptionName: message") of the first cell with an error output; else the last cell that
    started running (a time limit), with an empty message."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                message = str(output.get("evalue", "")).strip().splitlines()
                return index, f"{output.get('ename', 'Error')}: {message[-1] if message else ''}".rstrip(": ")
    started = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.metadata.get("execution")]
    return (started[-1] if started else None), ""


def execute_notebook(path: Path, timeout: int) -> dict:
    """Run one notebook from its own folder; a dict with status ok/error, seconds, cell, error."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.monotonic()
    result = {"status": "ok", "cell": None, "error": ""}
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError, RuntimeError) as exc:
        cell, message = failing_cell(nb)
        if not message:  # a time limit or a dead kernel: no error output
            lines = str(exc).strip().splitlines()
            message = f"{type(exc).__name__}: {lines[-1] if lines else ''}"
        result = {"status": "error", "cell": cell, "error": message}
    result["seconds"] = round(time.monotonic() - start, 1)
    return result


def run_notebook(path: Path, limit: int) -> dict:
    """execute_notebook in a child process with a hard limit; never raises."""
    name = str(path.relative_to(ROOT))
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, __file__, "--execute-notebook", str(path), "--timeout", str(limit)]
    start = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=limit + 30, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"notebook": name, "status": "error", "cell": None, "seconds": round(time.monotonic() - start),
                "error": f"time limit reached ({limit} s)"}  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode == 0 and lines:
        return {"notebook": name, **json.loads(lines[-1])}
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"notebook": name, "status": "error", "cell": None, "seconds": round(time.monotonic() - start),
            "error": f"the runner failed: {tail}"}  # fmt: skip


def ordered_notebooks(root: Path = ROOT) -> list[Path]:
    paths = sorted(root.glob("notebooks/*.ipynb")) + sorted(root.glob("solutions/*/*.ipynb"))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    return sorted(paths, key=lambda p: rank.get(p.stem, len(rank)))


# --------------------------------------------------------------------------------------------
# Tests and grids
# --------------------------------------------------------------------------------------------


def run_tests(out: Path, limit: int = TESTS_LIMIT_S) -> dict:
    junit = out / "tests.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *TESTS]
    start = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=limit, cwd=ROOT)
        tail, code = proc.stdout.strip().splitlines()[-1:] or [""], proc.returncode
    except subprocess.TimeoutExpired:
        tail, code = [f"time limit reached ({limit} s)"], None
    return {"exit": code, "seconds": round(time.monotonic() - start), "tail": tail[0], **parse_junit(junit)}


def parse_junit(path: Path) -> dict:
    """Counts, the failures (test, first line of the message) and each test's recorded properties."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures, properties = [], []
    if not path.exists():
        return {"counts": counts, "failures": [("(no result file)", "pytest did not finish")], "properties": []}
    for case in ElementTree.parse(path).iter("testcase"):
        name = f"{Path(case.get('file') or case.get('classname', '').replace('.', '/')).stem}::{case.get('name')}"
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is not None:
            counts["failed"] += 1
            first = (problem.get("message") or problem.text or "").strip().splitlines()
            failures.append((name, first[0][:300] if first else ""))
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if props:
            properties.append((name, props))
    return {"counts": counts, "failures": failures, "properties": properties}


def run_grids(out: Path, limit: int = GRIDS_LIMIT_S) -> list[dict]:
    """gpu_grid.sh --grids-only; its status file has one line per grid: name, exit code, seconds, limit."""
    status = out / "grids_status.tsv"
    status.unlink(missing_ok=True)
    env = {**os.environ, "PYTHON": sys.executable, "GPU_GRID_STATUS": str(status)}
    command = ["bash", str(ROOT / "benchmarks" / "gpu_grid.sh"), "--grids-only", "--results", str(out / "grids")]
    try:
        subprocess.run(command, timeout=limit, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pass
    grids = []
    for line in status.read_text().splitlines() if status.exists() else []:
        name, code, seconds, grid_limit = line.split("\t")
        tables = sorted((out / "grids").glob(f"*/{name}.md"))
        grids.append({"grid": name, "exit": int(code), "seconds": int(seconds), "limit": int(grid_limit),
                      "table": tables[0].read_text() if tables else ""})  # fmt: skip
    return grids


# --------------------------------------------------------------------------------------------
# The summary
# --------------------------------------------------------------------------------------------


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_summary(path: Path, meta: dict, notebooks: list[dict], tests: dict, grids: list[dict]) -> bool:
    """Write the Markdown summary; True when everything passed."""
    bad_notebooks = [n for n in notebooks if n["status"] != "ok"]
    tests_ok = tests.get("exit") == 0 and not tests["failures"]
    grids_ok = len(grids) == 3 and all(g["exit"] == 0 for g in grids)
    all_ok = not bad_notebooks and tests_ok and grids_ok
    lines = [
        f"# GPU check on {meta.get('gpu', '?')}",
        "",
        f"- {meta.get('date', '?')}, commit {meta.get('commit', '?')}, {meta.get('wall_s', '?')} s in all",
        f"- {meta.get('versions', '?')}",
        f"- **{'everything passed' if all_ok else 'PROBLEMS: see below'}**: notebooks "
        f"{len(notebooks) - len(bad_notebooks)}/{len(notebooks)} ok; tests {'ok' if tests_ok else 'FAILED'}; "
        f"grids {'ok' if grids_ok else 'incomplete'}",
        "",
        "## Notebooks",
        "",
        "Each executed on the GPU in its own kernel, from its own folder; cells counted from 0.",
        "",
        "| notebook | status | seconds | error (cell) |",
        "|---|---|---:|---|",
    ]
    for n in notebooks:
        where = "" if n.get("cell") is None else f" (cell {n['cell']})"
        error = f"{n.get('error', '')}{where}" if n["status"] != "ok" else ""
        lines.append(f"| {n['notebook']} | {n['status']} | {n.get('seconds', '')} | {_cell(error)} |")
    c = tests["counts"]
    lines += [
        "",
        f"## Tests: {', '.join(TESTS)}",
        "",
        f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped in {tests.get('seconds', '?')} s "
        f"(pytest: {_cell(tests.get('tail', ''))}).",
    ]
    if tests["failures"]:
        lines += ["", "| failed test | message |", "|---|---|"]
        lines += [f"| {_cell(name)} | {_cell(message)} |" for name, message in tests["failures"]]
    if tests["properties"]:
        lines += ["", "Measured by the tests:", "", "| test | values |", "|---|---|"]
        for name, props in tests["properties"]:
            lines.append(f"| {_cell(name)} | {_cell(', '.join(f'{k} = {v}' for k, v in props.items()))} |")
    lines += ["", "## Grids", "", "| grid | status | seconds | limit |", "|---|---|---:|---:|"]
    for g in grids:
        status = {0: "ok", 124: "TIME LIMIT: partial rows"}.get(g["exit"], f"exit {g['exit']}")
        lines.append(f"| {g['grid']} | {status} | {g['seconds']} | {g['limit']} |")
    if len(grids) < 3:
        lines.append(f"| (missing) | only {len(grids)} of 3 grids reported: see grids/gpu_grid.log | | |")
    for g in grids:
        table = g["table"].strip()
        # The grid's own Markdown, its headings moved two levels down under this one.
        table = re.sub(r"^(#+) ", lambda m: "#" * min(len(m.group(1)) + 2, 6) + " ", table, flags=re.M)
        lines += ["", f"### Grid `{g['grid']}`", "", table or "(no table was written)"]
    path.write_text("\n".join(lines) + "\n")
    return all_ok


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def cuda_problem() -> str | None:
    """Why this machine cannot run the check, or None."""
    try:
        import torch
    except Exception as exc:
        return f"PyTorch does not import ({type(exc).__name__}: {exc})"
    if os.environ.get("COURSE_DEVICE", "").lower() == "cpu":
        return "COURSE_DEVICE=cpu is set"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)"
    return None


def machine_meta() -> dict:
    import torch

    versions = [f"torch {torch.__version__} (CUDA {torch.version.cuda})", f"Python {platform.python_version()}"]
    try:
        import triton

        versions.append(f"Triton {triton.__version__}")
    except Exception:
        versions.append("Triton missing (flash-triton rows and tests say so)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return {
        "gpu": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit.stdout.strip() or "?",
        "versions": ", ".join(versions) + f", {os.cpu_count()} CPU cores",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for summary.md and the grids' results")
    parser.add_argument("--jobs", type=int, default=4, help="notebooks executed at a time (default 4)")
    parser.add_argument("--execute-notebook", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=int, default=NOTEBOOK_LIMIT_S, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute_notebook:  # the child process of run_notebook
        print(json.dumps(execute_notebook(args.execute_notebook, args.timeout)), flush=True)
        return 0

    problem = cuda_problem()
    if problem:
        print(f"gpu-check: refused: {problem}. This check runs the course on a CUDA GPU; nothing was run.")
        return 2
    start = time.monotonic()
    meta = machine_meta()
    out = args.out or ROOT / "build" / "gpu-check" / re.sub(r"[^A-Za-z0-9]+", "-", meta["gpu"]).strip("-").lower()
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpu-check on {meta['gpu']}: notebooks {args.jobs} at a time with the tests, then the grids; out {out}")

    deadline = time.monotonic() + PHASE_LIMIT_S
    with ThreadPoolExecutor(max_workers=1) as pool:
        tests_future = pool.submit(run_tests, out)  # alongside the notebooks

        def one(path: Path) -> dict:
            left = int(deadline - time.monotonic())
            if left < 20:
                name = str(path.relative_to(ROOT))
                return {"notebook": name, "status": "error", "cell": None, "seconds": 0,
                        "error": f"not run: the {PHASE_LIMIT_S} s for the notebooks were used up"}  # fmt: skip
            result = run_notebook(path, min(NOTEBOOK_LIMIT_S, left))
            print(f"  {result['notebook']}: {result['status']} {result.get('seconds')} s {result['error']}", flush=True)
            return result

        with ThreadPoolExecutor(max_workers=args.jobs) as notebook_pool:
            notebooks = list(notebook_pool.map(one, ordered_notebooks()))
        tests = tests_future.result()
    print(f"  tests: {tests['counts']}", flush=True)
    grids = run_grids(out)
    meta["wall_s"] = round(time.monotonic() - start)
    summary = out / "summary.md"
    ok = write_summary(summary, meta, notebooks, tests, grids)
    print(f"gpu-check: {'everything passed' if ok else 'PROBLEMS'} in {meta['wall_s']} s; summary: {summary}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
