"""The results store of a sweep: one SQLite file that survives a crash at any moment.

* One row per grid point, keyed by :attr:`GridPoint.key` (``PRIMARY KEY``): a point is inserted with
  ``INSERT OR IGNORE`` and committed as soon as its task (a chunk of points) comes back, one
  transaction per chunk, so a killed run loses at most the chunks in flight, and a rerun computes
  exactly the missing points and can never write a point twice.
* The journal is SQLite's write-ahead log with ``synchronous=FULL``: a committed row is on disk
  before :meth:`ResultStore.add` returns; a transaction interrupted by SIGKILL is rolled back when the
  file is next opened.
* A ``meta`` table remembers the spec's settings hash (see :class:`~ntpcert.experiments.sweep.spec.SweepSpec`);
  opening the store with different settings is refused, since its rows would answer another question.
  :func:`check_store` makes the same check without creating or changing any file, so that a command
  can refuse a wrong ``--store`` before it starts a cluster.
* Opened without a spec (to read it) the store is opened read-only and no file is created or changed;
  an existing file that is not a sweep store is refused, never written to.

Values are stored as canonical JSON text (floats written by ``repr``), so they read back bit for bit.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Iterator

from ntpcert.errors import InputError
from ntpcert.util.files import atomic_write_bytes
from ntpcert.experiments.sweep.spec import GridPoint, SweepSpec

__all__ = ["ResultRow", "ResultStore", "TABLE_FIELDS", "check_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    m INTEGER NOT NULL, d INTEGER NOT NULL, V INTEGER NOT NULL, k INTEGER NOT NULL,
    embedding TEXT NOT NULL, seed INTEGER NOT NULL,
    vals TEXT NOT NULL, error TEXT, seconds REAL NOT NULL, finished_at TEXT NOT NULL
);
"""
#: Columns of :meth:`ResultRow.to_json` that come from the grid point.
TABLE_FIELDS = ("m", "d", "V", "k", "embedding", "seed")
#: Seconds to wait for another process's write lock before giving up.
_BUSY_TIMEOUT_S = 60.0
#: The first bytes of every SQLite database file.
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _sqlite_header_ok(path: str, field: str) -> bool:
    """False for an empty file; True for an SQLite file; an InputError for anything else."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except IsADirectoryError:
        raise InputError(f"{field}: {path!r} is a directory") from None
    except OSError as err:
        raise InputError(f"{field}: cannot read {path!r} ({' '.join(str(err).split())})") from None
    if not head:
        return False
    if head != _SQLITE_MAGIC:
        raise InputError(f"{field}: {path!r} exists and is not a sweep store (not an SQLite file)")
    return True


def _connect_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection that creates no file: ``immutable`` when no write-ahead log is
    pending (the store was closed cleanly), else ``mode=ro`` (which reads the pending log)."""
    flag = "mode=ro" if os.path.exists(path + "-wal") else "immutable=1"
    return sqlite3.connect(f"{Path(os.path.abspath(path)).as_uri()}?{flag}", uri=True, timeout=_BUSY_TIMEOUT_S)


def check_store(path: str | os.PathLike, spec: SweepSpec, field: str = "--store") -> bool:
    """Check, without creating or changing any file, that ``path`` can hold ``spec``'s results:
    its directory exists and is writable, and it is either missing or a sweep store of the same
    settings. Returns whether it exists. Raises :class:`~ntpcert.errors.InputError` naming ``field``."""
    p = os.fspath(path)
    if not p:
        raise InputError(f"{field}: empty path")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        raise InputError(f"{field}: directory {parent!r} does not exist")
    if os.path.isdir(p):
        raise InputError(f"{field}: {p!r} is a directory")
    if not os.path.lexists(p):
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"{field}: cannot write in directory {parent!r} (permission denied)")
        return False
    if not os.path.isfile(p):
        raise InputError(f"{field}: {p!r} exists and is not a regular file")
    if not _sqlite_header_ok(p, field):
        raise InputError(f"{field}: {p!r} exists and is empty, not a sweep store; remove it or choose another path")
    if not os.access(p, os.R_OK | os.W_OK) or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{field}: cannot write to {p!r} (permission denied)")
    try:
        db = _connect_readonly(p)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"meta", "results"} <= tables:
                raise InputError(f"{field}: {p!r} is an SQLite file but not a sweep store")
            row = db.execute("SELECT value FROM meta WHERE name = 'settings_hash'").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        raise InputError(f"{field}: {p!r} is not a sweep store ({err})") from None
    if row is not None and row[0] != spec.settings_hash:
        raise InputError(f"{field}: {p!r} holds results for other settings (hash {row[0][:12]}, the spec's is "
                         f"{spec.settings_hash[:12]}); use a new store")
    return True


@dataclass(frozen=True)
class ResultRow:
    """One finished grid point.

    Attributes
    ----------
    point : GridPoint
    values : dict
        The quantities (see :mod:`ntpcert.experiments.sweep.compute`).
    error : str or None
    seconds : float
        Compute time of the point (not part of the deterministic table).
    """

    point: GridPoint
    values: dict
    error: str | None
    seconds: float

    def to_json(self, *, timing: bool = False) -> dict[str, Any]:
        """A flat dict: the point's fields, ``d_over_m``, the values and ``error`` (and ``seconds``)."""
        out: dict[str, Any] = {**self.point.to_json(), "d_over_m": self.point.d / self.point.m}
        out.update(self.values)
        out["error"] = self.error
        if timing:
            out["seconds"] = self.seconds
        return out


class ResultStore:
    """A sweep's results in one SQLite file (see the module doc). Use as a context manager.

    Parameters
    ----------
    path : str
        The file; created when missing (its directory must exist) if ``spec`` is given.
    spec : SweepSpec, optional
        When given, the store is bound to the spec's settings: a new store records them, an existing
        one must hold the same settings hash, else :class:`~ntpcert.errors.InputError`. Without it
        the store is opened read-only (for :meth:`rows`, :meth:`table`, :meth:`write_csv`).
    """

    def __init__(self, path: str | os.PathLike, spec: SweepSpec | None = None) -> None:
        self.path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        field = "--store" if spec is not None else "STORE"
        if not os.path.isdir(parent):
            raise InputError(f"{field}: directory {parent!r} does not exist")
        if spec is None:
            if not os.path.exists(self.path):
                raise InputError(f"STORE: file {self.path!r} not found")
            if not _sqlite_header_ok(self.path, field):
                raise InputError(f"STORE: {self.path!r} is empty, not a sweep store")
            try:
                self._db = _connect_readonly(self.path)
                tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            except sqlite3.DatabaseError as err:
                raise InputError(f"STORE: {self.path!r} is not a sweep store ({err})") from None
            if not {"meta", "results"} <= tables:
                self._db.close()
                raise InputError(f"STORE: {self.path!r} is an SQLite file but not a sweep store")
            return
        if os.path.exists(self.path):
            _sqlite_header_ok(self.path, field)  # never write into a file that is not a database
        try:
            self._db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as err:
            raise InputError(f"--store: {self.path!r} is not a sweep store ({err})") from None
        self._bind(spec)

    # ------------------------------------------------------------------ settings
    def _meta(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def _bind(self, spec: SweepSpec) -> None:
        have = self._meta("settings_hash")
        if have is None:
            with self._transaction():
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('settings_hash', ?)", (spec.settings_hash,))
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('settings', ?)",
                                 (json.dumps(spec.settings, sort_keys=True),))
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('name', ?)", (spec.name,))
            have = self._meta("settings_hash")
        if have != spec.settings_hash:
            raise InputError(f"--store: {self.path!r} holds results for other settings (hash {have[:12]}, the spec's "
                             f"is {spec.settings_hash[:12]}); use a new store")

    @property
    def settings(self) -> dict | None:
        """The settings the store was created with."""
        text = self._meta("settings")
        return None if text is None else json.loads(text)

    # ------------------------------------------------------------------ rows
    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def done_keys(self) -> set[str]:
        """Keys of every finished point."""
        return {r[0] for r in self._db.execute("SELECT key FROM results")}

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def add(self, point: GridPoint, result: dict[str, Any]) -> bool:
        """Commit one finished point; False (and nothing written) when it is already there."""
        return self.add_many([(point, result)]) == [True]

    def add_many(self, finished: list[tuple[GridPoint, dict[str, Any]]]) -> list[bool]:
        """Commit finished points in one transaction (all or none of them); for each, whether it was
        new (False: already there, left as it was)."""
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        new = []
        with self._transaction():
            for point, result in finished:
                vals = json.dumps(result["values"], sort_keys=True, allow_nan=False)
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (point.key, point.m, point.d, point.V, point.k, point.embedding, point.seed, vals,
                     result.get("error"), float(result.get("seconds", 0.0)), now),
                )
                new.append(cur.rowcount == 1)
        return new

    def rows(self) -> list[ResultRow]:
        """Every finished point, sorted by (m, d, V, k, embedding, seed)."""
        return list(self._iter_rows())

    def _iter_rows(self) -> Iterator[ResultRow]:
        q = "SELECT m, d, V, k, embedding, seed, vals, error, seconds FROM results ORDER BY m, d, V, k, embedding, seed"
        for m, d, V, k, emb, seed, vals, err, sec in self._db.execute(q):
            yield ResultRow(GridPoint(m, d, V, k, emb, seed), json.loads(vals), err, sec)

    def table(self, *, timing: bool = False) -> list[dict[str, Any]]:
        """The rows as flat dicts (see :meth:`ResultRow.to_json`); without timing it is deterministic."""
        return [r.to_json(timing=timing) for r in self._iter_rows()]

    def write_csv(self, path: str | os.PathLike, *, timing: bool = False) -> int:
        """Write :meth:`table` as CSV (empty cells for None) atomically (a temporary file in the same
        directory, then ``os.replace``); returns the number of rows."""
        table = self.table(timing=timing)
        fields: list[str] = []
        for row in table:
            fields.extend(k for k in row if k not in fields)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for row in table:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
        atomic_write_bytes(path, buf.getvalue().encode("utf-8"))
        return len(table)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
