"""DVC's read-modify-write of dvc.lock, without parsing or dumping again what it has just written.

After every stage it runs, DVC rewrites dvc.lock: it parses the whole file with ruamel.yaml's
round-trip loader (pure Python: 0.42 s of CPU for the committed 4,000-line lock on the 2-core
machine), puts the stage's entry in, and dumps the whole file again (0.25 s). `make replay` runs 16
stages, so it spent about 10 s of its 23 s of CPU there (bench/README.md), parsing each time the text it had
itself written one stage before, and, in a replay, writing the same text again.

`remembered_yaml()` replaces the `modify_yaml` that dvc.dvcfile calls with one that gives DVC the
same data and writes the same bytes, faster:

* a text this process wrote itself (compared in full) is not parsed: the data it was written from
  is used again;
* any other text is read with the safe loader (plain dicts, lists and scalars, about 6 times
  faster), and that data is used only when DVC's own dumper writes it back as exactly that text
  (nothing, no comment or style, would be lost); otherwise it is parsed as DVC parses it;
* when the data holds only plain values and is, type for type and value for value, what was just
  read (DVC put back an equal entry, as a replay does), the text read is written back as it was:
  DVC's dumper would write exactly it. Anything else is dumped by DVC's dumper.

As a repro starts, DVC loads dvc.yaml and dvc.lock twice each (strictyaml.load, validated against
a schema); `remembered_yaml()` also gives the second load of an unchanged text, for the same schema,
a copy of the data the first gave, and the lock's first rewrite the same.

The file is written after every stage, as DVC writes it. No check DVC makes is skipped: DVC sees the
same data and decides the same way.
"""

from __future__ import annotations

import copy
import io
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PLAIN = (str, int, float, bool, type(None))
_written: dict[str, tuple[str, Any]] = {}  # absolute path -> (the text written, the plain data it is)
_loaded: dict[tuple[str, bool], tuple[str, Any, Any]] = {}  # (path, round trip) -> (text, data, schema)


def fingerprint(data: Any) -> object:
    """The data's exact types and values, in order; a fresh object (equal to nothing) for data that
    holds anything but dicts (ordered or not), lists and plain scalars, whose dump may depend on more."""
    kind = type(data)
    if kind is dict or kind is OrderedDict:  # DVC's dumper writes an OrderedDict as a dict
        return ("d", tuple((fingerprint(k), fingerprint(v)) for k, v in data.items()))
    if kind is list:
        return ("l", tuple(fingerprint(v) for v in data))
    if kind in PLAIN:
        return (kind.__name__, repr(data))
    return object()


def dumps(data: Any) -> str:
    """What DVC's dumper writes for the data."""
    from dvc.utils.serialize._yaml import _dump

    stream = io.StringIO()
    _dump(data, stream)
    return stream.getvalue()


def read(key: str, text: str, path: str) -> tuple[Any, bool]:
    """The data DVC would parse from the text, and whether dumping it writes back exactly the text."""
    from dvc.utils.serialize._yaml import parse_yaml, parse_yaml_for_update

    kept = _written.pop(key, None)
    if kept is not None and kept[0] == text:
        return kept[1], True
    loaded = _loaded.get((key, False))
    plain = copy.deepcopy(loaded[1]) if loaded is not None and loaded[0] == text else parse_yaml(text, path)
    if dumps(plain) == text:
        return plain, True
    return parse_yaml_for_update(text, path), False


@contextmanager
def modify_yaml(path: str, fs: Any = None) -> Iterator[Any]:
    """dvc.utils.serialize.modify_yaml, less the parse and the dump whose result is known."""
    key = os.path.abspath(os.fspath(path))
    opener = fs.open if fs else open
    exists = fs.exists(os.fspath(path)) if fs else os.path.exists(path)
    data: Any = {}
    text, before = None, None
    if exists:
        with opener(path, encoding="utf-8") as fd:
            text = fd.read()
        data, plain = read(key, text, path)
        before = fingerprint(data) if plain else None
    yield data
    after = fingerprint(data)
    written = text if text is not None and before == after else dumps(data)
    with opener(path, "w+", encoding="utf-8") as fd:
        fd.write(written)
    if isinstance(after, tuple):
        _written[key] = (written, data)


def remembered_load(original: Callable[..., tuple[Any, str]]) -> Callable[..., tuple[Any, str]]:
    """dvc.utils.strictyaml.load, which DVC calls twice for dvc.yaml and twice for dvc.lock as a
    repro starts (0.29 s for the lock): a file whose text is the one loaded (and validated against
    the same schema) before is given a copy of the data loaded then."""

    def load(
        path: str, schema: Any = None, fs: Any = None, encoding: str = "utf-8", round_trip: bool = False
    ) -> Any:
        key = (os.path.abspath(os.fspath(path)), round_trip)
        loaded = _loaded.get(key)
        if loaded is not None and loaded[2] is schema and not round_trip:
            with (fs.open if fs else open)(path, encoding=encoding) as fd:
                text = fd.read()
            if text == loaded[0]:
                return copy.deepcopy(loaded[1]), text
        data, text = original(path, schema, fs, encoding, round_trip)
        if not round_trip:
            _loaded[key] = (text, copy.deepcopy(data), schema)
        return data, text

    return load


@contextmanager
def remembered_yaml() -> Iterator[None]:
    """dvc.dvcfile's modify_yaml and dvc.utils.strictyaml's load replaced by the ones above while the
    block runs."""
    import dvc.dvcfile
    import dvc.utils.strictyaml

    original_modify, original_load = dvc.dvcfile.modify_yaml, dvc.utils.strictyaml.load
    dvc.dvcfile.modify_yaml = modify_yaml
    dvc.utils.strictyaml.load = remembered_load(original_load)
    try:
        yield
    finally:
        dvc.dvcfile.modify_yaml, dvc.utils.strictyaml.load = original_modify, original_load
        _written.clear()
        _loaded.clear()
