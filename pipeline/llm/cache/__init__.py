"""The local call cache: one diskcache per project, key -> sealed CallRecord, checked on every read.

    store.py     CallStore: open, get (verified), put (sealed), seed (batched), iterate, gc
    safe_disk.py opening a folder someone else wrote: no pickle, no settings from the file, no links
    blocks.py    a request as references to content-addressed text blocks, and the block store
    bulk.py      many entries written to a diskcache in a few statements (a seed, a block store)
    schema.py    the exact SQL a diskcache database may hold (no foreign triggers run on a write)
    errors.py    a failing cache database said with its path and the fix

May import: pipeline.errors and the engine's shared base (pipeline.llm.types, keys, records, files,
bounds). Never the recordings room, the session, the backends or the settings (a contract in
pyproject.toml's [tool.importlinter] keeps it so): the cache is a small class of its own.
"""
