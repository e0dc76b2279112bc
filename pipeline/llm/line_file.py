"""Lines kept on disk in this process's own unnamed temporary file, 8 bytes a line in memory (issue 33).

A million-call run kept things a line each (a session's served calls, a recording's lines as they
are made, a dry run's calls) as Python objects: 1 to 1.5 kB a call. A LineFile writes each line's
bytes to an unnamed temporary file (gone with the process, so what is read back is what was
written) and holds only where each line ends, in an array("Q"). Its users are
pipeline.llm.served_log.LineLog (a session's calls, a dry run's) and
pipeline.llm.recordings.spool.Spool (a recording's lines).
"""

from __future__ import annotations

import os
import tempfile
import threading
from array import array
from typing import IO


class LineFile:
    """Lines appended (each its bytes, without a separator), read back by number (thread-safe)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix  # the temporary file's name, to tell whose it is among a process's files
        self._file: IO[bytes] | None = None
        self._ends = array("Q")  # where each line's bytes end in the file (the next one's start)
        self._lock = threading.Lock()

    def append(self, data: bytes) -> int:
        """Keep one line; its number (from 0)."""
        with self._lock:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix=self._prefix)  # noqa: SIM115 (closed by close)
            self._file.write(data)
            self._ends.append((self._ends[-1] if self._ends else 0) + len(data))
            return len(self._ends) - 1

    def __len__(self) -> int:
        return len(self._ends)

    def read(self, first: int, end: int) -> list[bytes]:
        """Lines `first` to `end` (not included), in one read; [] for an empty range."""
        with self._lock:
            if end <= first:
                return []
            assert self._file is not None, "lines of this file"
            self._file.flush()
            start = self._ends[first - 1] if first else 0
            data = os.pread(self._file.fileno(), self._ends[end - 1] - start, start)
            ends = self._ends[first:end]
        lines, at = [], 0
        for line_end in ends:
            lines.append(data[at : line_end - start])
            at = line_end - start
        return lines

    def line(self, number: int) -> bytes:
        """Line `number`'s bytes."""
        return self.read(number, number + 1)[0]

    def close(self) -> None:
        """Let go of the file (it reads as empty after this)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            self._ends = array("Q")
