"""custody.Popen and custody.run: subprocess's, with the child started by this process's agent.

Popen is a subclass of :class:`subprocess.Popen`: subprocess makes the pipes, wraps the streams
(text mode, buffering) and runs communicate(); custody replaces only what touches the child
(the start, the exit status, the signals). Those are four methods subprocess's POSIX
implementation has had since Python 3.3 (``_execute_child``, ``_internal_poll``, ``_wait``,
``send_signal``), each overridden here whole.
"""

import dataclasses
import enum
import os
import subprocess
from subprocess import PIPE, CompletedProcess, CalledProcessError, TimeoutExpired

from . import _agent
from ._errors import AgentError

# subprocess.Popen's keywords that describe how *this* process would fork and exec: the agent
# starts the child, so only their defaults are honoured, and anything else is refused rather
# than ignored.
_FORK_DEFAULTS = {
    "executable": None, "preexec_fn": None, "close_fds": True, "restore_signals": True,
    "start_new_session": False, "pass_fds": (), "user": None, "group": None,
    "extra_groups": None, "umask": -1, "process_group": None, "startupinfo": None,
    "creationflags": 0,
}


class Outcome(str, enum.Enum):
    """The typed result of a stop (custody's stop outcomes)."""

    EXITED = "exited"
    ALREADY_EXITED = "already-exited"
    NO_AUTHORITY = "no-authority"
    PERMISSION_DENIED = "permission-denied"
    TIMED_OUT = "timed-out"


@dataclasses.dataclass(frozen=True)
class StopResult:
    """What :meth:`Popen.stop` did: the outcome, whether the request to exit was sent,
    whether the kill after the grace was needed, and why for every outcome but ``exited``."""

    outcome: Outcome
    requested: bool
    forced: bool
    reason: str

    @property
    def ok(self):
        """Reports whether the child is known to be gone (``exited`` or ``already-exited``)."""
        return self.outcome in (Outcome.EXITED, Outcome.ALREADY_EXITED)


class Popen(subprocess.Popen):
    """Start a child as :class:`subprocess.Popen` does, owned by this process through custody.

    The child is born in a scope of its own (a cgroup, a process group, a job), covered by the
    owner-death supervisor, tagged and recorded in the ledger. ``send_signal``, ``terminate``
    and ``kill`` act on the whole scope; ``returncode`` comes from the agent's exit event and
    has subprocess's meaning (minus the signal number when a signal ended the child). When
    this process ends, however it ends, the child's scope is stopped.

    Beyond subprocess: ``purpose`` (the ledger row's purpose), ``grace`` (seconds between the
    request to exit and the kill, for :meth:`stop` and the stop at this process's end),
    ``keep`` (the row is not reapable), ``tag_env`` (the spawn tag's variable, e.g.
    ``HERMES_SPAWN``) and ``grant_env`` (hand the child a grant in that variable).
    """

    def __init__(self, args, bufsize=-1, stdin=None, stdout=None, stderr=None, shell=False,
                 cwd=None, env=None, universal_newlines=None, *, text=None, encoding=None,
                 errors=None, purpose=None, grace=None, keep=False, tag_env=None,
                 grant_env=None, pipesize=-1, **kwargs):
        for name, value in kwargs.items():
            if name not in _FORK_DEFAULTS:
                raise TypeError("custody.Popen() got an unexpected keyword argument %r" % name)
            if value != _FORK_DEFAULTS[name]:
                raise ValueError("custody.Popen: %s=%r is not supported: the custody agent "
                                 "starts the child, in a scope of its own" % (name, value))
        self._custody = {"purpose": purpose, "grace": grace, "keep": bool(keep),
                         "tag_env": tag_env, "grant_env": grant_env}
        self._child = None
        self._agent = None
        extra = {"pipesize": pipesize} if pipesize != -1 else {}
        super().__init__(args, bufsize=bufsize, stdin=stdin, stdout=stdout, stderr=stderr,
                         shell=shell, cwd=cwd, env=env, universal_newlines=universal_newlines,
                         text=text, encoding=encoding, errors=errors, **extra)

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                       errread, errwrite, *unused):
        """Ask the agent to start the child, handing it the child's ends of the streams."""
        try:
            argv = _argv(args, shell)
            stdio, fds = [], []
            for fd, inherited in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2)):
                # subprocess's "inherit" is this process's descriptor now, not the agent's
                # (which is whatever this process's was when the agent started).
                if fd == -1:
                    fd = inherited if _is_open(inherited) else None
                if fd is None:
                    stdio.append("null")
                else:
                    stdio.append("fd")
                    fds.append(fd)
            agent = _agent.agent()
            request = {"argv": argv, "stdio": stdio}
            # subprocess's env=None and cwd=None mean this process's now; the agent's own are
            # this process's when it started, so they are sent only when they differ.
            if env is not None or not agent.environ_unchanged():
                request["env"] = _environment(env)
            directory = _cwd(cwd)
            if directory is not None and (cwd is not None or directory != agent.cwd):
                request["cwd"] = directory
            request.update({k: v for k, v in self._custody.items() if v is not None})
            child = _agent.Child()
            reply, got = agent.call("start", request, fds, child=child, argv0=argv[0])
            _agent._close_all(got)  # none were asked for: every stream went as a descriptor
            self._agent, self._child = agent, child
            self.pid = reply["pid"]
            self.create_time = reply.get("create_time")
            self.containment = reply.get("containment")
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _internal_poll(self, _deadstate=None, *unused, **unused_kw):
        """The returncode once the agent's exit event has come: what has come is read, without
        waiting, unless another thread reads meanwhile (it then dispatches the event)."""
        if self.returncode is None and self._child is not None:
            if not self._child.done.is_set() and self._agent.usable():
                self._agent.poll()
            if self._child.done.is_set():
                self.returncode = self._child.returncode
        return self.returncode

    def _wait(self, timeout):
        if self.returncode is not None:
            return self.returncode
        self._check_owner()
        if not self._agent.wait(self._child, timeout):
            raise TimeoutExpired(self.args, timeout)
        self._check_held()
        self.returncode = self._child.returncode
        return self.returncode

    def _check_held(self):
        """Raise when the child is no longer this process's to wait for or signal."""
        if self._child.lost is not None:
            raise self._child.lost
        if self._child.handed_to is not None:
            raise ChildProcessError("custody: child %d was handed to process %s, its owner now"
                                    % (self.pid, self._child.handed_to))

    def send_signal(self, sig):
        """Send sig to every member of the child's scope (nothing once it has exited)."""
        self.poll()
        if self.returncode is not None:
            return
        if self._child.done.is_set():
            self._check_held()
        try:
            self._request("signal", signal=int(sig), target="scope")
        except ProcessLookupError:  # the exit, on its way here: nothing to signal, as subprocess
            pass

    def stop(self, grace=None):
        """Stop the child's scope: the request to exit, the grace (the start's when None), then
        the kill; return the :class:`StopResult` once the stop has ended. A stopped child is
        released: its row and cover are dropped."""
        fields = {} if grace is None else {"grace": grace}
        try:
            reply = self._request("stop", **fields)
        except ProcessLookupError:  # the agent no longer holds it: its scope is gone
            return StopResult(Outcome.ALREADY_EXITED, False, False,
                              "the agent no longer holds the child")
        try:
            outcome = Outcome(reply.get("outcome"))
        except ValueError:
            outcome = reply.get("outcome")
        return StopResult(outcome, bool(reply.get("requested")), bool(reply.get("forced")),
                          reply.get("reason") or "")

    def grant(self, ttl=60):
        """Return a one-shot grant for the child, for ``custody adopt`` (or another agent's
        adopt) to take it over within ttl seconds."""
        return self._request("grant", ttl=ttl)["grant"]

    def release(self):
        """Drop the child's row and cover once its scope is empty: its leader has exited and
        nothing it started runs on. While the scope still runs, the agent refuses (it would
        outlive this process uncovered) and :class:`ChildProcessError` is raised; hand a running
        child over with :meth:`grant` instead."""
        try:
            self._request("release")
        except ProcessLookupError:
            # The agent releases a child itself once its scope is empty after the exit; only
            # then may it no longer know the pid.
            if not self._child.done.is_set():
                raise
        self._agent.forget(self.pid)
        self._child.finish(lost=AgentError("custody: child %d was released" % self.pid))

    def _request(self, op, **fields):
        self._check_owner()
        fields["pid"] = self.pid
        return self._agent.call(op, fields)[0]

    def _check_owner(self):
        if not self._agent.usable() and self._agent.owner != os.getpid():
            raise ChildProcessError("custody: child %d belongs to process %d, not to this "
                                    "forked process" % (self.pid, self._agent.owner))


def run(*popenargs, input=None, capture_output=False, timeout=None, check=False, **kwargs):
    """Run a command as :func:`subprocess.run` does, through :class:`Popen`."""
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        kwargs["stdin"] = PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        kwargs["stdout"] = kwargs["stderr"] = PIPE
    with Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except TimeoutExpired as exc:
            process.kill()
            exc.stdout, exc.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        retcode = process.poll()
        if check and retcode:
            raise CalledProcessError(retcode, process.args, output=stdout, stderr=stderr)
    return CompletedProcess(process.args, retcode, stdout, stderr)


def _argv(args, shell):
    if isinstance(args, (str, bytes, os.PathLike)):
        args = [args]
    else:
        args = list(args)
    if shell:
        args = ["/bin/sh", "-c"] + args
    argv = [os.fsdecode(a) for a in args]
    if not argv:
        raise IndexError("list index out of range")  # as subprocess does for []
    return argv


def _environment(env):
    """The child's whole environment: subprocess's env=None is this process's now."""
    source = os.environ if env is None else env
    return {os.fsdecode(k): os.fsdecode(v) for k, v in source.items()}


def _cwd(cwd):
    if cwd is not None:
        return os.fsdecode(os.fspath(cwd))
    try:
        return os.getcwd()
    except OSError:  # a removed directory: the agent's own is the best there is
        return None


def _is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


__all__ = ["Popen", "run", "Outcome", "StopResult"]
