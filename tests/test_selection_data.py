"""The candidate catalog, the listening requests file, and the advocates' retrieval."""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from pathlib import Path

import pytest

from pipeline.data.catalog import COLUMNS, load_catalog
from pipeline.data.listening_requests import RetrievalSpec, framework_for, load_requests
from pipeline.errors import ConfigError, InputError
from pipeline.experiments.selection.params import SelectionSettings
from pipeline.experiments.selection.pools import request_pools
from pipeline.experiments.selection.retrieve import advocate_rankings, matches, retrieve
from tests.conftest import shared_dir

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "data/selection/catalog_fictional.csv"
REQUESTS = ROOT / "data/selection/requests.yaml"
SPOTIFY = shared_dir() / "corpora" / "music-spotify" / "spotify_tracks_2400.csv"


def catalog_rows(count: int = 3) -> list[dict[str, str]]:
    with CATALOG.open(encoding="utf-8", newline="") as handle:
        return [row for _, row in zip(range(count), csv.DictReader(handle), strict=False)]


def write_catalog(
    path: Path, rows: list[dict[str, str]], columns: list[str] | tuple[str, ...] = COLUMNS
) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def load_error(path: Path) -> InputError:
    with pytest.raises(InputError) as caught:
        load_catalog(path, "cat.csv")
    return caught.value


def test_the_shipped_catalog_and_requests_load():
    tracks = load_catalog(CATALOG)
    assert len(tracks) == 288 and len({t.track_id for t in tracks}) == 288
    assert tracks[0].line == 2 and tracks[-1].line == 289
    requests = load_requests(REQUESTS)
    assert len(requests.requests) == 20
    for request in requests.requests:
        framework = framework_for(request, requests.framework)
        assert framework.diversity_targets and all(c.weight > 0 for c in framework.criteria.values())


def test_a_bad_number_names_its_line_counting_a_title_that_spans_two_lines(tmp_path):
    rows = catalog_rows()
    rows[0]["track_name"] = 'A "quoted", two-line\ntitle'
    rows[2]["energy"] = "loud"
    error = load_error(write_catalog(tmp_path / "c.csv", rows))
    assert (error.path, error.line) == ("cat.csv", 5)  # header 1, row one 2-3, row two 4, row three 5
    assert "energy is 'loud', not a number from 0 to 1" in str(error)


def test_an_out_of_range_popularity_names_the_row(tmp_path):
    rows = catalog_rows()
    rows[1]["track_popularity"] = "120"
    error = load_error(write_catalog(tmp_path / "c.csv", rows))
    assert error.line == 3 and "track_popularity is '120'" in error.problem


def test_a_missing_column_names_line_one(tmp_path):
    error = load_error(
        write_catalog(tmp_path / "c.csv", catalog_rows(), [c for c in COLUMNS if c != "valence"])
    )
    assert error.line == 1 and "valence" in error.problem and "spotify_tracks_2400.csv" in error.fix


def test_a_repeated_track_id_names_both_lines(tmp_path):
    rows = catalog_rows()
    rows[2]["track_id"] = rows[0]["track_id"]
    error = load_error(write_catalog(tmp_path / "c.csv", rows))
    assert error.line == 4 and "already appears on line 2" in error.problem


def test_a_short_row_and_an_empty_artist_are_refused(tmp_path):
    path = write_catalog(tmp_path / "c.csv", catalog_rows())
    path.write_text(path.read_text(encoding="utf-8") + "only,three,fields\n", encoding="utf-8")
    error = load_error(path)
    assert error.line == 5 and "3 comma-separated fields" in error.problem
    rows = catalog_rows()
    rows[1]["track_artist"] = " "
    assert load_error(write_catalog(tmp_path / "d.csv", rows)).problem == "track_artist is empty"


def test_an_unterminated_quote_names_the_row_it_opens(tmp_path):
    path = write_catalog(tmp_path / "c.csv", catalog_rows())
    path.write_text(path.read_text(encoding="utf-8") + 'x,"never closed,\n', encoding="utf-8")
    error = load_error(path)
    assert error.line == 5 and "not valid CSV" in error.problem and "double quotes" in error.fix


def test_a_byte_that_is_not_utf8_names_its_line(tmp_path):
    path = write_catalog(tmp_path / "c.csv", catalog_rows())
    path.write_bytes(path.read_bytes().replace(b"\n", b"\n\xe9", 2).replace(b"\n\xe9", b"\n", 1))
    assert load_error(path).line == 3


def requests_text(extra: str) -> str:
    return (
        "framework:\n"
        "  criteria:\n"
        "    relevance: {description: fits, weight: 0.8}\n"
        "    novelty: {description: rare, weight: 0.2, source: attribute,\n"
        "              attribute: track_popularity, invert: true}\n"
        "  diversity_targets: {genre: 2}\n"
        "requests:\n"
        "  - id: one\n"
        "    text: something calm\n" + extra
    )


@pytest.mark.parametrize(
    ("extra", "line", "needle"),
    [
        ("  - id: two\n    text: more\n    weights: {relevance: 0.5, novelty: 0.4}\n", 12, "sum to 0.9"),
        (
            "  - id: two\n    text: more\n    diversity_targets: {mood: 2}\n",
            12,
            "unknown diversity dimension",
        ),
        ("  - id: one\n    text: again\n", 10, "already used"),
        (
            "  - id: two\n    text: more\n    weights: {relevance: 0.5, vibe: 0.5}\n",
            12,
            "criteria the framework lacks: vibe",
        ),
        ("  - id: two\n    text: more\n    retrieve: {prefer: {tempo: 120}}\n", 12, "prefer"),
        ("  - id: two\n    text: [unclosed\n", 12, "not valid YAML"),
    ],
)
def test_a_bad_request_names_its_line(tmp_path, extra, line, needle):
    path = tmp_path / "requests.yaml"
    path.write_text(requests_text(extra), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_requests(path, "requests.yaml")
    assert caught.value.line == line and needle in str(caught.value)


def test_an_attribute_criterion_needs_a_known_attribute(tmp_path):
    path = tmp_path / "requests.yaml"
    path.write_text(
        requests_text("").replace("attribute: track_popularity", "attribute: vibes"), encoding="utf-8"
    )
    with pytest.raises(InputError) as caught:
        load_requests(path, "requests.yaml")
    assert caught.value.line == 4 and "an attribute criterion needs" in caught.value.problem


def test_retrieval_is_deterministic_and_independent_of_catalog_order():
    tracks = load_catalog(CATALOG)
    spec = load_requests(REQUESTS).requests[0].retrieve
    first = retrieve(tracks, spec, 30)
    shuffled = list(tracks)
    random.Random(7).shuffle(shuffled)
    assert [e.track.track_id for e in retrieve(shuffled, spec, 30)] == [e.track.track_id for e in first]
    assert first == retrieve(tracks, spec, 30)


def test_the_pool_alternates_advocates_respects_filters_and_caps_artists():
    tracks = load_catalog(CATALOG)
    spec = RetrievalSpec(features={"energy": (0.6, 1.0)}, prefer={"valence": 0.8})
    pool = retrieve(tracks, spec, 24, max_per_artist=1)
    assert len(pool) == 24 and len({e.track.track_id for e in pool}) == 24
    assert all(matches(e.track, spec) for e in pool)
    assert max(Counter(e.track.track_artist for e in pool).values()) == 1
    assert [e.advocate for e in pool[:4]] == ["genre_mood", "discovery", "genre_mood", "discovery"]
    rankings = advocate_rankings(tracks, spec)
    assert pool[0].track == rankings["genre_mood"][0] and pool[1].track == rankings["discovery"][0]
    assert pool[1].track.track_popularity == min(t.track_popularity for t in rankings["discovery"])


def test_a_pool_is_as_large_as_the_filters_allow():
    tracks = load_catalog(CATALOG)
    spec = RetrievalSpec(tags=("new jack swing",), years=(1990, 1992))
    assert len(retrieve(tracks, spec, 40)) == sum(1 for t in tracks if matches(t, spec)) < 40


def test_params_resolve_every_request_into_a_pool():
    pools = request_pools(SelectionSettings(pool_size=20, limit=5), ROOT)
    assert [p.request.id for p in pools] == [r.id for r in load_requests(REQUESTS).requests[:5]]
    assert all(len(p.pool) == 20 for p in pools)


def test_a_params_framework_that_misses_a_weighted_criterion_is_a_config_error():
    framework = load_requests(REQUESTS).framework.model_copy(
        update={"criteria": {"relevance": load_requests(REQUESTS).framework.criteria["relevance"]}}
    )
    settings = SelectionSettings.model_validate({"framework": None, "lambda": 0.5})
    assert settings.lambda_ == 0.5
    with pytest.raises(ConfigError, match=r"selection\.framework does not fit request 'deep-focus'"):
        request_pools(settings.model_copy(update={"framework": framework}), ROOT)


@pytest.mark.skipif(
    not SPOTIFY.is_file(), reason="the Spotify corpus lives in ../shared (not in the repository)"
)
def test_the_real_spotify_catalog_gives_every_request_a_full_pool():
    tracks = load_catalog(SPOTIFY)
    assert len(tracks) == 2400
    settings = SelectionSettings(catalog=str(SPOTIFY), pool_size=30)
    assert all(len(p.pool) == 30 for p in request_pools(settings, ROOT))
