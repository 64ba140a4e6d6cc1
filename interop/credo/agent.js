// One Credo 0.5 agent, driven by JSON lines on stdin; answers and events as JSON lines on
// stdout, logs on stderr. Used by the interop tests (tests/interop/credo.py). Run it with
// NODE_PATH set to the node_modules of interop/install-credo.sh's folder.
//
//   node agent.js '{"label": "...", "mediatorInvitationUrl": "...", "pickup": "PickUpV2"}'
//   node agent.js --mode mediator --port 8123 --label mediator
//   CREDO_AGENT_OPTIONS='{"label": "sender", "inboundPort": 8124}' node agent.js
//
// Options (JSON object in argv[2], or --name value pairs, or CREDO_AGENT_OPTIONS; argv wins):
//   mode              "agent" (default) or "mediator" (a Credo mediator: MediatorModule with
//                     autoAcceptMediationRequests, HTTP and WebSocket inbound on one port)
//   label             the agent's label
//   dataDir           folder for the wallet (sqlite) and Credo's files; a fresh temporary
//                     folder (removed at exit) when absent
//   walletId, walletKey   fresh random ones when absent
//   inboundPort (port)    HTTP inbound on 127.0.0.1:port, advertised as the endpoint; a mediator
//                     picks a free port when absent
//   host              the host name in advertised endpoints (127.0.0.1)
//   wsEndpoint        mediator: also advertise ws://host:port (default true)
//   mediatorInvitationUrl  connect to this mediator as a recipient with no inbound endpoint
//   pickup            PickUpV1 | PickUpV2 | PickUpV2LiveMode | Implicit | auto (no strategy:
//                     Credo asks Discover Features) | None; default PickUpV2
//   pollingMs         mediatorPollingInterval for PickUpV1/PickUpV2 (default 500; Credo's is 5000)
//   readyTimeoutMs    how long a recipient waits for its pickup to start before "ready" (30000)
//   trace             also emit {"event": "sent"|"received", type, connectionId} per message
//   logLevel          Credo's log level on stderr: test|trace|debug|info|warn|error|off (warn)
//
// Commands: {"id", "cmd": "create-invitation" (multiUse?) | "receive-invitation" (url,
// timeoutMs?) | "send" (connectionId, content) | "messages" | "mediation" | "connections" |
// "shutdown"}. Answers: {"id", "ok": true, ...} or {"id", "ok": false, "error"}.
// Events: {"event": "ready", ...} once (a recipient: mediation granted and its first pickup
// message sent; a mediator: with its "invitationUrl"), {"event": "failed", "error"} if it
// could not start, {"event": "basic-message", "connectionId", "content"} for each basic
// message received, {"event": "mediation", "state"}, {"event": "pickup-error", "error"}.
'use strict'

const crypto = require('crypto')
const fs = require('fs')
const net = require('net')
const os = require('os')
const path = require('path')
const readline = require('readline')

// --- options --------------------------------------------------------------------------------

function parseArgv(argv) {
  if (argv.length === 1 && argv[0].trim().startsWith('{')) return JSON.parse(argv[0])
  const out = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${arg}`)
    let [name, value] = arg.slice(2).split(/=(.*)/s)
    if (value === undefined) {
      value = i + 1 < argv.length && !argv[i + 1].startsWith('--') ? argv[++i] : 'true'
    }
    name = name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())
    if (/^\d+$/.test(value)) value = Number(value)
    else if (value === 'true' || value === 'false') value = value === 'true'
    out[name] = value
  }
  return out
}

const options = {
  ...JSON.parse(process.env.CREDO_AGENT_OPTIONS || '{}'),
  ...parseArgv(process.argv.slice(2)),
}
if (options.port !== undefined && options.inboundPort === undefined) options.inboundPort = options.port
const mode = options.mode || 'agent'
const host = options.host || '127.0.0.1'

// --- output ---------------------------------------------------------------------------------

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function safeJson(data) {
  try {
    return JSON.stringify(data, (k, v) => (v instanceof Error ? { message: v.message, stack: v.stack } : v))
  } catch (e) {
    return String(data)
  }
}

function log(...args) {
  const stamp = new Date().toISOString().slice(11, 23)
  process.stderr.write(`${stamp} ${args.map((a) => (typeof a === 'string' ? a : safeJson(a))).join(' ')}\n`)
}

function errorText(e) {
  return e && e.message ? e.message : String(e)
}

process.on('unhandledRejection', (e) => log('unhandled rejection', e && e.stack ? e.stack : String(e)))
process.on('uncaughtException', (e) => log('uncaught exception', e && e.stack ? e.stack : String(e)))

// Credo is loaded after the handlers above, so that a missing NODE_PATH is reported as an event.
let credo
try {
  credo = {
    ...require('@credo-ts/core'),
    ...require('@credo-ts/node'),
    ...require('@credo-ts/askar'),
    ...require('@hyperledger/aries-askar-nodejs'),
  }
} catch (e) {
  log('cannot load Credo (is NODE_PATH the node_modules of interop/install-credo.sh?)', e.stack)
  emit({ event: 'failed', error: `cannot load Credo: ${errorText(e)}` })
  process.exit(1)
}
const {
  Agent,
  AgentEventTypes,
  AskarModule,
  BasicMessageEventTypes,
  BasicMessageRole,
  ConnectionsModule,
  ConsoleLogger,
  HttpInboundTransport,
  HttpOutboundTransport,
  LogLevel,
  MediationRecipientModule,
  MediatorModule,
  MediatorPickupStrategy,
  NodeFileSystem,
  RoutingEventTypes,
  TransportEventTypes,
  WsInboundTransport,
  WsOutboundTransport,
  agentDependencies,
  ariesAskar,
} = credo

class StderrLogger extends ConsoleLogger {
  constructor(level, onWarning) {
    super(level)
    this.onWarning = onWarning
  }
  log(level, message, data) {
    // Credo logs, and otherwise swallows, a pickup that could not start: catch it here.
    if (level >= LogLevel.warn && this.onWarning) this.onWarning(message, data)
    if (!this.isEnabled(level)) return
    log(`[${LogLevel[level]}] ${message}`, data ? safeJson(data) : '')
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, host, () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

// --- the agent ------------------------------------------------------------------------------

const PICKUP_STARTED_BY = {
  PickUpV1: ['https://didcomm.org/messagepickup/1.0/batch-pickup'],
  PickUpV2: ['https://didcomm.org/messagepickup/2.0/status-request'],
  PickUpV2LiveMode: ['https://didcomm.org/messagepickup/2.0/live-delivery-change'],
  Implicit: ['https://didcomm.org/trust_ping/1.0/ping'],
}

const received = []
let agent
let ownDataDir = null
let stopping = false

async function main() {
  const started = Date.now()
  let dataDir = options.dataDir
  if (!dataDir) {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'credo-agent-'))
    ownDataDir = dataDir
  }
  fs.mkdirSync(dataDir, { recursive: true })
  // Everything Credo writes (wallet, caches) goes under dataDir, not ~/.afj.
  class DataDirFileSystem extends NodeFileSystem {
    constructor() {
      super({ baseDataPath: dataDir, baseCachePath: dataDir, baseTempPath: dataDir })
    }
  }

  let port = options.inboundPort || 0
  if (mode === 'mediator' && !port) port = await freePort()
  const endpoints = []
  if (port) endpoints.push(`http://${host}:${port}`)
  if (port && mode === 'mediator' && options.wsEndpoint !== false) endpoints.push(`ws://${host}:${port}`)

  let pickupFailed = null
  let failPickup = null
  const onWarning = (message, data) => {
    if (/initiating message pickup|re-open websocket connection to mediator/i.test(message)) {
      const error = `${message}: ${errorText(data && data.error)}`
      emit({ event: 'pickup-error', error })
      if (!pickupFailed) {
        pickupFailed = error
        if (failPickup) failPickup(error)
      }
    }
  }

  const modules = {
    askar: new AskarModule({ ariesAskar }),
    connections: new ConnectionsModule({ autoAcceptConnections: true }),
  }
  let strategy = null
  if (mode === 'mediator') {
    modules.mediator = new MediatorModule({ autoAcceptMediationRequests: true })
  } else if (options.mediatorInvitationUrl) {
    strategy = options.pickup || 'PickUpV2'
    if (strategy !== 'auto' && !(strategy in MediatorPickupStrategy)) {
      throw new Error(`unknown pickup strategy ${strategy}: one of ${Object.keys(MediatorPickupStrategy)}, auto`)
    }
    modules.mediationRecipient = new MediationRecipientModule({
      mediatorInvitationUrl: options.mediatorInvitationUrl,
      // "auto": no strategy, so Credo asks Discover Features which pickup protocol is spoken.
      mediatorPickupStrategy: strategy === 'auto' ? undefined : MediatorPickupStrategy[strategy],
      mediatorPollingInterval: options.pollingMs || 500,
    })
  }

  agent = new Agent({
    config: {
      label: options.label || (mode === 'mediator' ? 'credo-mediator' : 'credo'),
      walletConfig: {
        id: options.walletId || `w-${crypto.randomUUID()}`,
        key: options.walletKey || crypto.randomUUID(),
        storage: { type: 'sqlite' },
      },
      endpoints: endpoints.length ? endpoints : undefined,
      logger: new StderrLogger(LogLevel[options.logLevel || 'warn'], onWarning),
    },
    dependencies: { ...agentDependencies, FileSystem: DataDirFileSystem },
    modules,
  })
  agent.registerOutboundTransport(new HttpOutboundTransport())
  agent.registerOutboundTransport(new WsOutboundTransport())
  let httpInbound = null
  let socketServer = null
  if (port) {
    httpInbound = new HttpInboundTransport({ port })
    agent.registerInboundTransport(httpInbound)
  }
  if (mode === 'mediator') {
    // WebSockets on the HTTP port, as Credo's own mediator sample does.
    const { WebSocketServer } = require('ws')
    socketServer = new WebSocketServer({ noServer: true })
    agent.registerInboundTransport(new WsInboundTransport({ server: socketServer }))
  }

  // Every message sent and processed, on stderr (and stdout with "trace"); the recipient's
  // "ready" waits for the first pickup message sent to the mediator after the grant.
  let grantedAt = null
  let pickupStartedWith = null
  let pickupStarted
  const pickupStart = new Promise((resolve, reject) => {
    pickupStarted = resolve
    failPickup = (error) => reject(new Error(error))
  })
  pickupStart.catch(() => {})
  agent.events.on(AgentEventTypes.AgentMessageSent, ({ payload }) => {
    const context = payload.message
    const type = context.message && context.message.type
    const connectionId = context.connection && context.connection.id
    log(`[sent] ${type} connection=${connectionId} status=${payload.status}`)
    if (options.trace) emit({ event: 'sent', type, connectionId, status: payload.status })
    if (grantedAt && !pickupStartedWith && payload.status !== 'undeliverable') {
      const wanted = strategy === 'auto' ? Object.values(PICKUP_STARTED_BY).flat() : PICKUP_STARTED_BY[strategy]
      if (wanted && wanted.includes(type)) {
        pickupStartedWith = type
        pickupStarted(type)
      }
    }
  })
  agent.events.on(AgentEventTypes.AgentMessageProcessed, ({ payload }) => {
    const type = payload.message && payload.message.type
    const connectionId = payload.connection && payload.connection.id
    log(`[received] ${type} connection=${connectionId}`)
    if (options.trace) emit({ event: 'received', type, connectionId })
  })
  agent.events.on(TransportEventTypes.OutboundWebSocketOpenedEvent, ({ payload }) =>
    log(`[websocket] opened connection=${payload.connectionId}`)
  )
  agent.events.on(TransportEventTypes.OutboundWebSocketClosedEvent, ({ payload }) =>
    log(`[websocket] closed connection=${payload.connectionId}`)
  )
  agent.events.on(RoutingEventTypes.MediationStateChanged, ({ payload }) => {
    const state = payload.mediationRecord.state
    if (state === 'granted' && !grantedAt) grantedAt = Date.now()
    log(`[mediation] ${payload.previousState} -> ${state}`)
    emit({ event: 'mediation', state, role: payload.mediationRecord.role })
  })
  agent.events.on(BasicMessageEventTypes.BasicMessageStateChanged, ({ payload }) => {
    const record = payload.basicMessageRecord
    if (record.role !== BasicMessageRole.Receiver) return
    const entry = { connectionId: record.connectionId, content: record.content }
    received.push(entry)
    emit({ event: 'basic-message', ...entry })
  })

  await agent.initialize()
  if (socketServer) {
    httpInbound.server.on('upgrade', (request, socket, head) => {
      socketServer.handleUpgrade(request, socket, head, (ws) => socketServer.emit('connection', ws, request))
    })
  }
  const ready = { event: 'ready', mode, label: agent.config.label, endpoints, dataDir, initMs: Date.now() - started }

  if (mode === 'mediator') {
    const oob = await agent.oob.createInvitation({ multiUseInvitation: true })
    ready.invitationUrl = oob.outOfBandInvitation.toUrl({ domain: endpoints[0] })
  } else if (options.mediatorInvitationUrl) {
    const mediator = await agent.mediationRecipient.findDefaultMediator()
    ready.mediation = mediator ? mediator.state : null
    ready.pickup = { strategy, started: null }
    if (mediator && mediator.state === 'granted' && strategy !== 'None') {
      if (!grantedAt) grantedAt = started // granted before our listener saw it (never, but safe)
      const timeoutMs = options.readyTimeoutMs || 30000
      let timer
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no pickup message sent in ${timeoutMs} ms`)), timeoutMs)
      })
      try {
        ready.pickup.started = await Promise.race([pickupStart, timeout])
      } catch (e) {
        ready.pickup.error = errorText(e)
      } finally {
        clearTimeout(timer)
      }
      const record = await agent.mediationRecipient.findDefaultMediator()
      ready.pickup.strategy = (record && record.pickupStrategy) || strategy
    }
  }
  ready.ms = Date.now() - started
  emit(ready)
}

// --- commands -------------------------------------------------------------------------------

async function mediationState() {
  if (!agent.mediationRecipient) return { state: null }
  const m = await agent.mediationRecipient.findDefaultMediator()
  return m
    ? {
        state: m.state,
        endpoint: m.endpoint,
        routingKeys: m.routingKeys,
        pickup: m.pickupStrategy,
        connectionId: m.connectionId,
      }
    : { state: null }
}

async function shutdown() {
  if (stopping) return
  stopping = true
  if (agent) await agent.shutdown().catch((e) => log('shutdown failed', e && e.stack))
  if (ownDataDir) fs.rmSync(ownDataDir, { recursive: true, force: true })
}

const handlers = {
  'create-invitation': async (c) => {
    const oob = await agent.oob.createInvitation({ multiUseInvitation: Boolean(c.multiUse) })
    return { url: oob.outOfBandInvitation.toUrl({ domain: 'https://example.org' }) }
  },
  'receive-invitation': async (c) => {
    const { connectionRecord } = await agent.oob.receiveInvitationFromUrl(c.url)
    if (!connectionRecord) throw new Error('the invitation made no connection (no handshake protocol?)')
    const connected = await agent.connections.returnWhenIsConnected(connectionRecord.id, {
      timeoutMs: c.timeoutMs || 30000,
    })
    return { connectionId: connected.id, protocol: connected.protocol }
  },
  send: async (c) => {
    await agent.basicMessages.sendMessage(c.connectionId, c.content)
    return {}
  },
  messages: async () => ({ messages: received }),
  connections: async () => ({
    connections: (await agent.connections.getAll()).map((r) => ({
      id: r.id,
      state: r.state,
      protocol: r.protocol,
      theirLabel: r.theirLabel,
      theirDid: r.theirDid,
    })),
  }),
  mediation: mediationState,
  shutdown: async () => {
    await shutdown()
    setTimeout(() => process.exit(0), 50)
    return {}
  },
}

function listen() {
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', async (line) => {
    if (!line.trim()) return
    let command
    try {
      command = JSON.parse(line)
    } catch (e) {
      emit({ id: null, ok: false, error: `not JSON: ${line.slice(0, 80)}` })
      return
    }
    const handler = handlers[command.cmd]
    if (!handler) {
      emit({ id: command.id, ok: false, error: `unknown command ${command.cmd}` })
      return
    }
    if (!agent || !agent.isInitialized) {
      if (command.cmd !== 'shutdown') {
        emit({ id: command.id, ok: false, error: 'the agent is not initialized (yet)' })
        return
      }
    }
    try {
      emit({ id: command.id, ok: true, ...(await handler(command)) })
    } catch (e) {
      log('command failed', command.cmd, e && e.stack ? e.stack : String(e))
      emit({ id: command.id, ok: false, error: errorText(e) })
    }
  })
  // The controlling process went away: stop too.
  lines.on('close', async () => {
    await shutdown()
    process.exit(0)
  })
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, async () => {
    await shutdown()
    process.exit(0)
  })
}

listen()
main().catch(async (e) => {
  log('agent failed to start', e && e.stack ? e.stack : String(e))
  emit({ event: 'failed', error: errorText(e) })
  await shutdown()
  process.exit(1)
})
