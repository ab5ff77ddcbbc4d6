// kafkajs driven by Gregor's compatibility suite.
//
// Usage: node kafkajs/client.js <op> < request.json > response.json
// The request and response are described in compat/script_test.go; bytes are base64.
// kafkajs reads only through consumer groups, so every read uses a group of its own.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')

// kafkajs ships gzip only; snappy comes from kafkajs-snappy, and lz4 from the pure-JS lz4js
// (LZ4 frames, as Kafka's v2 batches hold) through kafkajs's codec interface, as kafkajs-lz4
// does with a native module.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async (encoder) => Buffer.from(lz4.compress(encoder.buffer)),
  decompress: async (buffer) => Buffer.from(lz4.decompress(buffer)),
})

const codecs = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

// Logs go to stderr: stdout carries the response.
const logCreator = () => ({ namespace, level, label, log }) => {
  process.stderr.write(`[${label}] ${namespace}: ${log.message} ${JSON.stringify(log)}\n`)
}

function kafka (req, opts = {}) {
  return new Kafka({ clientId: 'gregor-compat', brokers: [req.addr], logLevel: logLevel.WARN, logCreator, ...security(req), ...opts })
}

// security is kafkajs's ssl and sasl options for a secured listener (the request's
// "security"): PEM contents, as kafkajs passes ssl to tls.connect.
function security (req) {
  const sec = req.security
  if (!sec) return {}
  const ssl = { ca: [fs.readFileSync(sec.ca, 'utf8')] }
  if (sec.cert) {
    ssl.cert = fs.readFileSync(sec.cert, 'utf8')
    ssl.key = fs.readFileSync(sec.key, 'utf8')
  }
  const out = { ssl }
  if (sec.mechanism) {
    out.sasl = { mechanism: sec.mechanism.toLowerCase(), username: sec.username, password: sec.password }
  }
  return out
}

const unb64 = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))
const b64 = (b) => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))

function recOut (partition, m) {
  const headers = Object.entries(m.headers || {}).map(([key, value]) => ({ key, value: b64(value) }))
  return {
    partition,
    offset: Number(m.offset),
    key: b64(m.key),
    value: b64(m.value),
    headers: headers.length ? headers : null,
    timestamp: Number(m.timestamp),
  }
}

// until polls cond every 10 ms (running refresh first, when given) until it holds or the
// deadline passes: by default the request's timeout, which ends before the suite's.
async function until (what, cond, seconds = timeout, refresh = async () => {}) {
  const end = Date.now() + seconds * 1000
  for (;;) {
    await refresh()
    if (cond()) return
    if (Date.now() > end) throw new Error(`timed out: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

let timeout = 60

const ops = {}

ops.version = async () => ({ version: require('kafkajs/package.json').version })

ops.admin = async (req) => {
  const admin = kafka(req).admin()
  await admin.connect()
  try {
    const topic = req.topic
    const res = { Partitions: 0, Config: '', Listed: false, GoneAfterDelete: false }
    await admin.createTopics({
      topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: req.config }] }],
    })
    const dc = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }],
    })
    for (const r of dc.resources) {
      for (const e of r.configEntries) if (e.configName === 'retention.ms') res.Config = e.configValue
    }
    res.Listed = (await admin.listTopics()).includes(topic)
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    res.Partitions = md.topics[0].partitions.length
    await admin.deleteTopics({ topics: [topic] })
    let listed = true
    try {
      await until('deleted topic unlisted', () => !listed, 30, async () => {
        listed = (await admin.listTopics()).includes(topic)
      })
      res.GoneAfterDelete = true
    } catch (e) {
      process.stderr.write(`${e}\n`)
    }
    return { admin: res }
  } finally {
    await admin.disconnect()
  }
}

async function produce (req, kafkaOpts = {}) {
  const producer = kafka(req, kafkaOpts).producer()
  await producer.connect()
  try {
    const messages = req.records.map((r) => {
      const m = { key: unb64(r.key), value: unb64(r.value) }
      if (r.partition >= 0) m.partition = r.partition
      if (r.timestamp) m.timestamp = String(r.timestamp)
      if (r.headers) m.headers = Object.fromEntries(r.headers.map((h) => [h.key, unb64(h.value)]))
      return m
    })
    await producer.send({ topic: req.topic, compression: codecs[req.codec], messages })
    return {}
  } finally {
    await producer.disconnect()
  }
}

ops.produce = (req) => produce(req)

// kafkajs retries an unknown topic's metadata 5 times with backoff (about 10s) before it
// gives up, as against Kafka; 2 retries keep the suite fast.
ops['produce-unknown'] = (req) => produce(req, { retry: { retries: 2 } })

let groupSeq = 0
const groupId = () => `compat-kafkajs-${process.pid}-${Date.now()}-${groupSeq++}`

// read runs a consumer of its own group on req.topic until n records of the partitions
// wanted (all when null); position(consumer) runs once the consumer is running.
async function read (req, { fromBeginning, partition = null, position = async () => {}, readUncommitted = false }) {
  const consumer = kafka(req).consumer({ groupId: groupId(), maxWaitTimeInMs: 100, readUncommitted })
  await consumer.connect()
  const out = []
  let crash = null
  consumer.on(consumer.events.CRASH, (e) => { crash = e.payload.error })
  try {
    await consumer.subscribe({ topic: req.topic, fromBeginning })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition: p, message }) => {
        if (partition === null || p === partition) out.push(recOut(p, message))
      },
    })
    await position(consumer)
    await until(`read ${req.n} records`, () => out.length >= req.n || crash)
    if (crash) throw crash
    return { records: out }
  } finally {
    await consumer.disconnect()
  }
}

ops.consume = (req) => read(req, { fromBeginning: true })

ops['seek-offset'] = (req) => read(req, {
  fromBeginning: false,
  partition: req.partition,
  position: async (c) => c.seek({ topic: req.topic, partition: req.partition, offset: String(req.offset) }),
})

ops['seek-time'] = async (req) => {
  const admin = kafka(req).admin()
  await admin.connect()
  let found
  try {
    found = await admin.fetchTopicOffsetsByTimestamp(req.topic, req.timestamp)
  } finally {
    await admin.disconnect()
  }
  const p = found.find((o) => o.partition === req.partition)
  return read(req, {
    fromBeginning: false,
    partition: req.partition,
    position: async (c) => c.seek({ topic: req.topic, partition: req.partition, offset: p.offset }),
  })
}

// fromBeginning: an offset out of range resets to the log start.
ops['out-of-range'] = (req) => read(req, {
  fromBeginning: true,
  partition: req.partition,
  position: async (c) => c.seek({ topic: req.topic, partition: req.partition, offset: String(req.high) }),
})

ops.group = async (req) => {
  const n = req.records.length
  const members = [0, 1].map(() => ({ assigned: [], records: [], next: {} }))
  const consumers = members.map(() => kafka(req).consumer({ groupId: req.group, maxWaitTimeInMs: 100 }))
  let result
  try {
    for (const [i, c] of consumers.entries()) {
      c.on(c.events.GROUP_JOIN, (e) => {
        members[i].assigned = (e.payload.memberAssignment[req.topic] || []).slice().sort()
      })
      await c.connect()
      await c.subscribe({ topic: req.topic, fromBeginning: true })
      await c.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          members[i].records.push(recOut(partition, message))
          members[i].next[partition] = String(Number(message.offset) + 1)
        },
      })
    }
    await until('partitions split between two members', () => {
      const [a, b] = members.map((m) => m.assigned)
      return a.length > 0 && b.length > 0 && a.length + b.length === 3
    })
    await produce({ ...req, codec: 'none' })
    await until('group read every record', () => members[0].records.length + members[1].records.length >= n)
    for (const [i, c] of consumers.entries()) {
      const offsets = Object.entries(members[i].next).map(([partition, offset]) => ({ topic: req.topic, partition: Number(partition), offset }))
      await c.commitOffsets(offsets)
    }
    // The answer is taken before the disconnects: the first member's LeaveGroup starts a
    // rebalance, and the second could take every partition before it disconnects too.
    result = members.map(({ assigned, records }) => ({ assigned: assigned.slice(), records: records.slice() }))
  } finally {
    for (const c of consumers) await c.disconnect()
  }
  return { members: result }
}

// --- the transactional ops (TxnClient in compat/txn_test.go) ---

const toMessage = (r) => {
  const m = { key: unb64(r.key), value: unb64(r.value), partition: r.partition }
  if (r.headers) m.headers = Object.fromEntries(r.headers.map((h) => [h.key, unb64(h.value)]))
  return m
}

// txnProducer is kafkajs's transactional producer as its documentation sets it up.
async function txnProducer (req) {
  const producer = kafka(req, { retry: { retries: 3 } }).producer({
    transactionalId: req.transactional_id, maxInFlightRequests: 1, idempotent: true,
  })
  await producer.connect()
  return producer
}

ops['txn-produce'] = async (req) => {
  const producer = await txnProducer(req)
  try {
    const txn = await producer.transaction()
    try {
      await txn.send({ topic: req.topic, messages: req.records.map(toMessage) })
    } catch (e) {
      await txn.abort()
      throw e
    }
    if (req.commit) await txn.commit()
    else await txn.abort()
    return {}
  } finally {
    await producer.disconnect()
  }
}

ops['txn-consume'] = (req) => read(req, { fromBeginning: true, readUncommitted: !req.read_committed })

// transform: each message is copied in a transaction of its own that also sends the
// consumer's next offset (txn.sendOffsets), as kafkajs's documentation shows.
ops.transform = async (req) => {
  const producer = await txnProducer(req)
  const consumer = kafka(req).consumer({ groupId: req.group, maxWaitTimeInMs: 100, readUncommitted: false })
  let copied = 0
  let failure = null
  try {
    await consumer.connect()
    await consumer.subscribe({ topic: req.topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (failure) return
        try {
          const txn = await producer.transaction()
          await txn.send({ topic: req.output, messages: [toMessage(recOut(partition, message))] })
          await txn.sendOffsets({
            consumerGroupId: req.group,
            topics: [{ topic: req.topic, partitions: [{ partition, offset: String(Number(message.offset) + 1) }] }],
          })
          await txn.commit()
          copied++
        } catch (e) {
          failure = e
        }
      },
    })
    await until(`copy ${req.n} records`, () => copied >= req.n || failure)
    if (failure) throw failure
    return {}
  } finally {
    await consumer.disconnect()
    await producer.disconnect()
  }
}

async function errOf (fn) {
  try {
    await fn()
    return null
  } catch (e) {
    process.stderr.write(`${e.stack || e}\n`)
    return classify(e)
  }
}

ops.fence = async (req) => {
  const [first, second, third] = req.records
  const a = await txnProducer(req)
  const b = await txnProducer(req)
  try {
    const ta = await a.transaction()
    await ta.send({ topic: req.topic, messages: [toMessage(first)] })
    const tb = await b.transaction() // InitProducerId fences a
    await tb.send({ topic: req.topic, messages: [toMessage(second)] })
    await tb.commit()
    const write = await errOf(() => ta.send({ topic: req.topic, messages: [toMessage(third)] }))
    const commit = await errOf(() => ta.commit())
    return { fence: { write, commit } }
  } finally {
    await a.disconnect()
    await b.disconnect()
  }
}

// classify gives the error's name, the Kafka error type it carries (possibly in a cause),
// and its message.
function classify (e) {
  let code = ''
  for (let x = e; x && !code; x = x.originalError || x.cause) code = x.type || ''
  return { type: e.name || 'Error', code, message: String(e.message || e) }
}

async function main () {
  const op = process.argv[2]
  const fn = ops[op]
  if (!fn) {
    process.stderr.write(`unknown op ${op}\n`)
    process.exit(2)
  }
  let input = ''
  for await (const chunk of process.stdin) input += chunk
  let resp
  try {
    const req = input ? JSON.parse(input) : {}
    timeout = req.timeout || timeout
    resp = await fn(req)
  } catch (e) {
    process.stderr.write(`${e.stack || e}\n`)
    resp = { error: classify(e) }
  }
  process.stdout.write(JSON.stringify(resp), () => process.exit(0))
}

main()
