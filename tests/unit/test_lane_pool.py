"""LanePool (``_dispatch/_lanes.py``), the thread pool of a service: per-lane concurrency, bounded backlogs that
refuse instead of queueing, round robin between lanes, close (finish what waits) and halt (drop it)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from jetstream_sync._dispatch import Lane, LanePool
from tests.helpers import wait_parked, wait_until

Item = tuple[str, int]


class Recorder:
    """Runs items, blocking those whose gate is shut; records what ran, and how many ran at once per lane."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ran: list[Item] = []
        self.running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.gates: dict[str, threading.Event] = {}

    def gate(self, lane: str) -> threading.Event:
        return self.gates.setdefault(lane, threading.Event())

    def __call__(self, item: Item) -> None:
        lane, _ = item
        with self.lock:
            self.running[lane] = self.running.get(lane, 0) + 1
            self.peak[lane] = max(self.peak.get(lane, 0), self.running[lane])
        gate = self.gates.get(lane)
        if gate is not None:
            assert gate.wait(10), f"gate of {lane} never opened"
        with self.lock:
            self.running[lane] -= 1
            self.ran.append(item)


@pytest.fixture
def make_pool() -> Iterator[Callable[[int, Callable[[Item], None]], LanePool[Item]]]:
    pools: list[LanePool[Item]] = []

    def make(workers: int, run: Callable[[Item], None]) -> LanePool[Item]:
        pool: LanePool[Item] = LanePool("test-lanes", workers, run)
        pool.start(lambda thread: None)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.halt()
        assert pool.wait(5)


def test_a_lane_runs_at_most_its_limit_at_once_and_the_others_keep_the_rest_of_the_threads(make_pool):
    recorder = Recorder()
    pool = make_pool(4, recorder)
    slow: Lane[Item] = pool.lane("slow", limit=1, max_pending=100, max_bytes=10**6)
    fast: Lane[Item] = pool.lane("fast", limit=4, max_pending=100, max_bytes=10**6)
    gate = recorder.gate("slow")
    for i in range(5):
        assert pool.offer(slow, ("slow", i))
    for i in range(20):
        assert pool.offer(fast, ("fast", i))
    # the slow lane holds one thread; the other three run every fast item meanwhile
    wait_until(lambda: sum(1 for lane, _ in recorder.ran if lane == "fast") == 20)
    assert slow.running == 1 and slow.waiting == 4
    gate.set()
    wait_until(lambda: len(recorder.ran) == 25)
    assert recorder.peak["slow"] == 1
    assert [i for lane, i in recorder.ran if lane == "slow"] == [0, 1, 2, 3, 4]  # one at a time, in order


def test_a_full_lane_refuses_at_once_and_takes_again_when_it_drained(make_pool):
    recorder = Recorder()
    pool = make_pool(2, recorder)
    lane: Lane[Item] = pool.lane("a", limit=2, max_pending=3, max_bytes=10**6)
    other: Lane[Item] = pool.lane("b", limit=2, max_pending=3, max_bytes=10**6)
    gate = recorder.gate("a")
    assert pool.offer(lane, ("a", 0)) and pool.offer(lane, ("a", 1))
    wait_until(lambda: lane.running == 2)  # both threads busy with it
    assert [pool.offer(lane, ("a", i)) for i in range(2, 6)] == [True, True, True, False]
    assert lane.waiting == 3
    assert pool.offer(other, ("b", 0))  # another lane is not refused for it (and waits for a thread)
    gate.set()
    wait_until(lambda: len(recorder.ran) == 6)
    assert pool.offer(lane, ("a", 6))
    wait_until(lambda: len(recorder.ran) == 7)


def test_the_byte_bound_refuses_past_it_but_always_lets_one_item_in(make_pool):
    recorder = Recorder()
    pool = make_pool(1, recorder)
    busy: Lane[Item] = pool.lane("busy", limit=1, max_pending=10, max_bytes=10)
    lane: Lane[Item] = pool.lane("a", limit=1, max_pending=10, max_bytes=100)
    gate = recorder.gate("busy")
    assert pool.offer(busy, ("busy", 0))
    wait_until(lambda: busy.running == 1)  # the one thread is held: what follows waits
    assert pool.offer(lane, ("a", 0), size=1000)  # larger than the bound, but alone: let in
    assert not pool.offer(lane, ("a", 1), size=1)
    gate.set()
    wait_until(lambda: len(recorder.ran) == 2)
    assert pool.offer(lane, ("a", 2), size=60) and pool.offer(lane, ("a", 3), size=40)


def test_lanes_take_turns_so_a_deep_backlog_does_not_hold_every_thread(make_pool):
    order: list[Item] = []
    release = threading.Event()

    def run(item: Item) -> None:
        if item == ("first", -1):
            assert release.wait(10)
        order.append(item)

    pool = make_pool(1, run)
    deep: Lane[Item] = pool.lane("deep", limit=1, max_pending=100, max_bytes=10**6)
    shallow: Lane[Item] = pool.lane("shallow", limit=1, max_pending=100, max_bytes=10**6)
    first: Lane[Item] = pool.lane("first", limit=1, max_pending=100, max_bytes=10**6)
    assert pool.offer(first, ("first", -1))
    wait_until(lambda: first.running == 1)
    for i in range(5):
        assert pool.offer(deep, ("deep", i))
    assert pool.offer(shallow, ("shallow", 0))
    release.set()
    wait_until(lambda: len(order) == 7)
    assert order.index(("shallow", 0)) <= 2  # served after at most one deep item, not after all five


def test_offers_without_a_wake_wait_for_one_wake_that_still_reaches_every_worker(make_pool):
    # the IO thread offers a burst with wake=False and wakes the pool once after it; one wake-up must still
    # spread slow items over every worker (each worker that takes an item wakes the next while more is ready)
    recorder = Recorder()
    pool = make_pool(4, recorder)
    lane: Lane[Item] = pool.lane("a", limit=4, max_pending=100, max_bytes=10**6)
    gate = recorder.gate("a")
    wait_parked(pool.threads)
    for i in range(6):
        assert pool.offer(lane, ("a", i), wake=False)
    assert lane.running == 0 and lane.waiting == 6  # nobody was woken: the workers still wait
    pool.wake()
    # one wake-up, four workers inside the handler: the slow items spread (lane.running counts an item once it
    # is taken, a moment before its worker runs it; a worker wakes the next in between)
    wait_until(lambda: recorder.running.get("a") == 4)
    assert lane.waiting == 2
    gate.set()
    wait_until(lambda: len(recorder.ran) == 6)
    assert recorder.peak["a"] == 4


def test_close_runs_what_waits_then_ends_and_refuses_new_items(make_pool):
    recorder = Recorder()
    pool = make_pool(2, recorder)
    lane: Lane[Item] = pool.lane("a", limit=1, max_pending=10, max_bytes=10**6)
    gate = recorder.gate("a")
    for i in range(4):
        assert pool.offer(lane, ("a", i))
    wait_until(lambda: lane.running == 1)
    pool.close()
    assert not pool.offer(lane, ("a", 9))
    assert not pool.wait(0.05)  # the item in hand holds its worker
    gate.set()
    assert pool.wait(5)
    assert recorder.ran == [("a", 0), ("a", 1), ("a", 2), ("a", 3)]


def test_halt_returns_what_waits_and_the_workers_end_after_the_item_in_hand(make_pool):
    recorder = Recorder()
    pool = make_pool(2, recorder)
    a: Lane[Item] = pool.lane("a", limit=1, max_pending=10, max_bytes=10**6)
    b: Lane[Item] = pool.lane("b", limit=1, max_pending=10, max_bytes=10**6)
    recorder.gate("a")
    recorder.gate("b")
    for i in range(3):
        assert pool.offer(a, ("a", i)) and pool.offer(b, ("b", i))
    wait_until(lambda: a.running == 1 and b.running == 1)
    left = pool.halt()
    assert sorted(left) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    assert a.waiting == b.waiting == 0 and not pool.offer(a, ("a", 9))
    recorder.gates["a"].set()
    recorder.gates["b"].set()
    assert pool.wait(5)
    assert sorted(recorder.ran) == [("a", 0), ("b", 0)]


def test_what_escapes_the_runner_is_logged_and_the_worker_goes_on(make_pool, caplog):
    done: list[int] = []

    def run(item: Item) -> None:
        if item[1] == 0:
            raise RuntimeError("a bug in the runner")
        done.append(item[1])

    pool = make_pool(1, run)
    lane: Lane[Item] = pool.lane("a", limit=1, max_pending=10, max_bytes=10**6)
    for i in range(3):
        assert pool.offer(lane, ("a", i))
    wait_until(lambda: done == [1, 2])
    assert "a request escaped its runner" in caplog.text and "a bug in the runner" in caplog.text


def test_the_idle_hook_runs_once_a_worker_ran_what_was_ready_and_when_it_ends():
    # a service sends the replies of a burst in the hook: once per burst, never between two items that were
    # ready, and once more when the worker ends, so that nothing a worker queued is left unsent
    events: list[object] = []
    release = threading.Event()

    def run(item: Item) -> None:
        if item[1] == 0:
            assert release.wait(10)
        events.append(item[1])

    pool: LanePool[Item] = LanePool("test-lanes", 1, run, idle=lambda: events.append("idle"))
    pool.start(lambda thread: None)
    lane: Lane[Item] = pool.lane("a", limit=1, max_pending=10, max_bytes=10**6)
    assert pool.offer(lane, ("a", 0))
    wait_until(lambda: lane.running == 1)
    for i in range(1, 4):
        assert pool.offer(lane, ("a", i))
    release.set()
    wait_until(lambda: events[-1:] == ["idle"])
    assert events == [0, 1, 2, 3, "idle"]  # the three waiting items ran back to back, then the hook once
    assert pool.offer(lane, ("a", 4))
    wait_until(lambda: events[-1:] == ["idle"] and len(events) == 7)
    assert events[5:] == [4, "idle"]
    pool.close()
    assert pool.wait(5)
    assert events[7:] == ["idle"]  # the worker ended: once more
