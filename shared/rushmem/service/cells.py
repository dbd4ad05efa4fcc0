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
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from rushmem.config import Settings
from rushmem.service.base import Collaborators
from rushmem.store.accounts.cells import (
    cell_entry,
    claim_cell,
    forget_cell,
    set_cell,
)
from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable, InvalidInput

logger = logging.getLogger(__name__)

_COUNTS = ("calls", "input_tokens", "output_tokens", "characters", "items")


class UserMoving(DatabaseUnavailable):
    """The user's memories are being moved to another cell: their writes wait (503; the queue
    delivers the message again later)."""


def placed_cell(user_id: str, cells: Sequence[str]) -> str:
    """The cell a new user goes to: the highest hash of (cell, user) (rendezvous hashing), so a cell
    added later takes new users only."""
    return max(cells, key=lambda cell: hashlib.sha256(f"{cell}\x00{user_id}".encode()).digest())


@dataclasses.dataclass
class _Entry:
    cell: str
    moving: bool
    placed: bool  # written in the directory (False: a reader's guess for a user never written)
    until: float


class Cells:
    """The databases of a deployment and the choice of one per user (see the module's docstring).
    Each cell's collaborators are its own (a connection, a read router), but the embedder, a model
    in memory, is built once and shared; ``collaborators`` given stand in for the built ones."""

    def __init__(self, settings: Settings, **collaborators: Any) -> None:
        self.settings = settings
        self.parts: dict[str, Collaborators] = {}
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        if not settings.cells:
            self.home = ""
            self.parts[self.home] = Collaborators(settings, **collaborators)
            return
        cells = dict(settings.cells)
        self.home = next(iter(cells))
        for name, url in cells.items():
            cell_settings = settings.model_copy(
                update={"cells": None, "database_url": url, "database_reader_url": None, "db_reader_host": None}
            )
            shared = dict(collaborators)
            if self.parts:  # one embedder (a model in memory) for every cell
                shared.setdefault("embedder", self.parts[self.home].embedder)
            self.parts[name] = Collaborators(cell_settings, **shared)

    @property
    def many(self) -> bool:
        return len(self.parts) > 1

    def each(self) -> list[Collaborators]:
        """Every cell's collaborators, the home cell's first."""
        return list(self.parts.values())

    def reading(self, user_id: str) -> Collaborators:
        """The cell that holds (or would hold) the user."""
        if not self.many:
            return self.parts[self.home]
        return self.parts[self._entry(user_id, write=False).cell]

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
            self._directory().run(lambda conn: forget_cell(conn, user_id), retry=False)
            self._forget_entry(user_id)

    def close(self) -> None:
        for parts in self.parts.values():
            parts.close()

    # ---- the directory -----------------------------------------------------------------------

    def _directory(self) -> Any:
        return self.parts[self.home].db

    def _entry(self, user_id: str, *, write: bool) -> _Entry:
        now = time.monotonic()
        cached = self._entries.get(user_id)
        if cached is not None and now < cached.until and (cached.placed or not write):
            return cached
        directory = self._directory()
        found = directory.run(lambda conn: cell_entry(conn, user_id))
        placed = found is not None
        if found is None and write:
            choice = placed_cell(user_id, list(self.parts))
            found = directory.run(lambda conn: claim_cell(conn, user_id, choice), retry=False)
            placed = True
        cell, moving = found if found is not None else (placed_cell(user_id, list(self.parts)), False)
        if cell not in self.parts:
            raise ConfigurationError(f"the directory places a user in cell {cell!r}, which AGENT_MEMORY_CELLS lacks")
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
            raise InvalidInput("moving a user needs AGENT_MEMORY_CELLS (users spread over cells)", field="to")
        source = self.cell_of(user_id)
        if source == to_cell:
            return 0
        directory = self._directory()
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
