"""The connection to this process's custody agent (docs/agent.md in the custody repository).

One agent per Python process, started on first use as ``custody agent --fd N`` over a
socketpair. One reader thread reads the agent's lines, attributes the descriptors that came with
them by stream offset, and hands replies to waiting requests by id and exit events to children.
"""

import collections
import errno
import json
import os
import socket
import subprocess
import sys
import threading

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

# Received descriptors are close-on-exec from the moment they exist, where the OS offers it, so
# a child this program starts some other way (os.system, a fork+exec) does not inherit a pipe
# end and keep a custody child's stream open.
_RECV_FLAGS = getattr(socket, "MSG_CMSG_CLOEXEC", 0)

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
    """What the agent has said about one child: its exit status, or that it was lost."""

    __slots__ = ("pid", "returncode", "lost", "handed_to", "done", "_lock", "_callbacks")

    def __init__(self):
        self.pid = None
        self.returncode = None
        self.lost = None  # the AgentError to raise when the agent ended before the exit
        self.handed_to = None  # the receiver's pid, once another owner adopted the child
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks = []

    def on_done(self, fn):
        """Call fn(child) once the child is done (exited, lost or handed), at once if it is."""
        with self._lock:
            if not self.done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def finish(self, returncode=None, lost=None, handed_to=None):
        with self._lock:
            if self.done.is_set():
                return
            self.returncode, self.lost, self.handed_to = returncode, lost, handed_to
            self.done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)


class _Call:
    __slots__ = ("op", "child", "argv0", "reply", "fds", "error", "done", "callback")

    def __init__(self, op, child, argv0, callback):
        self.op, self.child, self.argv0, self.callback = op, child, argv0, callback
        self.reply, self.fds, self.error = None, [], None
        self.done = threading.Event()


class Agent:
    """One running ``custody agent --fd N`` and the reader thread that serves its socket."""

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
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards what follows
        self._pending = {}
        self._children = {}
        self._next_id = 1
        self._ended = None  # the AgentError once the connection is over
        self._buf = bytearray()
        self._buf_offset = 0  # the stream offset of _buf[0]
        self._fd_queue = collections.deque()  # (first, end) offsets of a read, its descriptors
        self.covered = True
        try:
            self.hello = self._read_hello()
        except BaseException:
            self._sock.close()
            self.process.kill()
            self.process.wait()
            raise
        self._reader = threading.Thread(target=self._read_loop, name="custody-agent", daemon=True)
        self._reader.start()

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
        self._sock.settimeout(_HELLO_TIMEOUT)
        try:
            hello, fds = self._next_message()
        except socket.timeout:
            raise AgentError(errno.ETIMEDOUT, "custody: %s agent said no hello within %gs"
                             % (self.binary, _HELLO_TIMEOUT)) from None
        except EOFError:
            status = self.process.wait()
            raise AgentError(errno.EPIPE, "custody: %s agent ended before its hello (exit status "
                             "%s; its error is on stderr)" % (self.binary, status)) from None
        finally:
            self._sock.settimeout(None)
        _close_all(fds)
        if hello.get("event") != "hello":
            raise AgentError(errno.EPROTO, "custody: the agent's first message is not a hello: "
                             "%.200r" % hello)
        if hello.get("protocol") != PROTOCOL:
            raise AgentError(errno.EPROTO, "custody: %s speaks agent protocol %r; this client "
                             "speaks %d" % (self.binary, hello.get("protocol"), PROTOCOL))
        missing = [c for c in _NEEDED if c not in (hello.get("capabilities") or ())]
        if missing:
            raise AgentError(errno.EPROTO, "custody: %s agent lacks %s" % (self.binary,
                             ", ".join(missing)))
        return hello

    # Requests.

    def call(self, op, fields, fds=(), child=None, argv0=None, callback=None):
        """Send one request and return its reply's (result, descriptors), raising the mapped
        exception for an error reply.

        With ``callback``, return at once instead; the reader thread calls callback(call)
        when the reply arrives (see :meth:`result`). ``child`` is registered for the exit
        event by the reader, before it reads the next line, when the reply is a success.
        """
        c = _Call(op, child, argv0, callback)
        with self._lock:
            if self._ended is not None:
                raise self._ended
            rid = self._next_id
            self._next_id += 1
            self._pending[rid] = c
        try:
            self._send(self._line(dict(fields, id=rid, op=op)), fds)
        except BaseException as e:
            with self._lock:
                self._pending.pop(rid, None)
            if isinstance(e, OSError) and not e.errno == errno.E2BIG:
                raise AgentError(errno.EPIPE, "custody: send to the agent: %s" % e) from e
            raise
        if callback is not None:
            return c
        try:
            c.done.wait()
        except BaseException:  # KeyboardInterrupt: nobody will hold what this start makes
            self._abandon(c)
            raise
        return self.result(c)

    def _abandon(self, c):
        """Let a start whose caller stopped waiting kill its child's scope once it runs."""
        def kill_started(c):
            if c.error is None and c.reply.get("ok") and c.child is not None:
                _close_all(c.fds)
                try:
                    self.call("signal", {"pid": c.child.pid, "signal": "SIGKILL"},
                              callback=lambda _: None)
                except OSError:
                    pass  # the agent ended: it stopped the child itself
        with self._lock:
            if not c.done.is_set():
                c.callback = kill_started
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

    # The reader.

    def _next_message(self):
        """Return the next line as JSON with the descriptors that belong to it."""
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                first = self._buf_offset
                end = first + i  # the newline's stream offset
                line = bytes(self._buf[:i])
                del self._buf[:i + 1]
                self._buf_offset = end + 1
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                if not isinstance(msg, dict):
                    raise AgentError(errno.EPROTO, "custody: the agent sent a line that is not a "
                                     "JSON object: %.200r" % line)
                return msg, self._take_fds(msg, first, end)
            data, fds, flags, _ = socket.recv_fds(self._sock, _CHUNK, _MAX_FDS, _RECV_FLAGS)
            if fds and not _RECV_FLAGS:
                for fd in fds:
                    os.set_inheritable(fd, False)
            if flags & socket.MSG_CTRUNC:
                _close_all(fds)
                raise AgentError(errno.EPROTO, "custody: descriptors from the agent were "
                                 "truncated")
            if not data:
                _close_all(fds)
                raise EOFError
            if fds:
                start = self._buf_offset + len(self._buf)
                self._fd_queue.append((start, start + len(data), fds))
            self._buf += data

    def _take_fds(self, msg, first, end):
        """The descriptors of the line at stream offsets first..end (its newline).

        The agent sends a line's descriptors with one sendmsg(2) of that line, and only with a
        reply whose ``fds`` names them. Which read returns them is the kernel's choice: Linux
        glues the bytes of earlier lines, sent without descriptors, into the read that returns
        the descriptors, and stops that read after the line that carried them; BSD starts a
        read at them. So the read's first byte does not mark their line; what holds on both is
        that the read overlaps it. A line takes the descriptors of the first read that overlaps
        it, when it declares them; a read that ended before the line began carried descriptors
        no line declared, and they are closed.
        """
        while self._fd_queue and self._fd_queue[0][1] <= first:
            _close_all(self._fd_queue.popleft()[2])
        declared = msg.get("fds") if msg.get("ok") and "id" in msg else None
        want = len(declared) if isinstance(declared, list) else 0
        if not want:
            return []
        if not self._fd_queue or self._fd_queue[0][0] > end:
            raise AgentError(errno.EPROTO, "custody: the agent's reply %s declares %d "
                             "descriptors and none came with it" % (msg.get("id"), want))
        fds = self._fd_queue.popleft()[2]
        if len(fds) != want:
            _close_all(fds)
            raise AgentError(errno.EPROTO, "custody: the agent's reply %s declares %d "
                             "descriptors and %d came with it" % (msg.get("id"), want, len(fds)))
        return fds

    def _read_loop(self):
        try:
            while True:
                msg, fds = self._next_message()
                if "id" in msg and "event" not in msg:
                    self._reply(msg, fds)
                else:
                    _close_all(fds)  # no event carries descriptors
                    self._event(msg)
        except EOFError:
            status = self.process.poll()
            self._end(AgentError(errno.EPIPE, "custody: the agent ended (exit status %s)"
                                 % ("still running" if status is None else status)))
        except BaseException as e:  # a socket error or a protocol violation: the link is gone
            self._end(e if isinstance(e, AgentError) else
                      AgentError(errno.EIO, "custody: reading from the agent: %s" % e))

    def _reply(self, msg, fds):
        with self._lock:
            c = self._pending.pop(msg["id"], None)
            if c is not None and c.child is not None and msg.get("ok"):
                c.child.pid = msg.get("pid")
                self._children[c.child.pid] = c.child
        if c is None:
            _close_all(fds)
            return
        c.reply, c.fds = msg, fds
        self._complete(c)

    def _event(self, msg):
        kind = msg.get("event")
        if kind == "exit":
            with self._lock:
                child = self._children.pop(msg.get("pid"), None)
            if child is None:
                return
            returncode = _returncode(msg.get("code"), msg.get("signal"))
            if returncode is None:
                child.finish(lost=AgentError(errno.EPROTO, "custody: the agent's exit event for "
                                             "%s has neither a code nor a signal" % child.pid))
            else:
                child.finish(returncode=returncode)
        elif kind == "handed":
            with self._lock:
                child = self._children.pop(msg.get("pid"), None)
            if child is not None:
                child.finish(handed_to=msg.get("receiver"))
        elif kind == "lost-cover":
            self.covered = False
        elif kind == "covered":
            self.covered = True
        # Unknown events are ignored: that is how the protocol grows.

    def forget(self, pid):
        """Stop expecting events for pid (after a release: the agent sends none)."""
        with self._lock:
            return self._children.pop(pid, None)

    def _end(self, error):
        with self._lock:
            self._ended = error
            pending, self._pending = list(self._pending.values()), {}
            children, self._children = list(self._children.values()), {}
        _close_all([fd for _, _, fds in self._fd_queue for fd in fds])
        self._fd_queue.clear()
        for c in pending:
            c.error = error
            self._complete(c)
        for child in children:
            child.finish(lost=error)
        try:
            self._sock.close()
        except OSError:
            pass
        if self.process.poll() is None:  # reap it once it goes, without blocking anyone
            threading.Thread(target=self.process.wait, daemon=True).start()

    def _complete(self, c):
        with self._lock:  # against _abandon setting the callback meanwhile
            c.done.set()
            callback = c.callback
        if callback is not None:
            callback(c)


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
