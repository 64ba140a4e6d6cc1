// One Credo 0.6 or 0.7 agent, driven by JSON lines on stdin; answers and events as JSON lines
// on stdout, logs on stderr. The same protocol as ../credo/agent.js (Credo 0.5), for the
// API of 0.6+ where DIDComm is a module of its own (@credo-ts/didcomm). Used by the interop
// tests (tests/interop/credo.py) with an install of interop/install-credo.sh 0.6.3 | 0.7.0.
//
//   node agent.mjs '{"label": "...", "mediatorInvitationUrl": "...", "pickup": "PickUpV2",
//                    "inboundPort": 0, "pollingMs": 500, "peerNumAlgo": 4}'
//
// "pickup" is a DidCommMediatorPickupStrategy (PickUpV1, PickUpV2, PickUpV2LiveMode,
// Implicit, None) or "auto" (none set: Credo asks Discover Features). "peerNumAlgo" (1, 2
// or 4; Credo's default 4) is the did:peer method Credo uses in its DID Exchange requests.
// 0.6+ agents have no label of their own: "label" is sent with each invitation received.
//
// Commands: {"id", "cmd": "create-invitation" | "receive-invitation" (url) | "send"
// (connectionId, content) | "messages" | "mediation" | "connections" | "shutdown"}.
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
        store: {
          id: `w-${crypto.randomUUID()}`,
          key: crypto.randomUUID(),
          database: { type: 'sqlite', config: { inMemory: true } },
        },
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
  }
  emit(ready)

  const handlers = {
    'create-invitation': async () => {
      const oob = await agent.didcomm.oob.createInvitation({ label, multiUseInvitation: false })
      return { url: oob.outOfBandInvitation.toUrl({ domain: 'https://example.org' }) }
    },
    'receive-invitation': async (c) => {
      const { connectionRecord } = await agent.didcomm.oob.receiveInvitationFromUrl(c.url, { label })
      const connected = await agent.didcomm.connections.returnWhenIsConnected(connectionRecord.id, {
        timeoutMs: c.timeoutMs || 30000,
      })
      return { connectionId: connected.id }
    },
    send: async (c) => {
      await agent.didcomm.basicMessages.sendMessage(c.connectionId, c.content)
      return {}
    },
    messages: async () => ({ messages: received }),
    connections: async () => ({
      connections: (await agent.didcomm.connections.getAll()).map((r) => ({
        id: r.id,
        state: r.state,
        protocol: r.protocol,
        theirLabel: r.theirLabel,
        did: r.did,
        theirDid: r.theirDid,
      })),
    }),
    mediation: async () => {
      const m = await agent.didcomm.mediationRecipient.findDefaultMediator()
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

  serve(handlers, async () => {
    if (!stopping) await agent.shutdown()
  })
}

main().catch((e) => fail('agent failed to start', e))
