"""Parquet tables (a release's samples dataset), read and written with pyarrow within bounds.

A table is written with pyarrow's defaults and no pandas metadata, so the same rows give the same bytes.
`pyarrow` comes with ``hubkit[hub]``; it is imported when a table is read or written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hubkit.errors import FileFormatError

MAX_ROWS = 2_000_000


def read_table(data: bytes, name: str) -> Any:
    """The table a Parquet file's bytes hold (a `pyarrow.Table`) of plain columns: text, integers, numbers,
    booleans (nothing nested, so that every text is a cell `string_cells` sees).

    Raises:
        FileFormatError: not a Parquet file pyarrow reads, a nested column, or more than `MAX_ROWS` rows.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(pa.BufferReader(data))
        if file.metadata.num_rows > MAX_ROWS:
            raise FileFormatError(f"{name}: more than {MAX_ROWS} rows")
        table = file.read()
    except (pa.ArrowException, OSError) as e:
        raise FileFormatError(f"{name}: not a Parquet table ({str(e).splitlines()[0][:120]})") from e
    for field in table.schema:
        plain = field.type in (pa.string(), pa.large_string(), pa.bool_(), pa.null())
        if not (plain or pa.types.is_integer(field.type) or pa.types.is_floating(field.type)):
            raise FileFormatError(f"{name}: column {field.name!r} is {field.type}, not text or a number")
    return table


def write_table(table: Any) -> bytes:
    """A `pyarrow.Table` as Parquet bytes (pyarrow's defaults, no metadata beyond the schema)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(None), sink)
    return sink.getvalue().to_pybytes()


def table_of(columns: dict[str, list[Any]], types: dict[str, str]) -> Any:
    """A `pyarrow.Table` of `columns` (name → values), each of its pyarrow type name ("int64", "string",
    "bool", "double"), in the given order."""
    import pyarrow as pa

    return pa.table(
        {name: pa.array(values, type=pa.type_for_alias(types[name])) for name, values in columns.items()}
    )


def string_cells(table: Any) -> list[str]:
    """Every string cell of the table, column by column."""
    import pyarrow as pa

    return [
        value
        for column in table.columns
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        for value in column.to_pylist()
        if value is not None
    ]


def map_strings(table: Any, change: Callable[[str], str]) -> Any:
    """The table with `change` applied to every string cell (the same columns, types and row order)."""
    import pyarrow as pa

    columns = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            values = [None if v is None else change(v) for v in column.to_pylist()]
            column = pa.array(values, type=column.type)
        columns[name] = column
    return pa.table(columns)


def string_rows(table: Any) -> Iterator[list[str]]:
    """Each row's string cells, in row order."""
    for row in table.to_pylist():
        yield [value for value in row.values() if isinstance(value, str)]
