"""`judgeloop cache`: look after the local call store and the recordings, from the records alone.

    stats    local store entries and bytes; recordings per stage; the last run of each stage
    verify   re-derive every key from its request, in the local store AND the recordings;
             --repair deletes the local entries that fail (damaged, edited, foreign, a pickle)
    gc       drop local entries that no recording and no last run references
    merge    take a collaborator's recordings; a key answered differently on each side is a conflict
    seed     copy recorded calls into the local store
    export   write the local store out as recordings (for a collaborator, or another clone)

Nothing here keeps books of its own: the local store is pipeline.llm.cache.store.CallStore, the
recordings are pipeline.llm.recordings (read by stage_reader, written by stage_writer), and "the
last run" is the runs/<stage>.json summary that LLMSession.close writes next to the cache directory
(all read through pipeline.tools.inventory; what verify holds the store against: recorded_sums).
Each command is its own module here; this one is the group that gathers them.
"""

from __future__ import annotations

import click

from pipeline.tools.cache.export import export
from pipeline.tools.cache.gc import gc
from pipeline.tools.cache.merge_command import merge
from pipeline.tools.cache.seed import seed
from pipeline.tools.cache.stats import stats
from pipeline.tools.cache.verify import verify


@click.group()
def cache() -> None:
    """The local call cache and the recordings: stats, verify, gc, merge, seed, export.

    \b
    Examples:
      judgeloop cache stats                 entries and bytes; hits and model calls of the last runs
      judgeloop cache verify                re-derive every key: catch a record edited by hand
      judgeloop cache merge ../alice/recordings   a collaborator's calls into ours
      judgeloop cache gc --dry-run          what no recording references
    """


cache.add_command(stats)
cache.add_command(verify)
cache.add_command(gc)
cache.add_command(merge)
cache.add_command(seed)
cache.add_command(export)
