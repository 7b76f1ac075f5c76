"""custody.Popen and custody.run as subprocess's, against the real agent."""

import errno
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

import custody
from custody import DEVNULL, PIPE, STDOUT
from helpers import PYTHON, Incarnation, expect, kill_verified, require_cgroup, wait_gone


def test_is_a_subprocess_popen(children):
    p = custody.Popen(["true"])
    children.append(p)
    assert isinstance(p, subprocess.Popen)
    assert p.args == ["true"]
    assert p.wait() == 0
    assert p.returncode == 0


def test_pipes_both_ways(children):
    p = custody.Popen(["sh", "-c", "cat; echo err >&2"], stdin=PIPE, stdout=PIPE, stderr=PIPE)
    children.append(p)
    assert p.pid > 0
    assert p.communicate(b"hello\n") == (b"hello\n", b"err\n")
    assert p.returncode == 0


def test_text_mode(children):
    p = custody.Popen(["cat"], stdin=PIPE, stdout=PIPE, text=True, encoding="utf-8")
    children.append(p)
    assert p.communicate("héllo\r\nwörld\n") == ("héllo\nwörld\n", None)


def test_line_by_line(children):
    p = custody.Popen(["cat"], stdin=PIPE, stdout=PIPE, bufsize=0)
    children.append(p)
    p.stdin.write(b"one\n")
    assert p.stdout.readline() == b"one\n"
    p.stdin.close()
    assert p.stdout.read() == b""
    assert p.wait() == 0


def test_exit_code_and_signal(children):
    code = custody.Popen(["sh", "-c", "exit 7"])
    killed = custody.Popen(["sh", "-c", "kill -KILL $$"])
    children += [code, killed]
    assert code.wait() == 7
    assert killed.wait() == -signal.SIGKILL


def test_poll_and_wait_timeout(children):
    p = custody.Popen(["sleep", "1000"])
    children.append(p)
    assert p.poll() is None
    with pytest.raises(subprocess.TimeoutExpired) as info:
        p.wait(timeout=0.1)
    assert info.value.timeout == 0.1 and info.value.cmd == ["sleep", "1000"]
    p.kill()
    assert p.wait() == -signal.SIGKILL
    assert p.poll() == -signal.SIGKILL
    p.kill()  # after the exit: nothing, as subprocess does
    p.send_signal(signal.SIGTERM)


def test_terminate_is_sigterm(children):
    p = custody.Popen(["sleep", "1000"])
    children.append(p)
    p.terminate()
    assert p.wait() == -signal.SIGTERM


def test_communicate_timeout_keeps_output(children):
    p = custody.Popen(["sh", "-c", "echo partial; exec sleep 1000"], stdout=PIPE)
    children.append(p)
    with pytest.raises(subprocess.TimeoutExpired):
        p.communicate(timeout=0.5)
    p.kill()
    out, _ = p.communicate()
    assert out == b"partial\n"
    assert p.returncode == -signal.SIGKILL


def test_stderr_to_stdout_and_devnull(children):
    p = custody.Popen(["sh", "-c", "echo out; echo err >&2; cat"], stdin=DEVNULL, stdout=PIPE,
                      stderr=STDOUT)
    children.append(p)
    out, err = p.communicate()
    assert sorted(out.splitlines()) == [b"err", b"out"] and err is None


def test_file_object_and_descriptor(children, tmp_path):
    with open(tmp_path / "out", "wb") as f:
        p = custody.Popen(["echo", "to a file"], stdout=f)
        children.append(p)
        assert p.wait() == 0
    assert (tmp_path / "out").read_bytes() == b"to a file\n"
    fd = os.open(tmp_path / "fd", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        p = custody.Popen(["sh", "-c", "echo to a descriptor >&2"], stderr=fd)
        children.append(p)
        assert p.wait() == 0
    finally:
        os.close(fd)
    assert (tmp_path / "fd").read_bytes() == b"to a descriptor\n"


def test_inherits_this_process_streams_now(children, capfd):
    # capfd replaced descriptors 1 and 2 after the agent may have started: a child started with
    # stdout=None writes where this process's stdout is now, as with subprocess.
    p = custody.Popen(["sh", "-c", "echo inherited; echo also >&2"])
    children.append(p)
    assert p.wait() == 0
    assert capfd.readouterr() == ("inherited\n", "also\n")


def test_env_and_cwd(children, tmp_path, monkeypatch):
    p = custody.Popen(["sh", "-c", 'echo "$ONLY" "$PWD"'], stdout=PIPE, cwd=tmp_path,
                      env={"ONLY": "this", "PATH": os.environ["PATH"]})
    children.append(p)
    assert p.communicate()[0].decode().split() == ["this", str(tmp_path)]
    # env=None is this process's environment at the start, not the agent's at its own start.
    monkeypatch.setenv("CUSTODY_TEST_LATE", "late")
    monkeypatch.chdir(tmp_path)
    p = custody.Popen(["sh", "-c", 'echo "$CUSTODY_TEST_LATE" "$PWD"'], stdout=PIPE)
    children.append(p)
    assert p.communicate()[0].decode().split() == ["late", str(tmp_path)]


def test_shell(children):
    p = custody.Popen("echo $((6 * 7))", shell=True, stdout=PIPE)
    children.append(p)
    assert p.communicate()[0] == b"42\n"


def test_the_child_is_tagged(children):
    p = custody.Popen(["sh", "-c", 'echo "$CUSTODY_SPAWN"'], stdout=PIPE, purpose="test-tag")
    children.append(p)
    fields = p.communicate()[0].decode().strip().split(":")
    assert fields[0] == "v1" and fields[2] == "test-tag" and len(fields) == 5, fields
    p = custody.Popen(["sh", "-c", 'echo "$OTHER_TAG"'], stdout=PIPE, tag_env="OTHER_TAG")
    children.append(p)
    assert p.communicate()[0].startswith(b"v1:")


def test_context_manager(children):
    with custody.Popen(["sh", "-c", "echo done"], stdout=PIPE) as p:
        children.append(p)
        assert p.stdout.read() == b"done\n"
    assert p.returncode == 0 and p.stdout.closed


def test_child_closes_stdout_early(children):
    # The child's stdout reaches end of file here while the child runs on: nobody else (the
    # agent included) holds a copy of its write end.
    p = custody.Popen(["sh", "-c", "exec >&-; read line; echo got $line >&2"],
                      stdin=PIPE, stdout=PIPE, stderr=PIPE)
    children.append(p)
    assert p.stdout.read() == b""
    assert p.poll() is None
    out, err = p.communicate(b"late\n")
    assert (out, err, p.returncode) == (b"", b"got late\n", 0)


def test_child_closes_stdin_early(children):
    p = custody.Popen(["sh", "-c", "exec <&-; echo closed"], stdin=PIPE, stdout=PIPE)
    children.append(p)
    assert p.stdout.readline() == b"closed\n"
    assert p.wait() == 0
    with pytest.raises(BrokenPipeError):
        p.stdin.write(b"x" * 65536 * 2)
        p.stdin.flush()
    p.stdin = None  # its buffer could never be flushed


def test_missing_program_leaves_nothing():
    name = "custody-test-no-such-program"
    with pytest.raises(FileNotFoundError) as info:
        custody.Popen([name, "arg"], stdout=PIPE)
    assert info.value.filename == name
    assert info.value.errno == 2
    assert not _ledger_rows_naming(name)
    with pytest.raises(FileNotFoundError):
        custody.run(["/nonexistent/" + name])


def test_unexecutable_program(tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    with pytest.raises(PermissionError) as info:
        custody.Popen([str(script)])
    assert info.value.filename == str(script)


def test_bad_purpose_is_a_value_error():
    with pytest.raises(ValueError):
        custody.Popen(["true"], purpose="no:colons")


def test_fork_exec_keywords_are_refused():
    with pytest.raises(ValueError, match="preexec_fn"):
        custody.Popen(["true"], preexec_fn=lambda: None)
    with pytest.raises(TypeError, match="no_such_keyword"):
        custody.Popen(["true"], no_such_keyword=1)
    custody.Popen(["true"], close_fds=True, start_new_session=False).wait()  # the defaults


def test_stop_outcomes(children):
    p = custody.Popen(["sleep", "1000"], grace=5)
    children.append(p)
    result = p.stop(grace=2)
    assert result.outcome is custody.Outcome.EXITED and result.ok
    assert result.requested and not result.forced
    assert p.wait(60) == -signal.SIGTERM
    again = p.stop()
    assert again.outcome is custody.Outcome.ALREADY_EXITED and not again.requested


def test_stop_forces_after_the_grace(children):
    p = custody.Popen([PYTHON, "-c", "import signal, sys, time\n"
                       "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                       "print('ready', flush=True)\ntime.sleep(1000)"], stdout=PIPE)
    children.append(p)
    expect(p, "ready")
    result = p.stop(grace=0.5)
    assert (result.outcome, result.requested, result.forced) == (custody.Outcome.EXITED, True, True)
    assert p.wait(60) == -signal.SIGKILL


# A child whose child leaves its session (and so its process group) and then says its PID.
SETSID_GRANDCHILD = "setsid sh -c 'echo $$; exec sleep 1000' & wait"


def test_terminate_and_kill_reach_a_setsid_descendant(children):
    require_cgroup()
    for act, want in (("terminate", -signal.SIGTERM), ("kill", -signal.SIGKILL)):
        p = custody.Popen(["sh", "-c", SETSID_GRANDCHILD], stdout=PIPE)
        children.append(p)
        grandchild = Incarnation(p.stdout.readline())
        assert os.getsid(grandchild.pid) != os.getsid(p.pid)  # it did leave the child's session
        getattr(p, act)()
        assert p.wait(60) == want
        assert wait_gone([grandchild]) == [], "%s left the setsid descendant running" % act


def test_grant_hands_the_child_over(children):
    p = custody.Popen([PYTHON, "-c", "import sys; sys.stdin.read(); print('bye')"], stdin=PIPE)
    children.append(p)
    grant = p.grant(ttl=30)
    assert isinstance(grant, str) and grant
    # custody adopt becomes the owner (and waits for the child, as run does).
    adopt = subprocess.Popen([custody.find_binary(), "adopt", "--grace", "1s", grant],
                             stdout=PIPE, stderr=PIPE)
    try:
        with pytest.raises(ChildProcessError, match="handed"):
            p.wait(60)
        children.remove(p)  # not this process's child any more
        with pytest.raises(ChildProcessError, match="handed"):
            p.terminate()
        p.stdin.close()  # the child reads end of file and exits: its new owner sees it
        out, err = adopt.communicate(timeout=60)
        assert adopt.returncode == 0, err
    finally:
        if adopt.poll() is None:
            adopt.kill()
            adopt.wait()


def test_run():
    done = custody.run(["sh", "-c", "cat; echo err >&2; exit 3"], input=b"in",
                       capture_output=True)
    assert isinstance(done, subprocess.CompletedProcess)
    assert (done.args, done.returncode, done.stdout, done.stderr) == (
        ["sh", "-c", "cat; echo err >&2; exit 3"], 3, b"in", b"err\n")
    with pytest.raises(subprocess.CalledProcessError) as info:
        custody.run(["sh", "-c", "echo out; exit 4"], stdout=PIPE, check=True, text=True)
    assert (info.value.returncode, info.value.output) == (4, "out\n")
    assert custody.run(["true"], check=True).returncode == 0


def test_run_timeout_kills_the_child():
    with pytest.raises(subprocess.TimeoutExpired) as info:
        custody.run(["sh", "-c", "echo started; exec sleep 1000"], capture_output=True,
                    timeout=0.5)
    assert info.value.stdout == b"started\n"


def test_hundred_concurrent_starts(children):
    lock = threading.Lock()

    def start(i):
        p = custody.Popen(["sh", "-c", "read code; exit $code"], stdin=PIPE)
        with lock:
            children.append(p)
        return p

    threads = []
    for i in range(100):
        t = threading.Thread(target=start, args=(i,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    assert len({p.pid for p in children}) == 100
    assert all(p.poll() is None for p in children)  # all running at once

    def finish(p, code):
        p.communicate(b"%d\n" % code)

    threads = [threading.Thread(target=finish, args=(p, i)) for i, p in enumerate(children)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.returncode for p in children] == list(range(100))


def test_fork_starts_its_own_agent(children):
    parent_agent = custody.agent_info()["pid"]
    held = custody.Popen(["sleep", "1000"])
    children.append(held)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked child: report, then leave without running the parent's cleanup
        code = 1
        try:
            os.close(r)
            report = {}
            try:
                held.wait(timeout=5)
                report["wait"] = "returned"
            except ChildProcessError:
                report["wait"] = "refused"
            done = custody.run(["sh", "-c", "echo forked"], capture_output=True)
            report["output"] = done.stdout.decode()
            report["agent"] = custody.agent_info()["pid"]
            os.write(w, json.dumps(report).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        report = json.loads(f.read() or b"{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert report["wait"] == "refused", report
    assert report["output"] == "forked\n"
    assert report["agent"] != parent_agent
    # The parent's agent is untouched by the child's exit and still holds its child.
    assert custody.agent_info()["pid"] == parent_agent
    assert held.poll() is None
    held.kill()
    assert held.wait(60) == -signal.SIGKILL


def test_requests_from_many_threads_against_one_child(children):
    p = custody.Popen(["sleep", "1000"])
    children.append(p)
    errors = []

    def signal_it():
        try:
            for _ in range(20):
                p.send_signal(0)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=signal_it) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and p.poll() is None


def _ledger_rows_naming(word):
    try:
        with open(os.environ["CUSTODY_LEDGER"]) as f:
            rows = json.load(f)
    except (FileNotFoundError, ValueError):
        return []
    return [r for r in rows if word in str(r.get("argv", ""))]


def test_configure_after_the_agent_started_is_refused():
    info = custody.agent_info()
    assert info["protocol"] == 1 and "fds" in info["capabilities"]
    with pytest.raises(RuntimeError, match="configure"):
        custody.configure(tag_env="HERMES_SPAWN")


def test_release_refuses_a_running_scope_and_drops_an_empty_one(children):
    require_cgroup()  # the setsid grandchild stays in the scope only with a cgroup
    p = custody.Popen(["sh", "-c", "setsid sh -c 'echo $$; exec sleep 1000' & read go"],
                      stdin=PIPE, stdout=PIPE)
    children.append(p)
    grandchild = Incarnation(p.stdout.readline())
    with pytest.raises(ChildProcessError) as info:
        p.release()  # it would outlive its owner uncovered
    assert info.value.custody_code == "running"
    assert _ledger_rows_naming_pid(p.pid)  # nothing changed
    p.stdin.write(b"go\n")
    p.stdin.close()
    assert p.wait(60) == 0  # the leader is gone; its setsid grandchild runs on in the scope
    with pytest.raises(ChildProcessError):
        p.release()
    assert p.stop(grace=1).ok  # ends the residue
    assert wait_gone([grandchild]) == []
    q = custody.Popen(["true"])
    children.append(q)
    assert q.wait(60) == 0
    q.release()  # an empty scope: row and cover dropped
    assert not _ledger_rows_naming_pid(q.pid)


def test_keep_and_grant_env(children):
    p = custody.Popen(["sh", "-c", 'echo "$MY_GRANT"; exec sleep 1000'], stdout=PIPE, keep=True,
                      grant_env="MY_GRANT", purpose="kept")
    children.append(p)
    assert p.stdout.readline().startswith(b"custody-grant-")
    rows = _ledger_rows_naming_pid(p.pid)
    assert len(rows) == 1 and rows[0]["reapable"] is False and rows[0]["purpose"] == "kept", rows


def _ledger_rows_naming_pid(pid):
    try:
        with open(os.environ["CUSTODY_LEDGER"]) as f:
            rows = json.load(f)
    except (FileNotFoundError, ValueError):
        return []
    return [r for r in rows if r.get("pid") == pid]


def test_a_request_over_the_line_limit_is_refused_here():
    # The agent would discard it and answer with no id to match: refused before it is sent.
    with pytest.raises(OSError) as info:
        custody.Popen(["true"], env={"BIG": "x" * (1 << 20)})
    assert info.value.errno == errno.E2BIG
    assert custody.run(["true"]).returncode == 0  # and the connection is as good as before


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
