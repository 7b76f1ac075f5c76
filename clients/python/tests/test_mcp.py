"""An MCP host's stdio server, started the two ways the README shows: in-process through the
agent (custody.create_subprocess_exec), and as the Python SDK's stdio_client would start a
server whose command is ``custody run -- ...`` (asyncio's own subprocess, a new session). The
server speaks MCP's JSON-RPC over stdio (the SDK itself cannot be installed here)."""

import os
import signal

import pytest

import custody
from helpers import PYTHON, Incarnation, end_program, expect, program, require_cgroup, wait_gone

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_server.py")

# The host: a client session as the SDK's ClientSession runs one (initialize, the initialized
# notification, tools/list, tools/call), then, on "close", the MCP stdio shutdown: close the
# server's stdin, wait, then the scope's request to exit, and the kill after the grace.
HOST = r"""
import asyncio, json, sys
import custody

async def main(how, server):
    if how == "agent":
        proc = await custody.create_subprocess_exec(
            sys.executable, server, stdin=custody.PIPE, stdout=custody.PIPE,
            purpose="mcp-helper", grace=1)
    else:  # the SDK's stdio_client with command=custody, args=["run", "--", ...]
        proc = await asyncio.create_subprocess_exec(
            custody.find_binary(), "run", "--purpose", "mcp-helper", "--grace", "1s", "--",
            sys.executable, server, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, start_new_session=True)
    ids = iter(range(1, 1000))

    async def request(method, params=None):
        rid = next(ids)
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        await proc.stdin.drain()
        reply = json.loads(await proc.stdout.readline())
        assert reply["id"] == rid, reply
        return reply["result"]

    init = await request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "host", "version": "1"}})
    assert init["serverInfo"]["name"] == "stand-in"
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    tools = [t["name"] for t in (await request("tools/list"))["tools"]]
    assert tools == ["pids", "echo"], tools
    echoed = await request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert echoed["content"][0]["text"] == "hi"
    pids = (await request("tools/call", {"name": "pids", "arguments": {}}))["content"][0]["text"]
    print("ready", proc.pid, pids, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    proc.stdin.close()
    try:
        code = await asyncio.wait_for(proc.wait(), 2)
    except asyncio.TimeoutError:
        proc.terminate()
        try:
            code = await asyncio.wait_for(proc.wait(), 2)
        except asyncio.TimeoutError:
            proc.kill()
            code = await proc.wait()
    outcome = (await proc.stop()).outcome.value if how == "agent" else "-"
    print("closed", code, outcome, flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize("how", ["agent", "custody-run"])
def test_host_closes_the_server_and_its_residue(how):
    require_cgroup()
    host = program(HOST, how, SERVER)
    try:
        tree = [Incarnation(p) for p in expect(host, "ready")]
        host.stdin.write(b"close\n")
        host.stdin.flush()
        code, outcome = expect(host, "closed")
        assert code == "0"  # the server read end of file and exited
        # Its detached helper was in its scope: custody stopped it.
        assert outcome in ("exited", "-"), outcome
        assert wait_gone(tree) == []
        assert host.wait(60) == 0
    finally:
        end_program(host)


@pytest.mark.parametrize("how", ["agent", "custody-run"])
def test_host_sigkilled_takes_the_server_tree(how):
    require_cgroup()
    host = program(HOST, how, SERVER)
    try:
        tree = [Incarnation(p) for p in expect(host, "ready")]
        host.send_signal(signal.SIGKILL)
        host.wait()
        assert wait_gone(tree) == []
    finally:
        end_program(host)
