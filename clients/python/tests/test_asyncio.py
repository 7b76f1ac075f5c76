"""custody.create_subprocess_exec as asyncio's, against the real agent."""

import asyncio
import signal

import pytest

import custody
from custody import PIPE
from helpers import Incarnation, require_cgroup, wait_gone


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_communicate():
    async def main():
        p = await custody.create_subprocess_exec("sh", "-c", "cat; echo err >&2; exit 5",
                                                 stdin=PIPE, stdout=PIPE, stderr=PIPE)
        assert isinstance(p, asyncio.subprocess.Process) and p.pid > 0
        assert p.returncode is None
        out, err = await p.communicate(b"data")
        return out, err, p.returncode
    assert run(main()) == (b"data", b"err\n", 5)


def test_streams_line_by_line():
    async def main():
        p = await custody.create_subprocess_exec("cat", stdin=PIPE, stdout=PIPE)
        p.stdin.write(b"one\n")
        await p.stdin.drain()
        first = await p.stdout.readline()
        p.stdin.close()
        rest = await p.stdout.read()
        return first, rest, await p.wait()
    assert run(main()) == (b"one\n", b"", 0)


def test_terminate_kill_and_wait():
    async def main():
        a = await custody.create_subprocess_exec("sleep", "1000")
        b = await custody.create_subprocess_exec("sleep", "1000")
        a.terminate()
        b.kill()
        return await a.wait(), await b.wait()
    assert run(main()) == (-signal.SIGTERM, -signal.SIGKILL)


def test_wait_for_timeout_then_stop():
    async def main():
        p = await custody.create_subprocess_exec("sleep", "1000")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(p.wait(), 0.1)
        result = await p.stop(grace=2)
        return result.outcome, await p.wait()
    assert run(main()) == (custody.Outcome.EXITED, -signal.SIGTERM)


def test_shell_and_missing_program():
    async def main():
        p = await custody.create_subprocess_shell("echo $((2 + 3))", stdout=PIPE)
        out = (await p.communicate())[0]
        with pytest.raises(FileNotFoundError):
            await custody.create_subprocess_exec("custody-test-no-such-program")
        return out
    assert run(main()) == b"5\n"


def test_text_is_refused_as_asyncio_does():
    async def main():
        with pytest.raises(ValueError):
            await custody.create_subprocess_exec("true", text=True)
    run(main())


def test_kill_reaches_a_setsid_descendant():
    require_cgroup()

    async def main():
        p = await custody.create_subprocess_exec(
            "sh", "-c", "setsid sh -c 'echo $$; exec sleep 1000' & wait", stdout=PIPE)
        grandchild = Incarnation(int(await p.stdout.readline()))
        p.kill()
        return grandchild, await p.wait()
    grandchild, code = run(main())
    assert code == -signal.SIGKILL
    assert wait_gone([grandchild]) == []


def test_hundred_concurrent_starts():
    async def main():
        procs = await asyncio.gather(*(
            custody.create_subprocess_exec("sh", "-c", "read code; exit $code", stdin=PIPE)
            for _ in range(100)))
        assert len({p.pid for p in procs}) == 100
        results = await asyncio.gather(*(p.communicate(b"%d\n" % i) for i, p in enumerate(procs)))
        assert all(r == (None, None) for r in results)
        return [p.returncode for p in procs]
    assert run(main()) == list(range(100))
