"""Writing exported rows: one Parquet file, or a Hugging Face datasets folder (zipped) holding it
as ``data/train-*.parquet`` beside a dataset card. pyarrow is the ``export`` extra."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from datetime import datetime
from types import ModuleType
from typing import IO, Any

from kernelcup.core.errors import UserError
from kernelcup.core.export.runs import SYSTEM_NUMBERS, SYSTEM_TEXT, TIMING

INSTALL = "pip install 'kernelcup[export]' turns it on"


def pyarrow() -> tuple[ModuleType, ModuleType]:
    """pyarrow and pyarrow.parquet, or the one-line refusal naming the extra."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError as exc:
        raise UserError(f"Export is off: {INSTALL}.", "The rest of kernelcup works without it.") from exc
    return pa, pq


def schema(pa: ModuleType) -> Any:
    when = pa.timestamp("us", tz="UTC")
    timing = [(name, pa.int64() if name == "runs" else pa.float64()) for name in TIMING]
    return pa.schema([
        ("leaderboard", pa.string()), ("submission_id", pa.int64()), ("run_id", pa.int64()),
        ("gpu", pa.string()), ("mode", pa.string()), ("user", pa.string()), ("named", pa.bool_()),
        ("submitted_at", when), ("finished_at", when), ("file_name", pa.string()),
        ("code_sha256", pa.string()), ("code", pa.string()), ("status", pa.string()), ("passed", pa.bool_()),
        ("verdict", pa.string()), ("score_s", pa.float64()), ("score_low_s", pa.float64()),
        ("score_high_s", pa.float64()),
        ("tests", pa.list_(pa.struct([("case", pa.string()), ("passed", pa.bool_())]))),
        ("benchmarks", pa.list_(pa.struct([("case", pa.string()), ("passed", pa.bool_()), *timing,
                                           ("round_median_ns", pa.list_(pa.float64()))]))),
        *[(f"system_{name}", pa.string()) for name in SYSTEM_TEXT],
        *[(f"system_{name}", pa.float64()) for name in SYSTEM_NUMBERS],
        ("system_clock_limits", pa.list_(pa.string())),
    ])


def write_parquet(batches: Iterable[list[dict[str, Any]]], sink: str | IO[bytes]) -> int:
    """Every batch into one Parquet file (zstd), a row group per batch; the number of rows."""
    pa, pq = pyarrow()
    shape = schema(pa)
    count = 0
    with pq.ParquetWriter(sink, shape, compression="zstd") as writer:
        for batch in batches:
            writer.write_table(pa.Table.from_pylist(batch, schema=shape))
            count += len(batch)
    return count


def dataset_zip(batches: Iterable[list[dict[str, Any]]], title: str, boards: list[str], now: datetime) -> bytes:
    """A Hugging Face datasets folder, zipped: ``data/train-00000-of-00001.parquet`` and a
    ``README.md`` card whose YAML names the split, so ``load_dataset(folder)`` reads it."""
    parquet = io.BytesIO()
    count = write_parquet(batches, parquet)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr(f"{title}/data/train-00000-of-00001.parquet", parquet.getvalue())
        bundle.writestr(f"{title}/README.md", card(title, boards, count, now))
    return buffer.getvalue()


def card(title: str, boards: list[str], count: int, now: datetime) -> str:
    return f"""---
pretty_name: {title}
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*.parquet
---

# {title}

{count} runs of kernelcup leaderboards {", ".join(boards)}, exported {now:%Y-%m-%d %H:%M} UTC.

One row per run (a submission's job on one GPU). `user` is a pseudonym (`anon-...`, the same
for one user across exports) unless the user opted in to be named (`named`). `code` is present
where the leaderboard makes code public (after its deadline), else null, and `verdict` is then
rebuilt from public facts. `benchmarks` holds each case's timing statistics in nanoseconds:
median, mean, min, max, std, the 95% interval of the median (`ci_low_ns`, `ci_high_ns`) and, for
ranked runs, each round's median; `score_low_s`/`score_high_s` are the score's noise range.
`system_*` is what the harness recorded of the GPU and software: clocks before, after and their
range while timing, memory clock range, hottest temperature, highest power, what limited the
clock (`system_clock_limits`), driver, CUDA, torch and Triton versions, the isolation used.
Withdrawn submissions are not included.
"""
