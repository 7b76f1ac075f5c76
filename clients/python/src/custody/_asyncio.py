"""asyncio: create_subprocess_exec/create_subprocess_shell returning asyncio.subprocess.Process.

The Process is asyncio's own class, over a transport whose child is a :class:`custody.Popen`:
its exit comes from the agent's exit event (no child watcher, no waitpid), and its signals go to
the child's whole scope through the agent.
"""

import asyncio
import functools
from asyncio import base_subprocess, subprocess as aiosubprocess

from ._popen import Popen

_DEFAULT_LIMIT = 2 ** 16  # asyncio.streams' default buffer limit


async def create_subprocess_exec(program, *args, stdin=None, stdout=None, stderr=None,
                                 limit=_DEFAULT_LIMIT, **kwds):
    """Start program with args as :func:`asyncio.create_subprocess_exec` does, owned by this
    process through custody (keywords as for :class:`custody.Popen`)."""
    return await _create((program,) + args, False, stdin, stdout, stderr, limit, kwds)


async def create_subprocess_shell(cmd, stdin=None, stdout=None, stderr=None,
                                  limit=_DEFAULT_LIMIT, **kwds):
    """Run cmd through /bin/sh as :func:`asyncio.create_subprocess_shell` does."""
    return await _create(cmd, True, stdin, stdout, stderr, limit, kwds)


async def _create(args, shell, stdin, stdout, stderr, limit, kwds):
    for name in ("universal_newlines", "text", "encoding", "errors"):
        if kwds.get(name):
            raise ValueError("%s must be %s" % (name, "None" if name in ("encoding", "errors")
                                                else "False"))
    kwds.pop("bufsize", None)
    loop = asyncio.get_running_loop()
    # The start is a round trip to the agent (and the agent's own start on first use): run it
    # off the loop, so that other tasks run meanwhile and concurrent starts overlap.
    start = loop.run_in_executor(None, functools.partial(
        Popen, args, stdin=stdin, stdout=stdout, stderr=stderr, shell=shell, bufsize=0, **kwds))
    try:
        proc = await asyncio.shield(start)
    except asyncio.CancelledError:
        # The start goes on in its thread: a child nobody awaits is stopped, not left running.
        start.add_done_callback(_kill_started)
        raise
    protocol = aiosubprocess.SubprocessStreamProtocol(limit=limit, loop=loop)
    waiter = loop.create_future()
    transport = _Transport(loop, protocol, proc, waiter)
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
    return Process(transport, protocol, loop)


class Process(aiosubprocess.Process):
    """asyncio's Process for a custody child, with custody's :meth:`stop` and :meth:`grant`."""

    async def stop(self, grace=None):
        """Stop the child's scope and return the :class:`custody.StopResult`."""
        proc = self._transport.get_extra_info("subprocess")
        return await asyncio.get_running_loop().run_in_executor(None, proc.stop, grace)

    async def grant(self, ttl=60):
        """Return a one-shot grant for the child (see :meth:`custody.Popen.grant`)."""
        proc = self._transport.get_extra_info("subprocess")
        return await asyncio.get_running_loop().run_in_executor(None, proc.grant, ttl)


def _kill_started(future):
    if not future.cancelled() and future.exception() is None:
        proc = future.result()
        proc.kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


class _Transport(base_subprocess.BaseSubprocessTransport):
    """asyncio's subprocess transport over a custody child."""

    def __init__(self, loop, protocol, proc, waiter):
        pipe = aiosubprocess.PIPE
        super().__init__(loop, protocol, proc.args, False,
                         pipe if proc.stdin else None, pipe if proc.stdout else None,
                         pipe if proc.stderr else None, 0, waiter=waiter, proc=proc)
        proc._agent.on_done(proc._child, self._done_in_any_thread)

    def _start(self, args, shell, stdin, stdout, stderr, bufsize, proc):
        self._proc = proc

    def _done_in_any_thread(self, child):
        if child.returncode is None:
            return  # lost or handed: no exit status will ever come
        try:
            self._loop.call_soon_threadsafe(self._exited, child.returncode)
        except (AttributeError, RuntimeError):  # the transport finished, or the loop closed
            pass

    def _exited(self, returncode):
        if self._proc is not None and self._returncode is None:
            self._process_exited(returncode)

    # Python 3.13's transport signals the pid itself; a custody child is signalled through
    # its agent, on its whole scope.
    def send_signal(self, signal):
        self._check_proc()
        self._proc.send_signal(signal)

    def terminate(self):
        self._check_proc()
        self._proc.terminate()

    def kill(self):
        self._check_proc()
        self._proc.kill()
