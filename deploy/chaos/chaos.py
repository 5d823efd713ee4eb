"""What the chaos scripts (bus-chaos.py, agent-chaos.py) share: the run's folder, its seeded
randomness, counts and failures, the fault loop with its checkpoints, the end's report, and main's
handling of signals. Each script says what it starts, which faults it draws, and what must hold."""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from processes import Process

MAX_RESIDENT_KIB = 256 << 10  # each process holds 30-40 MiB here; a leak under the faults shows
GRACEFUL_STOP_SECONDS = 15  # a node's stop waits up to 1 s for its withdrawals to leave


class ChaosRun:
    """A run of faults; a script subclasses it with `processes()`, `due()`, `fault()`,
    `check_continues()` and `checkpoint(label)`."""

    def __init__(self, options, name):
        self.options, self.name = options, name
        self.random = random.Random(options.seed)
        self.work = tempfile.mkdtemp(prefix=f"{name}-")
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs)
        self.keys = os.path.join(self.work, "account") if options.secure else None
        self.counts, self.failures = {}, []
        self.refusals = {}  # a refused continue's reason -> the first such error in full

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def fail(self, message):
        self.failures.append(message)
        print(f"FAILED: {message}", flush=True)

    def make_keys(self, names):
        """With --secure, an account: a key each, in one folder that every process takes as its
        account (the broker's key is found there too)."""
        if not self.keys:
            return
        os.makedirs(self.keys)
        for name in names:
            subprocess.run([self.options.handoff, "keygen", name, "--out", self.keys], check=True, capture_output=True)

    def key(self, name):
        return ["--key", os.path.join(self.keys, name + ".key")] if self.keys else []

    def refused(self, text):
        """Counts a continue refused with a typed error (`Error: …` in `text`), keeping the first of
        each reason in full for the report."""
        error = text.split("Error: ", 1)[1]
        reason = error.split(":", 1)[0].split("(")[0].strip()
        self.count(f"continues refused: {reason}")
        self.refusals.setdefault(reason, error.strip().splitlines()[0][:300])

    def check_processes(self):
        for process in self.processes():
            if process.ended_on_its_own():
                self.fail(f"{process.name} ended on its own (status {process.popen.returncode}):\n{process.log_tail()}")
                process.ended_here = True  # reported once

    def stop_gracefully(self, processes):
        """SIGTERM to every one of `processes` alive, all in the same moment (a site or host
        shutting down); each must exit 0 by itself within GRACEFUL_STOP_SECONDS. One still starting
        (restarted a moment ago, before its ready line) may instead die of the SIGTERM, as any
        process does before it traps it; systemd counts that as a clean stop too."""
        running = [process for process in processes if process.alive]
        starting = {process for process in running if process.not_ready_yet}
        for process in running:
            process.terminate()
        for process in running:
            status = process.ended(GRACEFUL_STOP_SECONDS)
            if status == -signal.SIGTERM and process in starting:
                self.count("stopped while starting")
            elif status != 0:
                how = "did not end" if status is None else f"ended with {'signal ' + str(-status) if status < 0 else 'status ' + str(status)}"
                self.fail(f"{process.name} {how} within {GRACEFUL_STOP_SECONDS} s of the site's SIGTERM:\n{process.log_tail()}")

    def run_faults(self, pause):
        """Faults, drawn from the seed, `pause` (a range of seconds) apart, for --seconds, with a
        checkpoint every --checkpoint seconds and one at the end."""
        started = time.monotonic()
        next_checkpoint = started + self.options.checkpoint
        while time.monotonic() - started < self.options.seconds and not self.failures:
            time.sleep(self.random.uniform(*pause))
            self.due()
            self.fault()
            self.check_continues()
            self.check_processes()
            if time.monotonic() >= next_checkpoint:
                self.checkpoint(f"checkpoint at {time.monotonic() - started:.0f} s")
                next_checkpoint = time.monotonic() + self.options.checkpoint
        if not self.failures:
            self.checkpoint("the end")

    def report(self, *lines):
        """Checks every process's memory, prints the counts, `lines`, the first refusal of each kind
        and, on failure, the logs; returns the exit status. The work folder is kept on failure."""
        processes = self.processes()
        memory = ", ".join(f"{p.name} {p.rss_kib() // 1024} MiB" for p in processes)
        for process in processes:
            if process.rss_kib() > MAX_RESIDENT_KIB:
                self.fail(f"{process.name} holds {process.rss_kib() // 1024} MiB resident, over {MAX_RESIDENT_KIB // 1024} MiB")
        print("counts: " + ", ".join(f"{what} {n}" for what, n in sorted(self.counts.items())), flush=True)
        for line in lines:
            print(line, flush=True)
        print(f"resident memory at the end: {memory}", flush=True)
        for reason, error in sorted(self.refusals.items()):
            print(f"the first refusal of each kind: {error}", flush=True)
        if self.failures:
            for process in Process.everyone[-12:]:
                print(f"--- {process.name} ({process.log_path})\n{process.log_tail()}")
            print(f"{self.name}: FAILED, {len(self.failures)} failure(s); seed {self.options.seed}; logs in {self.work}")
            return 1
        print(f"{self.name}: passed (seed {self.options.seed})")
        Process.end_everyone()
        shutil.rmtree(self.work, ignore_errors=True)
        return 0


def add_common_arguments(parser):
    parser.add_argument("--handoff", default=".build/debug/handoff", help="the handoff command to run")
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 31))
    parser.add_argument("--seconds", type=float, default=60, help="how long faults go on")
    parser.add_argument("--checkpoint", type=float, default=20, help="seconds of faults between checkpoints")
    parser.add_argument("--secure", action="store_true", help="CURVE on every socket: an account of keys made here")
    parser.add_argument("--brokers", type=int, choices=[1, 2], default=1, help="2: a pair, every node at both")


def run_main(parser, options, make_run):
    """Runs `make_run(options).run()` and exits with its status; an interrupt ends every process
    started, as does any other way out."""
    if not os.access(options.handoff, os.X_OK):
        parser.error(f"no handoff command at {options.handoff} (swift build --product handoff)")
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: sys.exit(1))
    try:
        sys.exit(make_run(options).run())
    finally:
        Process.end_everyone()
