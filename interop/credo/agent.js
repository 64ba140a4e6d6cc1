// One Credo 0.5 agent, driven by JSON lines on stdin; answers and events as JSON lines on
// stdout, logs on stderr. Used by the interop tests (tests/interop/credo.py).
//
//   node agent.js '{"label": "...", "mediatorInvitationUrl": "...", "pickup": "PickUpV2",
//                   "inboundPort": 0, "pollingMs": 500}'
//
// Commands: {"id", "cmd": "create-invitation" | "receive-invitation" (url) | "send"
// (connectionId, content) | "messages" | "mediation" | "connections" | "shutdown"}.
// Answers: {"id", "ok": true, ...} or {"id", "ok": false, "error"}.
// Events: {"event": "ready", ...}, {"event": "basic-message", "connectionId", "content"}.
'use strict'

const readline = require('readline')
const crypto = require('crypto')
const path = require('path')
const { createRequire } = require('module')

// Credo's packages come from the install folder CREDO_HOME (interop/install-credo.sh) and
// only from there: a node_modules lying in a folder above this script must not shadow them.
const load = process.env.CREDO_HOME
  ? createRequire(path.join(process.env.CREDO_HOME, 'package.json'))
  : require
const {
  Agent,
  BasicMessageEventTypes,
  BasicMessageRole,
  ConnectionsModule,
  ConsoleLogger,
  HttpOutboundTransport,
  LogLevel,
  MediationRecipientModule,
  MediatorPickupStrategy,
  WsOutboundTransport,
} = load('@credo-ts/core')
const { agentDependencies, HttpInboundTransport } = load('@credo-ts/node')
const { AskarModule } = load('@credo-ts/askar')
const { ariesAskar } = load('@hyperledger/aries-askar-nodejs')

const options = JSON.parse(process.argv[2] || '{}')
const received = []
let stopping = false

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function log(...args) {
  process.stderr.write(args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ') + '\n')
}

class StderrLogger extends ConsoleLogger {
  constructor(level) {
    super(level)
  }
  log(level, message, data) {
    if (!this.isEnabled(level)) return
    process.stderr.write(`[${LogLevel[level]}] ${message} ${data ? safeJson(data) : ''}\n`)
  }
}

function safeJson(data) {
  try {
    return JSON.stringify(data, (k, v) => (v instanceof Error ? { message: v.message, stack: v.stack } : v))
  } catch (e) {
    return String(data)
  }
}

async function main() {
  const port = options.inboundPort || 0
  const modules = {
    askar: new AskarModule({ ariesAskar }),
    connections: new ConnectionsModule({ autoAcceptConnections: true }),
  }
  if (options.mediatorInvitationUrl) {
    modules.mediationRecipient = new MediationRecipientModule({
      mediatorInvitationUrl: options.mediatorInvitationUrl,
      // "auto": no strategy, so Credo asks Discover Features which pickup protocol we speak.
      mediatorPickupStrategy:
        options.pickup === 'auto' ? undefined : MediatorPickupStrategy[options.pickup || 'PickUpV2'],
      mediatorPollingInterval: options.pollingMs || 500,
    })
  }
  const agent = new Agent({
    config: {
      label: options.label || 'credo',
      walletConfig: {
        id: `w-${crypto.randomUUID()}`,
        key: crypto.randomUUID(),
        storage: { type: 'sqlite', config: { inMemory: true } },
      },
      endpoints: port ? [`http://127.0.0.1:${port}`] : undefined,
      logger: new StderrLogger(LogLevel[options.logLevel || 'warn']),
    },
    dependencies: agentDependencies,
    modules,
  })
  agent.registerOutboundTransport(new HttpOutboundTransport())
  agent.registerOutboundTransport(new WsOutboundTransport())
  if (port) agent.registerInboundTransport(new HttpInboundTransport({ port }))

  agent.events.on(BasicMessageEventTypes.BasicMessageStateChanged, ({ payload }) => {
    const record = payload.basicMessageRecord
    if (record.role !== BasicMessageRole.Receiver) return
    const entry = { connectionId: record.connectionId, content: record.content }
    received.push(entry)
    emit({ event: 'basic-message', ...entry })
  })

  const started = Date.now()
  await agent.initialize()
  const ready = { event: 'ready', ms: Date.now() - started }
  if (options.mediatorInvitationUrl) {
    const mediator = await agent.mediationRecipient.findDefaultMediator()
    ready.mediation = mediator ? mediator.state : null
  }
  emit(ready)

  const handlers = {
    'create-invitation': async () => {
      const oob = await agent.oob.createInvitation({ multiUseInvitation: false })
      return { url: oob.outOfBandInvitation.toUrl({ domain: 'https://example.org' }) }
    },
    'receive-invitation': async (c) => {
      const { connectionRecord } = await agent.oob.receiveInvitationFromUrl(c.url)
      const connected = await agent.connections.returnWhenIsConnected(connectionRecord.id, {
        timeoutMs: c.timeoutMs || 30000,
      })
      return { connectionId: connected.id }
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
      })),
    }),
    mediation: async () => {
      const m = await agent.mediationRecipient.findDefaultMediator()
      return m
        ? { state: m.state, endpoint: m.endpoint, routingKeys: m.routingKeys, pickup: m.pickupStrategy }
        : { state: null }
    },
    shutdown: async () => {
      stopping = true
      await agent.shutdown()
      setTimeout(() => process.exit(0), 50)
      return {}
    },
  }

  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', async (line) => {
    let command
    try {
      command = JSON.parse(line)
    } catch (e) {
      emit({ ok: false, error: `not JSON: ${line.slice(0, 80)}` })
      return
    }
    const handler = handlers[command.cmd]
    if (!handler) {
      emit({ id: command.id, ok: false, error: `unknown command ${command.cmd}` })
      return
    }
    try {
      emit({ id: command.id, ok: true, ...(await handler(command)) })
    } catch (e) {
      log('command failed', command.cmd, e && e.stack ? e.stack : String(e))
      emit({ id: command.id, ok: false, error: e && e.message ? e.message : String(e) })
    }
  })
  lines.on('close', async () => {
    if (!stopping) await agent.shutdown().catch(() => {})
    process.exit(0)
  })
}

process.on('unhandledRejection', (e) => log('unhandled rejection', e && e.stack ? e.stack : String(e)))
main().catch((e) => {
  log('agent failed to start', e && e.stack ? e.stack : String(e))
  emit({ event: 'failed', error: e && e.message ? e.message : String(e) })
  process.exit(1)
})
