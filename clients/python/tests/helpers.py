"""What the tests share: processes identified by PID and start time, owner programs, skips."""

import os
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

import custody

PYTHON = sys.executable
DEADLINE = 60.0  # generous: the machine may be loaded; a pass is usually far quicker


def skip_or_fail(reason):
    """Skip for a missing capability, or fail where CI requires every capability."""
    if os.environ.get("CUSTODY_REQUIRE_PRIVILEGED") == "1":
        pytest.fail("CUSTODY_REQUIRE_PRIVILEGED=1 but: " + reason)
    pytest.skip(reason)


def require_cgroup():
    containment = custody.agent_info().get("containment")
    if containment != "cgroup":
        skip_or_fail("the agent's containment is %r, not cgroup (run as root on a cgroup v2 "
                     "machine): a setsid descendant leaves a process group" % containment)


def start_ticks(pid):
    """The process's start (clock ticks since boot, /proc/PID/stat field 22), or None when no
    such process exists or it is a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    if fields[0] == "Z":
        return None
    return int(fields[19])


class Incarnation:
    """One process: its PID and its start, read now."""

    def __init__(self, pid):
        self.pid = int(pid)
        self.start = start_ticks(self.pid)
        assert self.start is not None, "process %d is not running" % self.pid

    def alive(self):
        return start_ticks(self.pid) == self.start

    def __repr__(self):
        return "%d@%d" % (self.pid, self.start)


def wait_gone(incarnations, deadline=DEADLINE):
    """Poll until none of incarnations runs; return those still running at the deadline (after
    killing them through a pidfd, their identity checked first, so the run leaves nothing)."""
    end = time.monotonic() + deadline
    left = list(incarnations)
    while left and time.monotonic() < end:
        left = [i for i in left if i.alive()]
        if left:
            time.sleep(0.02)
    for i in left:
        kill_verified(i)
    return left


def kill_verified(i):
    """SIGKILL the incarnation through a pidfd, its identity checked after the open."""
    try:
        fd = os.pidfd_open(i.pid)
    except OSError:
        return
    try:
        if i.alive():  # the pidfd now holds this incarnation, or the PID has moved on
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        os.close(fd)


def program(script, *args, env=None, **kwargs):
    """Start a Python program that imports the same custody as the tests, its stdout a pipe."""
    environment = dict(os.environ if env is None else env)
    here = os.path.dirname(os.path.dirname(os.path.abspath(custody.__file__)))
    environment["PYTHONPATH"] = os.pathsep.join(
        [here] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stdin", subprocess.PIPE)  # its lifeline: EOF when the test goes
    return subprocess.Popen([PYTHON, "-c", script] + list(args), env=environment, **kwargs)


def expect(proc, word, deadline=DEADLINE):
    """Read proc's stdout up to a line starting with word and return that line's other fields;
    fail on end of file or at the deadline."""
    end = time.monotonic() + deadline
    fd = proc.stdout.fileno()
    line = b""
    while True:
        left = end - time.monotonic()
        if left <= 0:
            pytest.fail("no %r line from the program within %gs (got %r)" % (word, deadline, line))
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        byte = os.read(fd, 1)
        if not byte:
            proc.wait()
            pytest.fail("the program ended (status %s) before a %r line; last %r"
                        % (proc.returncode, word, line))
        if byte != b"\n":
            line += byte
            continue
        fields = line.decode().split()
        line = b""
        if fields and fields[0] == "skip":
            skip_or_fail(" ".join(fields[1:]))
        if fields and fields[0] == word:
            return fields[1:]


def end_program(proc):
    """Kill a program the test started (by its handle) and wait for it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(DEADLINE)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def in_threads(fn, n):
    """Call fn(i) for i in range(n), each in a thread of its own, all at once; return the
    exceptions they raised (an assertion's among them), once every one has ended."""
    errors = []

    def one(i):
        try:
            fn(i)
        except Exception as e:  # noqa: BLE001 - returned to the test
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
