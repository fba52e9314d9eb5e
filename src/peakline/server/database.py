"""The database: an SQLite file in the data directory by default, PostgreSQL when ``--db``
says ``postgresql://...``; the same SQLAlchemy Core queries run on both.

SQLite is opened in WAL mode with ``synchronous=FULL``: a transaction is on disk when its
commit returns, so a run the server acknowledged survives the server being killed (or the
machine losing power). Write transactions start with ``BEGIN IMMEDIATE`` (the connection
option ``immediate``): they take the write lock at once and wait for it (``busy_timeout``)
rather than failing when a read transaction tries to become a write one while another
writer commits. PostgreSQL needs none of this (MVCC, READ COMMITTED).

Migrations (Alembic, migrations/) run every time the server or ``peakline serve token``
opens the database, so a new peakline upgrades an old database in place.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy import event

from peakline.errors import UsageError

DEFAULT_FILE = "peakline.db"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def url_for(db: str | None, data_dir: str | None) -> str:
    """The SQLAlchemy URL for ``--db`` / ``--data-dir``: PostgreSQL URLs get the psycopg
    (version 3) driver; no --db means an SQLite file in the data directory."""
    if db:
        if db.startswith(("postgresql://", "postgres://")):
            return "postgresql+psycopg://" + db.split("://", 1)[1]
        if db.startswith(("postgresql+psycopg://", "sqlite:///")):
            return db
        raise UsageError(f"--db {db!r}: expected postgresql://USER@HOST:PORT/NAME or "
                         "sqlite:///PATH")
    folder = os.path.abspath(data_dir or os.path.join(os.getcwd(), "peakline-data"))
    os.makedirs(folder, exist_ok=True)
    return "sqlite:///" + os.path.join(folder, DEFAULT_FILE)


def open_engine(url: str, *, pool_size: int = 20) -> sa.Engine:
    """An engine for ``url`` (url_for), migrated to the newest schema."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, pool_size=pool_size, max_overflow=40, pool_timeout=60)
        _sqlite_setup(engine)
    else:
        engine = sa.create_engine(url, pool_size=pool_size, max_overflow=40, pool_timeout=60,
                                  pool_pre_ping=True)
    try:
        migrate(engine)
    except sa.exc.OperationalError as error:
        raise UsageError(f"cannot open the database {engine.url.render_as_string()}: "
                         f"{error.orig}") from None
    return engine


def _sqlite_setup(engine: sa.Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # transactions are begun below, not by sqlite3
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection):
        immediate = connection.get_execution_options().get("immediate")
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def writer(engine: sa.Engine) -> sa.Engine:
    """``engine`` whose transactions are write transactions (BEGIN IMMEDIATE on SQLite)."""
    return engine.execution_options(immediate=True)


# SQLite has one writer at a time. Left to SQLite, waiting writers poll with growing sleeps
# (its busy handler), and under 50 concurrent pushes a few waited 10 s while others went
# ahead (benchmarks/server_history.py). Queueing them on one lock in the server process, the
# database's only writer, keeps the wait close to the sum of the transactions ahead.
_SQLITE_WRITE_LOCK = threading.Lock()


@contextlib.contextmanager
def write_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A write transaction: committed when the block ends, rolled back if it raises."""
    if engine.dialect.name == "sqlite":
        with _SQLITE_WRITE_LOCK, writer(engine).begin() as connection:
            yield connection
    else:
        with engine.begin() as connection:
            yield connection


def migrate(engine: sa.Engine) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location",
                           os.path.join(os.path.dirname(__file__), "migrations"))
    with writer(engine).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
