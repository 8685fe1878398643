"""A data source by reference: the files a URI names, their columns and their row counts.

``describe`` turns a checked ``DataUri`` (``locations.check_location``) and a format into a
``DataSource``: the files (one object; every object under a prefix ending in ``/``, names
starting with ``_`` or ``.`` skipped, as Hive and Spark leave markers; or the matches of a glob:
``*``, ``**``, ``[...]``), sorted, with their row counts and row groups read from the Parquet
footers, and the columns (name and Arrow type) of the Parquet schema or of a CSV file's header
row (types inferred from its first block). Nothing but footers and first blocks is read;
``scan_labels`` reads the target column alone when a check needs the labels.

Every problem is an ``InvalidInput`` (422) naming the request's field: no files matching, an
object that cannot be read, files that disagree on their columns.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import fsspec

from service.data.locations import DataUri, allowed_prefixes, check_resolved, storage_options, under
from service.errors import InvalidInput, detail
from service.settings import Settings

FORMATS = ("parquet", "csv")
MAX_FILES = 10_000
"""Most files one URI may expand to (422 above)."""
CSV_BLOCK_BYTES = 1 << 20
"""Bytes of a CSV file read to infer its column types (and per block when streaming)."""


@dataclass(frozen=True)
class Column:
    """One column of a source: its name and its Arrow type as text (``double``, ``string``...)."""

    name: str
    type: str

    @property
    def numeric(self) -> bool:
        """True for integer, floating-point and boolean columns."""
        return self.type in NUMERIC or self.type.startswith(("int", "uint", "float", "decimal"))


NUMERIC = frozenset({"bool", "halffloat", "float", "double"})


@dataclass(frozen=True)
class SourceFile:
    """One file of a source: its fsspec path, size, rows and rows per row group (Parquet)."""

    path: str
    size: int | None
    rows: int | None
    """From the Parquet footer; None for CSV until ``scan_labels`` counted them."""
    row_groups: tuple[int, ...] = ()


@dataclass
class DataSource:
    """The files of one URI in one format, and the columns they share."""

    uri: DataUri
    format: str
    files: list[SourceFile]
    columns: list[Column]
    options: dict[str, Any] = field(default_factory=dict)
    """The fsspec storage options (the server's endpoint; no credentials)."""

    @property
    def n_rows(self) -> int | None:
        """Total rows when every file's count is known, else None."""
        counts = [f.rows for f in self.files]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]

    def url(self, path: str) -> str:
        """The full URL of one of this source's file paths."""
        return f"{self.uri.scheme}://{path}"

    def column_names(self) -> list[str]:
        """The columns' names, in file order."""
        return [c.name for c in self.columns]


def open_filesystem(scheme: str, options: dict[str, Any] | None = None) -> Any:
    """An fsspec filesystem for ``scheme`` with ``options`` (see ``locations.storage_options``).

    S3 listings are never cached: other writers change the bucket.
    """
    if scheme == "s3":
        return fsspec.filesystem(
            "s3", use_listings_cache=False, skip_instance_cache=True, **(options or {})
        )
    return fsspec.filesystem(scheme, **(options or {}))


def _unreadable(field_name: str, url: str, exc: BaseException) -> InvalidInput:
    reason = "it does not exist" if isinstance(exc, FileNotFoundError) else f"{type(exc).__name__}"
    return InvalidInput("data cannot be read", [detail(field_name, f"cannot read {url}: {reason}")])


def _hidden(path: str) -> bool:
    return posixpath.basename(path.rstrip("/")).startswith(("_", "."))


def expand(uri: DataUri, settings: Settings, field_name: str = "data.uri") -> list[str]:
    """The file paths ``uri`` names, sorted (422 naming ``field_name`` when there are none).

    Each path is checked against the allow-list again (a glob or a symlink cannot lead out).
    """
    fs = open_filesystem(uri.scheme, storage_options(uri.scheme, settings))
    try:
        if uri.is_glob:
            found = fs.glob(uri.path, detail=True)
            paths = [p for p, info in found.items() if info.get("type") == "file"]
        elif uri.is_prefix:
            found = fs.find(uri.path, detail=True)
            paths = [p for p, info in found.items() if info.get("type") == "file"]
            paths = [p for p in paths if not _hidden(p[len(uri.path.rstrip("/")) :])]
        else:
            info = fs.info(uri.path)
            if info.get("type") != "file":
                raise InvalidInput(
                    "data cannot be read",
                    [detail(field_name, f"{uri.url} is a folder; end a prefix with /")],
                )
            paths = [uri.path]
    except InvalidInput:
        raise
    except Exception as exc:
        raise _unreadable(field_name, uri.url, exc) from None
    paths = sorted(p if uri.scheme == "s3" else "/" + p.lstrip("/") for p in paths)
    if not paths:
        raise InvalidInput("no data files", [detail(field_name, f"no files match {uri.url}")])
    if len(paths) > MAX_FILES:
        raise InvalidInput(
            "too many data files",
            [detail(field_name, f"{len(paths)} files match; the limit is {MAX_FILES}")],
        )
    prefixes = allowed_prefixes(settings)
    for path in paths:
        file_uri = DataUri(uri.scheme, path)
        if not under(file_uri, prefixes):
            raise InvalidInput(
                "data location refused",
                [detail(field_name, f"{file_uri.url} is outside every allowed location")],
            )
        check_resolved(file_uri, settings, field_name)
    return paths


def _parquet_file(fs: Any, path: str) -> tuple[SourceFile, list[Column]]:
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as fh:
        meta = pq.ParquetFile(fh).metadata
        schema = meta.schema.to_arrow_schema()
        size = fh.size if hasattr(fh, "size") else None
    groups = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    columns = [Column(f.name, str(f.type)) for f in schema]
    return SourceFile(path, size, meta.num_rows, groups), columns


def _csv_file(fs: Any, path: str) -> tuple[SourceFile, list[Column]]:
    import pyarrow.csv as pcsv

    with fs.open(path, "rb") as fh:
        reader = pcsv.open_csv(fh, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES))
        columns = [Column(f.name, str(f.type)) for f in reader.schema]
        size = fh.size if hasattr(fh, "size") else None
    return SourceFile(path, size, None), columns


def describe(
    uri: DataUri, data_format: str, settings: Settings, field_name: str = "data.uri"
) -> DataSource:
    """The files of ``uri`` and the columns they share, from footers and headers only (422s)."""
    if data_format not in FORMATS:
        raise InvalidInput(
            "unknown data format", [detail("data.format", f"must be one of {', '.join(FORMATS)}")]
        )
    paths = expand(uri, settings, field_name)
    options = storage_options(uri.scheme, settings)
    fs = open_filesystem(uri.scheme, options)
    read = _parquet_file if data_format == "parquet" else _csv_file
    files: list[SourceFile] = []
    columns: list[Column] | None = None
    for path in paths:
        url = f"{uri.scheme}://{path}"
        try:
            info, found = read(fs, path)
        except Exception as exc:
            raise _unreadable(field_name, url, exc) from None
        if columns is None:
            columns = found
        elif [c.name for c in found] != [c.name for c in columns]:
            raise InvalidInput(
                "data files disagree",
                [detail(field_name, f"{url} has other columns than {files[0].path}")],
            )
        files.append(info)
    assert columns is not None
    return DataSource(uri, data_format, files, columns, options)


def iter_column(source: DataSource, path: str, name: str) -> Iterator[Any]:
    """The values of column ``name`` of one file as Arrow arrays, block by block."""
    fs = open_filesystem(source.uri.scheme, source.options)
    with fs.open(path, "rb") as fh:
        if source.format == "parquet":
            import pyarrow.parquet as pq

            for batch in pq.ParquetFile(fh).iter_batches(columns=[name]):
                yield batch.column(0)
        else:
            import pyarrow.csv as pcsv

            reader = pcsv.open_csv(
                fh,
                read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                convert_options=pcsv.ConvertOptions(include_columns=[name]),
            )
            for batch in reader:
                yield batch.column(0)


def _parquet_range(source: DataSource, path: str, name: str) -> tuple[Any, Any] | None:
    """(min, max) of column ``name`` over one Parquet file from its statistics, or None."""
    import pyarrow.parquet as pq

    fs = open_filesystem(source.uri.scheme, source.options)
    with fs.open(path, "rb") as fh:
        meta = pq.ParquetFile(fh).metadata
    j = meta.schema.to_arrow_schema().get_field_index(name)
    low = high = None
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(j).statistics
        if stats is None or not stats.has_min_max or stats.null_count:
            return None
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    return None if low is None else (low, high)


def scan_labels(
    source: DataSource, target: str, max_classes: int, field_name: str = "data.target"
) -> tuple[DataSource, int | None]:
    """Count the classes of ``target`` (at least 2 is proven; None: more than ``max_classes``).

    Parquet: from the footers' statistics when every row group has them (min ≠ max proves two
    classes; the count is then not known: 2 is returned); else, and for CSV, the target column
    alone is streamed, which also counts each CSV file's rows (the returned source has them).
    Nulls in the target are a 422 naming ``field_name``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if source.format == "parquet":
        ranges = [_parquet_range(source, f.path, target) for f in source.files]
        if all(r is not None for r in ranges):
            low = min(r[0] for r in ranges if r is not None)
            high = max(r[1] for r in ranges if r is not None)
            return source, (1 if low == high else 2)
    seen: set[Any] = set()
    files = []
    for f in source.files:
        rows = 0
        try:
            for chunk in iter_column(source, f.path, target):
                if chunk.null_count:
                    raise InvalidInput(
                        "missing labels",
                        [detail(field_name, f"{source.url(f.path)} has empty {target!r} values")],
                    )
                rows += len(chunk)
                if len(seen) <= max_classes:
                    seen.update(pc.unique(chunk).to_pylist())
        except (InvalidInput, pa.ArrowInvalid) as exc:
            if isinstance(exc, InvalidInput):
                raise
            raise InvalidInput(
                "data cannot be read", [detail(field_name, f"{source.url(f.path)}: {exc}"[:300])]
            ) from None
        except Exception as exc:
            raise _unreadable("data.uri", source.url(f.path), exc) from None
        files.append(SourceFile(f.path, f.size, rows, f.row_groups))
    counted = DataSource(source.uri, source.format, files, source.columns, source.options)
    return counted, (len(seen) if len(seen) <= max_classes else None)
