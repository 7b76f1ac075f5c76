"""Hermes (the program custody shares its ledger with) starts its child with custody.Popen, and
its own roster and reaper see that child as custody does. The peer is Hermes's real module, at
$CUSTODY_PEER."""

import json
import os
import signal
import subprocess

import pytest

import custody
from helpers import PYTHON, Incarnation, end_program, expect, program, skip_or_fail, wait_gone

# What Hermes itself says about a pid: its roster (ledger_entries of its install), the spawn tag
# in the process's environment, and what its two reaper sweeps would reap (through kill_fn:
# nothing is killed).
HERMES_VIEW = r"""
import json, os, sys
import hermes_cli.process_identity as pi

def hermes_view(pid):
    import psutil
    roster = {e["pid"]: e for e in pi.ledger_entries()}
    try:
        tag = pi.parse_spawn_tag(psutil.Process(pid).environ().get(pi.SPAWN_ENV_VAR))
    except psutil.Error:
        tag = None
    reaped = []
    pi.reap_orphaned_mcp_helpers(kill_fn=reaped.append)
    for e in roster.values():
        if e.get("purpose") in ("serve", "dashboard", "gateway"):
            pi.reap_orphaned_backend_owner(e["pid"], e.get("create_time"), kill_fn=reaped.append)
    row = roster.get(pid)
    return {"listed": row is not None, "purpose": row and row["purpose"],
            "install": pi.install_id(), "row_install": row and row["install"],
            "create_time": row and row["create_time"],
            "tag": tag and [tag.install, tag.purpose, tag.spawner_pid],
            "spawner": row and row["spawner_pid"], "reaped": pid in reaped}
"""

# A Hermes process: it starts an MCP helper through custody, as Hermes would through
# spawn_owned, with Hermes's tag variable and files.
HERMES_OWNER = HERMES_VIEW + r"""
import custody
custody.configure(hermes_home=os.environ["PEER_HOME"], install_root=os.environ["PEER_PROJECT_ROOT"])
p = custody.Popen(["sh", "-c", "setsid sh -c 'echo $$; exec sleep 1000' & wait"],
                  stdout=custody.PIPE, purpose="mcp-helper", tag_env="HERMES_SPAWN", grace=1)
grandchild = int(p.stdout.readline())
print("ready", p.pid, grandchild, custody.agent_info()["pid"], flush=True)
print("view", json.dumps(hermes_view(p.pid)), flush=True)
sys.stdin.read()
"""


@pytest.fixture
def hermes(tmp_path):
    peer = os.environ.get("CUSTODY_PEER")
    if not peer:
        skip_or_fail("CUSTODY_PEER does not name the Hermes peer (run its ensure-deps, then "
                     "export CUSTODY_PEER=<peer dir>)")
    module = os.path.join(peer, "py", "hermes_cli", "process_identity.py")
    assert os.path.exists(module), "CUSTODY_PEER=%s: not the peer" % peer
    if subprocess.run([PYTHON, "-c", "import psutil"], capture_output=True).returncode:
        skip_or_fail("%s cannot import psutil (run the peer's ensure-deps)" % PYTHON)
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir(mode=0o700)
    project.mkdir()
    env = dict(os.environ, PEER_HOME=str(home), PEER_PROJECT_ROOT=str(project),
               PYTHONPATH=os.path.join(peer, "py"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("CUSTODY_LEDGER", None)  # Hermes's ledger, through --hermes-home
    return env


def run_hermes(env, script, *args):
    p = program(HERMES_VIEW + script, *args, env=env)
    try:
        out, _ = p.communicate(timeout=120)
    finally:
        end_program(p)
    assert p.returncode == 0
    return out.decode()


def custody_cli(env, *args):
    done = subprocess.run([custody.find_binary(), "--hermes-home", env["PEER_HOME"],
                           "--install-root", env["PEER_PROJECT_ROOT"]] + list(args),
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def custody_view(env, pid):
    row = next((r for r in custody_cli(env, "ps", "--json") if r["pid"] == pid), None)
    decision = next((d for d in custody_cli(env, "reap", "--dry-run", "--json")
                     if d["pid"] == pid), None)
    return row, decision


def test_hermes_sees_the_custody_child_as_custody_does(hermes):
    owner = program(HERMES_OWNER, env=hermes)
    try:
        child, grandchild, agent = (Incarnation(p) for p in expect(owner, "ready"))
        view = json.loads(" ".join(expect(owner, "view")))
        row, decision = custody_view(hermes, child.pid)

        # Alive, owned: both list it, under Hermes's install, and neither would reap it.
        assert view["listed"] and view["purpose"] == "mcp-helper", view
        assert view["row_install"] == view["install"], view
        assert view["tag"] == [view["install"], "mcp-helper", view["spawner"]], view
        assert row is not None and row["state"] == "alive", row
        assert (row["purpose"], row["install"], row["create_time"], row["spawner_pid"]) == (
            view["purpose"], view["install"], view["create_time"], view["spawner"])
        assert not view["reaped"]
        assert decision is not None and decision["action"] == "keep", decision

        # Hermes dies by SIGKILL: custody stops the child's whole tree; afterwards neither
        # Hermes's roster nor custody's lists it alive, and neither reaps anything of it.
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert wait_gone([child, grandchild, agent]) == []
        after = json.loads(run_hermes(hermes, "print(json.dumps(hermes_view(int(sys.argv[1]))))",
                                      str(child.pid)))
        assert not after["listed"] and not after["reaped"], after
        row, decision = custody_view(hermes, child.pid)
        assert row is None or row["state"] == "dead", row
        assert decision is None or decision["action"] != "reap", decision
    finally:
        end_program(owner)
