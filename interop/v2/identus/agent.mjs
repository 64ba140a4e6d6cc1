// A real Hyperledger Identus TS SDK 7.0.0 edge agent (SDK.Agent + SDK.Pluto on an in-memory
// @trust0/identus-store), driven by JSON lines.
//
//   stdin : one JSON request per line      stdout: one JSON answer per line (same order)
//   stderr: progress and diagnostics only (JSON lines with "ev", plus whatever the SDK prints)
//
// Ops (every answer has "ok"; a failed op answers {"ok":false,"error":"...","op":...}):
//   {"op":"start","mediator_did":"did:peer:2...", "live":true, "poll_ms":5000, "name":"A"}
//       -> {"ok":true,"did":"<routed peer DID>","host_did":"<DID used with the mediator>",
//           "mediator_did":..,"routing_did":..,"mediation":"GRANTED","live":true|false}
//       Runs Agent.start() (mediate-request -> mediate-grant, then live mode over the mediator's
//       ws:// service when "live" (default) else Pickup 3.0 polling every poll_ms), then
//       agent.createNewPeerDID([], true): a did:peer:2 whose DIDCommMessaging service uri is the
//       mediator's DID, announced with keylist-update.
//   {"op":"send","to":"<did>","content":"text", "from":"<own did, default the routed one>", "thid":?}
//       -> {"ok":true,"id":"<message id>"}   (basicmessage/2.0/message, forwarded via the
//          recipient's mediator when its service names a DID)
//   {"op":"received"} -> {"ok":true,"messages":[{"id","content","from","to","thid","created_time"}]}
//   {"op":"wait","count":1,"timeout_ms":30000} -> like "received", plus "timed_out":bool
//   {"op":"status"} -> {"ok":true, mediation state, live, socket state, every DIDComm type received}
//   {"op":"fetch","live":true|false,"poll_ms":N} / {"op":"fetch","off":true} -> {"ok":true, ...status}
//       (re)start fetching in that mode; with "fetch":false on start, the agent is mediated and
//       routed but offline until this op (messages wait in its mailbox meanwhile).
//   {"op":"new_did"} -> {"ok":true,"did":...}  (another routed DID, keylist-update again)
//   {"op":"stop"} -> {"ok":true} then the process exits (so does end of stdin).
//
// Environment: AGENT_MAX_SECONDS (default 120, 0 = none): exit(3) after that long, whatever happens.
//              AGENT_WS=ws|native: WebSocket implementation (default: the `ws` package unless Node
//              already has a global WebSocket).

import { createInterface } from 'node:readline'
import { randomUUID } from 'node:crypto'

// stdout belongs to the protocol: the SDK's ConsoleLogger (console.log) and its stray
// console.log/debug calls must go to stderr.
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
for (const k of ['log', 'info', 'debug', 'warn']) console[k] = (...a) => console.error(...a)

const T0 = Date.now()
let NAME = process.env.AGENT_NAME || 'agent'
const trace = (ev, fields = {}) =>
  process.stderr.write(JSON.stringify({ t: Date.now() - T0, agent: NAME, ev, ...fields }) + '\n')

const maxSeconds = Number(process.env.AGENT_MAX_SECONDS ?? 120)
if (maxSeconds > 0) {
  setTimeout(() => {
    trace('watchdog', { seconds: maxSeconds })
    process.exit(3)
  }, maxSeconds * 1000).unref()
}

// WebSocket for the SDK's live mode (it calls `new WebSocket(uri)` on the global).
let wsImpl = 'none'
{
  const want = process.env.AGENT_WS
  if (want !== 'native' && (want === 'ws' || typeof globalThis.WebSocket === 'undefined')) {
    const { default: WS } = await import('ws')
    // Traced subclass: logs open/close/error and the size/kind of each frame received.
    class TracedWS extends WS {
      constructor(url, ...rest) {
        super(url, ...rest)
        trace('ws.connect', { url: String(url) })
        this.on('open', () => trace('ws.open'))
        this.on('close', (code, reason) => trace('ws.close', { code, reason: String(reason) }))
        this.on('error', (e) => trace('ws.error', { error: String(e?.message ?? e) }))
        this.on('message', (data, isBinary) => trace('ws.frame', { bytes: data.length, binary: isBinary }))
      }
    }
    globalThis.WebSocket = TracedWS
    wsImpl = 'ws'
  } else if (typeof globalThis.WebSocket !== 'undefined') {
    wsImpl = 'native'
  }
}

const { default: SDK } = await import('@hyperledger/identus-sdk')
const { createStore } = await import('@trust0/identus-store')
const { StorageType } = await import('@trust0/ridb')
const { Domain } = SDK

const BASIC = 'https://didcomm.org/basicmessage/2.0/message'

let agent = null
let routedDID = null
const routedDIDs = []
const basic = [] // received basic messages
const seen = [] // every DIDComm message the agent handled: {piuri,id,from}
const waiters = new Set()

function bodyOf(m) {
  if (typeof m.body === 'string') {
    try { return JSON.parse(m.body) } catch { return { raw: m.body } }
  }
  return m.body ?? {}
}

function onMessages(msgs) {
  for (const m of msgs ?? []) {
    if (!m) continue
    // Messages the agent sent itself are stored and emitted too; keep only received ones.
    if (m.direction === Domain.MessageDirection?.SENT || m.direction === 0) continue
    seen.push({ piuri: m.piuri, id: m.id, from: m.from?.toString() })
    trace('event.message', { piuri: m.piuri, id: m.id, from: short(m.from?.toString()) })
    if (m.piuri === BASIC) {
      if (basic.some((b) => b.id === m.id)) continue
      const b = bodyOf(m)
      basic.push({
        id: m.id,
        content: b.content,
        from: m.from?.toString(),
        to: m.to?.toString(),
        thid: m.thid,
        created_time: m.createdTime,
      })
    }
  }
  for (const w of waiters) w()
}

const short = (s) => (typeof s === 'string' && s.length > 40 ? s.slice(0, 28) + '…' + s.slice(-8) : s)

// Diagnostics: an Api that logs every HTTP exchange, and Mercury pack/unpack tracing.
function tracedApi() {
  const inner = new SDK.ApiImpl()
  return {
    async request(method, url, query, headers, body) {
      const t = Date.now()
      try {
        const r = await inner.request(method, url, query, headers, body)
        trace('http', { method, url, status: r.httpStatus, ms: Date.now() - t, reply: r.body === '' ? 'empty' : typeof r.body })
        return r
      } catch (e) {
        trace('http.error', {
          method, url, status: e?.statusCode ?? e?.status, ms: Date.now() - t,
          error: String(e?.message ?? e), body: typeof e?.body === 'string' ? e.body.slice(0, 500) : e?.body,
        })
        throw e
      }
    },
  }
}

function traceMercury(mercury) {
  const pack = mercury.packMessage.bind(mercury)
  const unpack = mercury.unpackMessage.bind(mercury)
  mercury.packMessage = async (m) => {
    trace('pack', { piuri: m.piuri, id: m.id, to: short(m.to?.toString()), body: m.body })
    return pack(m)
  }
  mercury.unpackMessage = async (s) => {
    try {
      const m = await unpack(s)
      trace('unpack', { piuri: m.piuri, id: m.id, thid: m.thid, from: short(m.from?.toString()), body: m.body,
        attachments: m.attachments?.length,
        ...(m.attachments?.length ? { attachment_data: m.attachments.map((a) => Object.keys(a.data ?? {}).join('+')) } : {}) })
      return m
    } catch (e) {
      trace('unpack.error', { error: String(e?.message ?? e), input: String(typeof s === 'string' ? s : JSON.stringify(s)).slice(0, 200) })
      throw e
    }
  }
}

function mediatorInfo() {
  const c = agent?.connections?.mediator
  if (!c) return { mediation: 'NONE' }
  const stateNames = ['UNKNOWN', 'NEW', 'REQUESTED', 'DENIED', 'GRANTED', 'CLOSED', 'BROKEN']
  return {
    mediation: stateNames[c.state] ?? String(c.state),
    host_did: c.host,
    mediator_did: c.uri,
    routing_did: c.routingDID ?? null,
    live: !!c.liveMode,
    socket_state: c.socket ? c.socket.readyState : null,
  }
}

async function start(req) {
  if (agent) throw new Error('already started')
  if (req.name) NAME = String(req.name)
  const mediatorDID = String(req.mediator_did ?? '')
  if (!mediatorDID.startsWith('did:')) throw new Error('mediator_did required')
  const live = req.live !== false
  const apollo = new SDK.Apollo()
  const castor = new SDK.Castor(apollo)
  const password = randomUUID()
  const store = await createStore({ dbName: `identus-${NAME}-${password}`, storageType: StorageType.InMemory, password })
  const pluto = new SDK.Pluto(store, apollo)
  agent = SDK.Agent.initialize({
    apollo, castor, pluto, mediatorDID, api: tracedApi(),
    options: { experiments: { liveMode: live } },
  })
  traceMercury(agent.mercury)
  agent.addListener('message', onMessages)
  trace('start', { live, ws: wsImpl, mediator: short(mediatorDID) })
  const t = Date.now()
  // Agent.start() ends with startFetchingMessages() (polling every 5 s, or live mode).
  // "poll_ms" changes the period; "fetch": false skips it (an offline wallet; see op "fetch").
  const origFetch = agent.startFetchingMessages.bind(agent)
  agent.startFetchingMessages = (period) =>
    req.fetch === false ? Promise.resolve() : origFetch(req.poll_ms ? Number(req.poll_ms) : period)
  await agent.start()
  agent.startFetchingMessages = origFetch
  const info = mediatorInfo()
  trace('started', { ms: Date.now() - t, ...info })
  if (info.mediation !== 'GRANTED') {
    throw new Error(`mediation not granted (state ${info.mediation}); see the trace on stderr`)
  }
  routedDID = await agent.createNewPeerDID([], true)
  routedDIDs.push(routedDID)
  trace('routed_did', { did: routedDID.toString(), ms: Date.now() - t })
  return { did: routedDID.toString(), ...mediatorInfo(), ws: wsImpl }
}

async function send(req) {
  if (!agent) throw new Error('not started')
  const to = Domain.DID.fromString(String(req.to))
  const from = req.from ? Domain.DID.fromString(String(req.from)) : routedDID
  const msg = new SDK.BasicMessage({ content: String(req.content ?? '') }, from, to, req.thid).makeMessage()
  const t = Date.now()
  await agent.send(msg)
  trace('sent', { id: msg.id, to: short(to.toString()), ms: Date.now() - t })
  return { id: msg.id }
}

function waitFor(count, timeoutMs) {
  return new Promise((resolve) => {
    const done = (timedOut) => { waiters.delete(check); clearTimeout(timer); resolve(timedOut) }
    const check = () => { if (basic.length >= count) done(false) }
    const timer = setTimeout(() => done(true), timeoutMs)
    waiters.add(check)
    check()
  })
}

async function stop() {
  if (agent) {
    try { await agent.stop() } catch (e) { trace('stop.error', { error: String(e?.message ?? e) }) }
  }
}

const ops = {
  start,
  send,
  received: async () => ({ messages: basic }),
  wait: async (req) => {
    const timedOut = await waitFor(Number(req.count ?? 1), Number(req.timeout_ms ?? 30000))
    return { timed_out: timedOut, messages: basic }
  },
  status: async () => ({ ...mediatorInfo(), dids: routedDIDs.map(String), ws: wsImpl, seen }),
  new_did: async () => {
    if (!agent) throw new Error('not started')
    const d = await agent.createNewPeerDID([], true)
    routedDIDs.push(d)
    return { did: d.toString() }
  },
  // Stop whatever fetching runs (poll job, live socket) and start again in the given mode:
  // {"op":"fetch","live":true} / {"op":"fetch","live":false,"poll_ms":2000} / {"op":"fetch","off":true}
  fetch: async (req) => {
    if (!agent) throw new Error('not started')
    agent.stopFetchingMessages()
    const med = agent.connections.mediator
    if (med?.socket) { med.socket.close(); med.socket = undefined }
    if (!req.off) {
      agent.options.experiments = { ...(agent.options.experiments ?? {}), liveMode: req.live !== false }
      await agent.startFetchingMessages(req.poll_ms ? Number(req.poll_ms) : undefined)
    }
    return mediatorInfo()
  },
  stop: async () => { await stop(); return {} },
}

// Requests are handled strictly one after another, so answers come back in request order.
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity })
let chain = Promise.resolve()
rl.on('line', (line) => {
  if (!line.trim()) return
  chain = chain.then(async () => {
    let req
    try { req = JSON.parse(line) } catch (e) { out({ ok: false, error: `bad JSON: ${e.message}` }); return }
    const fn = ops[req?.op]
    if (!fn) { out({ ok: false, op: req?.op, error: `unknown op ${req?.op}` }); return }
    try {
      const res = await fn(req)
      out({ ok: true, ...res })
    } catch (e) {
      trace('op.error', { op: req.op, error: String(e?.stack ?? e) })
      out({ ok: false, op: req.op, error: String(e?.message ?? e) })
    }
    if (req.op === 'stop') process.exit(0)
  })
})
rl.on('close', () => { chain.then(stop).then(() => process.exit(0)) })
process.on('unhandledRejection', (e) => trace('unhandledRejection', { error: String(e?.stack ?? e) }))
process.on('uncaughtException', (e) => trace('uncaughtException', { error: String(e?.stack ?? e) }))
