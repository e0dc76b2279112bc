"""What DVC reads from a typed `-S key=value` (`judgeloop exp`): Hydra's override grammar, as DVC
documents `-S`, and OmegaConf's `${...}` in the values; what then lands in params.yaml, and what a
stage reads back, is pipeline.tools.set_values'.

- Hydra parses the value (`2` is a number, `'2'` text, `a,b` a sweep, `[a]` a list). An error is
  said with Hydra's reason, not DVC's "Invalid `--set-param` value".
- OmegaConf resolves every `${...}` in it: `${oc.env:NAME}` writes an environment variable's value
  (a token, a home folder) into params.yaml and the experiment's commit, `${other.key}` another
  key's; neither shows on the command line that ran the experiment. Refused: the value is given
  itself. The text `${` written `\\${` is text and kept.
- A sweep (`--queue`) is each of its runs, as Hydra's sweeper spells them for DVC.
- What the overrides mean is Hydra's own code applied to params.yaml's values (`meant`), set
  against what lands by the caller.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pipeline.errors import JudgeloopError
from pipeline.tools.preset_values import BY_HAND

DVC_PARAMS = "params.yaml"  # the file a -S without `file:` changes (DVC's DEFAULT_PARAMS_FILE)
MISSING_MARK = "???"  # OmegaConf's MISSING, as text
INTERPOLATION_FIX = (
    "Fix: give the value itself (a shell puts a variable's value in where the command shows it: "
    '-S "key=$NAME"), or write \\${ for the text ${'
)


def parsed(overrides: Sequence[str]) -> list[Any]:
    """Hydra's reading of each override, or a click error naming the one it cannot read."""
    from dvc.utils.hydra import to_hydra_overrides
    from hydra.errors import OverrideParseException

    try:
        return list(to_hydra_overrides(overrides))
    except OverrideParseException:
        pass
    for override in overrides:  # the first one Hydra cannot read alone, said with Hydra's reason
        try:
            to_hydra_overrides([override])
        except OverrideParseException as exc:
            reason = " ".join(str(exc).split())
            raise JudgeloopError(
                f"-S {override}: DVC reads -S with Hydra's override grammar, which cannot read it "
                f"({reason}). Fix: quote text that holds a space, a quote, a comma or a bracket: "
                f"-S \"key='...'\" (a quote inside written \\')"
            ) from None
    raise JudgeloopError(
        f"-S {' -S '.join(overrides)}: DVC's Hydra grammar cannot read them together. Fix: quote text: "
        "-S \"key='...'\""
    )


def sweep_runs(overrides: Sequence[str]) -> list[list[str]]:
    """The overrides of each run DVC makes of them: one, or one per point of a sweep (`a=1,2`:
    `--queue` queues each), spelled as Hydra's sweeper spells them for DVC."""
    from dvc.utils.hydra import get_hydra_sweeps

    if not any(override.is_sweep_override() for override in parsed(overrides)):
        return [list(overrides)]
    try:
        return [run[DVC_PARAMS] for run in get_hydra_sweeps({DVC_PARAMS: list(overrides)})]
    except Exception as exc:  # a glob sweep, or one Hydra's sweeper refuses: DVC would refuse it too
        raise JudgeloopError(
            f"-S {' -S '.join(overrides)}: DVC refuses this sweep ({exc}). Fix: list the values (-S key=a,b) "
            "or quote text: -S \"key='...'\""
        ) from None


def refuse_interpolation(override: str, file: str) -> None:
    """A `${...}` in a value typed (in any run of a sweep) refused, naming it."""
    for run in sweep_runs([override]):
        for each in parsed(run):
            if any(interpolates(text) for text in _texts(each.value())):
                where = "" if file == DVC_PARAMS else f" ({file})"
                raise JudgeloopError(
                    f"-S {override}{where}: its value holds a ${{...}}, which DVC's -S resolves when it "
                    "writes the params file (OmegaConf: ${oc.env:NAME} is an environment variable's value, "
                    "${section.key} another key's), so the experiment would record a value the command "
                    f"does not show, and commit it. {INTERPOLATION_FIX}"
                )
            if MISSING_MARK in _texts(each.value()):  # in a mapping merged, the old value is kept
                raise JudgeloopError(
                    f"-S {override}: the text {MISSING_MARK} is OmegaConf's mark of a missing value, which "
                    f"DVC's -S never writes: it fails, or keeps the value there. {BY_HAND}"
                )


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)


def interpolates(text: str) -> bool:
    """Whether OmegaConf resolves something in `text` (`\\${` is the text `${`, not resolved)."""
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser
    from omegaconf.grammar_parser import parse

    if "${" not in text:
        return False
    try:
        nodes = [parse(text)]
    except GrammarParseError:  # no interpolation OmegaConf can make: DVC fails, said by the check after
        return False
    while nodes:
        node = nodes.pop()
        if isinstance(node, OmegaConfGrammarParser.InterpolationContext):
            return True
        nodes.extend(getattr(node, "children", None) or [])
    return False


def covers(override: str, where: str) -> bool:
    """Whether the override's key is the dotted key `where` or a mapping above it."""
    key = override.partition("=")[0].lstrip("+~")
    return where == key or where.startswith(f"{key}.")


def meant(before: dict[str, Any], overrides: Sequence[str]) -> Any:
    """params.yaml's values (as a stage read them) with the overrides applied as Hydra's grammar
    means them: Hydra's own code on an OmegaConf copy, as DVC's apply_overrides, with no file
    written and nothing of params.yaml itself resolved (each of its `${` kept as the text it is)."""
    from dvc.utils.hydra import to_hydra_overrides
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from omegaconf import OmegaConf

    config = OmegaConf.create(_escaped(before), flags={"allow_objects": True})
    OmegaConf.set_struct(config, True)
    ConfigLoaderImpl._apply_overrides_to_config(to_hydra_overrides(list(overrides)), config)
    return OmegaConf.to_container(config, resolve=True)  # the values' `\${` made `${` again, as DVC


def _escaped(value: Any) -> Any:
    """Every text's `${` written so that OmegaConf makes it again (pipeline.tools.hydra_spelling)."""
    from pipeline.tools.hydra_spelling import _INTERPOLATION

    if isinstance(value, str):
        return _INTERPOLATION.sub(lambda m: m[1] * 2 + "\\${", value)
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, dict):
        return {key: _escaped(item) for key, item in value.items()}
    return value
