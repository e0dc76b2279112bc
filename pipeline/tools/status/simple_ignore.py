"""DVC's .dvcignore decision for one walk, without its regexes, where every rule is simple (issue 33).

DVC matches each entry of a walked folder against its rules' regexes on the entry's path from the
rules' folder (`DvcIgnorePatterns.matches`): about 15 µs an entry on a four-part path, the largest
part of `judgeloop status`'s walk that is not I/O. When every rule is a literal name (`name`,
`name/`) or a suffix (`*.ext`, `*.ext/`), with no negation, no other glob or escape and no `/` but a
trailing one, gitignore's rule matches an entry exactly when the entry's own name is that name or
ends with that suffix (a trailing `/`: folders only), or when a folder above it does. Within a walk
that prunes ignored folders, the folders above an entry up to the walked folder are not ignored, so
the entry's own name decides, once the folders from the rules' folder down to the walked folder
are checked too. Anything else: `None`, and DVC's own matching is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Characters with a meaning to gitignore besides a leading `*` and a trailing `/`.
_SPECIAL = frozenset("*?[]!\\/#")

Matcher = Callable[[str, bool], bool]


def simple_matcher(pattern: Any, walked: str) -> Matcher | None:
    """A matcher (name, is_dir) -> ignored equal to `pattern.matches(root, name, is_dir)` for every
    folder `root` of a pruned walk of `walked`, or None where that is not certain."""
    names: set[str] = set()
    folder_names: set[str] = set()
    suffixes: list[str] = []
    folder_suffixes: list[str] = []
    for info in getattr(pattern, "pattern_list", None) or ():
        rule = info.patterns
        folder_only = rule.endswith("/")
        body = rule[:-1] if folder_only else rule
        if body.startswith("*"):
            literal, into = body[1:], folder_suffixes if folder_only else suffixes
        else:
            literal, into = body, None
        if not literal or literal != literal.strip() or _SPECIAL & set(literal):
            return None
        if into is None:
            (folder_names if folder_only else names).add(literal)
        else:
            into.append(literal)
    ends, folder_ends = tuple(suffixes), tuple(suffixes + folder_suffixes)
    every_name = names | folder_names

    def matches(name: str, is_dir: bool) -> bool:
        if is_dir:
            return name in every_name or name.endswith(folder_ends)
        return name in names or name.endswith(ends)

    base = getattr(pattern, "dirname", None)
    if not isinstance(base, str) or not (walked == base or walked.startswith(base.rstrip("/") + "/")):
        return None
    above = walked[len(base) :].strip("/")
    if any(matches(part, True) for part in above.split("/") if above):
        return None  # a folder on the way is ignored: DVC's own matching says what follows
    return matches
