"""Documents in an order of their own, without a copy: the plan's ``payload`` column.

A first run's plan sends every document the mapping made. Ordered for delivery as a column of
its own, they would be held twice (the mapping's, and the plan's copy in delivery order), and
pyarrow's ``take`` over a column in many chunks concatenates them all first, a third time.
:class:`DocumentArray` is a pandas extension column that holds the documents where they are
(Arrow chunks) and an order over them (positions): sorting, filtering and concatenating plans
moves positions only; a document becomes text when it is read, a batch at a time
(:meth:`DocumentArray.arrow`), as the push and the recording take the plan's rows.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.api.extensions import (
    ExtensionArray,
    ExtensionDtype,
    register_extension_dtype,
    take,
)
from pandas.api.indexers import check_array_indexer

__all__ = ["DocumentArray", "DocumentDtype", "documents_containing"]

_TEXT = pa.large_string()
_READ_AT_ONCE = 5_000
"""Documents made Python strings at a time when the column is iterated."""


class _Documents:
    """Arrow text chunks and where each starts: what positions point into."""

    def __init__(self, chunks: Sequence[pa.Array]) -> None:
        self.chunks = tuple(chunk.cast(_TEXT) for chunk in chunks)
        lengths = np.array([len(chunk) for chunk in self.chunks], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._valid: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def valid(self) -> np.ndarray:
        """Whether each document is present (a record carried over unmapped has none)."""
        if self._valid is None:
            pieces = [chunk.is_valid().to_numpy(zero_copy_only=False) for chunk in self.chunks]
            self._valid = np.concatenate(pieces) if pieces else np.zeros(0, dtype=bool)
        return self._valid

    def containing(self, text: str) -> np.ndarray:
        """Whether each document contains ``text``, read chunk by chunk."""
        pieces = [
            pc.match_substring(chunk, text).fill_null(False).to_numpy(zero_copy_only=False)
            for chunk in self.chunks
        ]
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=bool)

    def gather(self, positions: np.ndarray) -> pa.Array:
        """The documents at ``positions`` (-1: missing), taken chunk by chunk: only these are
        copied, never the chunks concatenated."""
        present = positions >= 0
        wanted = positions[present]
        if not len(wanted):
            return pa.nulls(len(positions), _TEXT)
        chunk_of = np.searchsorted(self.starts, wanted, side="right") - 1
        order = np.argsort(chunk_of, kind="stable")
        cuts = np.flatnonzero(np.diff(chunk_of[order])) + 1
        pieces = []
        for group in np.split(order, cuts):
            chunk = int(chunk_of[group[0]])
            local = wanted[group] - self.starts[chunk]
            pieces.append(self.chunks[chunk].take(pa.array(local, pa.int64())))
        grouped = pa.concat_arrays(pieces)
        back = np.empty(len(order), dtype=np.int64)
        back[order] = np.arange(len(order), dtype=np.int64)
        if present.all():
            return grouped.take(pa.array(back))
        indices = np.zeros(len(positions), dtype=np.int64)
        indices[present] = back
        return grouped.take(pa.array(indices, mask=~present))


@register_extension_dtype
class DocumentDtype(ExtensionDtype):
    """Canonical JSON documents held in Arrow, read when asked for (missing: NaN)."""

    name: ClassVar[str] = "pms_sync_document"
    type = str
    kind: ClassVar[str] = "O"
    na_value = np.nan

    @classmethod
    def construct_array_type(cls) -> builtins.type[DocumentArray]:
        return DocumentArray

    def _get_common_dtype(self, dtypes: list[Any]) -> DocumentDtype | None:
        # Plans are concatenated with plans of text payloads (a plan file's, the property
        # changes', empty frames of objects): the documents stay documents, not Python text.
        if all(
            isinstance(dtype, DocumentDtype | pd.StringDtype)
            or dtype == np.dtype(object)
            or (isinstance(dtype, pd.ArrowDtype) and pa.types.is_string(dtype.pyarrow_dtype))
            or (isinstance(dtype, pd.ArrowDtype) and pa.types.is_large_string(dtype.pyarrow_dtype))
            for dtype in dtypes
        ):
            return self
        return None


class DocumentArray(ExtensionArray):
    """Positions over shared Arrow documents; see the module's docstring."""

    def __init__(self, documents: _Documents, positions: np.ndarray) -> None:
        self._documents = documents
        self._positions = np.asarray(positions, dtype=np.int64)

    @classmethod
    def over(cls, chunks: Sequence[pa.Array], positions: np.ndarray) -> DocumentArray:
        """The documents at ``positions`` of ``chunks`` read end to end (-1: missing)."""
        return cls(_Documents(chunks), positions)

    @classmethod
    def of_text(cls, values: Any) -> DocumentArray:
        """Every value of a text column (Arrow-backed columns keep their buffers)."""
        if isinstance(values, pd.Series | pd.Index):
            values = values.array
        if isinstance(values, DocumentArray):
            return values
        if hasattr(values, "__arrow_array__"):
            arrow = values.__arrow_array__()
        else:
            items = [None if _missing(value) else str(value) for value in values]
            arrow = pa.array(items, _TEXT)
        chunks = arrow.chunks if isinstance(arrow, pa.ChunkedArray) else [arrow]
        return cls.over(chunks, np.arange(len(arrow), dtype=np.int64))

    # -- what pandas asks of an extension array --------------------------------------------

    @classmethod
    def _from_sequence(
        cls, scalars: Any, *, dtype: Any = None, copy: bool = False
    ) -> DocumentArray:
        return cls.of_text(scalars)

    @classmethod
    def _from_factorized(cls, values: np.ndarray, original: DocumentArray) -> DocumentArray:
        return cls.of_text(values)

    @property
    def dtype(self) -> DocumentDtype:
        return DocumentDtype()

    @property
    def nbytes(self) -> int:
        return int(self._positions.nbytes)

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int | np.integer):
            position = int(self._positions[key])
            text = self._documents.gather(np.array([position], dtype=np.int64))[0].as_py()
            return np.nan if text is None else text
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        if not isinstance(key, slice):
            key = check_array_indexer(self, key)
        return DocumentArray(self._documents, self._positions[key])

    def __setitem__(self, key: Any, value: Any) -> None:
        if not isinstance(key, slice | int | np.integer):
            key = check_array_indexer(self, key)
        indices = np.arange(len(self))[key]
        values = [value] if np.ndim(indices) == 0 else list(value)
        if np.ndim(indices) != 0 and len(values) == 1 and len(indices) != 1:
            values = values * len(indices)
        added = pa.array([None if _missing(v) else str(v) for v in values], _TEXT)
        documents = _Documents([*self._documents.chunks, added])
        positions = self._positions.copy()
        positions[key] = len(self._documents) + np.arange(len(added), dtype=np.int64)
        self._documents, self._positions = documents, positions

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self), _READ_AT_ONCE):
            for text in self.arrow(slice(start, start + _READ_AT_ONCE)).to_pylist():
                yield np.nan if text is None else text

    def __eq__(self, other: Any) -> Any:
        return self.astype(object) == (
            other.astype(object) if isinstance(other, ExtensionArray) else other
        )

    def __arrow_array__(self, type: pa.DataType | None = None) -> pa.Array:
        found = self.arrow()
        return found if type is None else found.cast(type)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.astype(object) if dtype is None else self.astype(dtype)

    def isna(self) -> np.ndarray:
        positions = self._positions
        present = positions >= 0
        missing = ~present
        missing[present] = ~self._documents.valid[positions[present]]
        return missing

    def take(
        self, indices: Any, *, allow_fill: bool = False, fill_value: Any = None
    ) -> DocumentArray:
        taken = take(self._positions, indices, allow_fill=allow_fill, fill_value=-1)
        return DocumentArray(self._documents, taken)

    def copy(self) -> DocumentArray:
        return DocumentArray(self._documents, self._positions.copy())

    @classmethod
    def _concat_same_type(cls, to_concat: Sequence[DocumentArray]) -> DocumentArray:
        first = to_concat[0]._documents
        if all(array._documents is first for array in to_concat):
            return cls(first, np.concatenate([array._positions for array in to_concat]))
        chunks: list[pa.Array] = []
        positions = []
        for array in to_concat:
            offset = sum(len(chunk) for chunk in chunks)
            shifted = np.where(array._positions >= 0, array._positions + offset, -1)
            chunks.extend(array._documents.chunks)
            positions.append(shifted)
        return cls(_Documents(chunks), np.concatenate(positions))

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        if isinstance(dtype, DocumentDtype) or dtype == DocumentDtype.name:
            return self.copy() if copy else self
        text = pd.array(self.arrow(), dtype=pd.StringDtype("pyarrow", na_value=np.nan))
        if dtype is str or (isinstance(dtype, str) and dtype in {"str", "string"}):
            return text
        return text.astype(dtype)

    def _values_for_factorize(self) -> tuple[np.ndarray, Any]:
        return self.astype(object), np.nan

    # -- what pms-sync asks of it ------------------------------------------------------------

    def arrow(self, rows: slice | np.ndarray | None = None) -> pa.Array:
        """The documents (of ``rows`` only) as Arrow text: the only copy this column makes."""
        positions = self._positions if rows is None else self._positions[rows]
        return self._documents.gather(positions)

    def containing(self, text: str) -> np.ndarray:
        """Whether each document contains ``text``, without making any of them Python text."""
        positions = self._positions
        found = np.zeros(len(positions), dtype=bool)
        present = positions >= 0
        found[present] = self._documents.containing(text)[positions[present]]
        return found


def documents_containing(column: pd.Series, text: str) -> np.ndarray:
    """Whether each value of a payload column (documents or text) contains ``text``."""
    if isinstance(column.array, DocumentArray):
        return column.array.containing(text)
    return column.astype(str).str.contains(text, regex=False).to_numpy(dtype=bool)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA
