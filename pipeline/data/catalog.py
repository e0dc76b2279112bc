"""A candidate catalog: tracks with the columns of the Spotify corpus, read from CSV.

The columns are those of `spotify_tracks_2400.csv` (../shared/corpora/music-spotify, TidyTuesday
2020-01-21 deduplicated by its make_sample.py); extra columns are ignored, so a catalog may carry
more. The repository ships only a fictional catalog in these columns (data/selection/README.md says
why, and how to point `selection.catalog` at the real one).

Every row is checked: a missing column, a value that is not a number or is out of its range, an
empty id or name, or a repeated track_id stops loading with an InputError naming the file, the line
and the fix. The csv module is used, not split(","): titles hold commas and quotes, and a quoted
field may span lines, so each track keeps the line its row starts on.

Diversity is measured on categories derived here from the columns (`Track.category`): genre,
subgenre, era (the release decade, "1990s"), artist, and energy (low < 0.4 <= medium < 0.7 <= high).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from pipeline.data.input_files import COLUMN_FIX, plain_number, read_lines, repeated_column
from pipeline.errors import InputError
from pipeline.llm.project_files import quoted

TEXT_COLUMNS: Final = (
    "track_id",
    "track_name",
    "track_artist",
    "track_album_name",
    "track_album_release_date",
    "genre",
    "subgenre",
    "tags",
)
# Columns that must hold a value; an album name or release date may be empty.
REQUIRED_TEXT: Final = ("track_id", "track_name", "track_artist", "genre", "subgenre")
# Spotify's audio features on 0-1: the attributes a criterion may be derived from, with popularity.
UNIT_COLUMNS: Final = (
    "danceability",
    "energy",
    "valence",
    "acousticness",
    "instrumentalness",
    "speechiness",
    "liveness",
)
INT_RANGES: Final = {
    "track_popularity": (0, 100),
    "release_year": (1900, 2100),
    "n_playlists": (0, 1_000_000),
    "duration_ms": (1, 10**9),
}
FLOAT_RANGES: Final = {
    **dict.fromkeys(UNIT_COLUMNS, (0.0, 1.0)),
    "tempo": (0.0, 400.0),
    "loudness": (-100.0, 20.0),
}
COLUMNS: Final = TEXT_COLUMNS + tuple(INT_RANGES) + tuple(FLOAT_RANGES)
# The numeric attributes a criterion may be derived from, with the value that maps to 1.0.
ATTRIBUTE_SCALES: Final = {"track_popularity": 100.0, **dict.fromkeys(UNIT_COLUMNS, 1.0)}
DIVERSITY_DIMENSIONS: Final = ("genre", "subgenre", "era", "artist", "energy")


class Track(BaseModel):
    """One catalog row, typed; `line` is where its row starts in the file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    track_id: str
    track_name: str
    track_artist: str
    track_album_name: str
    track_album_release_date: str
    genre: str
    subgenre: str
    tags: tuple[str, ...]
    track_popularity: int
    release_year: int
    n_playlists: int
    duration_ms: int
    danceability: float
    energy: float
    valence: float
    acousticness: float
    instrumentalness: float
    speechiness: float
    liveness: float
    tempo: float
    loudness: float
    line: int

    @property
    def era(self) -> str:
        return f"{self.release_year // 10 * 10}s"

    def category(self, dimension: str) -> str:
        """The track's value on a diversity dimension (DIVERSITY_DIMENSIONS)."""
        if dimension == "genre":
            return self.genre
        if dimension == "subgenre":
            return self.subgenre
        if dimension == "era":
            return self.era
        if dimension == "artist":
            return self.track_artist
        if dimension == "energy":
            return "low" if self.energy < 0.4 else "medium" if self.energy < 0.7 else "high"
        raise ValueError(f"unknown diversity dimension {dimension!r}; known: {DIVERSITY_DIMENSIONS}")

    def attribute(self, name: str) -> float:
        """A numeric attribute a criterion may be derived from (ATTRIBUTE_SCALES)."""
        if name not in ATTRIBUTE_SCALES:
            raise ValueError(f"{name!r} is not a numeric attribute; known: {sorted(ATTRIBUTE_SCALES)}")
        return float(getattr(self, name))


def load_catalog(path: Path, shown: str | None = None) -> list[Track]:
    """Every track of a catalog CSV in file order; `shown` names the file in errors (default: path)."""
    shown = shown or str(path)
    if not path.is_file():
        raise InputError(
            shown, None, "no such file", "point selection.catalog at a CSV (data/selection/README.md)"
        )
    reader = csv.reader(io.StringIO("\n".join(read_lines(path, shown)), newline=""), strict=True)
    header = _header(reader, shown)
    tracks: list[Track] = []
    first_line: dict[str, int] = {}
    row_start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InputError(shown, row_start, f"not valid CSV ({exc})", _QUOTE_FIX) from None
        line, row_start = row_start, reader.line_num + 1
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            problem = f"the row has {len(cells)} comma-separated fields, the header {len(header)}"
            raise InputError(shown, line, problem, _QUOTE_FIX)
        track = _track(dict(zip(header, cells, strict=True)), shown, line)
        if track.track_id in first_line:
            problem = f"track_id {track.track_id} already appears on line {first_line[track.track_id]}"
            raise InputError(shown, line, problem, "keep one row per track_id")
        first_line[track.track_id] = line
        tracks.append(track)
    if not tracks:
        raise InputError(shown, 2, "the file has a header but no tracks", "add one row per track")
    return tracks


_QUOTE_FIX = 'quote any field holding a comma or a line break in double quotes, doubling inner quotes ("")'


def _header(reader: Any, shown: str) -> list[str]:
    try:
        header = [column.strip() for column in next(reader)]
    except csv.Error as exc:
        raise InputError(shown, 1, f"not valid CSV ({exc})", _QUOTE_FIX) from None
    missing = [column for column in COLUMNS if column not in header]
    if missing:
        problem = f"the header lacks column(s) {', '.join(missing)}"
        fix = (
            "use the columns of spotify_tracks_2400.csv (its make_sample.py derives them from the "
            "original TidyTuesday file); data/selection/README.md lists them"
        )
        raise InputError(shown, 1, problem, fix)
    if (twice := repeated_column(header, [c if c in COLUMNS else None for c in header])) is not None:
        raise InputError(shown, 1, twice, COLUMN_FIX)
    return header


def _track(row: dict[str, str], shown: str, line: int) -> Track:
    values: dict[str, Any] = {column: row[column].strip() for column in TEXT_COLUMNS}
    for column in REQUIRED_TEXT:
        if not values[column]:
            raise InputError(shown, line, f"{column} is empty", "fill it in, or delete the row")
    values["tags"] = tuple(tag.strip() for tag in values["tags"].split(";") if tag.strip())
    for column, (low, high) in INT_RANGES.items():
        number = _number(row[column], column, shown, line, low, high)
        if not number.is_integer():
            cell = quoted(shown, "'" + row[column] + "'")
            problem = f"{column} is {cell}, not a whole number"
            raise InputError(shown, line, problem, "correct it")
        values[column] = int(number)
    for column, (low_f, high_f) in FLOAT_RANGES.items():
        values[column] = _number(row[column], column, shown, line, low_f, high_f)
    return Track(**values, line=line)


def _number(cell: str, column: str, shown: str, line: int, low: float, high: float) -> float:
    value = plain_number(cell)
    if not low <= value <= high:  # NaN fails too
        given = quoted(shown, "'" + cell + "'")
        problem = f"{column} is {given}, not a number from {low:g} to {high:g}"
        raise InputError(shown, line, problem, "correct it (Spotify's value for the track)")
    return value
