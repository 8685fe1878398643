"""Files as streams of Arrow record batches: read one source file block by block, write one.

Parquet is read with ``ParquetFile.iter_batches`` and CSV with pyarrow's streaming reader (the
named feature columns read as float64, so every block has the same types), in blocks of about
``BATCH_ROWS`` rows; a file is written with ``ParquetWriter`` or pyarrow's ``CSVWriter`` one
table per block, so neither side ever holds a whole file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

BATCH_ROWS = 131_072
"""Rows per block read: large enough that per-block costs vanish, small enough for memory."""
CSV_BLOCK_BYTES = 16 << 20


def read_batches(
    fh: Any,
    data_format: str,
    columns: Sequence[str],
    floats: Sequence[str] = (),
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The ``columns`` of the open file ``fh`` as record batches, in file order.

    CSV columns named in ``floats`` are read as float64 (empty cells as nulls).
    """
    if data_format == "parquet":
        yield from pq.ParquetFile(fh).iter_batches(batch_size=batch_rows, columns=list(columns))
        return
    reader = pcsv.open_csv(
        fh,
        read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
        convert_options=pcsv.ConvertOptions(
            include_columns=list(columns),
            column_types={name: pa.float64() for name in floats},
        ),
    )
    yield from reader


class BatchFileWriter:
    """Writes tables of one schema to the open file ``fh`` as Parquet or CSV; ``close`` ends it.

    The schema is that of the first table written (or the ``empty`` table's, for no rows).
    """

    def __init__(self, fh: Any, data_format: str) -> None:
        self.fh = fh
        self.format = data_format
        self._writer: Any = None

    def write(self, table: pa.Table) -> None:
        """Append ``table``'s rows."""
        if self._writer is None:
            if self.format == "parquet":
                self._writer = pq.ParquetWriter(self.fh, table.schema)
            else:
                self._writer = pcsv.CSVWriter(self.fh, table.schema)
        self._writer.write_table(table)

    def close(self, empty: pa.Table | None = None) -> None:
        """Finish the file (with ``empty``'s header when nothing was written)."""
        if self._writer is None and empty is not None:
            self.write(empty)
        if self._writer is not None:
            self._writer.close()
