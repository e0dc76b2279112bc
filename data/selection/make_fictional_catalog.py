"""Write catalog_fictional.csv: 288 invented tracks in the columns of the Spotify corpus.

Every artist, title and album is made up from the word lists below, and every number is drawn from a
per-subgenre profile (roughly where such music sits: classic rock is from the 1960s-80s and
guitar-heavy, big room is loud and fast, neo soul slow and warm). Nothing is copied from Spotify or
the TidyTuesday data: the repository may ship this file, where it may not ship a sample of theirs
(README.md). Standard library only; the seed makes the file byte-identical on every run:

    python data/selection/make_fictional_catalog.py
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

SEED = 2026
TRACKS_PER_SUBGENRE = 12
COLUMNS = [
    "track_id",
    "track_name",
    "track_artist",
    "track_popularity",
    "track_album_name",
    "track_album_release_date",
    "release_year",
    "genre",
    "subgenre",
    "tags",
    "n_playlists",
    "danceability",
    "energy",
    "valence",
    "tempo",
    "acousticness",
    "instrumentalness",
    "speechiness",
    "liveness",
    "loudness",
    "duration_ms",
]

# subgenre: (genre, years, energy, valence, danceability, acousticness, instrumentalness, speechiness, tempo)
PROFILES: dict[str, tuple[str, tuple[int, int], float, float, float, float, float, float, float]] = {
    "big room": ("edm", (2012, 2020), 0.90, 0.45, 0.65, 0.02, 0.45, 0.07, 128),
    "electro house": ("edm", (2008, 2020), 0.85, 0.50, 0.72, 0.03, 0.35, 0.08, 126),
    "pop edm": ("edm", (2013, 2020), 0.75, 0.55, 0.66, 0.08, 0.05, 0.06, 118),
    "progressive electro house": ("edm", (2009, 2019), 0.78, 0.35, 0.60, 0.03, 0.60, 0.05, 127),
    "latin hip hop": ("latin", (2000, 2020), 0.70, 0.55, 0.78, 0.15, 0.01, 0.20, 96),
    "latin pop": ("latin", (1995, 2020), 0.72, 0.65, 0.70, 0.25, 0.01, 0.07, 104),
    "reggaeton": ("latin", (2004, 2020), 0.78, 0.65, 0.80, 0.12, 0.01, 0.12, 94),
    "tropical": ("latin", (1975, 2020), 0.65, 0.80, 0.74, 0.35, 0.05, 0.05, 110),
    "dance pop": ("pop", (1985, 2020), 0.75, 0.60, 0.72, 0.10, 0.01, 0.06, 118),
    "electropop": ("pop", (2005, 2020), 0.70, 0.50, 0.66, 0.12, 0.08, 0.05, 120),
    "indie poptimism": ("pop", (2010, 2020), 0.58, 0.45, 0.62, 0.30, 0.12, 0.06, 112),
    "post-teen pop": ("pop", (2010, 2020), 0.68, 0.52, 0.68, 0.15, 0.01, 0.08, 115),
    "hip pop": ("r&b", (1995, 2015), 0.65, 0.58, 0.74, 0.15, 0.01, 0.15, 98),
    "neo soul": ("r&b", (1994, 2020), 0.45, 0.50, 0.62, 0.40, 0.10, 0.09, 90),
    "new jack swing": ("r&b", (1986, 1996), 0.70, 0.70, 0.72, 0.10, 0.02, 0.07, 108),
    "urban contemporary": ("r&b", (1990, 2020), 0.55, 0.45, 0.68, 0.25, 0.02, 0.10, 100),
    "gangster rap": ("rap", (1988, 2010), 0.72, 0.55, 0.76, 0.10, 0.01, 0.28, 94),
    "hip hop": ("rap", (1985, 2020), 0.66, 0.55, 0.74, 0.15, 0.02, 0.25, 96),
    "southern hip hop": ("rap", (1995, 2020), 0.70, 0.50, 0.78, 0.08, 0.01, 0.22, 140),
    "trap": ("rap", (2012, 2020), 0.62, 0.35, 0.74, 0.12, 0.01, 0.20, 142),
    "album rock": ("rock", (1968, 1992), 0.68, 0.55, 0.52, 0.20, 0.10, 0.05, 124),
    "classic rock": ("rock", (1963, 1985), 0.65, 0.60, 0.50, 0.25, 0.08, 0.05, 122),
    "hard rock": ("rock", (1970, 2010), 0.88, 0.45, 0.45, 0.02, 0.05, 0.07, 130),
    "permanent wave": ("rock", (1978, 2005), 0.70, 0.50, 0.52, 0.10, 0.15, 0.05, 128),
}

ADJECTIVES = [
    "Amber",
    "Broken",
    "Cobalt",
    "Crimson",
    "Distant",
    "Electric",
    "Faded",
    "Golden",
    "Hidden",
    "Hollow",
    "Indigo",
    "Lunar",
    "Midnight",
    "Neon",
    "Paper",
    "Quiet",
    "Restless",
    "Silver",
    "Slow",
    "Velvet",
    "Wild",
    "Winter",
    "Wooden",
    "Young",
]
NOUNS = [
    "Atlas",
    "Avenue",
    "Bridge",
    "Canyon",
    "Circuit",
    "Coast",
    "Echo",
    "Engine",
    "Garden",
    "Harbor",
    "Highway",
    "Island",
    "Lantern",
    "Mirror",
    "Orchard",
    "Parade",
    "River",
    "Signal",
    "Skyline",
    "Static",
    "Tide",
    "Valley",
    "Window",
    "Wire",
]
FIRST_NAMES = [
    "Ada",
    "Bruno",
    "Cleo",
    "Dario",
    "Esme",
    "Felix",
    "Greta",
    "Hugo",
    "Iris",
    "Jonas",
    "Kira",
    "Luca",
    "Mara",
    "Nico",
    "Olga",
    "Pia",
    "Rafa",
    "Sol",
]
SURNAMES = [
    "Arden",
    "Bell",
    "Castell",
    "Dunmore",
    "Ferro",
    "Galloway",
    "Halden",
    "Ivers",
    "Kestrel",
    "Lindqvist",
    "Marlow",
    "Novak",
    "Orsini",
]

ALBUM_WORDS = ["Sessions", "Nights", "Tapes", "EP", "Stories"]


def _artist(rng: random.Random) -> str:
    form = rng.randrange(3)
    if form == 0:
        return f"The {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}s"
    if form == 1:
        return f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"
    return f"{rng.choice(FIRST_NAMES)} & the {rng.choice(NOUNS)}s"


def _unit(rng: random.Random, centre: float, spread: float = 0.15) -> float:
    return round(min(1.0, max(0.0, rng.gauss(centre, spread))), 3)


def rows() -> list[dict[str, str]]:
    rng = random.Random(SEED)
    out = []
    for subgenre, (genre, years, energy, valence, dance, acoustic, instr, speech, tempo) in PROFILES.items():
        artists = [_artist(rng) for _ in range(8)]  # a few artists hold two tracks, as on real playlists
        for _ in range(TRACKS_PER_SUBGENRE):
            year = rng.randint(*years)
            month, day = rng.randint(1, 12), rng.randint(1, 28)
            title = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
            tags = [genre, subgenre]
            if rng.random() < 0.1:  # about one track in ten also sits under a neighbouring subgenre
                neighbour = rng.choice([s for s, p in PROFILES.items() if p[0] == genre and s != subgenre])
                tags.append(neighbour)
            out.append(
                {
                    "track_id": "fx"
                    + "".join(rng.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(14)),
                    "track_name": title,
                    "track_artist": rng.choice(artists),
                    "track_popularity": str(min(100, max(0, round(rng.gauss(42, 22))))),
                    "track_album_name": f"{rng.choice(NOUNS)} {rng.choice(ALBUM_WORDS)}",
                    "track_album_release_date": f"{year}-{month:02d}-{day:02d}",
                    "release_year": str(year),
                    "genre": genre,
                    "subgenre": subgenre,
                    "tags": ";".join(tags),
                    "n_playlists": str(len(tags) - 1),
                    "danceability": str(_unit(rng, dance)),
                    "energy": str(_unit(rng, energy)),
                    "valence": str(_unit(rng, valence, 0.2)),
                    "tempo": str(round(max(60.0, rng.gauss(tempo, 8)), 3)),
                    "acousticness": str(_unit(rng, acoustic, 0.12)),
                    "instrumentalness": str(
                        _unit(rng, instr, 0.2) if instr > 0.05 else round(rng.random() * 0.01, 5)
                    ),
                    "speechiness": str(_unit(rng, speech, 0.05)),
                    "liveness": str(_unit(rng, 0.18, 0.1)),
                    "loudness": str(round(min(0.0, rng.gauss(-13 + 10 * energy, 2)), 3)),
                    "duration_ms": str(rng.randint(150_000, 330_000)),
                }
            )
    return out


def main() -> None:
    target = Path(__file__).with_name("catalog_fictional.csv")
    with target.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows())


if __name__ == "__main__":
    main()
