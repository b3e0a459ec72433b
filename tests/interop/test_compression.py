"""Compressed record batches (gzip, snappy, lz4, zstd) written by each client are
stored and served so that both clients read back identical messages."""

import random

import pytest

from clients import Msg, ck_consume, ck_produce, ck_watermarks, kp_consume, kp_produce

CODECS = ["gzip", "snappy", "lz4", "zstd"]
N = 300


def _messages(codec, producer):
    rnd = random.Random("%s-%s" % (codec, producer))
    words = [b"strata", b"kafka", b"broker", b"segment", b"offset", b"batch", b"record"]
    out = []
    for i in range(N):
        if i % 3 == 0:  # incompressible
            value = rnd.randbytes(rnd.randint(0, 1500))
        else:  # compressible text
            value = b" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 400)))
        out.append(Msg(b"%s-%d" % (codec.encode(), i), value, [("codec", codec.encode())]))
    return out


@pytest.mark.parametrize("producer", ["confluent", "kafka-python"])
@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_round_trip_to_both_clients(shared_broker, topic_name, codec, producer):
    bootstrap = shared_broker.bootstrap
    msgs = _messages(codec, producer)
    if producer == "confluent":
        # linger so that many records share a compressed batch
        ck_produce(bootstrap, topic_name, msgs, **{"compression.type": codec, "linger.ms": 50})
    else:
        kp_produce(bootstrap, topic_name, msgs, compression_type=codec, linger_ms=50)
    assert ck_watermarks(bootstrap, topic_name) == (0, N)

    from_ck = ck_consume(bootstrap, topic_name, N)
    from_kp = kp_consume(bootstrap, topic_name, N)
    assert from_ck == msgs
    assert from_kp == msgs

    # every record keeps its own offset inside compressed batches: read from the middle
    mid = N // 2 + 1
    assert ck_consume(bootstrap, topic_name, N - mid, offset=mid) == msgs[mid:]
    assert kp_consume(bootstrap, topic_name, N - mid, offset=mid) == msgs[mid:]
