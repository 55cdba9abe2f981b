"""User-facing errors: the CLI prints them as one line and exits with status 2."""

from __future__ import annotations


class GfsError(Exception):
    """Bad input or an impossible request, explained in one line."""


class InputError(GfsError):
    """A malformed file: names the file and, where known, the row and column."""

    def __init__(self, path: object, message: str, row: int | None = None,
                 column: str | None = None) -> None:
        where = str(path)
        if row is not None:
            where += f", row {row}"
        if column is not None:
            where += f", column '{column}'"
        super().__init__(f"{where}: {message}")
        self.path, self.row, self.column = path, row, column
        self._message = message

    def __reduce__(self) -> tuple[type[InputError], tuple[object, str, int | None, str | None]]:
        # rebuilt from its own arguments: an error raised in a worker process (a sweep, a
        # compare with workers) reaches the parent as this error, not as a broken pool
        return (type(self), (self.path, self._message, self.row, self.column))
