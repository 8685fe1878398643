"""Rows of a data source: one partition (a Parquet row group or a CSV file) read into ``(X, y)``.

A ``PartLoader`` is a small, picklable description of one partition (URL, format, columns,
row group, the server's storage options). Called, it reads that partition alone, through fsspec
and pyarrow, into ``X`` (float64, C order, the features in the request's order) and ``y`` (the
target as read: integers or strings). It runs where the rows are wanted: in the training worker
process, or as a task on a Dask worker (``bsvm_core.dask_partitions``), which opens the files with
its own credentials.

A deleted or unreadable object raises ``DataReadError`` naming it; a null or non-numeric value a
``ValueError`` naming the file and the column.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.data.sources import CSV_BLOCK_BYTES, DataSource, open_filesystem

Block = tuple[np.ndarray, np.ndarray]


class DataReadError(OSError):
    """A data file could not be read (deleted, denied, unreachable); the message names it."""


@dataclass(frozen=True)
class PartLoader:
    """One partition of a source: a whole CSV file, or one row group of a Parquet file."""

    scheme: str
    path: str
    format: str
    features: tuple[str, ...]
    target: str
    row_group: int | None = None
    rows: int | None = None
    """Rows of this partition when the metadata gave them."""
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The file's URL (with ``#row-group`` for a Parquet row group)."""
        tail = "" if self.row_group is None else f"#row-group={self.row_group}"
        return f"{self.scheme}://{self.path}{tail}"

    def __call__(self) -> Block:
        """``(X, y)`` of the partition: X float64 C-ordered (n, d), y the labels as read."""
        import pyarrow as pa

        try:
            table = self._read()
        except (ValueError, pa.ArrowInvalid) as exc:
            raise ValueError(f"{self.url}: {exc}"[:500]) from None
        except FileNotFoundError:
            raise DataReadError(f"data object {self.url} no longer exists") from None
        except OSError as exc:
            raise DataReadError(f"cannot read data object {self.url}: {exc}"[:500]) from None
        return to_block(table, self.features, self.target, self.url)

    def _read(self) -> Any:
        fs = open_filesystem(self.scheme, self.options)
        columns = [*self.features, self.target]
        with fs.open(self.path, "rb") as fh:
            if self.format == "parquet":
                import pyarrow.parquet as pq

                parquet = pq.ParquetFile(fh)
                if self.row_group is None:
                    return parquet.read(columns=columns)
                return parquet.read_row_groups([self.row_group], columns=columns)
            import pyarrow as pa
            import pyarrow.csv as pcsv

            return pcsv.read_csv(
                fh,
                read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                convert_options=pcsv.ConvertOptions(
                    include_columns=columns,
                    column_types={name: pa.float64() for name in self.features},
                ),
            )


def to_block(table: Any, features: Sequence[str], target: str, url: str) -> Block:
    """``(X, y)`` from an Arrow table: features as float64 columns of a C-ordered X (422-worthy
    ``ValueError`` naming ``url`` and the column on a null)."""
    X = np.empty((table.num_rows, len(features)), dtype=np.float64)
    for j, name in enumerate(features):
        column = table.column(name)
        if column.null_count:
            raise ValueError(f"{url}: column {name!r} has empty values")
        X[:, j] = column.to_numpy().astype(np.float64, copy=False)
    labels = table.column(target)
    if labels.null_count:
        raise ValueError(f"{url}: target column {target!r} has empty values")
    y = labels.to_numpy()
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError(f"{url}: target column {target!r} holds non-whole numbers")
        y = y.astype(np.int64)
    elif y.dtype.kind == "O":
        y = y.astype(str)
    if not np.all(np.isfinite(X)):
        i, j = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
        raise ValueError(f"{url}: column {features[j]!r} holds {X[i, j]} (row {i})")
    return X, y


def loaders(source: DataSource, features: Sequence[str], target: str) -> list[PartLoader]:
    """One loader per partition of ``source``: each Parquet row group, each CSV file."""
    out = []
    for f in source.files:
        common = {
            "scheme": source.uri.scheme,
            "path": f.path,
            "format": source.format,
            "features": tuple(features),
            "target": target,
            "options": dict(source.options),
        }
        if source.format == "parquet" and f.row_groups:
            out.extend(
                PartLoader(**common, row_group=g, rows=n) for g, n in enumerate(f.row_groups)
            )
        else:
            out.append(PartLoader(**common, rows=f.rows))
    return out


def iter_blocks(parts: Sequence[PartLoader]) -> Iterator[Block]:
    """Every partition's ``(X, y)`` in order, one at a time."""
    for part in parts:
        yield part()
