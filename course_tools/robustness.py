"""`course robustness`: run the chapters for several seeds and tabulate what their checks measured.

A check cell's bound is honest only if it holds for other random draws. This runs each chapter once
per seed offset (``COURSE_SEED=0, 1, 2`` by default; see :mod:`course_utils.env`), with
``COURSE_RECORD`` pointing at a file where every :func:`course_utils.checks.check` appends what it
measured. It then writes, under ``build/robustness/``:

    spread.md     one row per checked quantity: its bounds, the value for each seed, min and max,
                  and the margin (how far the worst seed stayed from the bound)
    spread.json   the same, for programs
    executed/     every executed notebook, to read a failure in context

and exits with status 1 if any chapter stopped with an error (a failing check included).

Chapters run one at a time by default, each kernel with its own defaults (every core), as a learner
runs them. ``--busy`` adds what a learner's laptop always has: another program competing for the CPU
(one process that spins on a core for the whole run), so that a check that only holds on an idle
machine shows up here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SEEDS = (0, 1, 2)


def _run_one(chapter: Path, seed: int, out: Path, timeout_s: int) -> subprocess.Popen:
    records = out / "records" / f"{chapter.stem}.seed{seed}.jsonl"
    records.parent.mkdir(parents=True, exist_ok=True)
    records.unlink(missing_ok=True)
    executed = out / "executed"
    executed.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "COURSE_SEED": str(seed), "COURSE_RECORD": str(records), "MPLBACKEND": "Agg"}
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        f"--ExecutePreprocessor.timeout={timeout_s}",
        f"--output-dir={executed}",
        f"--output={chapter.stem}.seed{seed}.ipynb",
        str(chapter),
    ]
    log = open(out / "records" / f"{chapter.stem}.seed{seed}.log", "w")
    process = subprocess.Popen(command, cwd=chapter.parent, env=environment, stdout=log, stderr=subprocess.STDOUT)
    process.log = log
    process.started = time.monotonic()
    return process


def _start_competitor() -> subprocess.Popen:
    """Another program busy on the machine: one process that spins until it is stopped."""
    return subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _error_of(out: Path, chapter: str, seed: int) -> str:
    """The last line of the error that stopped a chapter, from nbconvert's log."""
    log = (out / "records" / f"{chapter}.seed{seed}.log").read_text(errors="replace").splitlines()
    errors = [line.strip() for line in log if "Error" in line and ":" in line]
    return (errors[-1] if errors else (log[-1] if log else "no output"))[:300]


def execute(chapters: list[Path], seeds, out: Path, workers: int, timeout_s: int, log=print) -> dict:
    """Run every (chapter, seed), `workers` at a time; returns {(chapter, seed): (status, seconds)}."""
    pending = [(chapter, seed) for chapter in chapters for seed in seeds]
    running, results = {}, {}
    while pending or running:
        while pending and len(running) < workers:
            chapter, seed = pending.pop(0)
            running[(chapter.stem, seed)] = _run_one(chapter, seed, out, timeout_s)
        for key, process in list(running.items()):
            if process.poll() is None:
                continue
            process.log.close()
            seconds = time.monotonic() - process.started
            status = "ok" if process.returncode == 0 else _error_of(out, *key)
            results[key] = (status, seconds)
            log(f"  {key[0]} seed {key[1]}: {'ok' if status == 'ok' else 'FAILED'} in {seconds:.0f} s")
            del running[key]
        time.sleep(0.2)
    return results


def collect(out: Path, chapters: list[str], seeds) -> list[dict]:
    """One row per (chapter, quantity) with the value each seed gave."""
    rows: dict[tuple[str, str], dict] = {}
    for chapter in chapters:
        for seed in seeds:
            path = out / "records" / f"{chapter}.seed{seed}.jsonl"
            if not path.is_file():
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                row = rows.setdefault(
                    (chapter, entry["name"]),
                    {
                        "chapter": chapter,
                        "name": entry["name"],
                        "at_least": entry["at_least"],
                        "at_most": entry["at_most"],
                        "unit": entry.get("unit", ""),
                        "values": {},
                    },
                )
                # A check inside a loop records one value per pass: the table keeps the worst.
                previous = row["values"].get(seed)
                row["values"][seed] = entry["value"] if previous is None else _worst(row, previous, entry["value"])
    for row in rows.values():
        values = list(row["values"].values())
        row["min"], row["max"] = min(values), max(values)
        margins = []
        if row["at_least"] is not None:
            margins.append(row["min"] - row["at_least"])
        if row["at_most"] is not None:
            margins.append(row["at_most"] - row["max"])
        row["margin"] = min(margins)
    return sorted(rows.values(), key=lambda row: (row["chapter"], row["name"]))


def _worst(row: dict, a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if row["at_least"] is not None and row["at_most"] is None:
        return min(a, b)
    if row["at_most"] is not None and row["at_least"] is None:
        return max(a, b)
    low, high = row["at_least"], row["at_most"]
    return a if min(a - low, high - a) <= min(b - low, high - b) else b


def _g(value) -> str:
    return "" if value is None else f"{value:.4g}"


def write_tables(rows: list[dict], results: dict, seeds, out: Path, busy: bool = False) -> Path:
    header = (
        "| chapter | checked quantity | bound | " + " | ".join(f"seed {s}" for s in seeds) + " | min | max | margin |"
    )
    lines = [
        "# Spread of every checked quantity across seeds",
        "",
        f"`course robustness --seeds {' '.join(map(str, seeds))}{' --busy' if busy else ''}`; the margin is how far "
        "the worst seed stayed inside its bound (negative: a check failed)."
        + (" Another process kept one core busy throughout." if busy else ""),
        "",
        header,
        "|" + "---|" * (len(seeds) + 6),
    ]
    for row in rows:
        bound = " and ".join(
            part
            for part in (
                f">= {row['at_least']:g}" if row["at_least"] is not None else "",
                f"<= {row['at_most']:g}" if row["at_most"] is not None else "",
            )
            if part
        )
        cells = [_g(row["values"].get(seed)) for seed in seeds]
        lines.append(
            f"| {row['chapter']} | {row['name']} | {bound} | "
            + " | ".join(cells)
            + f" | {_g(row['min'])} | {_g(row['max'])} | {_g(row['margin'])} |"
        )
    failures = {key: value for key, value in results.items() if value[0] != "ok"}
    lines += ["", "## Runs", "", "| chapter | seed | seconds | result |", "|---|---|---|---|"]
    for (chapter, seed), (status, seconds) in sorted(results.items()):
        lines.append(f"| {chapter} | {seed} | {seconds:.0f} | {'ok' if status == 'ok' else status.replace('|', '/')} |")
    if failures:
        lines += ["", f"{len(failures)} run(s) failed."]
    table = out / "spread.md"
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "spread.json").write_text(
        json.dumps(
            {
                "rows": rows,
                "runs": [
                    {"chapter": c, "seed": s, "status": st, "seconds": round(sec, 1)}
                    for (c, s), (st, sec) in sorted(results.items())
                ],
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course robustness", description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapter names (default: all of notebooks/)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(DEFAULT_SEEDS), help="COURSE_SEED values")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="chapters executed at once (default 1: each kernel uses every core, as a learner's does)",
    )
    parser.add_argument(
        "--busy", action="store_true", help="keep another process busy on one core throughout, as on a learner's laptop"
    )
    parser.add_argument("--out", default=str(ROOT / "build" / "robustness"), help="output folder")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = parser.parse_args(argv)
    available = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if args.chapters:
        wanted = {Path(name).stem for name in args.chapters}
        unknown = wanted - {path.stem for path in available}
        if unknown:
            parser.error(f"no chapter named {', '.join(sorted(unknown))} in notebooks/")
        available = [path for path in available if path.stem in wanted]
    if any(seed < 0 for seed in args.seeds):
        parser.error("seeds are COURSE_SEED values: 0, 1, 2, ...")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"course robustness: {len(available)} chapter(s) x seeds {args.seeds}, {args.workers} at a time"
        + (", with another process busy on one core" if args.busy else "")
    )
    started = time.monotonic()
    competitor = _start_competitor() if args.busy else None
    try:
        results = execute(available, args.seeds, out, args.workers, args.timeout)
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()
    rows = collect(out, [path.stem for path in available], args.seeds)
    table = write_tables(rows, results, args.seeds, out, busy=args.busy)
    failed = [
        f"{chapter} (seed {seed}): {status}"
        for (chapter, seed), (status, _) in sorted(results.items())
        if status != "ok"
    ]
    print(f"course robustness: {len(rows)} checked quantities in {table} ({time.monotonic() - started:.0f} s)")
    for line in failed:
        print(f"  FAILED {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
