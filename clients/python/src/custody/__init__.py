"""custody: child processes that are owned, identified and provably stopped.

:class:`Popen`, :func:`run` and :func:`create_subprocess_exec` are shaped like
:mod:`subprocess` and :mod:`asyncio`'s; each child is started by this process's custody agent
(``custody agent --fd N``, started on first use), born in a scope of its own, and stopped with
its whole scope when this process ends, however it ends.
"""

from subprocess import (DEVNULL, PIPE, STDOUT, CalledProcessError, CompletedProcess,
                        SubprocessError, TimeoutExpired)

from ._agent import configure
from ._asyncio import create_subprocess_exec, create_subprocess_shell
from ._binary import find_binary
from ._errors import AgentError, BinaryNotFoundError
from ._popen import Outcome, Popen, StopResult, run

__all__ = [
    "AgentError", "BinaryNotFoundError", "CalledProcessError", "CompletedProcess", "DEVNULL",
    "Outcome", "PIPE", "Popen", "STDOUT", "StopResult", "SubprocessError", "TimeoutExpired",
    "agent_info", "configure", "create_subprocess_exec", "create_subprocess_shell",
    "find_binary", "run",
]


def agent_info():
    """Return this process's agent's hello (its ``pid``, ``version``, ``containment``,
    ``capabilities``), starting the agent if it is not running yet."""
    from . import _agent
    return dict(_agent.agent().hello)
