"""Hypothesis example databases for schedcheck: a local directory, optionally shared through Redis, guarded.

``open_database`` turns ``--db`` (a folder, ``none`` or ``redis://HOST:PORT/DB``) into an
``ExampleDatabase``; a shared Redis database is used together with the local one, and
a server that is unreachable or goes away mid-run degrades to the local database with
one line on stderr.  ``GuardedDatabase`` keeps a failing database from failing a run.
No work at import time.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Iterable
from urllib.parse import urlsplit

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

DEFAULT_DATABASE = os.path.join(".hypothesis", "examples")
REDIS_CONNECT_SECONDS = 2.0  # a shared database that answers slower than this is unreachable
REDIS_CALL_SECONDS = 5.0


# -- the example database ------------------------------------------------------------------


def _warn_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def open_database(
    spec: str | None, *, local: str = DEFAULT_DATABASE, warn: Callable[[str], None] = _warn_stderr
) -> ExampleDatabase | None:
    """The example database named by ``spec``: a directory, ``none``, or ``redis://HOST:PORT[/DB]``.

    A Redis database comes with the local directory ``local``: every example is written
    to both, and read from both.  If the server cannot be reached now or later, ``warn``
    gets one line and the run goes on with the local database alone."""
    if spec is None:
        return DirectoryBasedExampleDatabase(local)
    if spec == "none":
        keep_hypothesis_storage_off_disk()
        return None
    if spec.startswith("redis://"):
        host, port, db = parse_redis_url(spec)
        return SharedDatabase(DirectoryBasedExampleDatabase(local), host, port, db, warn=warn)
    if "://" in spec:
        raise ValueError(f"db={spec!r}: expected a directory, 'none' or redis://HOST:PORT[/DB]")
    return DirectoryBasedExampleDatabase(spec)


_STORAGE_OWNER = "SCHEDCHECK_HYPOTHESIS_STORAGE_PID"  # the process that made the temporary storage (and removes it)


def keep_hypothesis_storage_off_disk() -> str:
    """Send Hypothesis's own storage of this run to a temporary folder, removed when the process that made it exits.

    With no example database Hypothesis still writes: it caches the constants it collects
    from the modules it sees under ``.hypothesis/constants/`` (``hypothesis.internal.
    constants_ast``), with no setting to turn that off.  ``--db none`` means nothing of the
    run is kept, so the storage directory (``HYPOTHESIS_STORAGE_DIRECTORY``, which the
    processes this one starts inherit, and ``set_hypothesis_home_dir`` for this one) is a
    temporary folder; the constants are collected again on the next run (a cache, not a
    result).  Returns the folder."""
    import atexit
    import shutil
    import tempfile

    from hypothesis.configuration import set_hypothesis_home_dir

    where = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
    if not (where and os.environ.get(_STORAGE_OWNER) and os.path.isdir(where)):
        where = tempfile.mkdtemp(prefix="schedcheck-hypothesis-")
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = where
        os.environ[_STORAGE_OWNER] = str(os.getpid())
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(where, ignore_errors=True))
    set_hypothesis_home_dir(where)
    return where


def parse_redis_url(spec: str) -> tuple[str, int, int]:
    """``redis://HOST:PORT[/DB]`` as (host, port, db)."""
    parts = urlsplit(spec)
    path = parts.path.strip("/")
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "redis" or not parts.hostname or port is None or (path and not path.isdigit()):
        raise ValueError(f"db={spec!r}: expected redis://HOST:PORT or redis://HOST:PORT/DB")
    return parts.hostname, port, int(path or 0)


class SharedDatabase(ExampleDatabase):
    """The local directory database, always, plus a shared Redis one while it answers.

    Reads yield the local examples, then the shared ones not seen yet; writes go to the
    local database first, then to the shared one.  The first connection error drops the
    shared database for the rest of the run and says so in one line."""

    def __init__(
        self, local: ExampleDatabase, host: str, port: int, db: int = 0,
        *, warn: Callable[[str], None] = _warn_stderr,
    ) -> None:
        super().__init__()
        self.local = local
        self.where = f"{host}:{port}"
        self.warn = warn
        self.shared = None
        self._errors: tuple = (OSError,)
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError as error:
            raise ValueError(
                f"db=redis://{self.where}: the redis package is not installed ({error}); pip install redis"
            ) from None
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)
        client = redis.Redis(
            host=host, port=port, db=db,
            socket_connect_timeout=REDIS_CONNECT_SECONDS, socket_timeout=REDIS_CALL_SECONDS,
            retry=Retry(NoBackoff(), 0),
        )
        self.shared = RedisExampleDatabase(client)
        try:
            client.ping()
        except self._errors:
            self._lose()

    def __repr__(self) -> str:
        return f"SharedDatabase({self.local!r}, redis://{self.where}, connected={self.shared is not None})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SharedDatabase) and (self.local, self.where) == (other.local, other.where)

    __hash__ = None  # type: ignore[assignment]

    @property
    def connected(self) -> bool:
        return self.shared is not None

    def _lose(self) -> None:
        if self.shared is not None:
            self.shared = None
            self.warn(f"schedcheck: redis database at {self.where} unreachable; continuing with the local database only")

    def _shared(self, operation: str, *args) -> None:
        if self.shared is None:
            return
        try:
            getattr(self.shared, operation)(*args)
        except self._errors:
            self._lose()

    def fetch(self, key: bytes) -> Iterable[bytes]:
        seen = set()
        for value in self.local.fetch(key):
            seen.add(value)
            yield value
        if self.shared is None:
            return
        try:
            remote = list(self.shared.fetch(key))
        except self._errors:
            self._lose()
            return
        for value in remote:
            if value not in seen:
                seen.add(value)
                yield value

    def save(self, key: bytes, value: bytes) -> None:
        self.local.save(key, value)
        self._shared("save", key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.local.delete(key, value)
        self._shared("delete", key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.local.move(src, dest, value)
        self._shared("move", src, dest, value)


class GuardedDatabase(ExampleDatabase):
    """A database that can be told to drop the next save.

    Hypothesis saves the example being run when the test raises any BaseException, as if
    it had failed.  Search raises BudgetExhausted and HandOver (both BaseExceptions) on
    examples that did not fail too; without this guard those passing examples would be
    replayed first by every later run, on every machine sharing the database."""

    def __init__(self, wrapped: ExampleDatabase) -> None:
        super().__init__()
        self.wrapped = wrapped
        self._skip = False

    def __repr__(self) -> str:
        return f"GuardedDatabase({self.wrapped!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GuardedDatabase) and self.wrapped == other.wrapped

    __hash__ = None  # type: ignore[assignment]

    def skip_next_save(self) -> None:
        self._skip = True

    def fetch(self, key: bytes) -> Iterable[bytes]:
        self._skip = False
        yield from self.wrapped.fetch(key)

    def save(self, key: bytes, value: bytes) -> None:
        if self._skip:
            self._skip = False
            return
        self.wrapped.save(key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.wrapped.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.wrapped.move(src, dest, value)
