"""aiokafka (asyncio, pinned in requirements.txt) against strata: an idempotent producer with
every codec aiokafka supports here (none, gzip, lz4, zstd), a group consumer that commits, and
committed offsets read back; confluent-kafka confirms the log holds each message once."""
import asyncio

import aiokafka

from clients import ck_watermarks
from test_acceptance import create_topic

N = 400


async def produce_and_consume(bootstrap, topic, group):
    sent = []
    for codec in (None, "gzip", "lz4", "zstd"):
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                             compression_type=codec, linger_ms=5)
        await producer.start()
        try:
            batch = []
            for i in range(N):
                value = ("%s-%d" % (codec, i)).encode()
                batch.append(await producer.send(topic, key=b"k%d" % (i % 7), value=value,
                                                 headers=[("i", str(i).encode())]))
                sent.append(value)
            for future in batch:
                await future
        finally:
            await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                         auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    got = []
    try:
        async def drain():
            while len(got) < len(sent):
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    got.extend(r.value for r in records)
        await asyncio.wait_for(drain(), 60)
        await consumer.commit()
        partitions = sorted(consumer.assignment(), key=lambda tp: tp.partition)
        committed = [await consumer.committed(tp) for tp in partitions]
    finally:
        await consumer.stop()
    return sent, got, committed


def test_aiokafka_idempotent_codecs_group_and_commit(shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, 3)
    sent, got, committed = asyncio.run(
        produce_and_consume(shared_broker.bootstrap, topic_name, topic_name + "-g"))
    assert sorted(got) == sorted(sent) and len(got) == 4 * N, "every message once"
    ends = [ck_watermarks(shared_broker.bootstrap, topic_name, p)[1] for p in range(3)]
    assert sum(ends) == 4 * N, "no duplicates in the log"
    assert committed == ends, "the group committed the end of every partition"
