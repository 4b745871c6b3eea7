// Runs a list of kafkajs operations against a broker and prints one JSON line with the results.
//
// stdin: {"brokers": ["127.0.0.1:9092"], "ops": [{"op": "createTopics", ...}, ...]}
// stdout (last line): {"results": [{"ok": <value>} | {"error": {"name", "type", "code", "message"}}, ...]}
//
// Bytes travel as base64 strings ("b64"), null stays null. Each op is independent: an error in
// one is reported and the next still runs. kafkajs logs go to stderr.

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const xxh32 = require('lz4js/xxh32.js')
const { ZstdCodec } = require('zstd-codec')

// Pure-JS codecs for the types kafkajs leaves to plugins.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
// lz4js leaves the frame's block-independence flag unset, which Kafka refuses ("Dependent block
// stream is unsupported"); a frame of one block (lz4js's blocks hold 4 MB) has nothing to depend
// on, so set the flag and compute the descriptor's checksum again.
const LZ4_BLOCK_BYTES = 4 << 20
const lz4Frame = input => {
  if (input.length > LZ4_BLOCK_BYTES) throw new Error('lz4: more than one block')
  const frame = Buffer.from(lz4.compress(input))
  frame[4] |= 0x20  // FLG: block independence
  frame[6] = (xxh32.hash(0, frame, 4, 2) >> 8) & 0xff  // HC: second byte of xxh32(FLG, BD)
  return frame
}
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) { return lz4Frame(encoder.buffer) },
  async decompress(buffer) { return Buffer.from(lz4.decompress(buffer)) },
})
let zstdReady = null
const zstd = () => zstdReady || (zstdReady = new Promise(resolve => ZstdCodec.run(z => resolve(z))))
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) { const z = await zstd(); return Buffer.from(new z.Simple().compress(encoder.buffer, 3)) },
  async decompress(buffer) { const z = await zstd(); return Buffer.from(new z.Streaming().decompress(buffer)) },
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

const b64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))
const enc = b => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))

function readStdin() {
  return new Promise(resolve => {
    const chunks = []
    process.stdin.on('data', c => chunks.push(c))
    process.stdin.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString())))
  })
}

const stderrLogger = () => ({ namespace, level, label, log }) => {
  process.stderr.write(`[kafkajs ${label}] ${namespace} ${log.message} ${JSON.stringify(log)}\n`)
}

function toMessage(m) {
  const out = { key: b64(m.key), value: b64(m.value) }
  if (m.partition !== undefined && m.partition !== null) out.partition = m.partition
  if (m.timestamp !== undefined && m.timestamp !== null) out.timestamp = String(m.timestamp)
  if (m.headers) {
    // [[name, b64value], ...]; repeated names become arrays, as kafkajs wants them.
    const h = {}
    for (const [k, v] of m.headers) {
      const val = b64(v)
      if (k in h) h[k] = [].concat(h[k], [val])
      else h[k] = val
    }
    out.headers = h
  }
  return out
}

function fromMessage(topic, partition, m) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const one of [].concat(v)) headers.push([k, enc(one)])
  }
  return {
    topic, partition, offset: Number(m.offset), key: enc(m.key), value: enc(m.value),
    timestamp: Number(m.timestamp), headers,
  }
}

async function consumeGroup(kafka, op) {
  const consumer = kafka.consumer({ groupId: op.groupId, maxWaitTimeInMs: op.maxWaitTimeInMs || 500 })
  const got = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [op.topic], fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${got.length} of ${op.count} in time`)),
        op.timeoutMs || 30000)
      consumer.run({
        autoCommit: !op.commit,
        eachMessage: async ({ topic, partition, message }) => {
          got.push(fromMessage(topic, partition, message))
          if (got.length >= op.count) { clearTimeout(timer); resolve() }
        },
      }).catch(reject)
    })
    if (op.commit) {  // commit what was consumed, explicitly, before leaving the group
      const next = {}
      for (const m of got) next[m.partition] = Math.max(next[m.partition] || 0, m.offset + 1)
      await consumer.commitOffsets(Object.entries(next).map(
        ([partition, offset]) => ({ topic: op.topic, partition: Number(partition), offset: String(offset) })))
    }
  } finally {
    await consumer.disconnect()
  }
  return got
}

// Transactions of one transactional producer, in order: [{messages, commit}]; the outcome of each.
async function transactions(kafka, op) {
  const producer = kafka.producer({ transactionalId: op.transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const outcomes = []
  try {
    for (const t of op.transactions) {
      const txn = await producer.transaction()
      await txn.send({ topic: op.topic, acks: -1, messages: t.messages.map(toMessage) })
      if (t.commit) await txn.commit()
      else await txn.abort()
      outcomes.push(t.commit ? 'committed' : 'aborted')
    }
  } finally {
    await producer.disconnect()
  }
  return outcomes
}

async function runOp(kafka, admin, op) {
  switch (op.op) {
    case 'produce': {
      const producer = kafka.producer({
        allowAutoTopicCreation: op.allowAutoTopicCreation !== false,
        idempotent: !!op.idempotent,
        maxInFlightRequests: op.idempotent ? 1 : undefined,
      })
      await producer.connect()
      try {
        const res = await producer.send({
          topic: op.topic,
          acks: op.acks === undefined ? -1 : op.acks,
          timeout: 10000,
          compression: CODECS[op.codec || 'none'],
          messages: op.messages.map(toMessage),
        })
        return res.map(r => ({ ...r, baseOffset: Number(r.baseOffset) }))
      } finally {
        await producer.disconnect()
      }
    }
    case 'transactions': return transactions(kafka, op)
    case 'consumeGroup': return consumeGroup(kafka, op)
    case 'createTopics':
      return admin.createTopics({ topics: op.topics, validateOnly: !!op.validateOnly, waitForLeaders: true, timeout: 10000 })
    case 'deleteTopics': return admin.deleteTopics({ topics: op.topics, timeout: 10000 })
    case 'createPartitions': return admin.createPartitions({ topicPartitions: op.topicPartitions, timeout: 10000 })
    case 'listTopics': return admin.listTopics()
    case 'fetchTopicMetadata': return admin.fetchTopicMetadata({ topics: op.topics })
    case 'describeCluster': return admin.describeCluster()
    case 'describeConfigs': return admin.describeConfigs({ resources: op.resources, includeSynonyms: false })
    case 'alterConfigs': return admin.alterConfigs({ resources: op.resources, validateOnly: false })
    case 'fetchTopicOffsets': return admin.fetchTopicOffsets(op.topic)
    case 'fetchOffsets': return admin.fetchOffsets({ groupId: op.groupId, topics: [op.topic] })
    case 'fetchTopicOffsetsByTimestamp': return admin.fetchTopicOffsetsByTimestamp(op.topic, op.timestamp)
    case 'deleteTopicRecords': return admin.deleteTopicRecords({ topic: op.topic, partitions: op.partitions })
    default: throw new Error(`unknown op ${op.op}`)
  }
}

function describeError(e) {
  const out = { name: e.name, type: e.type || null, code: e.code ?? null, message: e.message }
  if (Array.isArray(e.errors)) out.errors = e.errors.map(describeError)
  if (e.originalError) out.originalError = describeError(e.originalError)
  if (e.cause && e.cause !== e) out.cause = describeError(e.cause)
  if (e.retryCount !== undefined) out.retryCount = e.retryCount
  return out
}

async function main() {
  const input = await readStdin()
  const watchdog = setTimeout(() => { process.stderr.write('kafkajs_ops: global timeout\n'); process.exit(3) },
    input.globalTimeoutMs || 120000)
  watchdog.unref()
  const kafka = new Kafka({
    clientId: 'compat-kafkajs',
    brokers: input.brokers,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: input.retries === undefined ? 3 : input.retries, initialRetryTime: 100, maxRetryTime: 2000 },
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
  })
  const admin = kafka.admin()
  await admin.connect()
  const results = []
  try {
    for (const op of input.ops) {
      try {
        results.push({ ok: (await runOp(kafka, admin, op)) ?? null })
      } catch (e) {
        results.push({ error: describeError(e) })
      }
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify({ results }) + '\n')
}

main().then(() => process.exit(0), e => { process.stderr.write(`${e.stack}\n`); process.exit(1) })
