"""The processes the chaos scripts (bus-chaos.py, agent-chaos.py) start: each in its own process
group, dying with the script (parent-death signal), its output in a log file of its own."""
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: SIGKILL when this script's thread ends


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Process:
    """One `handoff` process: started in its own process group, its output in a log file."""

    everyone = []

    def __init__(self, name, argv, logs, says_ready=False):
        """`says_ready`: its first line on standard output says that it is ready (a broker's)."""
        self.name, self.argv, self.says_ready = name, argv, says_ready
        self.log_path = os.path.join(logs, name.replace(" ", "-") + ".log")
        self.popen = None
        self.ended_here = False  # this script killed it, or it was asked to end
        self.stopped_until = None  # monotonic time of its SIGCONT while stopped
        self.lines = []
        self.first_line = threading.Event()
        Process.everyone.append(self)

    def start(self):
        log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent, start_new_session=True)
        log.close()
        self.ended_here, self.stopped_until = False, None
        self.lines, self.first_line = [], threading.Event()
        threading.Thread(target=self._read, args=(self.popen, self.lines, self.first_line), daemon=True).start()
        return self

    def _read(self, popen, lines, first_line):
        with open(self.log_path, "ab") as log:
            for raw in popen.stdout:
                log.write(b"stdout: " + raw)
                log.flush()
                lines.append(raw.decode(errors="replace"))
                first_line.set()
        first_line.set()

    @property
    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def signal(self, number):
        if self.alive:
            os.killpg(self.popen.pid, number)

    def kill(self):
        self.ended_here = True
        self.signal(signal.SIGKILL)
        if self.popen:
            self.popen.wait()

    def terminate(self):
        """SIGTERM (resumed first, so that it handles it now): a graceful stop, waited for by `ended`."""
        self.ended_here = True
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)

    def ended(self, timeout):
        """Its exit status once it ends within `timeout` seconds (negative: the signal that ended
        it), or None if it still runs, then killed."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def stop_for(self, seconds):
        self.signal(signal.SIGSTOP)
        self.stopped_until = time.monotonic() + seconds

    def resume(self):
        self.signal(signal.SIGCONT)
        self.stopped_until = None

    @property
    def not_ready_yet(self):
        """It says when it is ready, and has not yet: still starting, its signal handlers maybe
        not in place."""
        return self.says_ready and not self.lines

    def ended_on_its_own(self):
        return self.popen is not None and self.popen.poll() is not None and not self.ended_here

    def rss_kib(self):
        try:
            with open(f"/proc/{self.popen.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return ""

    @classmethod
    def end_everyone(cls):
        for process in cls.everyone:
            if process.alive:
                process.signal(signal.SIGCONT)
                process.kill()
