"""A stand-in MCP server: MCP's JSON-RPC 2.0 over stdio, one message per line, standard library
only. Like many real servers it starts a helper of its own, detached (a new session), and it
exits when its stdin ends without stopping that helper: the residue custody must clear."""

import json
import os
import subprocess
import sys

helper = subprocess.Popen(["sleep", "1000"], start_new_session=True)

TOOLS = [{"name": "pids", "description": "the server's and its helper's process ids",
          "inputSchema": {"type": "object", "properties": {}}},
         {"name": "echo", "description": "echo the text",
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                          "required": ["text"]}}]


def result(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stand-in", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "pids":
        return {"content": [{"type": "text", "text": "%d %d" % (os.getpid(), helper.pid)}]}
    if method == "tools/call" and params.get("name") == "echo":
        return {"content": [{"type": "text", "text": params["arguments"]["text"]}]}
    if method == "ping":
        return {}
    raise LookupError(method)


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification (notifications/initialized)
    try:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result(request)}
    except LookupError as e:
        reply = {"jsonrpc": "2.0", "id": request["id"],
                 "error": {"code": -32601, "message": "method not found: %s" % e}}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
