"""Where each user's memories are: one database, or cells, users spread over independent
databases (an Aurora cluster each in AWS; locally an embedded server each; docs/capacity.md, Cells).

:class:`Cells` is the one way to a store: the dispatcher asks it for the user's cell before every
verb (:mod:`.dispatch`), so the HTTP API, the queue, MCP, the CLI and in-process calls route the
same way without knowing about cells. With one database it is that database, and no lookup.

The directory (which cell holds a user) is a table in the home cell's database
(:mod:`rushmem.store.accounts.cells`), read once per user and cached for
``cell_directory_cache_s``; a user without an entry is placed on their first write, in the cell a
hash of their id chooses (rendezvous hashing: adding a cell moves no placed user). What spans cells
is the verbs' that say so (the users listing, erasure and its receipts), a queue batch (flushed on
every cell it wrote to), bulk import and recall batches (each user's part in their cell), and a
move (:meth:`Cells.move_user`, :func:`rushmem.service.moving.copy_user`).

The cells are named by RUSHMEM_CELLS, or in AWS by a Secrets Manager secret holding the same
JSON (RUSHMEM_CELLS_SECRET_ARN: the stack's CellsSecretArn), whose home cell is the stack's own
database; a container reads the secret again when the directory names a cell added since.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import SecretStr

from rushmem.config import Settings
from rushmem.providers.aws import get_secret_value
from rushmem.service.base import Collaborators
from rushmem.store.accounts.cells import (
    cell_entry,
    claim_cell,
    forget_cell,
    set_cell,
)
from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable, InvalidInput

logger = logging.getLogger(__name__)

CELLS_SETTING = "RUSHMEM_CELLS"
SECRET_SETTING = "RUSHMEM_CELLS_SECRET_ARN"  # noqa: S105 - a setting's name, no password


class UserMoving(DatabaseUnavailable):
    """The user's memories are being moved to another cell: their writes wait (503; the queue
    delivers the message again later)."""


def placed_cell(user_id: str, cells: Sequence[str]) -> str:
    """The cell a new user goes to: the highest hash of (cell, user) (rendezvous hashing), so a cell
    added later takes new users only."""
    return max(cells, key=lambda cell: hashlib.sha256(f"{cell}\x00{user_id}".encode()).digest())


def cell_urls(cells: Mapping[str, object], *, setting: str) -> dict[str, str]:
    """The cells' URLs by name, checked: a name each, and a URL for every cell but the home (the
    first), whose empty URL means this deployment's own database. Messages never quote a URL (it
    holds a password)."""
    shape = f"{setting} must be a JSON object of cell name -> PostgreSQL URL, the home cell first"
    if not isinstance(cells, Mapping) or not cells:
        raise ConfigurationError(shape)
    urls: dict[str, str] = {}
    for name, value in cells.items():
        url = value.get_secret_value() if isinstance(value, SecretStr) else value
        if not isinstance(name, str) or not name.strip() or not isinstance(url, str):
            raise ConfigurationError(f"{shape} (a name and a string each)")
        if urls and not url.strip():
            home = next(iter(urls))
            raise ConfigurationError(
                f"{setting}: cell {name!r} has no URL; only the home cell (the first, {home!r}) may be empty, "
                "meaning this deployment's own database"
            )
        urls[name] = url.strip()
    return urls


@dataclasses.dataclass
class _Entry:
    cell: str
    moving: bool
    placed: bool  # written in the directory (False: a reader's guess for a user never written)
    until: float


class Cells:
    """The databases of a deployment and the choice of one per user (see the module's docstring).
    Each cell's collaborators are its own (a connection, a read router), but the embedder, a model
    in memory, is built once and shared; ``collaborators`` given stand in for the built ones.
    Constructing does no I/O: the cells are read on the first call that needs one, and the home
    cell's collaborators (:attr:`home_parts`) exist from the start, so the memory's admin and a
    container's warm-up need no secret."""

    def __init__(self, settings: Settings, **collaborators: Any) -> None:
        self.settings = settings
        self._given = collaborators
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._loading = threading.Lock()
        if settings.cells and settings.cells_secret_arn:
            raise ConfigurationError(f"set {CELLS_SETTING} or {SECRET_SETTING}, not both")
        self._urls = cell_urls(settings.cells, setting=CELLS_SETTING) if settings.cells else None
        self._source = CELLS_SETTING if self._urls else SECRET_SETTING if settings.cells_secret_arn else None
        if self._source is None:
            self.home_parts = Collaborators(settings, **collaborators)
            self._named: dict[str, Collaborators] | None = {"": self.home_parts}
        else:
            home_url = next(iter(self._urls.values())) if self._urls else ""
            own = settings.model_copy(update={"cells": None, "cells_secret_arn": None})
            home_settings = self._cell_settings(home_url, home=True) if home_url else own
            self.home_parts = Collaborators(home_settings, **collaborators)
            self._named = None  # every cell by name, once read
        self._home = ""
        self._read_at = -math.inf

    @property
    def configured(self) -> bool:
        """Whether the settings name cells (known without reading them)."""
        return self._source is not None

    @property
    def parts(self) -> dict[str, Collaborators]:
        """Every cell's collaborators by name, the home cell's first (reads the cells)."""
        return self._cells()

    @property
    def home(self) -> str:
        """The home cell's name ("" without cells)."""
        self._cells()
        return self._home

    @property
    def many(self) -> bool:
        return self.configured and len(self._cells()) > 1

    def each(self) -> list[Collaborators]:
        """Every cell's collaborators, the home cell's first."""
        return list(self._cells().values())

    def reading(self, user_id: str) -> Collaborators:
        """The cell that holds (or would hold) the user."""
        return self.parts[self.cell_of(user_id)]

    def writing(self, user_id: str) -> Collaborators:
        """The cell the user's writes go to (placing a new user); UserMoving while they move."""
        return self.parts[self.writing_cell(user_id)]

    def writing_cell(self, user_id: str) -> str:
        if not self.many:
            return self.home
        entry = self._entry(user_id, write=True)
        if entry.moving:
            raise UserMoving("this user's memories are being moved to another cell; try again shortly")
        return entry.cell

    def cell_of(self, user_id: str) -> str:
        """The name of the cell that holds (or would hold) the user."""
        return self._entry(user_id, write=False).cell if self.many else self.home

    def by_cell(self, users: Sequence[str], *, write: bool) -> dict[str, list[int]]:
        """The positions of ``users`` grouped by their cell (a batch split over the cells)."""
        groups: dict[str, list[int]] = {}
        for i, user in enumerate(users):
            cell = self.writing_cell(user) if write else self.cell_of(user)
            groups.setdefault(cell, []).append(i)
        return groups

    def forget(self, user_id: str) -> None:
        """The user's directory entry deleted (their erasure: the directory holds their id)."""
        if self.many:
            self.home_parts.db.run(lambda conn: forget_cell(conn, user_id), retry=False)
            self._forget_entry(user_id)

    def close(self) -> None:
        for parts in self._loaded():
            parts.close()

    def release_secrets(self) -> None:
        """Before a SnapStart snapshot and after a restore: the home cell's connections, cached
        secrets and keyed providers let go (:meth:`Collaborators.release_secrets`), the other cells'
        connections closed and the cells forgotten (their URLs hold passwords): read again on the
        next call that needs a cell."""
        others = [parts for parts in self._loaded() if parts is not self.home_parts]
        self.home_parts.release_secrets()
        for parts in others:
            parts.close()
        if self.configured:
            with self._loading:
                self._named = None

    # ---- the cells, from the settings or the secret ------------------------------------------

    def _loaded(self) -> list[Collaborators]:
        """The collaborators built so far, each once (the home cell's first), reading nothing."""
        others = [p for p in (self._named or {}).values() if p is not self.home_parts]
        return [self.home_parts, *others]

    def _cells(self) -> dict[str, Collaborators]:
        named = self._named
        if named is None:
            with self._loading:
                if self._named is None:
                    self._install(self._read())
                named = self._named
        assert named is not None
        return named

    def _read(self, *, force: bool = False) -> dict[str, str]:
        if self._urls is not None:
            return self._urls
        arn = str(self.settings.cells_secret_arn)
        try:
            text = get_secret_value(arn, force=force)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{SECRET_SETTING}: {exc}") from exc
        try:
            cells = json.loads(text)
        except ValueError:
            cells = None  # the parser's message is not repeated: it may quote the text
        urls = cell_urls(cells, setting=f"{SECRET_SETTING} ({arn})")
        home, home_url = next(iter(urls.items()))
        if home_url:
            # The home cell's collaborators exist before the secret is read (the admin, the warm-up).
            raise ConfigurationError(
                f"{SECRET_SETTING} ({arn}): the home cell {home!r} (the first) must have an empty URL: it is this "
                "deployment's own database, reached as the database settings say"
            )
        return urls

    def _install(self, urls: dict[str, str]) -> None:
        """``urls`` become the cells (under ``_loading``): the first is the home, whose collaborators
        exist already; a cell known before keeps its collaborators (and connection)."""
        home = next(iter(urls))
        if self._named is not None and home != self._home:
            raise ConfigurationError(f"{self._source}: the home cell changed from {self._home!r} to {home!r}")
        known = self._named or {}
        named: dict[str, Collaborators] = {}
        for name, url in urls.items():
            if name == home:
                named[name] = self.home_parts
            elif name in known:
                named[name] = known[name]
            else:  # one embedder (a model in memory) for every cell: the home cell's, given or built
                named[name] = Collaborators(
                    self._cell_settings(url), **{**self._given, "embedder": self.home_parts.embedder}
                )
        self._home, self._named, self._read_at = home, named, time.monotonic()

    def _reread(self) -> None:
        """The secret read again (fetched, not cached) when the directory names a cell this
        container does not know: one added since the container read it. At most once per
        ``cell_directory_cache_s``."""
        if self._source != SECRET_SETTING:
            return
        with self._loading:
            if self._named is not None and time.monotonic() - self._read_at < self.settings.cell_directory_cache_s:
                return
            self._install(self._read(force=True))

    def _cell_settings(self, url: str, *, home: bool = False) -> Settings:
        """A cell named by its URL: one database (no readers). Another cell's roles are its own
        DBA's: the application login settings name the home database's login (and its password)."""
        update: dict[str, Any] = {
            "cells": None,
            "cells_secret_arn": None,
            "database_url": SecretStr(url),
            "database_reader_url": None,
            "db_reader_host": None,
        }
        if not home:
            update.update(app_db_user=None, app_db_secret_arn=None, app_db_iam_auth=False)
        return self.settings.model_copy(update=update)

    # ---- the directory -----------------------------------------------------------------------

    def _entry(self, user_id: str, *, write: bool) -> _Entry:
        now = time.monotonic()
        cached = self._entries.get(user_id)
        if cached is not None and now < cached.until and (cached.placed or not write):
            return cached
        directory = self.home_parts.db
        found = directory.run(lambda conn: cell_entry(conn, user_id))
        placed = found is not None
        if found is None and write:
            choice = placed_cell(user_id, list(self.parts))
            found = directory.run(lambda conn: claim_cell(conn, user_id, choice), retry=False)
            placed = True
        cell, moving = found if found is not None else (placed_cell(user_id, list(self.parts)), False)
        if cell not in self.parts:
            self._reread()
        if cell not in self.parts:
            raise ConfigurationError(f"the directory places a user in cell {cell!r}, which {self._source} lacks")
        entry = _Entry(cell, moving, placed, now + self.settings.cell_directory_cache_s)
        with self._lock:
            self._entries[user_id] = entry
        return entry

    def _forget_entry(self, user_id: str) -> None:
        with self._lock:
            self._entries.pop(user_id, None)

    # ---- moving a user -----------------------------------------------------------------------

    def move_user(self, user_id: str, to_cell: str, copy: Callable[[Collaborators, Collaborators, str], int]) -> int:
        """Move everything the user owns to ``to_cell``: hold their writes (the directory says
        ``moving``; writes answer 503 and the queue keeps them), wait out every container's cache,
        ``copy`` (from the old cell's collaborators to the new one's), switch the entry, wait again
        (readers still on the old cell see a complete copy meanwhile), then erase the old copy.
        Returns the memories moved."""
        if to_cell not in self.parts:
            raise InvalidInput(f"no cell named {to_cell!r}", field="to")
        if not self.many:
            raise InvalidInput("moving a user needs RUSHMEM_CELLS (users spread over cells)", field="to")
        source = self.cell_of(user_id)
        if source == to_cell:
            return 0
        directory = self.home_parts.db
        directory.run(lambda conn: set_cell(conn, user_id, source, moving=True), retry=False)
        self._forget_entry(user_id)
        time.sleep(self.settings.cell_directory_cache_s)  # every container now holds this user's writes
        try:
            moved = copy(self.parts[source], self.parts[to_cell], user_id)
        except BaseException:
            directory.run(lambda conn: set_cell(conn, user_id, source, moving=False), retry=False)
            self._forget_entry(user_id)
            raise
        directory.run(lambda conn: set_cell(conn, user_id, to_cell, moving=False), retry=False)
        self._forget_entry(user_id)
        time.sleep(self.settings.cell_directory_cache_s)  # no container reads the old cell any more
        return moved
