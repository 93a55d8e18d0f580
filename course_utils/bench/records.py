"""The typed records of a benchmark: one row per measurement, and the results of a whole grid.

The attribute names are the field names of the stored tables (``benchmarks/<device>/<grid>.json``,
described in ``benchmarks/README.md``), so a row converts to and from its JSON object one to one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

__all__ = ["AttentionRow", "DecodeRow", "BenchmarkResults"]


class _JsonRecord:
    """``to_json`` / ``from_json`` for a dataclass whose fields are JSON values."""

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict):
        """Build from a stored JSON object; unknown keys (from a newer version) are ignored."""
        names = {f.name for f in fields(cls)}
        try:
            return cls(**{key: value for key, value in data.items() if key in names})
        except TypeError as exc:  # a required field is missing
            raise ValueError(f"a stored {cls.__name__} lacks a field ({exc}); got keys {sorted(data)}") from None


@dataclass(kw_only=True)
class AttentionRow(_JsonRecord):
    """One attention method measured on one shape. ``status`` is ``ok``, or ``unsupported``, ``oom``,
    ``skipped`` or ``error`` with the ``reason``; the measured fields are ``None`` unless ``ok``."""

    method: str
    sdpa_backend: str | None  # the SDPA backend the call was pinned to (sdpa-* methods)
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool
    dtype: str  # "float32", "bfloat16"...
    device: str  # "cpu" or "cuda"
    status: str = "ok"
    reason: str | None = None
    time_ms: float | None = None  # median of the timed repeats
    time_min_ms: float | None = None
    repeats: int | None = None
    timer: str | None = None
    peak_mem_mib: float | None = None  # peak above what was allocated before the call
    flops: int
    tflops: float | None = None
    pct_of_peak: float | None = None  # of the datasheet's dense 16-bit peak (known GPUs only)
    max_abs_diff: float | None = None  # against the output of method diff_vs on the same inputs
    diff_vs: str | None = None
    block: int | None = None  # tile size, for methods that take one

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        """One line for a progress log: the shape, then the numbers or why there are none."""
        shape = f"b={self.batch} h={self.heads} n={self.seq_len} d={self.head_dim}" + (" causal" if self.causal else "")
        if not self.ok:
            return f"  {self.method:<15} {shape:<34} {self.status}: {self.reason}"
        return (
            f"  {self.method:<15} {shape:<34} {self.time_ms:10.3f} ms  {self.tflops:8.3f} TFLOP/s  "
            f"{self.peak_mem_mib:10.1f} MiB"
        )


@dataclass(kw_only=True)
class DecodeRow(_JsonRecord):
    """Greedy generation of ``tokens`` new tokens in one ``mode`` (``no-cache`` or ``kv-cache``)."""

    mode: str
    tokens: int
    seconds: float
    tokens_per_s: float  # over the whole batch
    status: str = "ok"
    speedup: float | None = None  # kv-cache rows: no-cache seconds / kv-cache seconds


@dataclass
class BenchmarkResults:
    """A grid's rows, the machine they were measured on (``meta``) and a ``summary`` of the comparison.

    ``kind`` is ``"attention"`` (rows are :class:`AttentionRow`) or ``"decode"`` (:class:`DecodeRow`).
    ``meta`` holds the machine's description (:func:`~course_utils.bench.machine.machine_info`) and the
    grid's settings; ``summary`` the derived comparisons that the tables print.
    """

    grid: str
    kind: str
    meta: dict
    rows: list = field(default_factory=list)
    summary: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "grid": self.grid,
            "kind": self.kind,
            "meta": self.meta,
            "rows": [row.to_json() for row in self.rows],
            "summary": self.summary,
        }

    @classmethod
    def from_json(cls, data: dict) -> BenchmarkResults:
        missing = {"grid", "kind", "meta", "rows"} - set(data)
        if missing:
            raise ValueError(f"not a benchmark results file: it lacks {sorted(missing)}")
        if data["kind"] not in ("attention", "decode"):
            raise ValueError(f"unknown kind of results {data['kind']!r}; expected attention or decode")
        row_type = AttentionRow if data["kind"] == "attention" else DecodeRow
        return cls(
            data["grid"],
            data["kind"],
            data["meta"],
            [row_type.from_json(r) for r in data["rows"]],
            data.get("summary", []),
        )
