// One Credo 0.6 or 0.7 agent, driven by JSON lines on stdin; answers and events as JSON lines
// on stdout, logs on stderr. The same protocol as ../credo/agent.js (Credo 0.5), for the
// API of 0.6+ where DIDComm is a module of its own (@credo-ts/didcomm). Used by the interop
// tests (tests/interop/credo.py) with an install of interop/install-credo.sh 0.6.3 | 0.7.0.
//
//   node agent.mjs '{"label": "...", "mediatorInvitationUrl": "...", "pickup": "PickUpV2",
//                    "inboundPort": 0, "pollingMs": 500, "peerNumAlgo": 4,
//                    "storage": {"path": "/abs/dir", "id": "...", "key": "...",
//                                "keyDerivationMethod": "kdf:argon2i:mod"}}'
//
// Without "storage" the wallet lives in memory and is gone when the process ends. With it,
// the wallet is the Askar SQLite store <path>/sqlite.db (profile = id), created on first
// start and reopened on later ones: same connections, same mediation, same keys.
//
// "pickup" is a DidCommMediatorPickupStrategy (PickUpV1, PickUpV2, PickUpV2LiveMode,
// Implicit, None) or "auto" (none set: Credo asks Discover Features). "peerNumAlgo" (1, 2
// or 4; Credo's default 4) is the did:peer method Credo uses in its DID Exchange requests.
// 0.6+ agents have no label of their own: "label" is sent with each invitation received.
//
// Commands: {"id", "cmd": "create-invitation" (multiUse, invitationDid) | "receive-invitation"
// (url, reuseConnection, timeoutMs) | "send" (connectionId, content) | "messages" |
// "basic-messages" | "mediation" | "mediations" | "connections" | "shutdown"}: the same as
// ../credo/agent.js.
// Answers: {"id", "ok": true, ...} or {"id", "ok": false, "error"}.
// Events: {"event": "ready", ...}, {"event": "basic-message", "connectionId", "content"}.
import crypto from 'node:crypto'
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

import driver from '../driver.cjs'

const { emit, fail, log, safeJson, serve } = driver

// Credo's packages come from the install folder CREDO_HOME (interop/install-credo.sh) and
// only from there. ESM ignores NODE_PATH, so each package is resolved from that folder and
// imported by its file URL; their own imports then resolve inside the install folder.
const home = process.env.CREDO_HOME
const resolveInHome = home ? createRequire(path.join(home, 'package.json')).resolve : null
const load = (name) => import(resolveInHome ? pathToFileURL(resolveInHome(name)).href : name)

// askar-nodejs registers the native binding when loaded; @credo-ts/askar must come after
// it, or Credo fails on its first key operation ("reading 'keyGetJwkSecret'").
async function loadCredo() {
  const { askarNodeJS } = await load('@openwallet-foundation/askar-nodejs')
  const { AskarModule } = await load('@credo-ts/askar')
  return {
    askarNodeJS,
    AskarModule,
    ...(await load('@credo-ts/core')),
    ...(await load('@credo-ts/didcomm')),
    ...(await load('@credo-ts/node')),
  }
}

const {
  Agent,
  AskarModule,
  askarNodeJS,
  agentDependencies,
  ConsoleLogger,
  DidCommBasicMessageEventTypes,
  DidCommBasicMessageRole,
  DidCommHttpInboundTransport,
  DidCommHttpOutboundTransport,
  DidCommMediatorPickupStrategy,
  DidCommModule,
  DidCommWsOutboundTransport,
  LogLevel,
  PeerDidNumAlgo,
} = await loadCredo().catch((e) => fail('agent failed to load Credo', e))

const options = JSON.parse(process.argv[2] || '{}')
const label = options.label || 'credo'
const received = []
let stopping = false

const NUMALGOS = {
  1: PeerDidNumAlgo.GenesisDoc,
  2: PeerDidNumAlgo.MultipleInceptionKeyWithoutDoc,
  4: PeerDidNumAlgo.ShortFormAndLongForm,
}


class StderrLogger extends ConsoleLogger {
  log(level, message, data) {
    if (!this.isEnabled(level)) return
    process.stderr.write(`[${LogLevel[level].toLowerCase()}] ${message} ${data ? safeJson(data) : ''}\n`)
  }
}


// "debug", "info", ...: LogLevel's keys are lower case in 0.6 and capitalized in 0.7.
function logLevel(name) {
  const key = Object.keys(LogLevel).find((k) => k.toLowerCase() === name.toLowerCase())
  if (key === undefined) throw new Error(`unknown log level ${name}`)
  return LogLevel[key]
}

const KEY_METHODS = ['kdf:argon2i:mod', 'kdf:argon2i:int', 'raw']

function askarStore(storage) {
  if (!storage) {
    return {
      id: `w-${crypto.randomUUID()}`,
      key: crypto.randomUUID(),
      database: { type: 'sqlite', config: { inMemory: true } },
    }
  }
  if (!storage.path || !path.isAbsolute(storage.path)) throw new Error('storage.path: an absolute folder')
  if (!storage.id || !storage.key) throw new Error('storage: id and key are needed')
  const method = storage.keyDerivationMethod || 'kdf:argon2i:mod'
  if (!KEY_METHODS.includes(method)) throw new Error(`storage.keyDerivationMethod ${method}: ${KEY_METHODS}`)
  return {
    id: storage.id,
    key: storage.key,
    keyDerivationMethod: method,
    database: { type: 'sqlite', config: { path: path.join(storage.path, 'sqlite.db') } },
  }
}

const connectionJson = (r) => ({
  id: r.id,
  state: r.state,
  role: r.role,
  protocol: r.protocol,
  theirLabel: r.theirLabel,
  did: r.did,
  theirDid: r.theirDid,
  outOfBandId: r.outOfBandId,
  invitationDid: r.invitationDid,
  mediatorId: r.mediatorId,
  createdAt: r.createdAt,
})

const mediationJson = (m) => ({
  id: m.id,
  connectionId: m.connectionId,
  state: m.state,
  role: m.role,
  default: m.getTags().default === true,
  endpoint: m.endpoint,
  routingKeys: m.routingKeys,
  recipientKeys: m.recipientKeys,
  pickup: m.pickupStrategy ?? null,
  createdAt: m.createdAt,
})

function pickupStrategy(name) {
  // "auto": no strategy, so Credo asks Discover Features which pickup protocol we speak.
  if (name === 'auto') return undefined
  const strategy = DidCommMediatorPickupStrategy[name || 'PickUpV2']
  if (!strategy) throw new Error(`unknown pickup strategy ${name}`)
  return strategy
}

async function main() {
  const port = options.inboundPort || 0
  const connections = { autoAcceptConnections: true }
  if (options.peerNumAlgo !== undefined) {
    if (!(options.peerNumAlgo in NUMALGOS)) throw new Error(`peerNumAlgo ${options.peerNumAlgo}: 1, 2 or 4`)
    connections.peerNumAlgoForDidExchangeRequests = NUMALGOS[options.peerNumAlgo]
  }
  const didcomm = {
    endpoints: port ? [`http://127.0.0.1:${port}`] : undefined,
    transports: {
      inbound: port ? [new DidCommHttpInboundTransport({ port })] : [],
      outbound: [new DidCommHttpOutboundTransport(), new DidCommWsOutboundTransport()],
    },
    connections,
    // Nothing here issues or proves credentials.
    credentials: false,
    proofs: false,
    mediationRecipient: options.mediatorInvitationUrl
      ? {
          mediatorInvitationUrl: options.mediatorInvitationUrl,
          mediatorPickupStrategy: pickupStrategy(options.pickup),
          mediatorPollingInterval: options.pollingMs || 500,
        }
      : true,
  }
  const agent = new Agent({
    config: { logger: new StderrLogger(logLevel(options.logLevel || 'warn')) },
    dependencies: agentDependencies,
    modules: {
      askar: new AskarModule({
        askar: askarNodeJS,
        store: askarStore(options.storage),
      }),
      didcomm: new DidCommModule(didcomm),
    },
  })

  agent.events.on(DidCommBasicMessageEventTypes.DidCommBasicMessageStateChanged, ({ payload }) => {
    const record = payload.basicMessageRecord
    if (record.role !== DidCommBasicMessageRole.Receiver) return
    const entry = { connectionId: record.connectionId, content: record.content }
    received.push(entry)
    emit({ event: 'basic-message', ...entry })
  })

  const started = Date.now()
  await agent.initialize()
  const ready = { event: 'ready', ms: Date.now() - started }
  if (options.mediatorInvitationUrl) {
    const mediator = await agent.didcomm.mediationRecipient.findDefaultMediator()
    ready.mediation = mediator ? mediator.state : null
    ready.mediationId = mediator ? mediator.id : null
    ready.mediatorConnectionId = mediator ? mediator.connectionId : null
  }
  // What the wallet holds right after start: a restarted wallet shows the connections and
  // mediation records of its earlier runs and, if Credo reused them, no new ones.
  ready.connections = (await agent.didcomm.connections.getAll()).length
  ready.mediations = (await agent.didcomm.mediationRecipient.getMediators()).length
  if (options.storage) ready.storage = { path: options.storage.path, id: options.storage.id }
  emit(ready)

  const handlers = {
    'create-invitation': async (c) => {
      const oob = await agent.didcomm.oob.createInvitation({
        label,
        multiUseInvitation: Boolean(c.multiUse),
        ...(c.invitationDid ? { invitationDid: c.invitationDid } : {}),
      })
      return {
        url: oob.outOfBandInvitation.toUrl({ domain: 'https://example.org' }),
        outOfBandId: oob.id,
        invitationId: oob.outOfBandInvitation.id,
      }
    },
    'receive-invitation': async (c) => {
      const before = new Set((await agent.didcomm.connections.getAll()).map((r) => r.id))
      const { connectionRecord } = await agent.didcomm.oob.receiveInvitationFromUrl(c.url, {
        label,
        reuseConnection: Boolean(c.reuseConnection),
      })
      if (!connectionRecord) throw new Error('the invitation made no connection')
      const connected = await agent.didcomm.connections.returnWhenIsConnected(connectionRecord.id, {
        timeoutMs: c.timeoutMs || 30000,
      })
      return { connectionId: connected.id, reused: before.has(connected.id) }
    },
    send: async (c) => {
      await agent.didcomm.basicMessages.sendMessage(c.connectionId, c.content)
      return {}
    },
    messages: async () => ({ messages: received }),
    'basic-messages': async () => ({
      messages: (await agent.didcomm.basicMessages.findAllByQuery({}))
        .sort((a, b) => a.createdAt - b.createdAt)
        .map((r) => ({
          id: r.id,
          connectionId: r.connectionId,
          role: r.role,
          content: r.content,
          sentTime: r.sentTime,
          createdAt: r.createdAt,
        })),
    }),
    connections: async () => ({
      connections: (await agent.didcomm.connections.getAll()).map(connectionJson),
    }),
    mediation: async () => {
      const m = await agent.didcomm.mediationRecipient.findDefaultMediator()
      if (!m) return { state: null }
      // The answer's "id" is the command's: the record's id goes as mediationId.
      const { id, ...record } = mediationJson(m)
      return { mediationId: id, ...record }
    },
    mediations: async () => ({
      mediations: (await agent.didcomm.mediationRecipient.getMediators()).map(mediationJson),
    }),
    shutdown: async () => {
      stopping = true
      await agent.shutdown()
      setTimeout(() => process.exit(0), 50)
      return {}
    },
  }

  serve(handlers, async () => {
    if (!stopping) await agent.shutdown()
  })
}

main().catch((e) => fail('agent failed to start', e))
