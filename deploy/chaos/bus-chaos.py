#!/usr/bin/env python3
"""Real processes under faults: a broker and advertising nodes, each `handoff` as users run it,
killed (-9), stopped (SIGSTOP) and restarted at random moments while other processes continue
their activities and pull their documents over continuation streams; those are killed and stopped
too, often mid-transfer.

    deploy/chaos/bus-chaos.py --handoff .build/debug/handoff [--seed S] [--seconds 60] [--brokers 2] [--secure]

With `--brokers 2`, a pair of brokers that every node publishes to and subscribes at, each killed
and stopped on its own. With `--secure`, every socket runs CURVE, with an account made for the run.
Now and then the whole site stops at once, gracefully (SIGTERM to every broker and advertiser in the
same moment, continues under way among them), and starts again.

What must hold, checked as it runs:
- no process ends unless this script ended it (a crash, a libzmq abort, an assertion), and one
  asked to stop with SIGTERM exits 0 within 15 s;
- every process stays under 256 MiB resident;
- every continue ends within its bound, either with the document byte for byte (exit 0) or with
  a typed error (`Error: …`, exit 1), never a partial file passed as whole;
- at each checkpoint (faults paused, every stopped process resumed, the broker up), the bus
  converges within 15 s, two and a half leases, to exactly the activities of the advertisers alive
  (none lost, none of a killed one left behind), and each of them continues whole, whatever the
  faults left behind (the streams of killed continuers among them).

The schedule of faults comes from the seed (printed first; `--seed S` runs it again). The timing of
real processes does not replay exactly, so a failure prints the processes' logs as well. Every
process started here dies with this script (parent-death signal, its own process group).
Exit status: 0 when everything held, 1 when something did not, 2 for bad arguments.
"""
import argparse
import dataclasses
import json
import os
import signal
import subprocess
import tempfile
import time

from brokers import Brokers
from chaos import ChaosRun, add_common_arguments, run_main
from processes import Process, die_with_parent

ACTIVITY_TYPE = "org.handoff.chaos.edit"
LEASE_SECONDS = 6  # the handoff command's: three advertise intervals of 2 s
CONVERGE_SECONDS = 15
CONTINUE_BOUND_SECONDS = 90


@dataclasses.dataclass
class Continue:
    """One `handoff continue` pulling an advertiser's document into a folder of its own."""
    popen: subprocess.Popen
    started: float  # monotonic
    activity: str
    document: str
    into: str
    must_succeed: bool  # started with nothing faulted: a refusal fails the run
    stopped_until: float | None = None  # monotonic time of its SIGCONT while stopped

    def signal(self, number):
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, number)

    def resume(self):
        self.signal(signal.SIGCONT)
        self.stopped_until = None


class Chaos(ChaosRun):
    def __init__(self, options):
        super().__init__(options, "bus-chaos")
        # With --secure, a key for the brokers (a pair shares it), one per advertiser slot (a
        # restarted advertiser keeps its slot's), one for the continuing processes, one for the observer.
        self.make_keys(["broker", "continuer", "observer"] + [f"advertiser-{slot}" for slot in range(options.advertisers)])
        self.brokers = Brokers(self, options.brokers)
        self.advertisers = {}  # slot -> (Process, activity id, document path)
        self.generation = 0
        self.continues = []  # Continue, running or not yet judged

    def bus(self, key):
        return self.brokers.bus_arguments() + ["--log-level", "warning", *self.key(key)]

    def start_advertiser(self, slot):
        self.generation += 1
        document = os.path.join(self.work, f"document-{slot}-{self.generation}.bin")
        with open(document, "wb") as file:
            file.write(self.random.randbytes(self.random.randint(64 << 10, 4 << 20)))
        process = Process(f"advertiser {slot} ({self.generation})", [
            self.options.handoff, "advertise", "--type", ACTIVITY_TYPE, "--title", f"slot {slot}",
            "--document", document, "--json", *self.bus(f"advertiser-{slot}")], self.logs).start()
        if not process.first_line.wait(20) or not process.lines:
            self.fail(f"{process.name} did not say what it advertises within 20 s:\n{process.log_tail()}")
            return
        activity = json.loads(process.lines[0])["activityId"]
        self.advertisers[slot] = (process, activity, document)

    def start_continue(self, slot=None, must_succeed=False):
        """Continues an advertiser's activity in a process of its own, pulling its document;
        `must_succeed` when nothing is faulted: a refusal then fails the run."""
        if not self.advertisers:
            return
        _, activity, document = self.advertisers[self.random.choice(sorted(self.advertisers)) if slot is None else slot]
        into = tempfile.mkdtemp(dir=self.work, prefix="into-")
        popen = subprocess.Popen(
            [self.options.handoff, "continue", "--id", activity, "--document-into", into, "--wait", "2", "--json", *self.bus("continuer")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent, start_new_session=True)
        self.continues.append(Continue(popen, time.monotonic(), activity, document, into, must_succeed))
        self.count("continues started")

    def check_continues(self, wait=False):
        """Judges every continue that ended (all of them, with `wait`); one past its bound fails."""
        still = []
        for running in self.continues:
            popen, activity = running.popen, running.activity
            if wait:
                try:
                    popen.wait(max(0.0, running.started + CONTINUE_BOUND_SECONDS - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            if popen.poll() is None:
                if time.monotonic() - running.started > CONTINUE_BOUND_SECONDS:
                    running.signal(signal.SIGKILL)
                    popen.wait()
                    self.fail(f"continuing {activity} did not end within {CONTINUE_BOUND_SECONDS} s")
                else:
                    still.append(running)
                continue
            out, err = popen.communicate()
            text = err.decode(errors="replace")
            document = running.document
            copy = os.path.join(running.into, os.path.basename(document))
            if popen.returncode == 0 and not os.path.exists(copy):
                self.fail(f"continuing {activity} exited 0 with no copy of the document ({copy})")
            elif popen.returncode == 0:
                with open(document, "rb") as original, open(copy, "rb") as pulled:
                    if original.read() != pulled.read():
                        self.fail(f"continuing {activity} exited 0 with a copy unlike the document ({copy})")
                    else:
                        self.count("continues whole")
            elif popen.returncode == 1 and "Error: " in text and running.must_succeed:
                self.fail(f"with nothing faulted, continuing {activity} was refused:\n{text[-2000:]}")
            elif popen.returncode == 1 and "Error: " in text:
                self.refused(text)
            else:
                self.fail(f"continuing {activity} ended with status {popen.returncode} and no typed error:\n{text[-2000:]}")
        self.continues = still

    def listed(self):
        run = subprocess.run([self.options.handoff, "activities", "--type", ACTIVITY_TYPE, "--json", "--wait", "2", *self.bus("observer")],
                             capture_output=True, timeout=60, preexec_fn=die_with_parent)
        return {json.loads(line)["id"] for line in run.stdout.decode().splitlines() if line.startswith("{")}

    def resume_everything(self):
        for running in self.continues:
            running.resume()
        for process, _, _ in self.advertisers.values():
            process.resume()
        self.brokers.resume_all()

    def checkpoint(self, label):
        """Faults paused (every continue under way judged first): within CONVERGE_SECONDS the bus
        lists exactly the live advertisers' activities, and each of them continues whole."""
        self.resume_everything()
        self.check_continues(wait=True)
        expected = {activity for _, activity, _ in self.advertisers.values()}
        deadline = time.monotonic() + CONVERGE_SECONDS
        seen = set()
        while time.monotonic() < deadline:
            seen = self.listed()
            if seen == expected:
                break
            time.sleep(0.5)
        self.count("checkpoints")
        if seen != expected:
            self.fail(f"{label}: the bus did not converge within {CONVERGE_SECONDS} s: missing {sorted(expected - seen)}, "
                      f"left behind {sorted(seen - expected)}")
        # Whatever the faults left behind (streams of killed continuers among them), every live
        # advertiser serves a continue, whole.
        for slot in sorted(self.advertisers):
            self.start_continue(slot, must_succeed=True)
        self.check_continues(wait=True)
        self.check_processes()

    def stop_site(self):
        """SIGTERM to every broker and advertiser at once; each must exit 0 by itself. Then the
        brokers start again, and an advertiser in each slot."""
        self.stop_gracefully(self.processes())
        self.brokers.resume_all()
        for slot in list(self.advertisers):
            self.start_advertiser(slot)

    def processes(self):
        """The brokers and the advertisers alive."""
        return self.brokers.all + [process for process, _, _ in self.advertisers.values()]

    def fault(self):
        """One fault, drawn from the seed."""
        now = time.monotonic()
        kind = self.random.choices(
            ["kill advertiser", "stop advertiser", "kill broker", "stop broker", "continue", "kill continuer", "stop continuer", "stop site"],
            weights=[3, 3, 1, 1, 6, 1, 1, 0.3])[0]
        slot = self.random.randrange(self.options.advertisers)
        broker = self.random.choice(self.brokers.all)
        entry = self.advertisers.get(slot)
        if kind == "kill advertiser" and entry:
            entry[0].kill()
            del self.advertisers[slot]
            if self.random.random() < 0.8:
                self.start_advertiser(slot)
        elif kind == "stop advertiser" and entry and entry[0].stopped_until is None:
            entry[0].stop_for(self.random.uniform(0.2, 2 * LEASE_SECONDS))
        elif kind == "kill broker" and broker.alive:
            self.brokers.kill(broker, now, self.random)
        elif kind == "stop broker" and broker.alive and broker.stopped_until is None:
            broker.stop_for(self.random.uniform(0.2, LEASE_SECONDS))
        elif kind == "continue":
            self.start_continue()
        elif kind == "stop site":
            self.stop_site()
        elif kind == "kill continuer" and self.continues:
            # Mid-transfer, often: its originator must let the stream go and serve the next one.
            killed = self.continues.pop(self.random.randrange(len(self.continues)))
            killed.signal(signal.SIGKILL)
            killed.popen.wait()
        elif kind == "stop continuer" and self.continues:
            stopped = self.random.choice(self.continues)
            if stopped.popen.poll() is None and stopped.stopped_until is None:
                stopped.signal(signal.SIGSTOP)
                stopped.stopped_until = now + self.random.uniform(0.2, 2 * LEASE_SECONDS)
        else:
            return
        self.count(kind)

    def due(self):
        """Resumes what was stopped long enough, restarts the broker after its time down, and
        starts advertisers in empty slots now and then."""
        now = time.monotonic()
        for process in self.processes() + self.continues:
            if process.stopped_until is not None and process.stopped_until <= now:
                process.resume()
        self.brokers.restart_due(now)
        for slot in range(self.options.advertisers):
            if slot not in self.advertisers and self.random.random() < 0.05:
                self.start_advertiser(slot)

    def run(self):
        print(f"bus-chaos: seed {self.options.seed}, {self.options.seconds} s, {len(self.brokers.all)} broker(s), {self.options.advertisers} advertisers, "
              f"{'CURVE' if self.keys else 'no security'}, "
              f"work folder {self.work}", flush=True)
        self.brokers.start()
        time.sleep(0.5)
        for slot in range(self.options.advertisers):
            self.start_advertiser(slot)
        self.checkpoint("the start")
        self.run_faults(pause=(0.05, 1.5))
        if not self.failures and not self.counts.get("continues whole"):
            self.fail("not one continue brought its document whole: the run checked nothing of continuing")
        return self.report()

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--advertisers", type=int, default=4)
    run_main(parser, parser.parse_args(), Chaos)

if __name__ == "__main__":
    main()
