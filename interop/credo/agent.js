// One Credo 0.5 agent, driven by JSON lines on stdin; answers and events as JSON lines on
// stdout, logs on stderr. Used by the interop tests (tests/interop/credo.py).
//
//   node agent.js '{"label": "...", "mediatorInvitationUrl": "...", "pickup": "PickUpV2",
//                   "inboundPort": 0, "pollingMs": 500,
//                   "storage": {"path": "/abs/dir", "id": "...", "key": "...",
//                               "keyDerivationMethod": "kdf:argon2i:mod"}}'
//
// Without "storage" the wallet lives in memory and is gone when the process ends. With it,
// the wallet is the Askar SQLite store <path>/sqlite.db (profile = id), created on first
// start and reopened on later ones: same connections, same mediation, same keys.
//
// Commands: {"id", "cmd": "create-invitation" (multiUse, invitationDid: a DID to put in
// the invitation instead of an inline service) | "receive-invitation" (url, reuseConnection,
// timeoutMs) | "send" (connectionId, content) | "messages" | "basic-messages" | "mediation" |
// "mediations" | "connections" | "set-device-info" (service fcm|apns, deviceToken,
// devicePlatform) | "get-device-info" (service) | "shutdown"}.
// "messages" are the basic messages this process received; "basic-messages" all basic
// message records in the wallet (both directions, kept across restarts).
// "receive-invitation" answers {connectionId, reused}: reused is true when Credo found a
// connection it already had for the invitation's key or DID and, with reuseConnection,
// kept it (OOB handshake-reuse) instead of making a new one.
// The device-info commands act on the mediator connection through Credo's push
// notifications module (@credo-ts/push-notifications), as a wallet registers its phone.
// Answers: {"id", "ok": true, ...} or {"id", "ok": false, "error"}.
// Events: {"event": "ready", ...}, {"event": "basic-message", "connectionId", "content"}.
'use strict'

const crypto = require('crypto')
const path = require('path')
const { createRequire } = require('module')
const { emit, fail, log, safeJson, serve } = require('../driver.cjs')

// Credo's packages come from the install folder CREDO_HOME (interop/install-credo.sh) and
// only from there: a node_modules lying in a folder above this script must not shadow them.
const load = process.env.CREDO_HOME
  ? createRequire(path.join(process.env.CREDO_HOME, 'package.json'))
  : require
const {
  Agent,
  AgentEventTypes,
  BasicMessageEventTypes,
  BasicMessageRole,
  ConnectionsModule,
  ConsoleLogger,
  HttpOutboundTransport,
  KeyDerivationMethod,
  LogLevel,
  MediationRecipientModule,
  MediatorPickupStrategy,
  WsOutboundTransport,
} = load('@credo-ts/core')
const { agentDependencies, HttpInboundTransport } = load('@credo-ts/node')
const { AskarModule } = load('@credo-ts/askar')
const { ariesAskar } = load('@hyperledger/aries-askar-nodejs')
const { PushNotificationsApnsModule, PushNotificationsFcmModule } = load(
  '@credo-ts/push-notifications'
)

const options = JSON.parse(process.argv[2] || '{}')
const received = []
let stopping = false


// Askar's names for the key derivation methods, as didcomm-mediator-credo and our importer
// spell them, to Credo 0.5's.
const KEY_METHODS = {
  'kdf:argon2i:mod': KeyDerivationMethod.Argon2IMod,
  'kdf:argon2i:int': KeyDerivationMethod.Argon2IInt,
  raw: KeyDerivationMethod.Raw,
}

function walletConfig(storage) {
  if (!storage) {
    return {
      id: `w-${crypto.randomUUID()}`,
      key: crypto.randomUUID(),
      storage: { type: 'sqlite', config: { inMemory: true } },
    }
  }
  if (!storage.path || !path.isAbsolute(storage.path)) throw new Error('storage.path: an absolute folder')
  if (!storage.id || !storage.key) throw new Error('storage: id and key are needed')
  const method = storage.keyDerivationMethod || 'kdf:argon2i:mod'
  if (!(method in KEY_METHODS)) throw new Error(`storage.keyDerivationMethod ${method}: ${Object.keys(KEY_METHODS)}`)
  return {
    id: storage.id,
    key: storage.key,
    keyDerivationMethod: KEY_METHODS[method],
    storage: { type: 'sqlite', config: { path: path.join(storage.path, 'sqlite.db') } },
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


class StderrLogger extends ConsoleLogger {
  constructor(level) {
    super(level)
  }
  log(level, message, data) {
    if (!this.isEnabled(level)) return
    process.stderr.write(`[${LogLevel[level]}] ${message} ${data ? safeJson(data) : ''}\n`)
  }
}


async function main() {
  const port = options.inboundPort || 0
  const modules = {
    askar: new AskarModule({ ariesAskar }),
    connections: new ConnectionsModule({ autoAcceptConnections: true }),
    pushNotificationsFcm: new PushNotificationsFcmModule(),
    pushNotificationsApns: new PushNotificationsApnsModule(),
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
      walletConfig: walletConfig(options.storage),
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
    ready.mediationId = mediator ? mediator.id : null
    ready.mediatorConnectionId = mediator ? mediator.connectionId : null
  }
  // What the wallet holds right after start: a restarted wallet shows the connections and
  // mediation records of its earlier runs and, if Credo reused them, no new ones.
  ready.connections = (await agent.connections.getAll()).length
  ready.mediations = (await agent.mediationRecipient.getMediators()).length
  if (options.storage) ready.storage = { path: options.storage.path, id: options.storage.id }
  emit(ready)

  const mediatorConnection = async () => {
    const mediator = await agent.mediationRecipient.findDefaultMediator()
    if (!mediator) throw new Error('no mediator')
    return mediator.connectionId
  }

  const handlers = {
    'create-invitation': async (c) => {
      const oob = await agent.oob.createInvitation({
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
      const before = new Set((await agent.connections.getAll()).map((r) => r.id))
      const { connectionRecord } = await agent.oob.receiveInvitationFromUrl(c.url, {
        reuseConnection: Boolean(c.reuseConnection),
      })
      if (!connectionRecord) throw new Error('the invitation made no connection')
      const connected = await agent.connections.returnWhenIsConnected(connectionRecord.id, {
        timeoutMs: c.timeoutMs || 30000,
      })
      return { connectionId: connected.id, reused: before.has(connected.id) }
    },
    send: async (c) => {
      await agent.basicMessages.sendMessage(c.connectionId, c.content)
      return {}
    },
    messages: async () => ({ messages: received }),
    'basic-messages': async () => ({
      messages: (await agent.basicMessages.findAllByQuery({}))
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
    connections: async () => ({ connections: (await agent.connections.getAll()).map(connectionJson) }),
    mediation: async () => {
      const m = await agent.mediationRecipient.findDefaultMediator()
      if (!m) return { state: null }
      // The answer's "id" is the command's: the record's id goes as mediationId.
      const { id, ...record } = mediationJson(m)
      return { mediationId: id, ...record }
    },
    mediations: async () => ({ mediations: (await agent.mediationRecipient.getMediators()).map(mediationJson) }),
    'set-device-info': async (c) => {
      const connectionId = await mediatorConnection()
      const info = { deviceToken: c.deviceToken, devicePlatform: c.devicePlatform }
      if (c.service === 'apns') {
        await agent.modules.pushNotificationsApns.setDeviceInfo(connectionId, { deviceToken: c.deviceToken })
      } else {
        await agent.modules.pushNotificationsFcm.setDeviceInfo(connectionId, info)
      }
      return {}
    },
    'get-device-info': async (c) => {
      // The answer comes back as a message the module handles without an event of its own:
      // it is caught from the agent's generic "message processed" event.
      const connectionId = await mediatorConnection()
      const answered = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no device-info within 10 s')), 10000)
        const listener = ({ payload }) => {
          const type = payload.message.type || payload.message['@type'] || ''
          if (!/push-notifications-(fcm|apns)\/1\.0\/(device-info|problem-report)$/.test(type)) return
          clearTimeout(timer)
          agent.events.off(AgentEventTypes.AgentMessageProcessed, listener)
          resolve(payload.message.toJSON())
        }
        agent.events.on(AgentEventTypes.AgentMessageProcessed, listener)
      })
      if (c.service === 'apns') await agent.modules.pushNotificationsApns.getDeviceInfo(connectionId)
      else await agent.modules.pushNotificationsFcm.getDeviceInfo(connectionId)
      return { message: await answered }
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
