// KafkaJS against strata, driven by tests/interop/test_kafkajs.py. Prints one JSON line.
//   node client.js roundtrip BOOTSTRAP TOPIC GROUP COUNT
//     creates TOPIC (3 partitions), produces COUNT keyed messages with an idempotent producer
//     (every other send gzip-compressed), consumes them all in GROUP, commits, and reports
//     the values consumed and the committed offsets.
//   node client.js group BOOTSTRAP TOPIC GROUP COUNT
//     two consumers in GROUP share TOPIC (already filled with COUNT messages) and report
//     what each was assigned and consumed.
//   node client.js transactions BOOTSTRAP TOPIC GROUP COUNT
//     a transactional producer commits COUNT messages to TOPIC (2 partitions) with offsets of
//     GROUP sent in the transaction (sendOffsets), then aborts COUNT more; reports what a
//     read_committed consumer (KafkaJS's default) reads and the offsets GROUP committed.
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const [mode, bootstrap, topic, groupId, countText] = process.argv.slice(2)
const count = Number(countText)
const kafka = new Kafka({ clientId: 'strata-kafkajs', brokers: bootstrap.split(','), logLevel: logLevel.ERROR })
const deadline = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error('timed out: ' + what)), ms))

async function roundtrip() {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true })
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  for (let start = 0; start < count; start += 100) {
    const messages = []
    for (let i = start; i < Math.min(count, start + 100); i++) {
      messages.push({ key: 'key-' + (i % 10), value: 'value-' + i, headers: { n: String(i) } })
    }
    const compression = (start / 100) % 2 === 0 ? CompressionTypes.None : CompressionTypes.GZIP
    await producer.send({ topic, messages, compression, acks: -1 })
  }
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  const done = new Promise((resolve) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (message.headers.n.toString() !== message.value.toString().slice('value-'.length)) {
          throw new Error('header and value disagree')
        }
        values.push(message.value.toString())
        await consumer.commitOffsets([{ topic, partition, offset: (Number(message.offset) + 1).toString() }])
        if (values.length === count) resolve()
      },
    })
  })
  await Promise.race([done, deadline(60000, 'consuming')])
  await consumer.disconnect()
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  await admin.disconnect()
  return { values, committed: committed[0].partitions.map((p) => [p.partition, Number(p.offset)]) }
}

async function group() {
  const members = [0, 1].map(() => kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 }))
  const assigned = [[], []]
  const consumed = [0, 0]
  let total = 0
  const done = new Promise((resolve) => {
    members.forEach((consumer, index) => {
      consumer.on(consumer.events.GROUP_JOIN, (event) => {
        assigned[index] = (event.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
      })
    })
    Promise.all(members.map(async (consumer, index) => {
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({
        eachMessage: async () => {
          consumed[index]++
          total++
          const split = assigned[0].length > 0 && assigned[1].length > 0
          if (total >= count && split) resolve()
        },
      })
    }))
  })
  await Promise.race([done, deadline(60000, 'both members consuming')])
  // Wait for a settled split (the second member may join after the first consumed a lot).
  const settle = Date.now() + 20000
  while ((assigned[0].length === 0 || assigned[1].length === 0) && Date.now() < settle) {
    await new Promise((r) => setTimeout(r, 100))
  }
  await Promise.all(members.map((consumer) => consumer.disconnect()))
  return { assigned, consumed, total }
}

async function transactions() {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true })
  const producer = kafka.producer({ transactionalId: topic + '-txn', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  const batch = (prefix) => {
    const messages = []
    for (let i = 0; i < count; i++) messages.push({ partition: i % 2, value: prefix + i })
    return messages
  }
  const committed = await producer.transaction()
  await committed.send({ topic, messages: batch('committed-') })
  await committed.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset: '7' }] }] })
  await committed.commit()
  const aborted = await producer.transaction()
  await aborted.send({ topic, messages: batch('aborted-') })
  await aborted.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset: '99' }] }] })
  await aborted.abort()
  await producer.disconnect()
  const offsets = await admin.fetchOffsets({ groupId, topics: [topic] })
  await admin.disconnect()
  const consumer = kafka.consumer({ groupId: groupId + '-reader', readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await Promise.race([
    new Promise((resolve) => {
      consumer.run({
        eachMessage: async ({ message }) => {
          values.push(message.value.toString())
          if (values.length >= count) setTimeout(resolve, 1500) // and a little longer: nothing more may come
        },
      })
    }),
    deadline(60000, 'reading the committed transaction'),
  ])
  await consumer.disconnect()
  const group = offsets[0].partitions.map((p) => [p.partition, Number(p.offset)]).sort((a, b) => a[0] - b[0])
  return { values, committed: group }
}

const run = { roundtrip, group, transactions }[mode]
Promise.race([run(), deadline(120000, mode)])
  .then((result) => { console.log(JSON.stringify(result)); process.exit(0) })
  .catch((error) => { console.error('FAILED', error); process.exit(1) })
