"""A custody child's owner is the Python process: it dies with it, however it dies."""

import os
import select
import signal

import custody
from helpers import Incarnation, end_program, expect, program, require_cgroup, wait_gone

# An owner: three children, each with a grandchild that left its session (setsid), reported
# as "ready AGENT CHILD GRANDCHILD ..." once all run; then it waits on its input.
OWNER = r"""
import sys, custody
grace = float(sys.argv[1])
pids = [custody.agent_info()["pid"]]
children = []
for _ in range(3):
    p = custody.Popen(["sh", "-c", "setsid sh -c 'echo $$; exec sleep 1000' & wait"],
                      stdout=custody.PIPE, grace=grace)
    children.append(p)
    pids += [p.pid, int(p.stdout.readline())]
print("containment", custody.agent_info()["containment"], flush=True)
print("ready", *pids, flush=True)
sys.stdin.read()
"""


def start_owner(grace="1"):
    owner = program(OWNER, grace)
    containment = expect(owner, "containment")[0]
    if containment != "cgroup":
        end_program(owner)
        require_cgroup()  # skips (or fails under CUSTODY_REQUIRE_PRIVILEGED=1) with the reason
    agent, *tree = [Incarnation(p) for p in expect(owner, "ready")]
    return owner, agent, tree


def test_owner_sigkilled_takes_every_tree():
    owner, agent, tree = start_owner()
    try:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert wait_gone(tree + [agent]) == []
    finally:
        end_program(owner)


def test_owner_exiting_takes_every_tree():
    owner, agent, tree = start_owner()
    try:
        owner.stdin.close()  # the owner reads end of file and returns from its script
        assert owner.wait(60) == 0
        assert wait_gone(tree + [agent]) == []
    finally:
        end_program(owner)


def test_owner_sigterm_ignored_by_children():
    # Children that ignore SIGTERM are killed after their grace all the same.
    owner = program(r"""
import sys, custody
p = custody.Popen(["sh", "-c", "trap '' TERM; echo $$; while :; do sleep 1; done"],
                  stdout=custody.PIPE, grace=0.5)
print("ready", custody.agent_info()["pid"], p.stdout.readline().decode().strip(), flush=True)
sys.stdin.read()
""")
    try:
        agent, child = [Incarnation(p) for p in expect(owner, "ready")]
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert wait_gone([child, agent]) == []
    finally:
        end_program(owner)


def test_agent_killed_children_stopped_and_a_new_agent_serves():
    owner = program(r"""
import sys, custody, custody._agent as a
p = custody.Popen(["sleep", "1000"])
first = a.agent()
print("ready", first.process.pid, p.pid, flush=True)
sys.stdin.readline()
first.process.kill()  # the agent is this program's own child: it signals it by its handle
try:
    p.wait(60)
    print("result waited", p.returncode, flush=True)
except custody.AgentError as e:
    print("result lost", e.errno, flush=True)
again = custody.run(["sh", "-c", "exit 9"])
print("again", again.returncode, custody.agent_info()["pid"] != first.process.pid, flush=True)
sys.stdin.read()
""")
    try:
        agent, child = [Incarnation(p) for p in expect(owner, "ready")]
        owner.stdin.write(b"go\n")
        owner.stdin.flush()
        assert expect(owner, "result") == ["lost", "32"]  # EPIPE: the agent ended
        assert expect(owner, "again") == ["9", "True"]
        # The dead agent's supervisor stopped the child it held.
        assert wait_gone([child, agent]) == []
    finally:
        end_program(owner)


def test_binary_lookup(tmp_path):
    probe = "import custody\ntry:\n    print('found', custody.find_binary())\n" \
            "except custody.BinaryNotFoundError as e:\n    print('error', e)\n"
    binary = custody.find_binary()
    env = {k: v for k, v in os.environ.items() if k != "CUSTODY_BIN"}
    shipped = os.path.join(os.path.dirname(custody.__file__), "bin", "custody")
    # PATH, when CUSTODY_BIN is unset (and the package ships no copy).
    (tmp_path / "bin").mkdir()
    os.symlink(binary, tmp_path / "bin" / "custody")
    env["PATH"] = str(tmp_path / "bin")
    out = _probe(probe, env)
    if os.path.exists(shipped):
        assert out == "found " + shipped
    else:
        assert out == "found %s" % (tmp_path / "bin" / "custody")
        # Nowhere: the error names what was tried.
        env["PATH"] = str(tmp_path)
        out = _probe(probe, env)
        assert out.startswith("error ") and "CUSTODY_BIN" in out and shipped in out \
            and str(tmp_path) in out, out
    # CUSTODY_BIN naming no executable is an error, not a reason to run another custody.
    env["CUSTODY_BIN"] = str(tmp_path / "missing")
    out = _probe(probe, env)
    assert out.startswith("error ") and str(tmp_path / "missing") in out, out


def _probe(script, env):
    p = program(script, env=env)
    try:
        out = p.communicate(timeout=60)[0].decode().strip()
    finally:
        end_program(p)
    return out


def test_the_agent_holds_no_copy_of_the_owner_stdout():
    # A program's reader sees end of file on its stdout when the program ends, not when its
    # agent does.
    owner = program("import custody\ncustody.run(['true'])\nprint('done', flush=True)\n"
                    "import os\nos.close(1)\nimport sys\nsys.stdin.read()\n")
    try:
        assert expect(owner, "done") == []
        # The owner closed its stdout but lives on, and so does its agent: end of file now.
        ready, _, _ = select.select([owner.stdout], [], [], 30)
        assert ready and os.read(owner.stdout.fileno(), 1) == b"", "no end of file"
        assert owner.poll() is None
    finally:
        end_program(owner)
