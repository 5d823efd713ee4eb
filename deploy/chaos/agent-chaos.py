#!/usr/bin/env python3
"""The contacts story under faults: a broker and three `handoff agent` processes hosting the
Contacts plugin (the seeds' app, `handoff demo`), each killed (-9), stopped (SIGSTOP) and restarted
on its own data folder at random moments, while contacts are added on one agent, which shares its
list, and the other two continue the list (a continuation stream each) again and again.

    deploy/chaos/agent-chaos.py --handoff .build/debug/handoff [--seed S] [--seconds 60] [--brokers 2] [--secure]

With `--brokers 2`, a pair of brokers that every agent publishes to and subscribes at (a site's
two brokers), each killed, stopped and restarted on its own, sometimes both at once.

Now and then the whole site stops at once, gracefully (SIGTERM to every broker and agent in the
same moment, as a host's shutdown does), and starts again: each must end by itself, with status 0,
within 15 s (libzmq 4.3.4 aborted a broker stopping as its subscribers dropped, before its sending
sockets lingered: docs/operations.md).

With `--secure`, the broker and the agents run CURVE on every bus and continuation socket, with an
account made for the run (a key each, as `handoff demo` makes them).

The Contacts plugin must sit next to the handoff command (libHandoffContactsPlugin.so, as `handoff
demo` expects it: `swift build` puts it there).

What must hold, checked as it runs:
- no process ends unless this script ended it, and each stays under 256 MiB resident;
- nothing accepted is lost: every contact whose `add` answered with its id is in the sharing
  agent's list from then on, whatever kill -9 came after (the plugin writes atomically);
- a continuing agent's list is always whole: its contacts are the first contacts of the sharing
  agent's list, in order (a list replaces the local one only after its stream checked out), and
  every agent answers `list` whenever it runs, a kill -9 mid-stream or not;
- every continue ends within its bound, continued (exit 0) or with a typed error (`Error: …`),
  and never because a stream's stall timeout gave up on a peer whose application works, nor on a
  checksum mismatch (each agent ends its streams in another algorithm: SHA-256, CRC-32C, XXH64);
- a site stopped with SIGTERM ends cleanly: every broker and agent exits 0 within 15 s;
- at each checkpoint (faults paused, everything resumed and running), the sharing agent shares
  again and both others continue it: each then lists exactly the sharing agent's contacts.

The schedule of faults comes from the seed (printed first; `--seed S` runs it again). Every process
started here dies with this script (parent-death signal, its own process group).
Exit status: 0 when everything held, 1 when something did not, 2 for bad arguments.
"""
import argparse
import os
import signal
import subprocess
import time

from brokers import Brokers
from chaos import ChaosRun, add_common_arguments, run_main
from processes import Process, die_with_parent

LIST_TYPE = "org.handoff.contacts.list-contacts"
LEASE_SECONDS = 6  # the agent's: three advertise intervals of 2 s
CONTINUE_BOUND_SECONDS = 90
# Every agent gives up on a stream pair whose peer stays connected without progress this long. No
# application here ever stalls (the plugin writes and reads at once), and a stopped agent is silent
# past the 5 s idle timeout well before this, so a pair given up on for stalling is a false stall.
STALL_SECONDS = 10
# Each agent's streams end in another of the contract's checksums: every continue reads a list
# written in another algorithm than its own, and must verify it.
CHECKSUMS = {"agent-a": "sha256", "agent-b": "crc32c", "agent-c": "xxh64"}
COMMAND_SECONDS = 10  # a control command to a running agent answers well within this
SHARER, CONTINUERS = "agent-a", ["agent-b", "agent-c"]


class Chaos(ChaosRun):
    def __init__(self, options):
        super().__init__(options, "agent-chaos")
        plugins = os.path.join(self.work, "plugins")
        os.makedirs(plugins)
        library = os.path.join(os.path.dirname(os.path.abspath(options.handoff)), "libHandoffContactsPlugin.so")
        os.symlink(library, os.path.join(plugins, "libHandoffContactsPlugin.so"))
        self.make_keys(["broker", SHARER] + CONTINUERS)  # a pair shares the broker's key
        self.brokers = Brokers(self, options.brokers)
        self.agents, self.controls = {}, {}
        # Why the last `contacts` command to each agent got no list (a timeout, or its typed error).
        self.last_unanswered = {}
        for name in [SHARER] + CONTINUERS:
            self.controls[name] = f"ipc://{self.work}/{name}.sock"
            self.agents[name] = Process(name, [
                options.handoff, "agent", "--name", name, *self.brokers.bus_arguments(), "--plugins", plugins,
                "--data", os.path.join(self.work, "data", name), "--control", self.controls[name],
                "--stream-stall-timeout", str(STALL_SECONDS), "--stream-checksum", CHECKSUMS[name],
                "--log-level", "warning", *self.key(name)], self.logs)
        self.down_until = {}  # agent name -> when it starts again
        self.added = 0  # contacts asked for, numbered in their first name
        self.acknowledged = []  # (number, id) of each add that answered with its id
        self.continues = []  # (Popen, agent, started)

    def running(self, name):
        agent = self.agents[name]
        return agent.alive and agent.stopped_until is None

    def contacts(self, name, *arguments, timeout=COMMAND_SECONDS):
        """`handoff contacts --agent …`: (status, lines), status None when it did not answer in time."""
        try:
            run = subprocess.run([self.options.handoff, "contacts", "--agent", self.controls[name], *arguments],
                                 capture_output=True, timeout=timeout, preexec_fn=die_with_parent, start_new_session=True)
        except subprocess.TimeoutExpired:
            self.last_unanswered[name] = f"`contacts {' '.join(arguments)}` got no answer within {timeout} s"
            return None, []
        if run.returncode == 1:
            self.last_unanswered[name] = f"`contacts {' '.join(arguments)}`: {run.stderr.decode(errors='replace').strip()[-500:]}"
        if run.returncode not in (0, 1) or (run.returncode == 1 and b"Error: " not in run.stderr):
            self.fail(f"`contacts {' '.join(arguments)}` on {name} ended with status {run.returncode} and no typed error:\n"
                      f"{run.stderr.decode(errors='replace')[-1500:]}")
        return run.returncode, run.stdout.decode(errors="replace").splitlines()

    def listed(self, name):
        """The agent's contacts as (number, id) in its order, or None when it did not answer."""
        status, lines = self.contacts(name, "list")
        if status != 0:
            return None
        numbered = []
        for line in lines:
            fields = line.split("\t")
            # id, name ("First12 Last12"), phone, email: the number is the add's.
            numbered.append((int(fields[1].split()[0].removeprefix("First")), fields[0]))
        return numbered

    def start_agent(self, name):
        agent = self.agents[name].start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.contacts(name, "list", timeout=3)[0] == 0:
                if name == SHARER:
                    self.share()
                return
            if not agent.alive:
                break
        self.fail(f"{name} did not answer its control socket within 30 s:\n{agent.log_tail()}")

    def add(self):
        self.added += 1
        number = self.added
        status, lines = self.contacts(SHARER, "add", f"First{number}", f"Last{number}", f"+1-555-{number:04d}", f"c{number}@example.org")
        if status == 0 and lines:
            self.acknowledged.append((number, lines[0].strip()))
            self.count("adds acknowledged")

    def share(self):
        if self.contacts(SHARER, "share")[0] == 0:
            self.count("shares")

    def start_continue(self, name):
        popen = subprocess.Popen([self.options.handoff, "continue", "--agent", self.controls[name], "--type", LIST_TYPE],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                 preexec_fn=die_with_parent, start_new_session=True)
        self.continues.append((popen, name, time.monotonic()))
        self.count("continues started")

    def check_continues(self, wait=False, must_succeed=False):
        still = []
        for popen, name, started in self.continues:
            if wait:
                try:
                    popen.wait(max(0.0, started + CONTINUE_BOUND_SECONDS - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            if popen.poll() is None:
                if time.monotonic() - started > CONTINUE_BOUND_SECONDS:
                    os.killpg(popen.pid, signal.SIGKILL)
                    popen.wait()
                    self.fail(f"{name}'s continue of the list did not end within {CONTINUE_BOUND_SECONDS} s")
                else:
                    still.append((popen, name, started))
                continue
            _, err = popen.communicate()
            text = err.decode(errors="replace")
            if popen.returncode == 0:
                self.count("continues done")
            elif "stall timeout" in text:
                self.fail(f"{name}'s continue of the list was given up on for stalling, though every application here works:\n{text[-2000:]}")
            elif "checksum mismatch" in text:
                # Faults cut streams short (truncated, peer lost); no fault here changes a byte.
                self.fail(f"{name}'s continue of the list failed its checksum, though nothing here changes bytes:\n{text[-2000:]}")
            elif popen.returncode == 1 and "Error: " in text and not must_succeed:
                self.refused(text)
            else:
                self.fail(f"{name}'s continue of the list ended with status {popen.returncode}"
                          f"{' with nothing faulted' if must_succeed else ' and no typed error'}:\n{text[-2000:]}")
        self.continues = still

    def check_lists(self, label):
        """The invariants that hold at any moment: the sharer keeps every acknowledged contact, and
        each other agent's list is the first contacts of the sharer's, in order."""
        shared = self.listed(SHARER) if self.running(SHARER) else None
        if shared is not None:
            kept = {identifier for _, identifier in shared}
            lost = [entry for entry in self.acknowledged if entry[1] not in kept]
            if lost:
                self.fail(f"{label}: {SHARER} lost acknowledged contacts {lost[:5]} ({len(lost)} in all)")
        for name in CONTINUERS:
            if not self.running(name):
                continue
            theirs = self.listed(name)
            if theirs is None:
                if self.running(name):
                    self.fail(f"{label}: {name} did not list its contacts ({self.last_unanswered.get(name, 'no reason kept')}):\n"
                              f"{self.agents[name].log_tail()}")
                continue
            self.count("lists checked")
            if shared is not None and theirs != shared[:len(theirs)]:
                self.fail(f"{label}: {name}'s {len(theirs)} contacts are not the first of {SHARER}'s {len(shared)}: "
                          f"{theirs[:3]}… against {shared[:3]}…")

    def resume_everything(self):
        self.brokers.resume_all()
        for name, agent in self.agents.items():
            agent.resume()
            if not agent.alive:
                self.start_agent(name)
        self.down_until = {}

    def checkpoint(self, label):
        self.resume_everything()
        self.check_continues(wait=True)
        self.check_lists(label)
        self.share()
        time.sleep(LEASE_SECONDS / 2)  # the shared list's newest version on the bus
        for name in CONTINUERS:
            self.start_continue(name)
        self.check_continues(wait=True, must_succeed=True)
        shared = self.listed(SHARER)
        for name in CONTINUERS:
            theirs = self.listed(name)
            if shared is None or theirs != shared:
                self.fail(f"{label}: after continuing, {name}'s list ({None if theirs is None else len(theirs)} contacts) "
                          f"is not {SHARER}'s ({None if shared is None else len(shared)})")
        self.check_lists(label)
        self.check_processes()
        self.count("checkpoints")

    def stop_site(self):
        """SIGTERM to every broker and agent at once; each must exit 0 by itself. Then all start again."""
        self.stop_gracefully(self.processes())
        self.brokers.resume_all()
        time.sleep(0.5)
        for name in self.agents:
            self.start_agent(name)
        self.down_until = {}

    def processes(self):
        return self.brokers.all + list(self.agents.values())

    def fault(self):
        now = time.monotonic()
        kind = self.random.choices(["add", "continue", "check lists", "share", "kill agent", "stop agent", "kill broker", "stop broker", "stop site"],
                                   weights=[8, 4, 2, 1, 2, 2, 1, 1, 0.4])[0]
        name = self.random.choice([SHARER] + CONTINUERS)
        agent = self.agents[name]
        broker = self.random.choice(self.brokers.all)
        if kind == "add" and self.running(SHARER):
            self.add()
        elif kind == "continue" and self.running(name) and name != SHARER:
            self.start_continue(name)
        elif kind == "check lists":
            self.check_lists("between faults")
        elif kind == "share" and self.running(SHARER):
            self.share()
        elif kind == "kill agent" and agent.alive:
            agent.resume()
            agent.kill()
            self.down_until[name] = now + self.random.uniform(0, 3)
        elif kind == "stop agent" and agent.alive and agent.stopped_until is None:
            agent.stop_for(self.random.uniform(0.2, 2 * LEASE_SECONDS))
        elif kind == "kill broker" and broker.alive:
            self.brokers.kill(broker, now, self.random)
        elif kind == "stop broker" and broker.alive and broker.stopped_until is None:
            broker.stop_for(self.random.uniform(0.2, LEASE_SECONDS))
        elif kind == "stop site":
            self.stop_site()
        else:
            return
        self.count(kind)

    def due(self):
        now = time.monotonic()
        for process in self.processes():
            if process.stopped_until is not None and process.stopped_until <= now:
                process.resume()
        self.brokers.restart_due(now)
        for name, until in list(self.down_until.items()):
            if until <= now:
                del self.down_until[name]
                self.start_agent(name)

    def run(self):
        print(f"agent-chaos: seed {self.options.seed}, {self.options.seconds} s, {'a broker' if len(self.brokers.all) == 1 else 'a broker pair'} "
              f"and agents {SHARER} (adds and shares), "
              f"{', '.join(CONTINUERS)} (continue the list), {'CURVE' if self.keys else 'no security'}, work folder {self.work}", flush=True)
        self.brokers.start()
        time.sleep(0.5)
        for name in self.agents:
            self.start_agent(name)
        for _ in range(5):
            self.add()
        self.checkpoint("the start")
        self.run_faults(pause=(0.05, 0.5))
        return self.report(f"contacts: {self.added} asked for, {len(self.acknowledged)} acknowledged")

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    options = parser.parse_args()
    library = os.path.join(os.path.dirname(os.path.abspath(options.handoff)), "libHandoffContactsPlugin.so")
    if os.access(options.handoff, os.X_OK) and not os.path.exists(library):
        parser.error(f"no Contacts plugin at {library} (swift build --product HandoffContactsPlugin)")
    run_main(parser, options, Chaos)

if __name__ == "__main__":
    main()
