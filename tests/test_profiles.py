"""Settings profiles (dev, ci, nightly) and the choice of example database."""

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from proofs.search.database import GuardedDatabase, open_database, parse_redis_url
from proofs.search.profiles import PROFILES, get_profile, register_profiles, search_options


def test_three_profiles_are_registered_with_hypothesis():
    register_profiles()
    for name in ("dev", "ci", "nightly"):
        assert isinstance(settings.get_profile(f"schedcheck-{name}"), settings)
    ci = settings.get_profile("schedcheck-ci")
    assert ci.derandomize and ci.database is None and ci.deadline is None


def test_ci_is_seeded_and_bounded_dev_is_random_nightly_is_long():
    assert search_options("ci")["seed"] == 0
    assert search_options("dev")["seed"] is None
    assert get_profile(None).name == "dev"
    assert PROFILES["dev"].examples < PROFILES["nightly"].examples
    assert PROFILES["ci"].examples <= PROFILES["dev"].examples
    assert search_options("nightly")["examples"]["conformance"] == PROFILES["nightly"].examples


def test_the_command_line_wins_over_the_profile():
    options = search_options("ci", examples=50, seed=7)
    assert options["seed"] == 7 and options["examples"]["conformance"] == 50


def test_an_unknown_profile_is_named():
    with pytest.raises(ValueError, match="profile='weekly'"):
        get_profile("weekly")


def test_database_specs(tmp_path):
    assert open_database("none") is None
    local = open_database(str(tmp_path / "db"))
    assert isinstance(local, DirectoryBasedExampleDatabase)
    assert isinstance(open_database(None), DirectoryBasedExampleDatabase)
    assert parse_redis_url("redis://127.0.0.1:6379") == ("127.0.0.1", 6379, 0)
    assert parse_redis_url("redis://localhost:7000/2") == ("localhost", 7000, 2)
    for bad in ("redis://127.0.0.1", "redis://:6379", "redis://h:1/x", "http://h:1"):
        with pytest.raises(ValueError, match="db="):
            open_database(bad)


def test_an_unreachable_redis_server_leaves_the_local_database(tmp_path):
    pytest.importorskip("redis")
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    lines = []
    database = open_database(f"redis://127.0.0.1:{port}", local=str(tmp_path / "local"), warn=lines.append)
    assert not database.connected
    assert lines == [f"schedcheck: redis database at 127.0.0.1:{port} unreachable; continuing with the local database only"]
    database.save(b"k", b"v")
    assert list(database.fetch(b"k")) == [b"v"] and len(lines) == 1


def test_the_guard_drops_only_the_next_save(tmp_path):
    guarded = GuardedDatabase(DirectoryBasedExampleDatabase(str(tmp_path)))
    guarded.skip_next_save()
    guarded.save(b"k", b"passing")
    guarded.save(b"k", b"failing")
    assert list(guarded.fetch(b"k")) == [b"failing"]
