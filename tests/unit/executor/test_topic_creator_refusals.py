"""TopicCreator's answer to each Kafka error of DescribeTopics and CreateTopics: a missing permission
or a call the broker lacks is warned about once per topic and the task goes on; anything else fails
the task. The admin client is a stand-in that answers with the given KafkaError values; what the
task then writes against a real broker is in tests/integration/test_topic_creation_refused.py."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.cimpl import NewTopic

from sluiceway.connect import ConnectException
from sluiceway_executor.topic_creation import TopicCreator, refusal

WORKER = {"bootstrap.servers": "127.0.0.1:9", "group.id": "cluster"}
CONNECTOR = {
    "topic": "t",
    "topic.creation.default.replication.factor": "-1",
    "topic.creation.default.partitions": "2",
}
LOGGER = "sluiceway_executor.topic_creation"

GO_ON = [
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._UNSUPPORTED_FEATURE,
    KafkaError.INVALID_REQUEST,
]
# Refusals that are not about permissions or missing calls: the task fails as before.
FAIL = [
    KafkaError.POLICY_VIOLATION,
    KafkaError.INVALID_CONFIG,
    KafkaError.INVALID_REPLICATION_FACTOR,
    KafkaError.INVALID_PARTITIONS,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._INVALID_ARG,
]


def failed(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


def _future(outcome: BaseException | None) -> Future[Any]:
    future: Future[Any] = Future()
    if outcome is None:
        future.set_result(None)
    else:
        future.set_exception(outcome)
    return future


class Admin:
    """Answers DescribeTopics and CreateTopics from the given outcomes; counts the calls.

    ``existing`` topics describe fine, the others are unknown unless ``describe`` says otherwise;
    creations succeed unless ``create`` says otherwise; ``*_call`` is raised by the call itself."""

    def __init__(
        self,
        *,
        existing: tuple[str, ...] = (),
        describe: dict[str, BaseException] | None = None,
        create: dict[str, BaseException] | None = None,
        describe_call: BaseException | None = None,
        create_call: BaseException | None = None,
    ) -> None:
        self.existing = set(existing)
        self.describe = describe or {}
        self.create = create or {}
        self.describe_call = describe_call
        self.create_call = create_call
        self.described: list[list[str]] = []
        self.created: list[list[str]] = []

    def describe_topics(self, topics: TopicCollection, **kwargs: Any) -> dict[str, Future[Any]]:
        names = list(topics.topic_names)
        self.described.append(names)
        if self.describe_call is not None:
            raise self.describe_call
        return {
            name: _future(
                self.describe.get(name)
                or (None if name in self.existing else failed(KafkaError.UNKNOWN_TOPIC_OR_PART))
            )
            for name in names
        }

    def create_topics(self, new_topics: list[NewTopic], **kwargs: Any) -> dict[str, Future[Any]]:
        names = [t.topic for t in new_topics]
        self.created.append(names)
        if self.create_call is not None:
            raise self.create_call
        return {name: _future(self.create.get(name)) for name in names}


def creator(admin: Admin) -> TopicCreator:
    return TopicCreator(WORKER, CONNECTOR, task="task 0 of src", timeout=2, admin=admin)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.mark.parametrize("code", GO_ON)
def test_a_refused_creation_is_warned_about_once_and_the_task_goes_on(
    code: int, caplog: pytest.LogCaptureFixture
) -> None:
    admin = Admin(create={"orders": failed(code)})
    topics = creator(admin)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        topics.ensure(["orders"])
        topics.ensure(["orders"])
    # Met after the first batch: the second asks Kafka nothing and warns no more.
    assert admin.described == [["orders"]]
    assert admin.created == [["orders"]]
    (warning,) = warnings(caplog)
    assert "task 0 of src" in warning
    assert "'orders'" in warning
    assert "without being created first" in warning
    assert KafkaError(code).name() in warning
    assert "the write fails with the broker's error" in warning


@pytest.mark.parametrize("code", GO_ON)
def test_a_refused_lookup_is_warned_about_once_and_nothing_is_created(
    code: int, caplog: pytest.LogCaptureFixture
) -> None:
    admin = Admin(describe={"orders": failed(code)})
    topics = creator(admin)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        topics.ensure(["orders"])
        topics.ensure(["orders"])
    assert admin.described == [["orders"]]
    assert admin.created == []
    (warning,) = warnings(caplog)
    assert "'orders'" in warning and "without being looked up first" in warning


def test_the_warning_names_the_permission_that_was_missing() -> None:
    topic_denied = failed(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    cluster_denied = failed(KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    assert refusal("Describe", "orders", topic_denied) == (
        "the producer's principal needs Describe on topic 'orders' (TOPIC_AUTHORIZATION_FAILED)"
    )
    assert refusal("Create", "orders", topic_denied) == (
        "the producer's principal needs Create on topic 'orders' or on the cluster "
        "(TOPIC_AUTHORIZATION_FAILED)"
    )
    assert refusal("Create", "orders", cluster_denied) == (
        "the producer's principal needs Create on the cluster or on topic 'orders' "
        "(CLUSTER_AUTHORIZATION_FAILED)"
    )
    assert refusal("Create", "orders", failed(KafkaError.UNSUPPORTED_VERSION)) == (
        "the broker does not support CreateTopics (UNSUPPORTED_VERSION)"
    )
    assert refusal("Describe", "orders", failed(KafkaError._UNSUPPORTED_FEATURE)) == (
        "the broker does not support DescribeTopics (_UNSUPPORTED_FEATURE)"
    )


@pytest.mark.parametrize("code", FAIL)
def test_every_other_refusal_fails_the_task(code: int) -> None:
    assert refusal("Create", "orders", failed(code)) is None
    with pytest.raises(ConnectException) as created:
        creator(Admin(create={"orders": failed(code)})).ensure(["orders"])
    assert "'orders'" in str(created.value) and "did not create it" in str(created.value)
    with pytest.raises(ConnectException) as described:
        creator(Admin(describe={"orders": failed(code)})).ensure(["orders"])
    assert "could not look it up" in str(described.value)


def test_errors_that_are_not_kafka_errors_fail_the_task() -> None:
    assert refusal("Create", "orders", TimeoutError()) is None
    assert refusal("Create", "orders", KafkaException("no error inside")) is None


def test_a_refusal_of_the_whole_request_lets_every_topic_of_it_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin = Admin(create_call=failed(KafkaError.CLUSTER_AUTHORIZATION_FAILED))
    topics = creator(admin)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        topics.ensure(["a", "b"])
        topics.ensure(["a", "b"])
    assert admin.created == [["a", "b"]]
    assert len(warnings(caplog)) == 2
    assert all("Create on the cluster" in w for w in warnings(caplog))

    lookup = Admin(describe_call=failed(KafkaError._UNSUPPORTED_FEATURE))
    creator(lookup).ensure(["a"])
    assert lookup.created == []
    with pytest.raises(ConnectException):
        creator(Admin(create_call=failed(KafkaError.POLICY_VIOLATION))).ensure(["a"])


def test_in_one_batch_the_other_topics_are_still_created_and_found(caplog: pytest.LogCaptureFixture) -> None:
    admin = Admin(
        existing=("kept",),
        create={"denied": failed(KafkaError.TOPIC_AUTHORIZATION_FAILED)},
    )
    topics = creator(admin)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        topics.ensure(["kept", "denied", "made"])
        topics.ensure(["kept", "denied", "made", "later"])
    assert admin.described == [["denied", "kept", "made"], ["later"]]
    assert admin.created == [["denied", "made"], ["later"]]
    (warning,) = warnings(caplog)
    assert "'denied'" in warning
