"""Schema rules shared by both backends: what plain Delta can hold, Spark <-> Arrow <-> Delta.

Tables created through :mod:`snap_spark.lake` have nullable columns only (as Spark's own file
writers do), timestamps as ``timestamp[us, tz=UTC]`` and no type that needs a Delta table
feature (``timestamp_ntz``, ``variant``), so they stay at reader/writer protocol 1/2.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    YearMonthIntervalType,
)

from snap_spark.lake.api import LakeSchemaError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

#: Column types a table may be partitioned by. Timestamps are left out on purpose: their
#: partition strings are read in the reader's session time zone by some engines; partition
#: by a derived ``date`` instead.
PARTITION_TYPES: tuple[type[DataType], ...] = (
    StringType,
    DateType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
)

_PRIMITIVE_TYPES: tuple[type[DataType], ...] = (
    StringType,
    BinaryType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    DateType,
    TimestampType,
)


def check_delta_compatible(schema: StructType) -> None:
    """Raise :class:`LakeSchemaError` unless every column fits a protocol 1/2 Delta table.

    Rejected: ``timestamp_ntz`` and ``variant`` (they need table features), intervals and
    ``void`` (not Delta types), and column names that differ only by case (Delta column
    names are case-insensitive).

    Examples:
        >>> from pyspark.sql.types import StructType, StructField, TimestampNTZType
        >>> check_delta_compatible(StructType([StructField("t", TimestampNTZType())]))
        Traceback (most recent call last):
        ...
        snap_spark.lake.api.LakeSchemaError: column 't': timestamp_ntz is not plain Delta ...
    """
    _check_struct(schema, prefix="")


def _check_struct(struct: StructType, prefix: str) -> None:
    seen: dict[str, str] = {}
    for field in struct.fields:
        name = f"{prefix}{field.name}"
        folded = field.name.lower()
        if folded in seen:
            raise LakeSchemaError(
                f"columns {seen[folded]!r} and {name!r} differ only by case; "
                "Delta column names are case-insensitive"
            )
        seen[folded] = name
        _check_type(field.dataType, name)


def _check_type(data_type: DataType, name: str) -> None:
    if isinstance(data_type, StructType):
        _check_struct(data_type, prefix=f"{name}.")
    elif isinstance(data_type, ArrayType):
        _check_type(data_type.elementType, f"{name}[]")
    elif isinstance(data_type, MapType):
        _check_type(data_type.keyType, f"{name}{{key}}")
        _check_type(data_type.valueType, f"{name}{{value}}")
    elif isinstance(data_type, TimestampNTZType):
        raise LakeSchemaError(
            f"column {name!r}: timestamp_ntz is not plain Delta (it needs writer protocol 7); "
            "use a UTC timestamp"
        )
    elif isinstance(data_type, (YearMonthIntervalType, DayTimeIntervalType, NullType)):
        raise LakeSchemaError(
            f"column {name!r}: {data_type.simpleString()} is not a Delta type; cast it first"
        )
    elif not isinstance(data_type, _PRIMITIVE_TYPES):
        raise LakeSchemaError(
            f"column {name!r}: {data_type.simpleString()} is not supported in plain Delta tables"
        )


def as_nullable(data_type: DataType) -> DataType:
    """``data_type`` with every field, element and value nullable and no field metadata.

    Examples:
        >>> from pyspark.sql.types import StructType, StructField, LongType
        >>> as_nullable(StructType([StructField("n", LongType(), False)])).simpleString()
        'struct<n:bigint>'
    """
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(f.name, as_nullable(f.dataType), nullable=True) for f in data_type.fields]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(as_nullable(data_type.elementType), containsNull=True)
    if isinstance(data_type, MapType):
        return MapType(
            as_nullable(data_type.keyType),
            as_nullable(data_type.valueType),
            valueContainsNull=True,
        )
    return data_type


def nullable_schema(schema: StructType) -> StructType:
    """:func:`as_nullable` for a whole schema (the schema tables are created with).

    Examples:
        >>> from pyspark.sql.types import StructType, StructField, LongType
        >>> nullable_schema(StructType([StructField("n", LongType(), False)])).fields[0].nullable
        True
    """
    result = as_nullable(schema)
    assert isinstance(result, StructType)
    return result


def to_arrow(schema: StructType) -> pa.Schema:
    """The Arrow schema files of a table with this Spark schema are written with.

    Timestamps become ``timestamp[us, tz=UTC]``; every field is nullable.

    Examples:
        >>> from pyspark.sql.types import StructType, StructField, TimestampType
        >>> str(to_arrow(StructType([StructField("at", TimestampType())])).field("at").type)
        'timestamp[us, tz=UTC]'
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(
        nullable_schema(schema),
        error_on_duplicated_field_names_in_struct=True,
        prefers_large_types=False,
        **_utc_timestamps(),
    )


@functools.cache
def _utc_timestamps() -> dict[str, Any]:
    """``to_arrow_schema``'s argument for UTC timestamps: PySpark 4.2 names the zone
    (``timezone=``), 4.0 and 4.1 take ``timestamp_utc=True``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return {"timezone": "UTC"}
    return {"timestamp_utc": True}


def from_delta_json(schema_json: str) -> StructType:
    """Spark schema of a Delta schema string (Delta's schema JSON is Spark's StructType JSON).

    Examples:
        >>> field = '{"name":"n","type":"long","nullable":true,"metadata":{}}'
        >>> s = '{"type":"struct","fields":[' + field + ']}'
        >>> from_delta_json(s).simpleString()
        'struct<n:bigint>'
    """
    return StructType.fromJson(json.loads(schema_json))


def same_columns(left: StructType, right: StructType) -> bool:
    """True when both schemas have the same column names and types (order, nullability and
    field metadata aside).

    Examples:
        >>> from pyspark.sql.types import StructType, StructField, LongType, StringType
        >>> a = StructType([StructField("n", LongType(), False), StructField("s", StringType())])
        >>> same_columns(a, StructType([a.fields[1], a.fields[0]]))
        True
    """
    return _column_types(left) == _column_types(right)


def _column_types(schema: StructType) -> dict[str, str]:
    return {f.name: as_nullable(f.dataType).json() for f in schema.fields}


def describe_mismatch(table: StructType, incoming: StructType) -> str:
    """A human readable list of what differs between a table schema and a DataFrame schema."""
    table_cols = _column_types(table)
    incoming_cols = _column_types(incoming)
    problems: list[str] = []
    missing = [name for name in table_cols if name not in incoming_cols]
    extra = [name for name in incoming_cols if name not in table_cols]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"columns not in the table {extra}")
    for name, type_json in incoming_cols.items():
        if name in table_cols and table_cols[name] != type_json:
            table_type = _type_string(table, name)
            incoming_type = _type_string(incoming, name)
            problems.append(f"column {name!r} is {incoming_type}, the table has {table_type}")
    return "; ".join(problems) or "schemas match"


def _type_string(schema: StructType, name: str) -> str:
    return schema[name].dataType.simpleString()


def conform(df: DataFrame, table_schema: StructType, path: str) -> DataFrame:
    """``df`` with its columns in the table's order; raises when names or types differ.

    Schema evolution is not done implicitly: a new column or a changed type is an error
    naming the difference.

    Examples:
        >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
        >>> table_schema = StructType([StructField("id", StringType()),
        ...                            StructField("n", LongType())])
        >>> df = spark.createDataFrame([(1, "a")], "n long, id string")
        >>> conform(df, table_schema, "/lake/counts").columns
        ['id', 'n']
        >>> conform(df.withColumn("note", df.id), table_schema, "/lake/counts")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        snap_spark.lake.api.LakeSchemaError: ... at /lake/counts: columns not in the table ['note']
    """
    if not same_columns(table_schema, df.schema):
        raise LakeSchemaError(
            f"DataFrame does not match the table at {path}: "
            f"{describe_mismatch(table_schema, df.schema)}"
        )
    names = [f.name for f in table_schema.fields]
    if df.columns == names:
        return df
    return df.select(*[df[name] for name in names])


def check_partition_columns(schema: StructType, partition_by: Sequence[str]) -> list[str]:
    """Validate partition columns against ``schema``; returns them as a list.

    Partition columns must exist, be top-level columns of a :data:`PARTITION_TYPES` type,
    appear once, and leave at least one data column.

    Examples:
        >>> from pyspark.sql.types import StructType, StructField, DateType, LongType
        >>> s = StructType([StructField("day", DateType()), StructField("n", LongType())])
        >>> check_partition_columns(s, ("day",))
        ['day']
    """
    columns = list(partition_by)
    if isinstance(partition_by, str):
        raise LakeSchemaError("partition_by must be a sequence of column names, not a string")
    if len(set(columns)) != len(columns):
        raise LakeSchemaError(f"partition columns repeat: {columns}")
    names = {f.name: f for f in schema.fields}
    for column in columns:
        if column not in names:
            raise LakeSchemaError(f"partition column {column!r} is not a column of the DataFrame")
        data_type = names[column].dataType
        if not isinstance(data_type, PARTITION_TYPES):
            raise LakeSchemaError(
                f"partition column {column!r} is {data_type.simpleString()}; partition by a "
                "string, date, boolean or integer column"
            )
    if columns and len(columns) == len(schema.fields):
        raise LakeSchemaError("every column is a partition column; keep at least one data column")
    return columns
