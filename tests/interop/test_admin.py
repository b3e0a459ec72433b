"""Admin APIs through confluent-kafka's AdminClient (plus kafka-python for the
offset-out-of-range check): CreateTopics, Metadata, CreatePartitions,
DeleteTopics, DescribeConfigs, IncrementalAlterConfigs, AlterConfigs,
DescribeCluster, DeleteRecords."""

import kafka
import kafka.errors
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic, ResourceType)

from clients import (Msg, ck_admin, ck_consume, ck_consumer, ck_produce, ck_topic_partitions,
                     ck_watermarks, kp_consumer, make_messages, wait_until)

T = 10  # seconds for any admin future (a healthy local broker answers in milliseconds)


def _error_code(future):
    """Run an admin future that must fail; return its Kafka error code."""
    with pytest.raises(KafkaException) as ei:
        future.result(timeout=T)
    return ei.value.args[0].code()


def _create(admin, name, partitions=1, config=None):
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                       config=config or {})], operation_timeout=10, request_timeout=T)
    fs[name].result(timeout=T)


def _describe(admin, name):
    res = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([res], request_timeout=T)[res].result(timeout=T)


def _incremental(admin, name, ops):
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    return admin.incremental_alter_configs([res], request_timeout=T)[res]


SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


@pytest.mark.single_node
def test_create_list_grow_and_delete_topic(shared_broker, topic_name):
    bootstrap = shared_broker.bootstrap
    admin = ck_admin(bootstrap)
    _create(admin, topic_name, partitions=3)

    md = wait_until(lambda: admin.list_topics(timeout=10).topics.get(topic_name), timeout=10,
                    message="topic in metadata")
    assert md.error is None
    assert sorted(md.partitions) == [0, 1, 2]
    for p in md.partitions.values():
        assert p.error is None and p.leader == 0 and p.replicas == [0] and p.isrs == [0]

    # creating it again
    fs = admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1)],
                             request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.TOPIC_ALREADY_EXISTS

    # grow to 5; shrinking is not allowed
    admin.create_partitions([NewPartitions(topic_name, 5)], request_timeout=T)[topic_name].result(timeout=T)
    wait_until(lambda: ck_topic_partitions(bootstrap, topic_name) == 5, timeout=10,
               message="5 partitions in metadata")
    fs = admin.create_partitions([NewPartitions(topic_name, 2)], request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.INVALID_PARTITIONS
    assert ck_topic_partitions(bootstrap, topic_name) == 5

    # the new partitions are usable
    ck_produce(bootstrap, topic_name, make_messages(10, with_nulls=False), partition=4)
    assert ck_watermarks(bootstrap, topic_name, partition=4) == (0, 10)

    admin.delete_topics([topic_name], operation_timeout=10, request_timeout=T)[topic_name].result(timeout=T)
    wait_until(lambda: topic_name not in admin.list_topics(timeout=10).topics, timeout=10,
               message="deleted topic to disappear from metadata")


def test_create_partitions_of_unknown_topic_fails(shared_broker, topic_name):
    admin = ck_admin(shared_broker.bootstrap)
    fs = admin.create_partitions([NewPartitions(topic_name, 4)], request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_unknown_topic_fails(shared_broker, topic_name):
    admin = ck_admin(shared_broker.bootstrap)
    fs = admin.delete_topics([topic_name], request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.parametrize("name", ["bad/name", "..", ".", "has space", "x" * 250],
                         ids=["slash", "dotdot", "dot", "space", "too-long"])
def test_invalid_topic_name_is_rejected(shared_broker, name):
    admin = ck_admin(shared_broker.bootstrap)
    fs = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)],
                             request_timeout=T)
    assert _error_code(fs[name]) == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, 17
    assert name not in admin.list_topics(timeout=10).topics


def test_zero_partitions_is_rejected(shared_broker, topic_name):
    admin = ck_admin(shared_broker.bootstrap)
    fs = admin.create_topics([NewTopic(topic_name, num_partitions=0, replication_factor=1)],
                             request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.INVALID_PARTITIONS
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_describe_and_alter_topic_configs(shared_broker, topic_name):
    admin = ck_admin(shared_broker.bootstrap)
    _create(admin, topic_name, config={"retention.ms": "86400000"})

    configs = _describe(admin, topic_name)
    for key in ("retention.ms", "retention.bytes", "segment.bytes", "max.message.bytes",
                "flush.policy"):
        assert key in configs, "%s missing from DescribeConfigs: %s" % (key, sorted(configs))
    # a config given at creation time is reported
    assert configs["retention.ms"].value == "86400000"
    default_max_message_bytes = configs["max.message.bytes"].value

    _incremental(admin, topic_name, [("retention.ms", "3600000", SET),
                                     ("max.message.bytes", "2048000", SET),
                                     ("flush.policy", "interval:100", SET)]).result(timeout=T)
    configs = _describe(admin, topic_name)
    assert configs["retention.ms"].value == "3600000"
    assert configs["max.message.bytes"].value == "2048000"
    assert configs["flush.policy"].value == "interval:100"
    assert not configs["retention.ms"].is_default

    # DELETE reverts to the default
    _incremental(admin, topic_name, [("max.message.bytes", None, DELETE)]).result(timeout=T)
    configs = _describe(admin, topic_name)
    assert configs["max.message.bytes"].value == default_max_message_bytes
    assert configs["retention.ms"].value == "3600000"  # untouched


@pytest.mark.parametrize("key,value", [
    ("retention.ms", "abc"),
    ("max.message.bytes", "-5"),
    ("segment.bytes", "lots"),
    ("flush.policy", "sometimes"),
])
def test_invalid_config_value_is_rejected(shared_broker, topic_name, key, value):
    admin = ck_admin(shared_broker.bootstrap)
    _create(admin, topic_name)
    before = _describe(admin, topic_name)[key].value
    assert _error_code(_incremental(admin, topic_name, [(key, value, SET)])) == KafkaError.INVALID_CONFIG
    assert _describe(admin, topic_name)[key].value == before


def test_legacy_alter_configs_round_trip(shared_broker, topic_name):
    admin = ck_admin(shared_broker.bootstrap)
    _create(admin, topic_name)
    res = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"retention.bytes": "1048576"})
    admin.alter_configs([res], request_timeout=T)[res].result(timeout=T)
    assert _describe(admin, topic_name)["retention.bytes"].value == "1048576"


def _broker_incremental(admin, name, ops):
    res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    return admin.incremental_alter_configs([res], request_timeout=T)[res]


def _describe_broker(admin, name):
    res = ConfigResource(ResourceType.BROKER, name)
    return admin.describe_configs([res], request_timeout=T)[res].result(timeout=T)


@pytest.mark.single_node
def test_dynamic_broker_configs_are_checked_applied_and_persisted(broker, topic_name):
    """AlterConfigs and IncrementalAlterConfigs on the BROKER resource (strata refused both):
    a dynamic topic default set for this broker ("0") or cluster-wide ("") becomes the value of
    every topic without its own override, DescribeConfigs shows it with Kafka's sources and
    synonyms, it survives a SIGKILL restart, and what Kafka refuses is refused."""
    from confluent_kafka.admin import ConfigSource

    admin = ck_admin(broker.bootstrap)
    _create(admin, topic_name)
    _create(admin, topic_name + "-own", config={"retention.ms": "1234"})
    _broker_incremental(admin, "0", [("log.retention.ms", "7200000", SET)]).result(timeout=T)
    # The cluster-wide default (resource name ""), which confluent-kafka cannot name: kafka-python's
    # AlterConfigs (the legacy API: the set becomes exactly these).
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, KafkaAdminClient
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        answer = kp.alter_configs([KpResource(ConfigResourceType.BROKER, "", configs={
            "log.segment.bytes": "50000000", "num.io.threads": "16", "log.roll.ms": "3600000"})])
        assert [r[0] for r in answer.resources] == [0], answer
    finally:
        kp.close()

    def check():
        topic = _describe(admin, topic_name)
        assert topic["retention.ms"].value == "7200000"
        assert topic["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert topic["segment.bytes"].value == "50000000"
        assert topic["segment.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert topic["segment.ms"].value == "3600000"
        own = _describe(admin, topic_name + "-own")
        assert own["retention.ms"].value == "1234" and own["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        this = _describe_broker(admin, "0")
        assert this["log.retention.ms"].value == "7200000"
        assert this["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert this["log.segment.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert this["log.dirs"].is_read_only
        assert this["num.io.threads"].value == "16"
        assert this["num.io.threads"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    check()
    broker.restart()  # SIGKILL: the dynamic configs are in the persisted metadata
    admin = ck_admin(broker.bootstrap)
    check()

    # Applied, not only described: a dynamic timestamp bound refuses an hour-old record on a
    # topic without its own bound (INVALID_TIMESTAMP), and deleting it lets the record in.
    import time as _time
    _broker_incremental(admin, "0", [("log.message.timestamp.before.max.ms", "60000", SET)]).result(timeout=T)
    old = int(_time.time() * 1000) - 3_600_000
    with pytest.raises(AssertionError, match="INVALID_TIMESTAMP|Broker: Invalid timestamp"):
        ck_produce(broker.bootstrap, topic_name, [(None, b"old", ())], timestamps=[old], timeout=10,
                   **{"retries": 0})
    _broker_incremental(admin, "0", [("log.message.timestamp.before.max.ms", None,
                                      AlterConfigOpType.DELETE)]).result(timeout=T)
    ck_produce(broker.bootstrap, topic_name, [(None, b"old", ())], timestamps=[old], timeout=10)

    # DELETE goes back to the static value.
    _broker_incremental(admin, "0", [("log.retention.ms", None, AlterConfigOpType.DELETE)]).result(timeout=T)
    assert _describe(admin, topic_name)["retention.ms"].value == "604800000"

    refused = [
        ("0", "log.dirs", "/tmp/x", KafkaError.INVALID_REQUEST),  # static: not dynamic
        ("0", "log.retention.ms", "soon", KafkaError.INVALID_REQUEST),  # a bad value
    ]
    for name, key, value, code in refused:
        assert _error_code(_broker_incremental(admin, name, [(key, value, SET)])) == code, key
    assert _error_code(_broker_incremental(admin, "0", [("log.retention.ms", "5", AlterConfigOpType.APPEND)])) \
        == KafkaError.INVALID_CONFIG
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:  # listener and security configs only per broker
        answer = kp.alter_configs([KpResource(ConfigResourceType.BROKER, "",
                                              configs={"ssl.keystore.location": "/k.pem"})])
        assert [r[0] for r in answer.resources] == [KafkaError.INVALID_REQUEST], answer
    finally:
        kp.close()


def test_create_topic_with_invalid_config_is_rejected(shared_broker, topic_name):
    admin = ck_admin(shared_broker.bootstrap)
    fs = admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1,
                                       config={"retention.ms": "abc"})], request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.INVALID_CONFIG
    assert topic_name not in admin.list_topics(timeout=10).topics


@pytest.mark.single_node
def test_describe_cluster_and_metadata_show_node_0(shared_broker):
    admin = ck_admin(shared_broker.bootstrap)
    desc = admin.describe_cluster(request_timeout=T).result(timeout=T)
    assert [n.id for n in desc.nodes] == [0]
    assert (desc.nodes[0].host, desc.nodes[0].port) == ("127.0.0.1", shared_broker.port)
    assert desc.controller is not None and desc.controller.id == 0
    assert isinstance(desc.cluster_id, str) and desc.cluster_id

    md = admin.list_topics(timeout=10)
    assert sorted(md.brokers) == [0]
    assert (md.brokers[0].host, md.brokers[0].port) == ("127.0.0.1", shared_broker.port)
    assert md.controller_id == 0
    assert md.cluster_id == desc.cluster_id


def test_delete_records_moves_low_watermark(shared_broker, topic_name):
    bootstrap = shared_broker.bootstrap
    admin = ck_admin(bootstrap)
    _create(admin, topic_name)
    msgs = make_messages(100, with_nulls=False)
    ck_produce(bootstrap, topic_name, msgs, partition=0)

    fs = admin.delete_records([TopicPartition(topic_name, 0, 40)], request_timeout=T,
                              operation_timeout=10)
    (f,) = fs.values()
    assert f.result(timeout=T).low_watermark == 40
    assert ck_watermarks(bootstrap, topic_name) == (40, 100)

    # consuming from the beginning starts at the new low watermark
    first = ck_consume(bootstrap, topic_name, 1, raw=True)[0]
    assert first.offset() == 40 and first.key() == msgs[40][0]

    # deleting beyond the high watermark is an error and changes nothing
    fs = admin.delete_records([TopicPartition(topic_name, 0, 1000)], request_timeout=T)
    assert _error_code(next(iter(fs.values()))) == KafkaError.OFFSET_OUT_OF_RANGE
    assert ck_watermarks(bootstrap, topic_name) == (40, 100)


def test_fetch_below_low_watermark_is_out_of_range(shared_broker, topic_name):
    bootstrap = shared_broker.bootstrap
    admin = ck_admin(bootstrap)
    _create(admin, topic_name)
    ck_produce(bootstrap, topic_name, make_messages(50, with_nulls=False), partition=0)
    (f,) = admin.delete_records([TopicPartition(topic_name, 0, 30)], request_timeout=T).values()
    f.result(timeout=T)

    # kafka-python with no reset policy surfaces OFFSET_OUT_OF_RANGE from poll()
    c = kp_consumer(bootstrap, auto_offset_reset="none")
    try:
        tp = kafka.TopicPartition(topic_name, 0)
        c.assign([tp])
        c.seek(tp, 10)
        with pytest.raises(kafka.errors.OffsetOutOfRangeError):
            for _ in range(40):  # bounded: ~20 s
                c.poll(timeout_ms=500)
    finally:
        c.close()

    # librdkafka with auto.offset.reset=error reports the reset as a consumer error
    c = ck_consumer(bootstrap, **{"auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic_name, 0, 10)])
        errors = []
        for _ in range(40):  # bounded: ~20 s
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is not None, "got a message at offset %d below the low watermark" % m.offset()
            errors.append(m.error().code())
            if m.error().code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                break
        assert set(errors) & {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}, errors
    finally:
        c.close()

    # with auto.offset.reset=earliest the same fetch lands on the low watermark
    c = ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic_name, 0, 10)])
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                assert m.offset() == 30
                break
        else:
            pytest.fail("no message after an earliest offset reset")
    finally:
        c.close()


def test_consume_from_beginning_on_empty_topic_gets_nothing(shared_broker, topic_name):
    """An assigned consumer on an empty partition sees no messages and no errors."""
    bootstrap = shared_broker.bootstrap
    _create(ck_admin(bootstrap), topic_name)
    c = ck_consumer(bootstrap, **{"enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        for _ in range(40):
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF, \
                (m.error(), m.offset())
            break
        else:
            pytest.fail("no partition EOF event for an empty partition")
    finally:
        c.close()
    assert ck_watermarks(bootstrap, topic_name) == (0, 0)


def _group_with_a_commit(broker, group, topic):
    """A group with no members and one committed offset (state Empty); returns its id."""
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    return group


def test_authorized_operations_without_an_authorizer_are_everything(shared_broker, topic_name):
    """KIP-430 through confluent-kafka: with no authorizer Kafka answers the full sets (8
    topic operations, 7 cluster operations, 5 group operations in Kafka 4); strata answered none."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    admin = ck_admin(shared_broker.bootstrap)
    _create(admin, topic_name)
    topic = admin.describe_topics(TopicCollection([topic_name]), include_authorized_operations=True,
                                  request_timeout=T)[topic_name].result(timeout=T)
    assert set(topic.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}, topic.authorized_operations
    cluster = admin.describe_cluster(include_authorized_operations=True,
                                     request_timeout=T).result(timeout=T)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE}, cluster.authorized_operations
    # Not asked for: none reported.
    plain = admin.describe_cluster(request_timeout=T).result(timeout=T)
    assert not plain.authorized_operations

    # A group with a committed offset (Empty): its operations.
    group = _group_with_a_commit(shared_broker, "authz-" + topic_name, topic_name)
    described = admin.describe_consumer_groups([group], include_authorized_operations=True,
                                               request_timeout=T)[group].result(timeout=T)
    assert set(described.authorized_operations) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}, described.authorized_operations


def test_list_groups_filters_by_type_and_reports_classic(shared_broker, topic_name):
    """ListGroups v5 (KIP-848) through confluent-kafka: every strata group is a classic one."""
    from confluent_kafka import ConsumerGroupType

    admin = ck_admin(shared_broker.bootstrap)
    _create(admin, topic_name)
    group = _group_with_a_commit(shared_broker, "types-" + topic_name, topic_name)

    def listed(**kw):
        result = admin.list_consumer_groups(request_timeout=T, **kw).result(timeout=T)
        assert not result.errors, result.errors
        return {g.group_id: g for g in result.valid}

    classic = listed(types={ConsumerGroupType.CLASSIC})
    assert group in classic and classic[group].type == ConsumerGroupType.CLASSIC
    assert group not in listed(types={ConsumerGroupType.CONSUMER})
    assert listed()[group].type == ConsumerGroupType.CLASSIC


# Every topic config Kafka 4.0 defines, each with a valid value other than its default.
KAFKA4_TOPIC_CONFIGS = {
    "cleanup.policy": "compact,delete", "compression.gzip.level": "5", "compression.lz4.level": "12",
    "compression.type": "zstd", "compression.zstd.level": "7", "delete.retention.ms": "1000",
    "file.delete.delay.ms": "5", "flush.messages": "100", "flush.ms": "1000",
    "follower.replication.throttled.replicas": "0:1,1:2", "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "*", "local.retention.bytes": "-2",
    "local.retention.ms": "-2", "max.compaction.lag.ms": "100000", "max.message.bytes": "2000000",
    "message.timestamp.after.max.ms": "60000", "message.timestamp.before.max.ms": "60000",
    "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "10", "min.insync.replicas": "2", "preallocate": "true",
    "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false", "retention.bytes": "100000000", "retention.ms": "3600000",
    "segment.bytes": "10000000", "segment.index.bytes": "1000000", "segment.jitter.ms": "10",
    "segment.ms": "3600000", "unclean.leader.election.enable": "true",
}


def test_every_kafka4_topic_config_is_accepted_and_described(shared_broker, topic_name):
    """Tools set any of Kafka's topic configs; strata accepts them all, applies those it has the
    behaviour for, and stores and describes the rest (DescribeConfigs' documentation says which)."""
    admin = ck_admin(shared_broker.bootstrap)
    _create(admin, topic_name, config=KAFKA4_TOPIC_CONFIGS)
    configs = _describe(admin, topic_name)
    for key, value in KAFKA4_TOPIC_CONFIGS.items():
        assert configs[key].value == value, (key, configs[key].value)
        assert not configs[key].is_default, key
    # (Which are applied is in each config's DescribeConfigs v3+ documentation: api_matrix.rs.)
    # A default is described as one, with its value.
    other = topic_name + "-defaults"
    _create(admin, other)
    defaults = _describe(admin, other)
    assert defaults["message.timestamp.after.max.ms"].value == "3600000"  # Kafka 4's default
    assert defaults["compression.type"].value == "producer" and defaults["compression.type"].is_default


@pytest.mark.parametrize("key,value", [
    ("compression.type", "brotli"), ("min.cleanable.dirty.ratio", "1.5"), ("preallocate", "yes"),
    ("remote.storage.enable", "true"), ("leader.replication.throttled.replicas", "a:b"),
    ("compression.gzip.level", "0"), ("message.format.version", "3.0-IV1"),
])
def test_invalid_kafka4_topic_configs_are_refused(shared_broker, topic_name, key, value):
    admin = ck_admin(shared_broker.bootstrap)
    fs = admin.create_topics([NewTopic(topic_name, 1, 1, config={key: value})], request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.INVALID_CONFIG


def test_list_configs_take_append_and_subtract_and_cross_checks_hold(shared_broker, topic_name):
    admin = ck_admin(shared_broker.bootstrap)
    _create(admin, topic_name)
    APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    _incremental(admin, topic_name, [("cleanup.policy", "compact", APPEND),
                                     ("leader.replication.throttled.replicas", "0:1", APPEND)]).result(timeout=T)
    _incremental(admin, topic_name, [("leader.replication.throttled.replicas", "1:1", APPEND)]).result(timeout=T)
    configs = _describe(admin, topic_name)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["leader.replication.throttled.replicas"].value == "0:1,1:1"
    _incremental(admin, topic_name, [("cleanup.policy", "delete", SUBTRACT)]).result(timeout=T)
    assert _describe(admin, topic_name)["cleanup.policy"].value == "compact"
    # APPEND on a config that is not a list: INVALID_CONFIG.
    assert _error_code(_incremental(admin, topic_name, [("retention.ms", "5", APPEND)])) == KafkaError.INVALID_CONFIG
    # Kafka's cross-field rule: min.compaction.lag.ms may not exceed max.compaction.lag.ms.
    assert _error_code(_incremental(admin, topic_name, [("min.compaction.lag.ms", "100", SET),
                                                        ("max.compaction.lag.ms", "10", SET)])) == KafkaError.INVALID_CONFIG


@pytest.mark.single_node
def test_manual_replica_assignments_are_checked_and_applied(shared_broker, topic_name):
    """CreateTopics and CreatePartitions with a manual replica assignment (strata refused it with
    INVALID_REQUEST): accepted for the brokers the cluster has (this one, node 0), refused with
    INVALID_REPLICA_ASSIGNMENT for an unknown broker, a broker twice, or a count that disagrees."""
    admin = ck_admin(shared_broker.bootstrap)
    fs = admin.create_topics([NewTopic(topic_name, 3, replica_assignment=[[0], [0], [0]])],
                             request_timeout=T)
    fs[topic_name].result(timeout=T)
    assert ck_topic_partitions(shared_broker.bootstrap, topic_name) == 3
    for bad in ([[1]], [[0, 0]], [[0], [0, 1]]):
        name = topic_name + "-bad%d" % len(str(bad))
        fs = admin.create_topics([NewTopic(name, len(bad), replica_assignment=bad)], request_timeout=T)
        assert _error_code(fs[name]) == KafkaError.INVALID_REPLICA_ASSIGNMENT, bad

    fs = admin.create_partitions([NewPartitions(topic_name, 5, replica_assignment=[[0], [0]])],
                                 request_timeout=T)
    fs[topic_name].result(timeout=T)
    wait_until(lambda: ck_topic_partitions(shared_broker.bootstrap, topic_name) == 5)
    fs = admin.create_partitions([NewPartitions(topic_name, 7, replica_assignment=[[0]])], request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.INVALID_REPLICA_ASSIGNMENT  # 2 new, 1 given
    fs = admin.create_partitions([NewPartitions(topic_name, 6, replica_assignment=[[3]])], request_timeout=T)
    assert _error_code(fs[topic_name]) == KafkaError.INVALID_REPLICA_ASSIGNMENT  # no broker 3
    ck_produce(shared_broker.bootstrap, topic_name, make_messages(3, with_nulls=False), partition=4)


@pytest.mark.single_node
def test_a_deleted_topic_made_again_at_once_starts_empty_and_its_old_files_go(broker, topic_name):
    """The old partition directory is renamed aside at once and its files are removed in the
    background (gently, so gigabytes of segments never stall the disk): a topic made again
    under the same name right away holds only its new records, and no directory of the old one
    is left once the removal is done."""
    bootstrap = broker.bootstrap
    admin = ck_admin(bootstrap)
    _create(admin, topic_name, partitions=2, config={"segment.bytes": str(1 << 20)})
    payload = [Msg(None, b"old-%06d-" % i + b"x" * 2000) for i in range(3000)]
    ck_produce(bootstrap, topic_name, payload, partition=0)
    old_dir = broker.data_dir / ("%s-0" % topic_name)
    assert len([p for p in old_dir.iterdir() if p.suffix == ".log"]) > 3, "several segments"
    admin.delete_topics([topic_name], operation_timeout=10, request_timeout=T)[topic_name].result(timeout=T)
    wait_until(lambda: topic_name not in admin.list_topics(timeout=10).topics, timeout=10,
               message="the deleted topic to leave the metadata")
    _create(admin, topic_name, partitions=2)
    ck_produce(bootstrap, topic_name, [Msg(None, b"new-1"), Msg(None, b"new-2")], partition=0)
    assert ck_watermarks(bootstrap, topic_name, partition=0) == (0, 2)
    assert [m[1] for m in ck_consume(bootstrap, topic_name, 2, partition=0)] == [b"new-1", b"new-2"]
    leftovers = lambda: [p.name for p in broker.data_dir.iterdir() if p.name.endswith(".deleted")]  # noqa: E731
    wait_until(lambda: not leftovers(), timeout=30, message="the old directory removed")
