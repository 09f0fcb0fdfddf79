"""Failed sign-ins counted in the database: every process on it shares the counts and the lockouts, which outlive a
restart; the rule is the in-process one (5 per name, 20 per address, 30 s doubling), and a burst of parallel
guesses spread over processes is cut off after the free ones."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import delete, func, inspect, select, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db import create_db_engine, init_db
from db.models import SchemaVersion, SignInFailure
from relabel.review.sign_in_throttle import (
    FORGET_S,
    FREE_PER_ADDRESS,
    FREE_PER_USER,
    LOCK_S,
    MAX_LOCK_S,
    PURGE_EVERY,
    DbSignInThrottle,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def process(url: str, clock: Clock) -> DbSignInThrottle:
    """What one studio process holds: an engine of its own and a throttle on it."""
    engine = create_db_engine(url)
    init_db(engine)
    return DbSignInThrottle(engine, clock=clock)


def rows(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(SignInFailure)) or 0)


def test_failures_in_one_process_lock_the_name_in_another_for_longer_each_time(db_url: str) -> None:
    clock = Clock()
    first, second = process(db_url, clock), process(db_url, clock)
    for i in range(FREE_PER_USER):
        assert (first if i % 2 else second).begin("alice", "10.0.0.1") is None  # admitted, counted until right
    for throttle in (first, second):
        locked = throttle.begin("alice", "10.0.0.1")
        assert locked is not None and locked.who == "'alice'" and locked.seconds == LOCK_S
        assert locked.message == f"too many failed sign-ins for 'alice'; try again in {LOCK_S:.0f} s"
    assert second.begin("bob", "10.0.0.1") is None  # another name from the same address goes on
    second.succeeded("bob", "10.0.0.1")
    clock.now += LOCK_S
    assert first.begin("alice", "10.0.0.1") is None  # one more guess, which fails: twice as long, everywhere
    again = second.begin("alice", "10.0.0.1")
    assert again is not None and again.seconds == 2 * LOCK_S


def test_a_lockout_outlives_a_restart_and_a_right_password_starts_the_name_afresh(db_url: str) -> None:
    clock = Clock()
    before = process(db_url, clock)
    for _ in range(FREE_PER_USER):
        before.begin("alice", "10.0.0.1")
    before.engine.dispose()
    after = process(db_url, clock)  # a restarted process on the same database
    locked = after.begin("alice", "10.0.0.1")
    assert locked is not None and locked.seconds == LOCK_S
    clock.now += LOCK_S
    assert after.begin("alice", "10.0.0.1") is None
    after.succeeded("alice", "10.0.0.1")
    for _ in range(FREE_PER_USER):  # afresh: the whole allowance again
        assert after.begin("alice", "10.0.0.1") is None


def test_one_address_guessing_many_names_is_locked_out_until_it_signs_in_right(db_url: str) -> None:
    clock = Clock()
    first, second = process(db_url, clock), process(db_url, clock)
    for i in range(FREE_PER_ADDRESS):
        assert (first, second)[i % 2].begin(f"name{i}", "10.0.0.9") is None
    locked = second.begin("alice", "10.0.0.9")
    assert locked is not None and locked.who == "this address" and "this address" in locked.message
    assert first.begin("alice", "10.0.0.10") is None  # another address is not
    first.succeeded("name0", "10.0.0.9")  # one of them was right after all: the address takes it back
    assert second.begin("alice", "10.0.0.9") is None


def test_the_lockout_stops_growing_at_its_cap_and_old_failures_are_forgotten_and_purged(db_url: str) -> None:
    clock = Clock()
    throttle = process(db_url, clock)
    for _ in range(FREE_PER_USER + 10):  # wait out each lockout and fail again
        refused = throttle.begin("alice", "10.0.0.1")
        if refused is not None:
            clock.now += refused.seconds
            assert throttle.begin("alice", "10.0.0.1") is None
    locked = throttle.begin("alice", "10.0.0.1")
    assert locked is not None and locked.seconds == MAX_LOCK_S
    clock.now += MAX_LOCK_S + FORGET_S + 1  # the lockout is over and the failures are old: they no longer count
    for _ in range(FREE_PER_USER):
        assert throttle.begin("alice", "10.0.0.1") is None
    assert rows(throttle.engine) == 2
    clock.now += FORGET_S + MAX_LOCK_S + 1
    throttle._admitted = PURGE_EVERY * 7  # the next admitted attempt deletes the forgotten rows
    assert throttle.begin("bob", "10.0.0.2") is None
    assert rows(throttle.engine) == 2  # bob's two rows; alice's and 10.0.0.1's are gone


def test_a_burst_of_parallel_guesses_over_two_processes_is_cut_off_after_the_free_ones(db_url: str) -> None:
    clock = Clock()
    throttles = [process(db_url, clock), process(db_url, clock)]
    admitted: list[bool] = []
    start = threading.Barrier(16)

    def guess(k: int) -> None:
        start.wait()
        admitted.append(throttles[k % 2].begin("alice", f"10.0.1.{k}") is None)

    threads = [threading.Thread(target=guess, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 16 and sum(admitted) == FREE_PER_USER


def test_a_workspace_of_schema_8_gains_the_table(tmp_path: Path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'relabel.db'}")
    init_db(engine)
    with engine.begin() as conn:  # as a workspace stamped with schema 8 was
        conn.execute(text("DROP TABLE sign_in_failures"))
        conn.execute(delete(SchemaVersion).where(col(SchemaVersion.version) >= 9))
    assert not inspect(engine).has_table("sign_in_failures")
    assert init_db(engine) >= 9
    assert inspect(engine).has_table("sign_in_failures")
    assert DbSignInThrottle(engine).begin("alice", "10.0.0.1") is None
