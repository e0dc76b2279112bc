"""The trusted record: every call a stage made, as text under recordings/, pinned by dvc.lock.

    line_format.py   a call and a shared block as one canonical JSON line each (the format itself)
    line_checks.py   a recording's text and each line read back and refused unless it can be trusted
    line_search.py   a recording's lines found in its bytes by what they hold, without splitting it
    stage_folders.py a stage's folder: its file names, its name checked, links refused
    stage_calls.py   a stage's calls gathered as it runs, each held by its line's place, read back in order
    stage_writer.py  a stage's recording written in one step: one file, or shards (StageRecording)
    stage_reader.py  a stage's recording read whole: split into lines and blocks, every call verified
    key_reader.py    the calls of some keys, read without reading the whole recording when it can
    item_reader.py   the calls of some items (audit --item), only their lines parsed when it can
    call_places.py   the calls of a recording being made, each held as a hash and its line's number
    spool.py         a recording being made: its lines on disk, only their places in memory
    id_table.py      a packed table of 64-bit ids -> numbers (a spool's blocks, CallPlaces' calls)
    shards.py        a large stage's recording in 16 shards by key, under a manifest renamed in one step
    stage_index.py   a stage's recording held as its lines' places, each call read and parsed when served
    line_openings.py how a canonical call line opens: a line found by it without a parse (StageIndex)
    request_match.py a verified line matched against the caller's request, not rebuilt (StageIndex)
    key_places.py    a recording's keys and the line of each, packed (StageIndex)
    layouts.py       the layout of each request a verified line was parsed into, to seed the cache
    block_places.py  a sharded recording's blocks found where they lie, not read with their shard
    item_table.py    a shard of calls' table of items: where each item's lines lie (audit --item)
    folder_scan.py   one pass over a stage's folder: each file hashed (pin, shards, memo), its lines placed
    offsets.py       lines by file, offset and digest, read back and checked when served (blocks too)
    index.py         RecordingIndex: every recorded call by key, stage by stage, for a session
    stage_read.py    a stage's recording as the index reads it: its calls by key, or why none may be used
    lookup_order.py  the lookup in the other stages' recordings: pinned first, which may answer
    recorded_models.py the models that made a stage's recorded calls (the model's identity)
    models_memo.py   a recording's models remembered by its files' identities (private local state)
    hold_one.py      `judgeloop status`'s index: one stage's recording held at a time
    stage_keys.py    a stage's keys as written, unverified: which other recording a lookup must read
    verified_memo.py recordings verified once, remembered by the hash of what was verified
    pins.py          each stage's recording pinned by dvc.lock: an edit shows and is refused
    owners.py        which recordings folders belong to which stage of dvc.yaml
    store.py         where the recordings travel between machines: git or DVC's cache

May import: pipeline.errors and the engine's shared base (pipeline.llm.types, keys, records, files,
bounds, private_memo). Never the cache room, the session, the backends or the settings (a contract in
pyproject.toml's [tool.importlinter] keeps it so): the session joins the two rooms.
"""
