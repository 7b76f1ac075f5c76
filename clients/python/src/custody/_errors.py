"""The exceptions custody raises, and the one table from the agent's error codes to them."""

import errno
import os


class AgentError(OSError):
    """The custody agent could not be started or spoken to, or it ended.

    A child started through an agent that ended is not known to have exited: the agent's
    supervisor stops it, but this process is never told its status.
    """


class BinaryNotFoundError(AgentError):
    """No custody binary was found (the message names every place that was searched)."""


def from_reply(error, argv0=None):
    """Return the exception for an agent error reply's ``error`` object.

    Each exception carries the agent's code as ``custody_code``. A missing program is a
    :class:`FileNotFoundError` and an unexecutable one a :class:`PermissionError`, with the
    program as ``filename``, as :mod:`subprocess` raises them.
    """
    code = error.get("code") if isinstance(error, dict) else None
    message = (error.get("message") if isinstance(error, dict) else None) or str(code)
    if code == "not-found" and argv0 is not None:
        exc = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv0)
    elif code == "permission-denied" and argv0 is not None:
        exc = PermissionError(errno.EACCES, os.strerror(errno.EACCES), argv0)
    else:
        kind, number = _BY_CODE.get(code, (AgentError, errno.EIO))
        if kind is ValueError:
            exc = ValueError("custody: " + message)
        else:
            exc = kind(number, "custody: " + message)
    exc.custody_code = code
    return exc


_BY_CODE = {
    "not-found": (FileNotFoundError, errno.ENOENT),
    "permission-denied": (PermissionError, errno.EPERM),
    "no-such-child": (ProcessLookupError, errno.ESRCH),
    # The bounded wait for the ledger's lock ran out: nothing was started.
    "ledger-locked": (TimeoutError, errno.ETIMEDOUT),
    "grant-refused": (PermissionError, errno.EPERM),
    # release of a child whose scope still runs: nothing changed.
    "running": (ChildProcessError, errno.EBUSY),
    "busy": (AgentError, errno.EBUSY),
    "unsupported": (OSError, errno.ENOTSUP),
    "bad-request": (ValueError, None),
    "start-failed": (ChildProcessError, errno.ECHILD),
    "no-such-fifo": (AgentError, errno.EPROTO),
    "fd-mismatch": (AgentError, errno.EPROTO),
    "bad-json": (AgentError, errno.EPROTO),
    "unknown-op": (AgentError, errno.EPROTO),
    "line-too-long": (AgentError, errno.EPROTO),
}
