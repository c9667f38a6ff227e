"""Errors that say where bad data came from: the file, the record and the field."""

from __future__ import annotations


class SchemaError(ValueError):
    """A record broke the contract.

    The message always names the source (a file or stream), the record (an id
    or row number) and the field at fault, so that a data engineer can find it.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        record: str | int | None = None,
        field: str | None = None,
    ):
        self.reason = message
        self.source = source
        self.record = record
        self.field = field
        where = []
        if source is not None:
            where.append(f"file {source}")
        if record is not None:
            where.append(f"record {record}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)

    def located(self, *, source: str | None = None, record: str | int | None = None) -> SchemaError:
        """The same error with the file and record filled in where unknown."""
        return SchemaError(
            self.reason,
            source=self.source or source,
            record=self.record if self.record is not None else record,
            field=self.field,
        )
