"""The broker side of a chaos run (bus-chaos.py, agent-chaos.py): one broker, or a pair that every
node publishes to and subscribes at (a site's two brokers), and the faults each takes on its own:
killed (-9) and started again on the same ports within 3 s, or stopped (SIGSTOP) for a while."""
from processes import Process, free_port


class Brokers:
    def __init__(self, run, count):
        """`count` brokers on free loopback ports, under `run`'s command, logs and key ("broker": a
        pair shares it)."""
        self.endpoints = [(f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}") for _ in range(count)]
        self.all = [Process(f"broker {index}", [run.options.handoff, "broker", "--frontend", frontend, "--backend", backend,
                                                "--log-level", "warning", *run.key("broker")], run.logs, says_ready=True)
                    for index, (frontend, backend) in enumerate(self.endpoints)]
        self.down_until = {}  # a killed broker -> when it starts again

    def bus_arguments(self):
        """`--broker FRONTEND BACKEND` for each: a node at every broker."""
        return [word for frontend, backend in self.endpoints for word in ("--broker", frontend, backend)]

    def start(self):
        for broker in self.all:
            broker.start()

    def kill(self, broker, now, random):
        """kill -9 (resumed first, so that it dies now); it starts again within 3 s (`restart_due`)."""
        broker.resume()
        broker.kill()
        self.down_until[broker] = now + random.uniform(0, 3)

    def restart_due(self, now):
        for broker, until in list(self.down_until.items()):
            if until <= now:
                broker.start()
                del self.down_until[broker]

    def resume_all(self):
        """Every broker running: resumed, or started again at once."""
        for broker in self.all:
            broker.resume()
            if not broker.alive:
                broker.start()
        self.down_until = {}
