"""Where the custody binary is: $CUSTODY_BIN, then the copy shipped in this package, then PATH."""

import os
import shutil

from ._errors import BinaryNotFoundError

# The copy a wheel may ship beside the module (see the package's README, "Packaging").
_SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "custody")


def find_binary():
    """Return the path of the custody binary this process uses.

    ``$CUSTODY_BIN`` wins when set, and is then the only candidate: a path the user named that
    is not an executable file is an error, not a reason to run some other custody. Otherwise the
    copy shipped inside the package, then ``custody`` on ``PATH``. Raises
    :class:`BinaryNotFoundError` naming every place it looked.
    """
    named = os.environ.get("CUSTODY_BIN")
    if named:
        if _executable(named):
            return named
        raise BinaryNotFoundError(
            "custody: CUSTODY_BIN=%s is not an executable file" % named)
    if _executable(_SHIPPED):
        return _SHIPPED
    found = shutil.which("custody")
    if found:
        return found
    raise BinaryNotFoundError(
        "custody: no custody binary: CUSTODY_BIN is not set, %s does not exist, and no custody "
        "is on PATH (%s)" % (_SHIPPED, os.environ.get("PATH", os.defpath)))


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)
