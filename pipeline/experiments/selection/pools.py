"""From the `selection` params to the work a scoring stage does: each request, its framework, its pool."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.data.catalog import load_catalog
from pipeline.data.listening_requests import Framework, ListeningRequest, framework_for, load_requests
from pipeline.errors import ConfigError
from pipeline.experiments.selection.params import SelectionSettings
from pipeline.experiments.selection.retrieve import PoolEntry, retrieve


@dataclass(frozen=True)
class RequestPool:
    request: ListeningRequest
    framework: Framework  # resolved: the request's own weights and targets, else the default's
    pool: list[PoolEntry]


def request_pools(settings: SelectionSettings, root: Path = Path()) -> list[RequestPool]:
    """Every request to run (the first `limit`), with its framework and its pool, in file order."""
    catalog = load_catalog(root / settings.catalog, settings.catalog)
    requests_file = load_requests(root / settings.requests, settings.requests)
    default = settings.framework or requests_file.framework
    chosen = requests_file.requests[: settings.limit] if settings.limit else requests_file.requests
    pools = []
    for request in chosen:
        try:
            framework = framework_for(request, default)
        except ValueError as exc:  # only a params override can get here: load_requests checked the file's
            raise ConfigError(
                f"selection.framework does not fit request {request.id!r} of {settings.requests}: {exc}. "
                "Fix: give selection.framework every criterion the requests weigh, or set it to null."
            ) from None
        pool = retrieve(catalog, request.retrieve, settings.pool_size, settings.max_per_artist)
        pools.append(RequestPool(request, framework, pool))
    return pools
