"""The suite runs against the custody binary ($CUSTODY_BIN, else the package's copy, else PATH)
and imports custody from ../src, or, with CUSTODY_TEST_INSTALLED=1, from wherever it is
installed (the wheel's test). Every agent it starts writes a ledger of its own, never the
user's."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
INSTALLED = os.environ.get("CUSTODY_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, SRC)

import custody  # noqa: E402

_STATE = tempfile.mkdtemp(prefix="custody-py-test-")
os.environ["CUSTODY_LEDGER"] = os.path.join(_STATE, "spawn-ledger.json")


def pytest_configure(config):
    where = os.path.dirname(os.path.abspath(custody.__file__))
    if INSTALLED == where.startswith(SRC):
        pytest.exit("custody imported from %s, but CUSTODY_TEST_INSTALLED=%s"
                    % (where, os.environ.get("CUSTODY_TEST_INSTALLED", "")), returncode=1)
    try:
        custody.find_binary()
    except custody.BinaryNotFoundError as e:
        pytest.exit("%s (build it: go build -o DIR/custody ./cmd/custody, then "
                    "CUSTODY_BIN=DIR/custody)" % e, returncode=1)


def pytest_report_header(config):
    return "custody %s from %s, binary %s" % (
        "installed" if INSTALLED else "source", os.path.dirname(custody.__file__),
        custody.find_binary())


def pytest_unconfigure(config):
    # The agent writes the ledger as it ends (its rows removed), and makes the directory again
    # if it is gone by then: end this process's agent, and await its exit, first.
    a = custody._agent._agent
    if a is not None and a.usable():
        a._sock.close()  # the hang-up: the agent stops what it still holds and exits
        try:
            a.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            a.process.kill()
            a.process.wait()
    shutil.rmtree(_STATE, ignore_errors=True)


@pytest.fixture
def children():
    """A list for the test's custody children: whatever is still running at the end is killed
    (its whole scope) and waited for."""
    started = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(60)
