"""Start to exit of /bin/true through custody.Popen against subprocess.Popen.

The arms are interleaved (one of each per round, the order rotating), so that a machine whose
load changes during the run weighs on all alike; the medians of the rounds are compared. The
first custody call, which starts this process's agent, is timed apart and not counted. A third
arm, the agent's own start of the same program (a bare ``start`` request, no environment or
descriptors, then its exit event), splits custody.Popen's time into the agent's and the
client's. With ``--floor``, a fourth arm makes the same bare start through a floor agent (the
binary of ``internal/benchagent``, built with ``go build``): one that speaks the protocol's start
and exit around a plain start of the program and does nothing of custody's, so that what any
helper process between this process and its children costs (the socket's trips, the wake-ups, a
Go program's start) is measured beside custody's own share. Beside custody's arms the floor
agent also bears what an owned start leaves to do after it (its release, the ledger's background,
the next cgroup), which lands on whichever arm runs next; ``--floor-alone`` times the floor agent
against subprocess.Popen with no custody arm at all.

    CUSTODY_BIN=/path/to/custody python3 bench.py [-n 200] [--program /bin/true] [--floor BIN
        [--floor-alone]] [--json]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

import custody  # noqa: E402
from custody import _agent  # noqa: E402


class _Bare:
    """The agent's start alone, shaped like a Popen for once()."""

    def __init__(self, argv, agent=None):
        self._child = _agent.Child()
        self._agent = agent or _agent.agent()
        self._agent.call("start", {"argv": argv, "stdio": ["null", "null", "null"]},
                         child=self._child)

    def wait(self):
        self._agent.wait(self._child)
        self.returncode = self._child.returncode


def once(popen, argv):
    start = time.perf_counter()
    p = popen(argv)
    p.wait()
    elapsed = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit("%s exited %s" % (argv, p.returncode))
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="rounds (default 200)")
    parser.add_argument("--program", default="/bin/true")
    parser.add_argument("--floor", metavar="BIN",
                        help="also time bare starts through this floor agent (internal/benchagent)")
    parser.add_argument("--floor-alone", action="store_true",
                        help="time only subprocess.Popen and the --floor agent, no custody arm")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    argv = [args.program]
    if args.floor_alone:
        if not args.floor:
            parser.error("--floor-alone needs --floor BIN")
        return _floor_alone(args, argv)

    first = once(custody.Popen, argv)  # the agent's start, then the first child
    info = custody.agent_info()
    plain, owned, bare, floor = [], [], [], []
    arms = [(plain, subprocess.Popen), (owned, custody.Popen), (bare, _Bare)]
    if args.floor:
        floor_agent = _floor_agent(args.floor)
        arms.append((floor, lambda argv: _Bare(argv, floor_agent)))
    for i in range(args.n):
        k = i % len(arms)
        for times, popen in arms[k:] + arms[:k]:
            times.append(once(popen, argv))
    ms = {"subprocess": statistics.median(plain) * 1e3, "custody": statistics.median(owned) * 1e3,
          "agent": statistics.median(bare) * 1e3}
    if floor:
        ms["floor"] = statistics.median(floor) * 1e3
    result = {
        "program": args.program, "rounds": args.n, "python": platform.python_version(),
        "machine": "%s, %d CPUs, load %s" % (platform.platform(), os.cpu_count(),
                                            " ".join("%.2f" % x for x in os.getloadavg())),
        "containment": info.get("containment"),
        "first_call_ms": first * 1e3,
        "median_ms": ms,
        "p90_ms": {"subprocess": _quantile(plain, 0.9) * 1e3,
                   "custody": _quantile(owned, 0.9) * 1e3},
        "ratio": ms["custody"] / ms["subprocess"],
        "agent_ratio": ms["agent"] / ms["subprocess"],
        "client_ms": ms["custody"] - ms["agent"],
    }
    if floor:
        result["floor_ratio"] = ms["floor"] / ms["subprocess"]
        result["agent_over_floor"] = ms["agent"] / ms["floor"]
    if args.json:
        print(json.dumps(result))
        return
    print("%s, %d rounds interleaved, Python %s, containment %s" % (
        args.program, args.n, result["python"], result["containment"]))
    print("machine: %s" % result["machine"])
    print("first custody call (agent start + child): %.2f ms" % result["first_call_ms"])
    print("median subprocess.Popen %.3f ms, custody.Popen %.3f ms: %.2fx" % (
        ms["subprocess"], ms["custody"], result["ratio"]))
    print("median the agent's bare start %.3f ms (%.2fx): the client adds %.3f ms" % (
        ms["agent"], result["agent_ratio"], result["client_ms"]))
    print("p90    subprocess.Popen %.3f ms, custody.Popen %.3f ms" % (
        result["p90_ms"]["subprocess"], result["p90_ms"]["custody"]))
    if floor:
        print("median the floor agent's bare start %.3f ms (%.2fx); the agent's over it %.2fx" % (
            ms["floor"], result["floor_ratio"], result["agent_over_floor"]))


def _floor_alone(args, argv):
    """subprocess.Popen and the floor agent's bare start, interleaved, and nothing of custody's."""
    floor_agent = _floor_agent(args.floor)
    _Bare(argv, floor_agent).wait()  # the floor agent's first child, not counted
    plain, floor = [], []
    arms = [(plain, subprocess.Popen), (floor, lambda argv: _Bare(argv, floor_agent))]
    for i in range(args.n):
        for times, popen in arms[i % 2:] + arms[:i % 2]:
            times.append(once(popen, argv))
    ms = {"subprocess": statistics.median(plain) * 1e3, "floor": statistics.median(floor) * 1e3}
    result = {"program": args.program, "rounds": args.n, "python": platform.python_version(),
              "median_ms": ms, "floor_ratio": ms["floor"] / ms["subprocess"]}
    if args.json:
        print(json.dumps(result))
        return
    print("%s, %d rounds interleaved, Python %s, no custody arm" % (
        args.program, args.n, result["python"]))
    print("median subprocess.Popen %.3f ms, the floor agent's bare start %.3f ms: %.2fx" % (
        ms["subprocess"], ms["floor"], result["floor_ratio"]))


def _floor_agent(binary):
    """A connection to a floor agent (see --floor), started as the client starts custody's."""
    saved = os.environ.get("CUSTODY_BIN")
    os.environ["CUSTODY_BIN"] = binary
    try:
        return _agent.Agent({})
    finally:
        if saved is None:
            del os.environ["CUSTODY_BIN"]
        else:
            os.environ["CUSTODY_BIN"] = saved


def _quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


if __name__ == "__main__":
    main()
