"""Durability across broker restarts on the same data dir: acknowledged (acks=all)
messages, topics, partition counts and altered configs survive SIGKILL and
SIGTERM."""

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from clients import (ck_admin, ck_consume, ck_produce, ck_topic_partitions, ck_watermarks,
                     kp_consume, make_messages)

N = 1000
T = 10


def _setup_topic_with_config(bootstrap, name):
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)],
                        request_timeout=T)[name].result(timeout=T)
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)


def _retention_ms(bootstrap, name):
    res = ConfigResource(ResourceType.TOPIC, name)
    admin = ck_admin(bootstrap)  # keep the client alive until its future resolves
    return admin.describe_configs([res], request_timeout=T)[res].result(timeout=T)["retention.ms"].value


def test_acked_messages_and_topic_metadata_survive_sigkill(broker, topic_name):
    data_topic = topic_name + "-data"
    cfg_topic = topic_name + "-cfg"
    msgs = make_messages(N, prefix="restart")
    assert ck_produce(broker.bootstrap, data_topic, msgs, acks="all") == list(range(N))
    _setup_topic_with_config(broker.bootstrap, cfg_topic)
    # some data in a non-zero partition of the 3-partition topic too
    ck_produce(broker.bootstrap, cfg_topic, msgs[:10], acks="all", partition=2)

    broker.restart()  # SIGKILL, then start on the same data dir and ports

    assert ck_watermarks(broker.bootstrap, data_topic) == (0, N)
    assert ck_consume(broker.bootstrap, data_topic, N) == msgs
    assert ck_topic_partitions(broker.bootstrap, data_topic) == 1
    assert ck_topic_partitions(broker.bootstrap, cfg_topic) == 3
    assert _retention_ms(broker.bootstrap, cfg_topic) == "7200000"
    assert kp_consume(broker.bootstrap, cfg_topic, 10, partition=2) == msgs[:10]

    # appends continue after the recovered end, not over it
    more = make_messages(5, prefix="after")
    assert ck_produce(broker.bootstrap, data_topic, more) == list(range(N, N + 5))

    # and a second crash keeps both generations
    broker.restart()
    assert ck_consume(broker.bootstrap, data_topic, N + 5) == msgs + more


def test_sigterm_is_a_clean_stop_that_keeps_data(broker, topic_name):
    msgs = make_messages(200, prefix="term")
    ck_produce(broker.bootstrap, topic_name, msgs, acks="all")

    rc, on_sigterm = broker.terminate()
    assert on_sigterm, "strata did not exit within 5s of SIGTERM (was SIGKILLed)"
    assert rc == 0, "a clean shutdown exits 0, got %r" % rc
    assert "clean shutdown complete" in broker.stderr_tail(200)
    assert broker.wait_port_free(), "port still accepting after exit"

    broker.start()
    # The clean-shutdown marker lets the restart skip recovery: nothing to truncate.
    assert "truncating the log" not in broker.stderr_tail(200)
    assert ck_watermarks(broker.bootstrap, topic_name) == (0, 200)
    assert ck_consume(broker.bootstrap, topic_name, 200) == msgs


def test_sigterm_with_acks_1_and_flush_never_keeps_every_acked_message_and_restarts_clean(broker, topic_name):
    """Issue #7, graceful shutdown: with acks=1 and flush.policy=never nothing is fsynced before
    the answer, so only the shutdown's own flush and fsync keep the data. SIGTERM, restart: every
    acknowledged message is there, and every partition log opened on the clean path."""
    import re
    from test_acceptance import create_topic
    create_topic(broker.bootstrap, topic_name, 4, {"flush.policy": "never"})
    msgs = make_messages(3000, prefix="never")
    ck_produce(broker.bootstrap, topic_name, msgs, acks="1")

    rc, on_sigterm = broker.terminate()
    assert on_sigterm and rc == 0, "a clean shutdown exits 0 on SIGTERM (rc %r)" % rc
    log_before = broker.stderr_path.read_text(errors="replace")
    assert "requests in progress drained" in log_before and "clean shutdown complete" in log_before
    broker.start()
    restart_log = broker.stderr_path.read_text(errors="replace")[len(log_before):]
    opened = re.findall(r"partition logs opened.*?clean=(\d+) recovered=(\d+)", restart_log)
    assert opened, "each shard logs how its logs opened:\n%s" % restart_log[-3000:]
    assert all(int(recovered) == 0 for _, recovered in opened), opened
    assert sum(int(clean) for clean, _ in opened) >= 4 + 50  # the topic and __consumer_offsets
    low_high = [ck_watermarks(broker.bootstrap, topic_name, p) for p in range(4)]
    assert sum(high for _, high in low_high) == 3000
    got = []
    for partition, (_, high) in enumerate(low_high):
        got += ck_consume(broker.bootstrap, topic_name, high, partition=partition)
    assert sorted(got, key=repr) == sorted(msgs, key=repr)
