"""The server processes of the network family: the fd limit and CPU pinning, starting a
server of a system and waiting for its port, its CPU time, and the checks a server must pass
before it is measured (the HTTP protocol check; for the offload servers, a client closing
while its request is at a worker)."""

import os
import re
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import time

from net_pyservers import is_pyserver, py_command
from net_systems import OFFLOAD, SYSTEMS, is_offload, offload_placement


def raise_fd_limit(need):
    """1000 connections need more than the usual soft limit of 1024 fds (wrk and server
    inherit ours)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def pinning(server_cpu, client_cpu):
    """taskset prefixes for the server and wrk, or empty ones when the CPUs are not ours."""
    try:
        mine = os.sched_getaffinity(0)
    except AttributeError:
        mine = set()
    if server_cpu in mine and client_cpu in mine and server_cpu != client_cpu and \
            subprocess.run(["taskset", "-c", str(server_cpu), "true"]).returncode == 0:
        return (["taskset", "-c", str(server_cpu)], ["taskset", "-c", str(client_cpu)])
    print(f"warning: cannot pin to CPUs {server_cpu} and {client_cpu}; running unpinned",
          file=sys.stderr, flush=True)
    return [], []


def wait_reap(pid, timeout):
    """Waits for pid up to timeout seconds; returns (status, rusage) or None."""
    deadline = time.monotonic() + timeout
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return status, ru
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def cpu_of(ru):
    return ru.ru_utime + ru.ru_stime


class Server:
    """One server process: started pinned, "ready" awaited, stopped with SIGTERM."""

    def __init__(self, command, port, prefix, ready_timeout=10.0):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(prefix + command + ["--port", str(port)],
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.port = None
        self.ready = self._wait_ready(ready_timeout)

    def _wait_ready(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not sel.select(deadline - time.monotonic()):
                break
            line = self.proc.stdout.readline()
            if not line:
                break  # exited
            if line.startswith("ready"):
                # "ready <what> 127.0.0.1:<port>": the port is the one it got (--port 0).
                m = re.search(r":(\d+)\s*$", line)
                self.port = int(m.group(1)) if m else None
                return line.split(None, 1)[1].strip() if " " in line else "ready"
        return None

    def cpu_seconds(self):
        """The server's CPU time so far (user + system, from /proc/PID/stat), or None: read
        before and after the client, it leaves out the start-up (a Python server's imports
        take a few hundred ms of CPU) and the shutdown."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        """SIGTERM, then the server's CPU seconds, exit status and stderr."""
        if self.proc.poll() is not None:
            ru = None  # it had exited already (and poll() reaped it)
        else:
            self.proc.send_signal(signal.SIGTERM)
            got = wait_reap(self.proc.pid, 10.0)
            if got is None:
                self.proc.kill()
                got = wait_reap(self.proc.pid, 5.0)
            status, ru = got if got else (None, None)
            self.proc.returncode = os.waitstatus_to_exitcode(status) if got else -9
        self.err.seek(0)
        text = self.err.read()
        self.err.close()
        self.proc.stdout.close()
        return (cpu_of(ru) if ru else None), self.proc.returncode, text


def check_server(build, system, port, pins):
    """Before measuring: a server must answer pipelined requests split at odd places, and
    a request cut in two only once whole. Returns None or what went wrong."""
    import socket
    command, prefix = launch(build, system, pins)
    srv = Server(command, port, prefix, ready_timeout(system))
    if not srv.ready or not srv.port:
        _, rc, err = srv.stop()
        return f"did not start (exit {rc}): {err.strip()[-300:]}"
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    pieces = [req * 2 + req[:7], req[7:] + req[:-1], b"\n" + req[:-2], b"\r", b"\n"]
    why = None
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            got = b""
            for i, piece in enumerate(pieces):
                sock.sendall(piece)
                want = [2, 3, 4, 4, 5][i]
                deadline = time.monotonic() + 5
                while got.count(b"hello") < want and time.monotonic() < deadline:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                if got.count(b"hello") != want or not got.startswith(b"HTTP/1.1 200 "):
                    why = f"after piece {i + 1}: {got.count(b'hello')} responses, not {want}"
                    break
            if why is None:
                sock.settimeout(0.2)
                try:
                    extra = sock.recv(65536)
                except socket.timeout:
                    extra = b""
                if extra:
                    why = f"{len(extra)} bytes beyond the 5 responses"
    except OSError as e:
        why = f"socket: {e}"
    _, rc, err = srv.stop()
    if why is None and rc != 0:
        why = f"exited with {rc} on SIGTERM: {err.strip()[-300:]}"
    return why


# The close-while-at-worker check: work long enough that every request is still at a worker
# when its client has closed, on this many connections.
CLOSE_CHECK_WORK_US = 20000


CLOSE_CHECK_CONNS = 16


def ready_timeout(system):
    """Seconds a server has to print its ready line: a Python server imports its packages
    first, which on a loaded 2-vCPU machine takes seconds."""
    return 30.0 if is_pyserver(system) else 10.0


def launch(build, system, pins, work_us=None):
    """(command, command prefix) that start system's server; the server takes "--port N"
    after the command."""
    if is_pyserver(system):
        return py_command(system), pins[0]
    binary, args, _ = SYSTEMS[system]
    command = [os.path.join(build, binary)] + args
    if not is_offload(system):
        return command, pins[0]
    work = OFFLOAD["work_us"] if work_us is None else work_us
    return (command + ["--workers", str(OFFLOAD["workers"]), "--work-us", str(work)] +
            offload_placement(pins), [])


def check_offload_close(build, system, port, pins):
    """Before measuring an offload server: clients that send a request and close (half of
    them with a reset) while the request is at a worker (each takes CLOSE_CHECK_WORK_US),
    then a fresh connection that must be answered, then SIGTERM while one more request is at
    a worker: the server must exit 0 and have freed every connection (it counts the
    requests of a connection when it frees it). Returns None or what went wrong."""
    import socket
    import struct
    command, prefix = launch(build, system, pins, CLOSE_CHECK_WORK_US)
    srv = Server(command, port, prefix)
    if not srv.ready or not srv.port:
        _, rc, err = srv.stop()
        return f"did not start (exit {rc}): {err.strip()[-300:]}"
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    why, sure, sent, last = None, 0, 0, None
    try:
        for i in range(CLOSE_CHECK_CONNS):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
                n = 1 + i % 2
                sock.sendall(req * n)
                sent += n
                if i % 4 >= 2:  # a reset: the server may find the error before the data
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                else:
                    sure += n
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(req)
            got = b""
            while got.count(b"hello") < 1:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
            if got.count(b"hello") != 1:
                why = f"a connection opened after the closed ones got {got!r:.80}"
        sure += 1
        sent += 1
        # One more, whose request is at a worker (or queued) when SIGTERM comes.
        last = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        last.sendall(req)
        sent += 1
        time.sleep(0.005)
    except OSError as e:
        why = f"socket: {e}"
    _, rc, err = srv.stop()
    if last:
        last.close()
    if rc != 0:  # a sanitizer's report, say: it explains a socket error too
        san = re.search(r"^.*ERROR: \w+Sanitizer.*$", err, re.M)
        why = ((why + "; server " if why else "") + f"exited with {rc}: " +
               (san.group(0) if san else err.strip()[-300:]))
    m = re.search(r"(\d+) requests on (\d+) connections", err)
    conns = (CLOSE_CHECK_CONNS + 1, CLOSE_CHECK_CONNS + 2)  # the last may not be accepted yet
    if why is None and not m:
        why = f"no request count at exit: {err.strip()[-300:]}"
    elif why is None and not (sure <= int(m.group(1)) <= sent and int(m.group(2)) in conns):
        why = (f"freed connections counted {m.group(1)} requests on {m.group(2)} connections, "
               f"not {sure}-{sent} on {conns[0]}-{conns[1]}")
    return why
