"""Start to exit of /bin/true through custody.Popen against subprocess.Popen.

The arms are interleaved (one of each per round, the order rotating), so that a machine whose
load changes during the run weighs on all alike; the medians of the rounds are compared. The
first custody call, which starts this process's agent, is timed apart and not counted. A third
arm, the agent's own start of the same program (a bare ``start`` request, no environment or
descriptors, then its exit event), splits custody.Popen's time into the agent's and the
client's.

    CUSTODY_BIN=/path/to/custody python3 bench.py [-n 200] [--program /bin/true] [--json]
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

    def __init__(self, argv):
        self._child = _agent.Child()
        _agent.agent().call("start", {"argv": argv, "stdio": ["null", "null", "null"]},
                            child=self._child)

    def wait(self):
        self._child.done.wait()
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
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    argv = [args.program]

    first = once(custody.Popen, argv)  # the agent's start, then the first child
    info = custody.agent_info()
    plain, owned, bare = [], [], []
    arms = [(plain, subprocess.Popen), (owned, custody.Popen), (bare, _Bare)]
    for i in range(args.n):
        for times, popen in arms[i % 3:] + arms[:i % 3]:
            times.append(once(popen, argv))
    ms = {"subprocess": statistics.median(plain) * 1e3, "custody": statistics.median(owned) * 1e3,
          "agent": statistics.median(bare) * 1e3}
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


def _quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


if __name__ == "__main__":
    main()
