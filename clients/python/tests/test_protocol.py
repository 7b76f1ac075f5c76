"""The client's side of the agent protocol: descriptors passed back with replies are attributed
by stream offset to the reply whose line they came with, under concurrent requests."""

import os
import threading

import pytest

from custody import _agent

from helpers import in_threads


def test_pipes_passed_back_belong_to_their_replies():
    agent = _agent.agent()
    results = {}

    def start(i):
        child = _agent.Child()
        reply, fds = agent.call("start", {
            "argv": ["sh", "-c", "echo out-%d; echo err-%d >&2" % (i, i)],
            "stdio": ["null", "pipe", "pipe"]}, child=child)
        assert reply["fds"] == ["stdout", "stderr"] and len(fds) == 2, (reply, fds)
        streams = []
        for fd in fds:
            with os.fdopen(fd, "rb") as f:
                streams.append(f.read())
        assert agent.wait(child, 60)
        results[i] = (streams, child.returncode)

    assert in_threads(start, 40) == []
    for i in range(40):
        assert results[i] == ([b"out-%d\n" % i, b"err-%d\n" % i], 0), (i, results[i])


def test_descriptors_sent_with_a_request_reach_the_child(tmp_path):
    agent = _agent.agent()
    r, w = os.pipe()
    try:
        child = _agent.Child()
        reply, fds = agent.call("start", {"argv": ["sh", "-c", "echo via-fd"],
                                          "stdio": ["null", "fd", "null"]}, [w], child=child)
        assert fds == [] and "fds" not in reply or reply["fds"] == []
        os.close(w)
        w = None
        with os.fdopen(r, "rb") as f:
            r = None
            assert f.read() == b"via-fd\n"  # and end of file: the agent kept no copy
        agent.wait(child, 60)
        assert child.returncode == 0
    finally:
        for fd in (r, w):
            if fd is not None:
                os.close(fd)


def test_starts_with_descriptors_among_requests_without():
    # Lines without descriptors (signals) and lines with them (starts passing this process's
    # streams) interleave on the socket; the kernel may return several in one read, and each
    # side must still give every line its own descriptors.
    import custody
    holder = custody.Popen(["sleep", "1000"])
    stop = threading.Event()
    errors = []

    def signals():
        try:
            while not stop.is_set():
                holder.send_signal(0)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def starts():
        try:
            for _ in range(30):
                p = custody.Popen(["true"], stdout=custody.DEVNULL)
                assert p.wait(60) == 0
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    workers = [threading.Thread(target=signals) for _ in range(3)]
    workers += [threading.Thread(target=starts) for _ in range(3)]
    try:
        for t in workers:
            t.start()
        for t in workers[3:]:
            t.join()
    finally:
        stop.set()
        for t in workers:
            t.join()
        holder.kill()
        holder.wait(60)
    assert errors == []
