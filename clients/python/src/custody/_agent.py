"""The connection to this process's custody agent (docs/agent.md in the custody repository).

One agent per Python process, started on first use as ``custody agent --fd N`` over a
socketpair. Whichever thread waits reads the agent's lines (see :class:`Agent`), attributes the
descriptors that came with them by stream offset, and hands replies to waiting requests by id and
exit events to children.
"""

import array
import collections
import errno
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time

from ._binary import find_binary
from ._errors import AgentError, from_reply

PROTOCOL = 1

# What this client uses of the agent; an agent that does not offer one of these is refused at
# its hello rather than failing at the first request that needs it.
_NEEDED = ("fds", "signal", "stop")

# The agent sends at most three descriptors with a reply; more room than that only guards
# against a future agent, since a truncated control message loses descriptors for good.
_MAX_FDS = 16
_CHUNK = 1 << 16
_ANCBUF = socket.CMSG_SPACE(_MAX_FDS * 4) if hasattr(socket, "CMSG_SPACE") else 0

# Received descriptors are close-on-exec from the moment they exist, where the OS offers it, so
# a child this program starts some other way (os.system, a fork+exec) does not inherit a pipe
# end and keep a custody child's stream open.
_RECV_FLAGS = getattr(socket, "MSG_CMSG_CLOEXEC", 0)

# How often a thread waiting for the turn to read checks that it is still taken: only a safety
# net, for a hand-on that a signal handler's exception cut short in the main thread (see
# Agent._release); a waiter is woken when it is its turn. Long, so that threads waiting for
# children that run for hours cost one wake-up a second each, not twenty.
_TURN_CHECK = 1.0

# How long the agent may take to say hello: the binary's start and its setup (ledger, the
# owner's handle), on a machine that may be loaded.
_HELLO_TIMEOUT = 60.0

_options = {}  # configure()'s flags, for the next agent this process starts
_agent = None
_agent_lock = threading.Lock()
_forks = 0  # os.fork()s this process is the child of; see _after_fork


def configure(ledger=None, install_root=None, hermes_home=None, tag_env=None, grace=None):
    """Set the global flags of the agent this process will start (``--ledger``,
    ``--install-root``, ``--hermes-home``, ``--tag-env``, ``--grace``).

    Call it before the first child is started: an agent already running keeps the flags it was
    started with, so configuring after that raises :class:`RuntimeError` instead of silently
    doing nothing.
    """
    flags = {"ledger": ledger, "install-root": install_root, "hermes-home": hermes_home,
             "tag-env": tag_env, "grace": grace}
    with _agent_lock:
        if _agent is not None and _agent.usable():
            raise RuntimeError("custody: configure() after this process's agent started")
        _options.clear()
        _options.update({k: v for k, v in flags.items() if v is not None})


def agent():
    """Return this process's agent, starting one on first use.

    A process made by ``os.fork()`` never uses its parent's agent (their requests and replies
    would interleave on one socket, and the agent's owner is the parent): it starts its own.
    """
    global _agent
    a = _agent
    if a is not None and a.usable():
        return a
    with _agent_lock:
        a = _agent
        if a is None or not a.usable():
            a = _agent = Agent(_options)
        return a


def _after_fork():
    """In a child of os.fork(): forget the parent's agent and close this copy of its socket.

    The parent's reader thread does not exist here and its locks may have been held at the
    fork; only the socket's descriptor is touched, so that this process can never read the
    parent's replies, and its module lock is made anew.
    """
    global _agent, _agent_lock, _forks
    _forks += 1
    _agent_lock = threading.Lock()
    if _agent is not None:
        _agent.forget_after_fork()
    _agent = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Child:
    """What the agent has said about one child: its exit status, or that it was lost.

    ``done`` is set once the child is finished; nothing sets it unless somebody reads the
    agent's socket, so wait with :meth:`Agent.wait`, which reads when nobody else does.
    """

    __slots__ = ("pid", "returncode", "lost", "handed_to", "done", "_finished", "_lock",
                 "_callbacks")

    def __init__(self):
        self.pid = None
        self.returncode = None
        self.lost = None  # the AgentError to raise when the agent ended before the exit
        self.handed_to = None  # the receiver's pid, once another owner adopted the child
        self.done = threading.Event()
        self._finished = False
        self._lock = threading.Lock()
        self._callbacks = []

    def on_done(self, fn):
        """Call fn(child) once the child is finished (exited, lost or handed), at once if it
        is. A callback may run twice (see :meth:`finish`): it must be idempotent."""
        with self._lock:
            if not self._finished:
                self._callbacks.append(fn)
                return
        fn(self)

    def finish(self, returncode=None, lost=None, handed_to=None):
        """Record the child's end (the first one told counts), run the callbacks, then set
        ``done``.

        Each step is done before the one that marks it done, so a finish cut short by an
        exception (a signal handler's, in the main thread) and run again completes: callbacks
        run at least once, and ``done`` is set only after all of them.
        """
        with self._lock:
            if not self._finished:
                self.returncode, self.lost, self.handed_to = returncode, lost, handed_to
                self._finished = True
            callbacks = list(self._callbacks)
        for fn in callbacks:
            fn(self)
        with self._lock:
            del self._callbacks[:len(callbacks)]
        self.done.set()


class _Call:
    __slots__ = ("op", "child", "argv0", "reply", "fds", "error", "done", "callback", "fired",
                 "interest")

    def __init__(self, op, child, argv0, callback):
        self.op, self.child, self.argv0, self.callback = op, child, argv0, callback
        self.reply, self.fds, self.error = None, [], None
        self.done = threading.Event()
        self.fired = False  # the callback has returned
        self.interest = None  # the token that keeps a reader running until the callback fires


class _Waiter:
    """A thread waiting for its turn to read, or for its target to be done (a _Call or a
    Child; None for the background reader, which is never done)."""

    __slots__ = ("target", "wake")

    def __init__(self, target):
        self.target = target
        self.wake = threading.Event()

    def satisfied(self):
        return self.target is not None and self.target.done.is_set()


class Agent:
    """One running ``custody agent --fd N``, read by whichever thread waits for it.

    There is no reader thread of its own: a thread that waits for a reply or an exit reads the
    socket itself while nobody else does (and the others wait for it, each woken when its
    reply or exit has come, or when the turn to read is theirs). A reply then reaches the
    thread that waits for it straight from the kernel, where a reader thread would wake it a
    second time (on a virtual machine whose idle processors sleep, some 0.05 ms of a 1.4 ms
    start and exit of /bin/true, of which subprocess takes 0.95). A background reader runs only
    while something waits without a thread: an asyncio child's exit, a request whose reply goes
    to a callback.

    A line is consumed only after it has been dispatched, and dispatching is idempotent, so a
    read that an exception cuts short (a signal handler raising in the main thread, between the
    kernel's return and the bookkeeping) is finished before the exception goes on: no reply or
    exit is ever lost. The bytes land in a zeroed buffer whose end is found again by its first
    NUL (a protocol line never holds one: JSON escapes it), so even a count the exception
    discarded is recovered. Descriptors that came with such a read are lost (the reply that
    declares them then ends the connection as a protocol error); the client's own starts never
    ask for any.
    """

    def __init__(self, options):
        if not hasattr(socket, "send_fds") or not hasattr(socket, "AF_UNIX"):
            # Windows: the agent's pipes and duplicated handles are not spoken here yet.
            raise AgentError(errno.ENOTSUP, "custody: the Python client needs Unix sockets "
                             "with descriptor passing, which %s lacks" % sys.platform)
        binary = find_binary()
        argv = [binary]
        for name, value in options.items():
            argv += ["--" + name, str(value)]
        # What the agent inherits, so that a start can leave out what has not changed since:
        # the agent's default environment and working directory are these (a start's
        # environment costs the agent about a third of a millisecond to take in).
        self._environ = dict(_environ())
        self.cwd = _getcwd()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # A session of its own: a terminal's ^C goes to the foreground process group, and
            # the agent must end only with its owner (this process), never with a keystroke
            # this process may catch. Its children are in scopes of their own anyway.
            # Children never get the agent's own streams (every start passes this process's
            # descriptors), so it holds only stderr, for its diagnostics: a copy of this
            # process's stdout would keep a reader's pipe open after this process is gone.
            self.process = subprocess.Popen(
                argv + ["agent", "--fd", str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.binary = binary
        self.owner = os.getpid()
        self._forks = _forks
        self._sock = ours
        self._poller = select.poll()
        self._poller.register(ours.fileno(), select.POLLIN)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards what follows
        self._pending = {}
        self._children = {}
        self._next_id = 1
        self._ended = None  # the AgentError once the connection is over
        self._reaped = False
        # The received stream: (buffer, stream offset of buffer[0], first unconsumed byte,
        # end of data). One tuple, so that one assignment changes it: an exception between
        # two assignments could not leave it half changed.
        self._rx = (bytearray(_CHUNK), 0, 0, 0)
        # Descriptors received, oldest first: [first, end) stream offsets of the read that
        # brought them, the descriptors, and the offset of the line that took them (or None).
        self._fd_queue = collections.deque()
        self._reading = None  # the thread that reads now
        self._waiters = []  # _Waiters, in the order they came
        self._interest = set()  # tokens of what waits without a thread; see _background
        self._background_thread = None
        self.hello = None
        self.covered = True
        try:
            self._read_hello()
        except BaseException:
            self._sock.close()
            self.process.kill()
            self.process.wait()
            raise

    def environ_unchanged(self):
        """Reports whether this process's environment is still the one the agent inherited."""
        return _environ() == self._environ

    # The agent's side of a process's life.

    def usable(self):
        """Reports whether this process may send to this agent: it is its owner and the
        connection is open."""
        return self._ended is None and self._forks == _forks and self.owner == os.getpid()

    def forget_after_fork(self):
        self._ended = AgentError(errno.ECHILD, "custody: the agent belongs to the parent process "
                                 "%d; a forked child starts its own" % self.owner)
        try:
            os.close(self._sock.detach())
        except OSError:
            pass

    def _read_hello(self):
        deadline = time.monotonic() + _HELLO_TIMEOUT
        self._reading = threading.get_ident()
        try:
            while self.hello is None and self._ended is None:
                if not self._pump(deadline):
                    raise AgentError(errno.ETIMEDOUT, "custody: %s agent said no hello within "
                                     "%gs" % (self.binary, _HELLO_TIMEOUT))
        finally:
            self._reading = None
        if self.hello is None:
            if self._ended.errno != errno.EPIPE:
                raise self._ended
            status = self.process.wait()
            raise AgentError(errno.EPIPE, "custody: %s agent ended before its hello (exit status "
                             "%s; its error is on stderr)" % (self.binary, status)) from None
        hello = self.hello
        if hello.get("protocol") != PROTOCOL:
            raise AgentError(errno.EPROTO, "custody: %s speaks agent protocol %r; this client "
                             "speaks %d" % (self.binary, hello.get("protocol"), PROTOCOL))
        missing = [c for c in _NEEDED if c not in (hello.get("capabilities") or ())]
        if missing:
            raise AgentError(errno.EPROTO, "custody: %s agent lacks %s" % (self.binary,
                             ", ".join(missing)))

    # Requests.

    def call(self, op, fields, fds=(), child=None, argv0=None, callback=None):
        """Send one request and return its reply's (result, descriptors), raising the mapped
        exception for an error reply.

        With ``callback``, return at once instead; a reader calls callback(call) when the
        reply arrives (see :meth:`result`), at least once: it must be idempotent and must
        not wait for the agent. ``child`` is registered for the exit event, before the next
        line is read, when the reply is a success.
        """
        c = _Call(op, child, argv0, callback)
        with self._lock:
            if self._ended is not None:
                raise self._ended
            rid = self._next_id
            self._next_id += 1
            self._pending[rid] = c
            if callback is not None:
                self._want_locked(c)
        try:
            self._send(self._line(dict(fields, id=rid, op=op)), fds)
        except BaseException as e:
            with self._lock:
                self._pending.pop(rid, None)
                if c.interest is not None:
                    self._interest.discard(c.interest)
            if isinstance(e, OSError) and not e.errno == errno.E2BIG:
                raise AgentError(errno.EPIPE, "custody: send to the agent: %s" % e) from e
            raise
        if callback is not None:
            return c
        try:
            self.wait(c)
        except BaseException:  # KeyboardInterrupt: nobody will hold what this start makes
            self._abandon(c)
            raise
        return self.result(c)

    def _abandon(self, c):
        """Let a start whose caller stopped waiting kill its child's scope once it runs."""
        def kill_started(c):
            if c.error is None and c.reply.get("ok") and c.child is not None:
                _close_all(c.fds)
                c.fds = []
                try:
                    self.call("signal", {"pid": c.child.pid, "signal": "SIGKILL"},
                              callback=lambda _: None)
                except OSError:
                    pass  # the agent ended: it stopped the child itself
        with self._lock:
            if not c.done.is_set():
                c.callback = kill_started
                self._want_locked(c)
                return
        kill_started(c)

    def _line(self, msg):
        """The request as one protocol line, refused here when the agent could not take it."""
        try:
            line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        except UnicodeEncodeError as e:  # a name fsdecode kept as surrogates: not UTF-8
            raise ValueError("custody: the %s request holds text that is not UTF-8: %s"
                             % (msg["op"], e)) from None
        limit = self.hello.get("max_line") or 1 << 20
        if len(line) > limit:  # the agent would discard it and answer with no id to match
            raise OSError(errno.E2BIG, "custody: the %s request is %d bytes, over the agent's "
                          "line limit of %d" % (msg["op"], len(line), limit))
        return line

    @staticmethod
    def result(c):
        if c.error is not None:
            raise c.error
        if not c.reply.get("ok"):
            _close_all(c.fds)
            raise from_reply(c.reply.get("error"), c.argv0)
        return c.reply, c.fds

    def _send(self, line, fds):
        """Write one line; its descriptors go with its first byte, as the framing rule says."""
        with self._send_lock:
            if fds:
                sent = socket.send_fds(self._sock, [line], list(fds))
                line = line[sent:]
            if line:
                self._sock.sendall(line)

    # Waiting, and whose turn it is to read.

    def wait(self, target, timeout=None):
        """Wait until target (a request's call or a Child) is done, reading the agent's socket
        meanwhile when no other thread does; return whether it is done within timeout.

        Every way out, an exception's too, gives up the turn and the place in the queue: a
        thread gone with either would leave the others waiting for ever.
        """
        if target.done.is_set():
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        me = threading.get_ident()
        w = _Waiter(target)
        try:
            while True:
                with self._lock:
                    if w in self._waiters:  # woken: out of the queue, to read or to queue again
                        self._waiters.remove(w)
                    if target.done.is_set():
                        return True
                    ended = self._ended is not None
                    # The turn already this thread's: left by an exit an exception cut short
                    # (callbacks, which run while a thread reads, never wait).
                    if self._reading in (None, me) and not ended:
                        self._reading = me
                    elif not ended:
                        w.wake.clear()
                        self._waiters.append(w)
                if self._reading == me:  # only this thread sets it to itself
                    return self._lead(target, deadline)
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if ended:
                    # _end has finished every target it knew; one it did not (a child released
                    # meanwhile) is finished by the thread that released it.
                    return target.done.wait(remaining)
                # Woken when the target is done or the turn is this thread's; the bound is a
                # safety net only, for a hand-on that an exception cut short (see _release).
                w.wake.wait(_TURN_CHECK if remaining is None else min(remaining, _TURN_CHECK))
                if target.done.is_set():
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        finally:
            # The turn first, by one store with no call before it (see _release).
            if self._reading == me:
                self._reading = None
            self._release(w, me)

    def _release(self, w, me):
        """Leave the queue and wake the next reader, once the turn is given up.

        The callers give the turn up first, in their ``finally`` and by one store with no call
        before it: CPython runs a signal handler only at a call's return, a backward jump or a
        function's start, so no exception can keep the turn held by a thread that has left (the
        call to this function is already one such point). An exception that cuts this short
        leaves a waiter unwoken, which then takes the free turn at its next check
        (_TURN_CHECK).
        """
        with self._lock:
            self._leave_locked(w, me)

    def _leave_locked(self, w, me):
        if self._reading == me:
            self._reading = None
        if w in self._waiters:
            self._waiters.remove(w)
        self._hand_on_locked()

    def _lead(self, target, deadline):
        """Read and dispatch until target is done or the deadline passes."""
        while not target.done.is_set():
            if self._ended is not None or not self._pump(deadline):
                return target.done.is_set()
        return True

    def _hand_on_locked(self):
        """With the turn free, wake a waiter to take it: a thread waiting for a reply or an
        exit first, else the background reader. A waiter already woken may be on its way, or
        may have left by an exception; another woken as well costs only a wake-up."""
        if self._reading is not None:
            return
        background = None
        for w in self._waiters:
            if w.wake.is_set() or w.satisfied():
                continue
            if w.target is not None:
                w.wake.set()
                return
            background = w
        if background is not None:
            background.wake.set()

    def _wake_satisfied_locked(self):
        for w in self._waiters:
            if w.satisfied():
                w.wake.set()

    def poll(self):
        """Dispatch what has already come, without waiting, when no other thread reads."""
        me = threading.get_ident()
        try:
            with self._lock:
                if self._reading is not None or self._ended is not None:
                    return
                self._reading = me
            now = time.monotonic()
            while self._ended is None and self._pump(now, quick=True):
                pass
        finally:
            # The turn first, by one store with no call before it (see _release).
            if self._reading == me:
                self._reading = None
            self._release(None, me)  # never queued: it only reads when the turn is free

    def on_done(self, child, fn):
        """Call fn(child) once child is finished, from whichever thread reads then: a
        background reader runs meanwhile, so that it is called even if no thread waits."""
        token = object()
        with self._lock:
            if self._ended is None:
                self._interest.add(token)
                self._ensure_background_locked()

        def done(child):
            try:
                fn(child)
            finally:
                with self._lock:
                    self._interest.discard(token)
        child.on_done(done)

    def _want_locked(self, c):
        """Keep a reader running until c's callback has fired."""
        if c.interest is None:
            c.interest = object()
        self._interest.add(c.interest)
        self._ensure_background_locked()

    def _ensure_background_locked(self):
        if self._background_thread is None and self._ended is None:
            t = threading.Thread(target=self._background, name="custody-agent", daemon=True)
            self._background_thread = t
            t.start()

    def _background(self):
        """Read while anything waits without a thread; end when nothing does.

        A thread that waits for its own reply takes the turn whenever it is free (a background
        reader hands it on between reads): it is then woken by the kernel itself.
        """
        w = _Waiter(None)
        me = threading.get_ident()
        try:
            while True:
                with self._lock:
                    if not self._interest or self._ended is not None:
                        self._background_thread = None
                        return
                    if self._reading is None:
                        self._reading = me
                    else:
                        w.wake.clear()
                        self._waiters.append(w)
                if self._reading == me:
                    while self._interest and self._ended is None:
                        if not self._pump(None):
                            break
                        with self._lock:
                            if any(x.target is not None for x in self._waiters):
                                break  # a thread waits for its reply: let it read
                else:
                    w.wake.wait(_TURN_CHECK)  # the safety net, as for any waiter
                with self._lock:
                    self._leave_locked(w, me)
        except BaseException as e:  # noqa: BLE001 - a bug here must not hang every waiter
            self._end(AgentError(errno.EIO, "custody: the agent's background reader: %s" % e))
        finally:
            if self._reading == me:
                self._reading = None
            with self._lock:
                if self._background_thread is threading.current_thread():
                    self._background_thread = None
                self._leave_locked(w, me)

    # Reading: whoever has the turn.

    def _pump(self, deadline, quick=False):
        """Read once (waiting until the deadline; None waits for ever) and dispatch every whole
        line read; return False when nothing came by the deadline.

        An exception raised meanwhile (a signal handler's, in the main thread) leaves the bytes
        read in the buffer and the line being dispatched unconsumed: the dispatch is finished
        before the exception goes on.
        """
        try:
            if not self._fill(deadline, quick):
                return False
            self._drain()
            return True
        except BaseException:
            self._repair()
            raise

    def _repair(self):
        for _ in range(100):
            try:
                self._drain()
                if self._ended is not None:
                    self._end(self._ended)
                return
            except BaseException:  # noqa: BLE001 - another signal's exception: finish anyway
                continue

    def _fill(self, deadline, quick=False):
        buf, base, start, end = self._rx
        end = _data_end(buf, end)
        if len(buf) - end < _CHUNK // 4:  # room for a read: a fresh zeroed buffer
            size = len(buf)
            while size - (end - start) < _CHUNK // 2:
                size *= 2
            fresh = bytearray(size)
            fresh[:end - start] = buf[start:end]
            self._rx = (fresh, base + start, 0, end - start)
            buf, base, start, end = self._rx
        flags = _RECV_FLAGS
        if deadline is not None:
            # A blocking recvmsg(2) that a signal interrupts takes nothing (EINTR, then the
            # handler's exception); a deadline needs poll(2), which consumes nothing either.
            timeout = 0 if quick else max(0, int((deadline - time.monotonic()) * 1000 + 1))
            if not self._poller.poll(timeout):
                return False
            flags |= socket.MSG_DONTWAIT
        try:
            n, ancdata, msg_flags, _ = self._sock.recvmsg_into(
                [memoryview(buf)[end:]], _ANCBUF, flags)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as e:
            self._end(AgentError(errno.EIO, "custody: reading from the agent: %s" % e))
            return True
        fds = _fds_of(ancdata)
        if fds:
            self._fd_queue.append([base + end, base + end + n, fds, None])
        if msg_flags & socket.MSG_CTRUNC:
            self._end(AgentError(errno.EPROTO, "custody: descriptors from the agent were "
                                 "truncated"))
            return True
        if n == 0:
            status = self.process.poll()
            self._end(AgentError(errno.EPIPE, "custody: the agent ended (exit status %s)"
                                 % ("still running" if status is None else status)))
            return True
        self._rx = (buf, base, start, end + n)
        return True

    def _drain(self):
        """Dispatch every whole line received, each consumed only once dispatched."""
        while self._ended is None:
            buf, base, start, end = self._rx
            real_end = _data_end(buf, end)
            if real_end != end:  # a read's count lost to an exception
                self._rx = (buf, base, start, real_end)
                end = real_end
            nl = buf.find(b"\n", start, end)
            if nl < 0:
                return
            try:
                msg = json.loads(buf[start:nl])
            except ValueError:
                msg = None
            if not isinstance(msg, dict):
                self._end(AgentError(errno.EPROTO, "custody: the agent sent a line that is not a "
                                     "JSON object: %.200r" % bytes(buf[start:nl])))
                return
            try:
                self._dispatch(msg, base + start, base + nl)
            except AgentError as e:  # the link's protocol broken
                self._end(e)
                return
            self._rx = (buf, base, nl + 1, end)
            self._drop_fds_before(base + nl + 1)
            with self._lock:
                self._wake_satisfied_locked()

    def _dispatch(self, msg, first, end):
        """Act on one line; idempotent, since a line cut short is dispatched again."""
        if "id" in msg and "event" not in msg and self.hello is not None:
            self._reply(msg, first, end)
            return
        kind = msg.get("event")
        if self.hello is None:
            if kind != "hello":
                raise AgentError(errno.EPROTO, "custody: the agent's first message is not a "
                                 "hello: %.200r" % msg)
            self.hello = msg
        elif kind == "exit":
            with self._lock:
                child = self._children.get(msg.get("pid"))
            if child is not None:
                returncode = _returncode(msg.get("code"), msg.get("signal"))
                if returncode is None:
                    child.finish(lost=AgentError(errno.EPROTO, "custody: the agent's exit "
                                                 "event for %s has neither a code nor a "
                                                 "signal" % child.pid))
                else:
                    child.finish(returncode=returncode)
                with self._lock:
                    self._children.pop(msg.get("pid"), None)
        elif kind == "handed":
            with self._lock:
                child = self._children.get(msg.get("pid"))
            if child is not None:
                child.finish(handed_to=msg.get("receiver"))
                with self._lock:
                    self._children.pop(msg.get("pid"), None)
        elif kind == "lost-cover":
            self.covered = False
        elif kind == "covered":
            self.covered = True
        # Unknown events are ignored: that is how the protocol grows.

    def _reply(self, msg, first, end):
        with self._lock:
            c = self._pending.get(msg["id"])
            if c is not None and c.child is not None and msg.get("ok") and c.reply is None:
                c.child.pid = msg.get("pid")
                self._children[c.child.pid] = c.child
        if c is None:
            return  # its descriptors, if any, are closed as unclaimed
        if c.reply is None:
            c.fds = self._take_fds(msg, first, end)
            c.reply = msg
        self._complete(c)
        with self._lock:
            self._pending.pop(msg["id"], None)

    def _take_fds(self, msg, first, end):
        """The descriptors of the line at stream offsets first..end (its newline).

        The agent sends a line's descriptors with one sendmsg(2) of that line, and only with a
        reply whose ``fds`` names them. Which read returns them is the kernel's choice: Linux
        glues the bytes of earlier lines, sent without descriptors, into the read that returns
        the descriptors, and stops that read after the line that carried them; BSD starts a
        read at them. So the read's first byte does not mark their line; what holds on both is
        that the read overlaps it. A line takes the descriptors of the first unclaimed read that
        overlaps it, when it declares them; descriptors no line claimed are closed once the
        stream has passed them.
        """
        declared = msg.get("fds") if msg.get("ok") and "id" in msg else None
        want = len(declared) if isinstance(declared, list) else 0
        if not want:
            return []
        for entry in self._fd_queue:
            if entry[1] <= first or entry[3] not in (None, first):
                continue
            if entry[0] > end:
                break
            if len(entry[2]) != want:
                raise AgentError(errno.EPROTO, "custody: the agent's reply %s declares %d "
                                 "descriptors and %d came with it"
                                 % (msg.get("id"), want, len(entry[2])))
            entry[3] = first
            return list(entry[2])
        raise AgentError(errno.EPROTO, "custody: the agent's reply %s declares %d "
                         "descriptors and none came with it" % (msg.get("id"), want))

    def _drop_fds_before(self, offset):
        while self._fd_queue and self._fd_queue[0][1] <= offset:
            entry = self._fd_queue[0]
            if entry[3] is None:
                _close_all(entry[2])
            self._fd_queue.popleft()

    def _complete(self, c):
        with self._lock:  # against _abandon setting the callback meanwhile
            c.done.set()
            callback = None if c.fired else c.callback
        if callback is not None:
            callback(c)
            c.fired = True
        if c.interest is not None:
            with self._lock:
                self._interest.discard(c.interest)

    def forget(self, pid):
        """Stop expecting events for pid (after a release: the agent sends none)."""
        with self._lock:
            return self._children.pop(pid, None)

    def _end(self, error):
        """The connection is over: fail every request and child still waiting. Idempotent,
        like a dispatch: _repair runs it again when an exception cut it short."""
        with self._lock:
            if self._ended is None:
                self._ended = error
            error = self._ended
            pending = list(self._pending.values())
            children = list(self._children.values())
        for c in pending:
            if c.reply is None and c.error is None:
                c.error = error
            self._complete(c)
        for child in children:
            child.finish(lost=error)
        with self._lock:
            self._pending.clear()
            self._children.clear()
            self._interest.clear()
            for w in self._waiters:
                w.wake.set()
        for entry in self._fd_queue:
            if entry[3] is None:
                _close_all(entry[2])
        self._fd_queue.clear()
        try:
            self._sock.close()
        except OSError:
            pass
        if not self._reaped and self.process.poll() is None:
            # Reap it once it goes, without blocking anyone.
            self._reaped = True
            threading.Thread(target=self.process.wait, daemon=True).start()


def _data_end(buf, end):
    """Where the received data ends: at the first NUL from end (the buffer is zeroed beyond
    the data, and a protocol line holds no NUL), or the buffer's end."""
    i = buf.find(0, end)
    return len(buf) if i < 0 else i


def _fds_of(ancdata):
    fds = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", data[:len(data) - len(data) % 4]))
    if fds and not _RECV_FLAGS:
        for fd in fds:
            os.set_inheritable(fd, False)
    return fds


def _environ():
    """os.environ's own dictionary where CPython has one: comparing it costs a microsecond,
    where comparing os.environ decodes every entry (some 60 µs for 40 variables)."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else os.environ


def _getcwd():
    try:
        return os.getcwd()
    except OSError:  # a removed directory
        return None


def _returncode(code, signo):
    """subprocess's returncode: the exit code, or minus the number of the killing signal."""
    if signo is not None:
        return -int(signo)
    return int(code) if code is not None else None


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
