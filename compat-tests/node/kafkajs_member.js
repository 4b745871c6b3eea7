// One kafkajs consumer group member, run as its own process by test_group_rebalance.py so that a
// crash is a real SIGKILL. Usage: node kafkajs_member.js '<json settings>' with bootstrap, topic,
// group, name, journal, session_timeout_ms, heartbeat_interval_ms.
//
// It writes the journal group_member.py writes (one JSON object a line, each line one write).
// kafkajs has no rebalance callbacks: a member owns what a GROUP_JOIN event hands it, from the
// moment the event fires, until it sends its next JoinGroup or LeaveGroup (kafkajs stops consuming
// before either). The network REQUEST event's createdAt ends the ownership: its sentAt is read
// after the socket write, so a busy machine can date it after the broker completed the rebalance
// and handed the partitions on (CI saw the next owner's GROUP_JOIN 1 ms before a sentAt).
// It commits synchronously after every batch.

const fs = require('fs')
const { Kafka, logLevel, PartitionAssigners } = require('kafkajs')

const cfg = JSON.parse(process.argv[2])
const fd = fs.openSync(cfg.journal, 'a')
const write = (ev, fields, t) => {
  const line = JSON.stringify({ ev, t: (t === undefined ? Date.now() : t) / 1000, ...fields }) + '\n'
  fs.writeSync(fd, line)
}

const owned = new Set()
const next = new Map()
const committed = new Map()

const kafka = new Kafka({
  clientId: cfg.name,
  brokers: [cfg.bootstrap],
  logLevel: logLevel.WARN,
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 30 },
})
const consumer = kafka.consumer({
  groupId: cfg.group,
  sessionTimeout: cfg.session_timeout_ms,
  heartbeatInterval: cfg.heartbeat_interval_ms,
  rebalanceTimeout: 30000,
  maxWaitTimeInMs: 100,
  partitionAssigners: [PartitionAssigners.roundRobin],
})

consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
  const parts = (payload.memberAssignment[cfg.topic] || []).slice().sort((a, b) => a - b)
  write('assigned', { parts, gen: null })
  for (const p of parts) owned.add(p)
})
consumer.on(consumer.events.REQUEST, ({ payload }) => {
  if (payload.apiName !== 'JoinGroup' && payload.apiName !== 'LeaveGroup') return
  if (owned.size === 0) return
  const parts = [...owned].sort((a, b) => a - b)
  write('revoked', { parts, why: payload.apiName }, payload.createdAt)
  owned.clear()
  next.clear()
  committed.clear()
})
// A crash has already stopped the consumer (kafkajs disconnects before it emits CRASH): whatever it
// still owned ends here. After a retriable crash kafkajs starts the consumer again, as a new member
// (as when its only broker restarts and it finds no broker for a fetch, KafkaJSNoBrokerAvailableError):
// the client recovered. Any other crash ends the member.
consumer.on(consumer.events.CRASH, ({ payload }) => {
  if (owned.size !== 0) {
    write('revoked', { parts: [...owned].sort((a, b) => a - b), why: 'crash' })
    owned.clear()
    next.clear()
    committed.clear()
  }
  write(payload.restart ? 'retried' : 'client_error', { error: String(payload.error) })
})

async function commit() {
  const pending = {}
  for (const p of owned) {
    if (next.has(p) && next.get(p) !== committed.get(p)) pending[p] = next.get(p)
  }
  if (Object.keys(pending).length === 0) return
  write('committing', { offsets: pending })
  try {
    await consumer.commitOffsets(Object.entries(pending).map(
      ([p, o]) => ({ topic: cfg.topic, partition: Number(p), offset: String(o) })))
  } catch (e) {
    write('commit_failed', { offsets: pending, error: String(e) })
    return
  }
  for (const [p, o] of Object.entries(pending)) committed.set(Number(p), o)
  write('committed', { offsets: pending })
}

async function main() {
  await consumer.connect()
  await consumer.subscribe({ topics: [cfg.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return
      const offsets = batch.messages.map(m => Number(m.offset))
      write('consumed', { p: batch.partition, o: offsets })
      next.set(batch.partition, offsets[offsets.length - 1] + 1)
      if (stall) {  // see group_member.py: killed with this batch uncommitted
        write('stalled', {})
        await new Promise(() => {})
      }
      await commit()
    },
  })
  write('started', {})
}

// A member outliving a test that was itself killed would consume forever.
const parent = process.ppid
setInterval(() => { if (process.ppid !== parent) process.exit(1) }, 500).unref()

let stall = false
process.on('SIGUSR2', () => { stall = true })

let stopping = false
process.on('SIGTERM', async () => {
  if (stopping) return
  stopping = true
  try {
    await consumer.disconnect()  // stops consuming, then LeaveGroup (which ends the ownership)
    write('closed', {})
  } catch (e) {
    write('error', { error: String(e) })
  }
  process.exit(0)
})

main().catch(e => {
  write('error', { error: String(e && e.stack || e) })
  process.exit(1)
})
