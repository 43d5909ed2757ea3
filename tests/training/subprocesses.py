"""Helpers for tests that run training in child processes: free ports, timeouts, clean-up."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_ports(count):
    """`count` distinct free TCP ports on 127.0.0.1 (bound to port 0, then released)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def child_env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    env.pop("TF_CONFIG", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _interruptible():
    """In the child: Ctrl-C's default action, as in a terminal.

    A test run started in the background by a non-interactive shell inherits
    SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the
    child would never see the Ctrl-C the tests send it.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(args, log_path, **env):
    """Start `python args...` in its own process group, output to `log_path`.

    Its temporary files go in `log_path`'s folder (`TMPDIR`): a killed process leaves TensorFlow's AutoGraph
    files behind, and they stay with the test's other files, not in the machine's temporary folder."""
    env.setdefault("TMPDIR", os.path.dirname(os.path.abspath(log_path)))
    log = open(log_path, "wb")
    process = subprocess.Popen([sys.executable, "-u", *args], cwd=REPO, env=child_env(**env),
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               preexec_fn=_interruptible)
    process.log_file = log
    process.log_path = log_path
    return process


def kill(process, sig=signal.SIGKILL):
    """Send `sig` to the process group we started for `process` (if it still runs)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
    process.wait()
    process.log_file.close()


def finish(processes, timeout):
    """Wait for all `processes`; kill them all if any takes longer than `timeout` seconds.

    Returns the list of exit codes; a timeout raises `AssertionError` with the logs' tails.
    """
    codes = []
    deadline = time.monotonic() + timeout
    try:
        for p in processes:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        for p in processes:
            kill(p)
        raise AssertionError(f"timed out after {timeout} s\n" + logs(processes)) from None
    for p in processes:
        p.log_file.close()
    return codes


def logs(processes, tail=3000):
    text = []
    for p in processes:
        with open(p.log_path, "rb") as f:
            text.append(f"--- {p.log_path} ---\n" + f.read().decode(errors="replace")[-tail:])
    return "\n".join(text)


def start_workers(count, args_for, log_dir):
    """Start `count` workers of one MultiWorkerMirroredStrategy cluster on 127.0.0.1.

    `args_for(index)` gives worker `index`'s command line; its TF_CONFIG is set
    here and its output goes to `log_dir/w{index}.log`.
    """
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(count)]}
    processes = []
    for index in range(count):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        processes.append(start(args_for(index), os.path.join(log_dir, f"w{index}.log"), TF_CONFIG=tf_config))
    return processes
