"""Who reads the agent's socket: the thread that waits, while no other thread does.

These tests hold the reading to what a program sees: no reply and no exit is lost when a signal
handler's exception cuts a read short in the main thread; a poll() with nobody waiting still
learns of an exit; threads that wait for each other's replies hand the turn on; and a program
that only starts and waits runs no thread of custody's.
"""

import signal
import subprocess
import sys
import threading
import time

import custody
from custody import _agent

from helpers import DEADLINE, in_threads


class _Interrupted(Exception):
    pass


class _Injector:
    """Raise _Interrupted once, at the n-th point of this thread's run through the client's
    reading code where CPython runs a signal handler: just after a call has returned, before
    the caller stores its result (a function's return, a C function's return: the evaluation
    loop checks for signals there), and at a function's start (which is also where a call that
    a signal interrupts raises, having done nothing). A profile function raising there makes
    the exception come from that very call, as a handler's would. Elsewhere (between a
    ``with``'s ``__enter__`` and its block, say) CPython runs no handler, and raising there would
    test what no program meets."""

    def __init__(self, n, first=None):
        self.n, self.steps, self.fired = n, 0, False
        self.file = _agent.__file__
        self.first = first  # called at the first point: the wait has begun

    def __enter__(self):
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)

    def _ours(self, frame):
        return frame is not None and frame.f_code.co_filename == self.file

    def _profile(self, frame, event, arg):
        if self.fired:
            return
        if event == "call":
            point = self._ours(frame)
        elif event == "return":
            point = self._ours(frame.f_back)
        elif event == "c_return":
            point = self._ours(frame)
        else:
            point = False
        if point:
            self.steps += 1
            if self.steps == 1 and self.first is not None:
                self.first()
            if self.steps == self.n:
                self.fired = True
                raise _Interrupted()


def test_an_exception_at_any_step_of_a_read_loses_no_reply_or_exit():
    # A signal handler's exception can be raised in the main thread between any two steps of
    # the code that reads: after recvmsg(2) has returned and before its count is stored, in the
    # middle of a dispatch. Raised once at each step in turn, the wait, retried, must still
    # return its child's status, and the thread after it must still find the turn free: a line
    # lost or a turn kept would hang it (and the deadline fails the test).
    # Each child exits once its stdin is closed, which the injector does at the wait's first
    # point: the wait always has the exit to read, however loaded the machine.
    def child(code):
        return custody.Popen(["sh", "-c", "read x; exit %d" % code], stdin=subprocess.PIPE)

    p = child(0)
    with _Injector(0, p.stdin.close) as count:  # how many points one wait for an exit passes
        p.wait(timeout=DEADLINE)
    steps = count.steps
    assert steps > 30, steps
    fired = 0
    for n in range(1, steps + 1):
        p = child(n % 7)
        deadline = time.monotonic() + DEADLINE
        with _Injector(n, p.stdin.close) as inject:
            while True:
                try:
                    code = p.wait(timeout=max(0.0, deadline - time.monotonic()))
                    break
                except _Interrupted:
                    continue
        fired += inject.fired
        assert code == n % 7, "exception at point %d of %d: status %r" % (n, steps, code)
        other = []
        t = threading.Thread(target=lambda: other.append(custody.run(["true"]).returncode))
        t.start()
        t.join(DEADLINE)
        assert other == [0], "exception at point %d of %d: the turn was not handed on" % (
            n, steps)
    assert fired > steps // 2, (fired, steps)


def test_poll_learns_of_an_exit_with_nobody_waiting():
    p = custody.Popen(["true"])
    deadline = time.monotonic() + DEADLINE
    while p.poll() is None:
        assert time.monotonic() < deadline, "poll() never saw the exit"
        time.sleep(0.001)
    assert p.returncode == 0


def test_a_program_that_starts_and_waits_runs_no_thread_of_custodys():
    before = {t.ident for t in threading.enumerate()}
    p = custody.Popen(["true"])
    assert p.wait(timeout=DEADLINE) == 0
    assert custody.run(["true"]).returncode == 0
    added = [t.name for t in threading.enumerate() if t.ident not in before]
    assert added == []


def test_threads_waiting_on_one_another_hand_the_turn_on():
    # Each thread waits for its own child while others read: the one reading when its child
    # exits gives the turn to a waiter, never to nobody. A child that lives longer than its
    # thread's turn would hang its waiter if the turn were dropped.
    agent = _agent.agent()
    results = {}

    def one(i):
        child = _agent.Child()
        agent.call("start", {"argv": ["sh", "-c", "sleep 0.0%d; exit %d" % (i % 5, i % 9)],
                             "stdio": ["null", "null", "null"]}, child=child)
        assert agent.wait(child, DEADLINE), "child %d: no exit within the deadline" % i
        results[i] = child.returncode

    assert in_threads(one, 60) == []
    assert results == {i: i % 9 for i in range(60)}


def test_wait_times_out_and_the_turn_goes_on():
    # A thread that reads until its deadline gives the turn up: another thread's wait then
    # reads and sees its child's exit.
    agent = _agent.agent()
    long_child, short_child = _agent.Child(), _agent.Child()
    agent.call("start", {"argv": ["sleep", "1000"], "stdio": ["null", "null", "null"]},
               child=long_child)
    try:
        assert not agent.wait(long_child, 0.05)
        agent.call("start", {"argv": ["true"], "stdio": ["null", "null", "null"]},
                   child=short_child)
        got = []
        t = threading.Thread(target=lambda: got.append(agent.wait(short_child, DEADLINE)))
        t.start()
        t.join()
        assert got == [True] and short_child.returncode == 0
    finally:
        agent.call("signal", {"pid": long_child.pid, "signal": "SIGKILL"})
        assert agent.wait(long_child, DEADLINE)
    assert long_child.returncode == -signal.SIGKILL


def test_asyncio_exits_come_with_no_thread_waiting():
    # An asyncio child's exit needs a reader while the loop runs: the background reader reads
    # then, and ends once nothing waits without a thread.
    import asyncio

    n = 3

    async def main():
        procs = [await custody.create_subprocess_exec("sh", "-c", "exit %d" % i)
                 for i in range(n)]
        return [await asyncio.wait_for(p.wait(), DEADLINE) for p in procs]

    assert asyncio.run(main()) == list(range(n))
    deadline = time.monotonic() + DEADLINE
    while any(t.name == "custody-agent" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the background reader outlived what it read for"
        time.sleep(0.001)
