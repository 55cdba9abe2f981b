"""User-facing errors: the CLI prints them as one line and exits with status 2."""

from __future__ import annotations

import contextlib


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


def shown(value: object) -> str:
    """A value as the user gave it, for messages: a float in its shortest exact form
    (``8.0000001``, not ``8`` as ``:g`` would print it; ``1e+308``), whole numbers without ``.0``,
    text one line and at most 60 characters (a cell may hold a whole file's worth)."""
    if isinstance(value, bool):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        with contextlib.suppress(TypeError, ValueError):
            value = value.item()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    text = repr(value) if isinstance(value, str) else str(value)
    text = text if "\n" not in text else repr(str(value))
    return text if len(text) <= 60 else text[:57] + "..."


def shown_list(values: object, limit: int = 8) -> str:
    """Some values for a message, each `shown`, at most ``limit`` of them."""
    items = list(values)  # type: ignore[call-overload]
    text = ", ".join(shown(v) for v in items[:limit])
    return text + (f" … ({len(items)} in all)" if len(items) > limit else "")
