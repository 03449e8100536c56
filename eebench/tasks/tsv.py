"""Read one GLUE/ELUE TSV file into named columns, strictly, with line numbers for errors.

The benchmark files come in two quoting styles, with or without a BOM, with LF or CRLF line
endings, and with or without a header line (see docs/data.md). The csv module handles all of it
once the right settings are chosen, so this is the only place that knows about them. Every problem
is raised as a one-line DataError that names the file and, where it applies, the line.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

from eebench.errors import DataError
from eebench.io import not_a_file

QUOTING = {"none": csv.QUOTE_NONE, "csv": csv.QUOTE_MINIMAL}

# IMDb reviews reach ~14k characters; a runaway quoted field in a CSV-quoted file is caught by the
# strict reader long before this limit, so the limit only has to be above any real field.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass
class Table:
    """The data rows of a TSV file; `lines[i]` is the 1-based line where row i starts."""

    path: Path
    columns: tuple[str, ...]
    rows: list[list[str]]
    lines: list[int]
    blank_lines: int  # empty lines between or after rows: counted, never silently dropped

    def column(self, name: str) -> list[str]:
        i = self.columns.index(name)
        return [row[i] for row in self.rows]


def _unterminated(name: str, line: int, how: str) -> DataError:
    """A quoted field that runs past the line it opened on. No benchmark file holds a line break
    inside a field, so a record spanning lines is a quote left open: named at its first line,
    never read as one long row that swallows the rows after it."""
    return DataError(f"{name}:{line}: unterminated quote: the quoted field {how}")


def read_tsv(
    path: Path,
    quoting: str = "none",
    header: bool = True,
    columns: tuple[str, ...] | None = None,
    label: str | None = None,
) -> Table:
    """Read `path`; `columns` names the fields of a file without a header line.

    `label` is how the file is named in messages (default: the path as given).
    """
    name = label or str(path)
    if quoting not in QUOTING:
        raise ValueError(f"unknown quoting {quoting!r}; choose from {sorted(QUOTING)}")
    if not path.is_file():  # a FIFO would block the reader, a device never end
        raise DataError(f"{name}: {not_a_file(path)}")
    records: list[list[str]] = []
    starts: list[int] = []
    blank = 0
    prev = 0  # the line the last record ended on: the next one starts after it
    try:
        # utf-8-sig drops a leading BOM (MRPC, SNLI); newline="" lets csv strip CR of CRLF files.
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=QUOTING[quoting], strict=True)
            for record in reader:
                if reader.line_num > prev + 1:  # a quoted field ran on past its line
                    raise _unterminated(name, prev + 1, f"runs on to line {reader.line_num}")
                if not record:
                    blank += 1
                else:
                    records.append(record)
                    starts.append(prev + 1)
                prev = reader.line_num
    except UnicodeDecodeError as e:
        raise DataError(f"{name}: not valid UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise DataError(f"{name}: cannot read ({e.strerror or e})") from None
    except csv.Error as e:
        # A quote opened in a record and not closed on its line: the csv module notices where
        # the field ends (the end of the file, or a later quote not followed by a tab), but the
        # line to fix is where the record starts.
        if "end of data" in str(e):
            raise _unterminated(name, prev + 1, f"runs to the end of the file (line "
                                f"{reader.line_num})") from None
        if reader.line_num > prev + 1:
            raise _unterminated(name, prev + 1, f"runs on to line {reader.line_num}, where "
                                f"parsing stops ({e})") from None
        line = reader.line_num or 1
        raise DataError(f"{name}:{line}: malformed {quoting}-quoted TSV ({e})") from None
    if not records:
        raise DataError(f"{name}: empty file")
    if header:
        names = tuple(c.strip() for c in records[0])
        records, starts = records[1:], starts[1:]
        if len(set(names)) != len(names):
            raise DataError(f"{name}:1: duplicate column names in header: {', '.join(names)}")
    else:
        if columns is None:
            raise ValueError(f"{name}: a file without a header needs column names")
        names = tuple(columns)
    if not records:
        raise DataError(f"{name}: no data rows (header line only)")
    for record, line in zip(records, starts, strict=True):
        if len(record) != len(names):
            raise DataError(
                f"{name}:{line}: expected {len(names)} tab-separated fields "
                f"({', '.join(names)}), found {len(record)}"
            )
    return Table(path=path, columns=names, rows=records, lines=starts, blank_lines=blank)
