"""A scripted executor: speaks the attach protocol over a real socket so tests can drive
the leader's assignment and fencing precisely (the real executor is tested end to end)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc

from sluiceway.api.v1 import common_pb2, executor_pb2, executor_pb2_grpc

T = TypeVar("T")


class ExecutorPeer:
    def __init__(
        self,
        address: str,
        executor_id: str,
        *,
        auto_ack: bool = True,
        heartbeat: float | None = 0.3,
        running: list[executor_pb2.RunningTask] | None = None,
        token: str | None = None,
    ) -> None:
        self.id = executor_id
        self.auto_ack = auto_ack
        self._outgoing: queue.Queue[executor_pb2.ExecutorMessage | None] = queue.Queue()
        self._lock = threading.Lock()
        self.assigned: dict[str, executor_pb2.TaskAssignment] = {}
        self.revoked: list[str] = []
        self.events: list[tuple[float, str, str]] = []  # (time, kind, task)
        self.welcome: executor_pb2.Welcome | None = None
        self.fenced: str | None = None
        self.closed = threading.Event()
        self._channel = grpc.insecure_channel(address)
        self.send(
            executor_pb2.ExecutorMessage(
                hello=executor_pb2.Hello(
                    executor_id=executor_id, host="peer", version="test", running_tasks=running or []
                )
            )
        )
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._call = executor_pb2_grpc.ExecutorServiceStub(self._channel).Attach(
            self._requests(), metadata=metadata
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._heartbeat_stop = threading.Event()
        if heartbeat:
            threading.Thread(target=self._beat, args=(heartbeat,), daemon=True).start()

    def _requests(self) -> Iterator[executor_pb2.ExecutorMessage]:
        while True:
            message = self._outgoing.get()
            if message is None:
                return
            yield message

    def _beat(self, interval: float) -> None:
        while not self._heartbeat_stop.wait(interval):
            self.send(
                executor_pb2.ExecutorMessage(
                    heartbeat=executor_pb2.Heartbeat(running_tasks=list(self.assigned))
                )
            )

    def stop_heartbeats(self) -> None:
        self._heartbeat_stop.set()

    def _read(self) -> None:
        try:
            for message in self._call:
                kind = message.WhichOneof("kind")
                with self._lock:
                    if kind == "welcome":
                        self.welcome = message.welcome
                    elif kind == "assignment":
                        for task in message.assignment.tasks:
                            self.assigned[task.task] = task
                            self.events.append((time.monotonic(), "assign", task.task))
                    elif kind == "revocation":
                        for name in message.revocation.tasks:
                            self.revoked.append(name)
                            self.events.append((time.monotonic(), "revoke", name))
                    elif kind == "fenced":
                        self.fenced = message.fenced.reason
                if kind == "revocation" and self.auto_ack:
                    self.ack(list(message.revocation.tasks))
        except grpc.RpcError:
            pass
        finally:
            self.closed.set()

    def send(self, message: executor_pb2.ExecutorMessage) -> None:
        self._outgoing.put(message)

    def ack(self, tasks: list[str]) -> None:
        with self._lock:
            for name in tasks:
                self.assigned.pop(name, None)
                self.events.append((time.monotonic(), "ack", name))
        self.send(executor_pb2.ExecutorMessage(revocation_ack=executor_pb2.RevocationAck(tasks=tasks)))

    def report(self, task: str, state: int, trace: str = "", generation: int | None = None) -> None:
        gen = self.assigned[task].generation if generation is None else generation
        self.send(
            executor_pb2.ExecutorMessage(
                task_status=executor_pb2.TaskStatusReport(task=task, generation=gen, state=state, trace=trace)  # type: ignore[arg-type]
            )
        )

    def running(self) -> list[executor_pb2.RunningTask]:
        """What this peer runs, as a Hello lists it when it attaches again."""
        with self._lock:
            return [
                executor_pb2.RunningTask(
                    task=a.task,
                    generation=a.generation,
                    fingerprint=a.fingerprint,
                    state=common_pb2.STATE_RUNNING,
                )
                for a in self.assigned.values()
            ]

    def goodbye(self) -> None:
        self.send(executor_pb2.ExecutorMessage(goodbye=executor_pb2.Goodbye()))

    def tasks(self) -> set[str]:
        with self._lock:
            return set(self.assigned)

    def close(self) -> None:
        self._heartbeat_stop.set()
        self._outgoing.put(None)
        self._call.cancel()
        self._channel.close()


def wait_for(probe: Callable[[], T | None], timeout: float = 20.0, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or probe}")
