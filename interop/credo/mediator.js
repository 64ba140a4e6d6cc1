// An old Credo 0.5 mediator, set up the way didcomm-mediator-credo (0.5 era) runs one, so that
// the interop tests have a real store to import: Credo's MediatorModule (@credo-ts/core
// 0.5.19) on an Askar SQLite store, HTTP and WebSocket inbound on ONE port (the WebSocket
// server takes the HTTP server's upgrades), mediation granted automatically, a reusable
// out-of-band invitation made at the first start and reused at every later one, and
// forwards for recipients queued as Askar records of category `MessageRecord`
// (docs/import-sources.md §2.2), so that they survive a restart.
//
//   node mediator.js '{"port": 3110, "label": "Credo Mediator",
//                      "storage": {"path": "/abs/data", "id": "mediator", "key": "...",
//                                  "keyDerivationMethod": "kdf:argon2i:mod"},
//                      "endpoints": ["http://127.0.0.1:3110", "ws://127.0.0.1:3110"],
//                      "forwardingStrategy": "QueueAndLiveModeDelivery", "leaseMs": 30000}'
//
// The store is <path>/wallet/<id>/sqlite.db, where Credo puts it by default under its data
// path (~/.afj/data); its default profile is named <id>. "endpoints" defaults to
// http://127.0.0.1:<port> and ws://127.0.0.1:<port>. "forwardingStrategy" is Credo's
// MessageForwardingStrategy: QueueOnly, QueueAndLiveModeDelivery (the default here), or
// DirectDelivery (Credo's default: sends on an open session, and queues only when the
// recipient's DID document has the `didcomm:transport/queue` endpoint, as Credo wallets'
// have). The invitation URL ("<first http endpoint>/invite?oob=...") is printed on stderr
// and in the ready event.
//
// Commands (JSON lines on stdin): {"id", "cmd": "queue" | "connections" | "mediations" |
// "invitation" | "shutdown"}. "queue" lists the queued MessageRecords (oldest first).
// Events: {"event": "ready", "invitationUrl", "invitationId", "outOfBandId",
// "invitationReused", "endpoints", "store", ...}, {"event": "queued", "id", "connectionId"},
// {"event": "removed", "ids"}.
'use strict'

const crypto = require('crypto')
const path = require('path')
const { createRequire } = require('module')
const { emit, fail, log, safeJson, serve } = require('../driver.cjs')

const load = process.env.CREDO_HOME
  ? createRequire(path.join(process.env.CREDO_HOME, 'package.json'))
  : require
const {
  Agent,
  BaseRecord,
  ConnectionsModule,
  ConsoleLogger,
  DidCommMimeType,
  HttpOutboundTransport,
  InjectionSymbols,
  KeyDerivationMethod,
  LogLevel,
  MediationRepository,
  MediationRole,
  MediatorModule,
  MessagePickupModule,
  OutOfBandRepository,
  OutOfBandRole,
  OutOfBandState,
  RecordNotFoundError,
  WsOutboundTransport,
} = load('@credo-ts/core')
const { agentDependencies, HttpInboundTransport, WsInboundTransport } = load('@credo-ts/node')
const { AskarModule, AskarMultiWalletDatabaseScheme } = load('@credo-ts/askar')
const { ariesAskar } = load('@hyperledger/aries-askar-nodejs')
const WebSocket = load('ws')

const options = JSON.parse(process.argv[2] || '{}')
let stopping = false

// Credo 0.5's MessageForwardingStrategy values (the enum is not exported by @credo-ts/core).
const STRATEGIES = ['QueueOnly', 'QueueAndLiveModeDelivery', 'DirectDelivery']

const KEY_METHODS = {
  'kdf:argon2i:mod': KeyDerivationMethod.Argon2IMod,
  'kdf:argon2i:int': KeyDerivationMethod.Argon2IInt,
  raw: KeyDerivationMethod.Raw,
}


class StderrLogger extends ConsoleLogger {
  log(level, message, data) {
    if (!this.isEnabled(level)) return
    process.stderr.write(`[${LogLevel[level]}] ${message} ${data ? safeJson(data) : ''}\n`)
  }
}


// A queued message, stored as didcomm-mediator-credo stores it: category `MessageRecord`,
// name = id, tag `connectionId`, value {id, connectionId, message (the JWE), createdAt,
// updatedAt, metadata, _tags}.
class MessageRecord extends BaseRecord {
  constructor(props) {
    super()
    this.type = MessageRecord.type
    if (props) {
      this.id = props.id || crypto.randomUUID()
      this.createdAt = props.createdAt || new Date()
      this.connectionId = props.connectionId
      this.message = props.message
    }
  }

  getTags() {
    return { ...this._tags, connectionId: this.connectionId }
  }
}
MessageRecord.type = 'MessageRecord'


// Credo 0.5's MessagePickupRepository, kept in the agent's Askar store. Messages are handed
// out oldest first (createdAt, made strictly increasing in this process so that the order is
// never a tie). A message taken without being deleted (Pickup 2.0 delivery, live mode) is
// leased for `leaseMs`: not handed out again until then unless acknowledged (removed); the
// lease lives in memory, so after a restart every stored message is pending again.
class AskarMessageQueue {
  constructor(leaseMs) {
    this.agent = null
    this.leaseMs = leaseMs
    this.leases = new Map()
    this.lastCreated = 0
    this.locks = new Map()
  }

  get context() {
    return this.agent.context
  }

  get storage() {
    return this.agent.dependencyManager.resolve(InjectionSymbols.StorageService)
  }

  // Runs `fn` after every earlier call for the same connection has finished: two deliveries
  // racing (live mode delivers on every forward) must not both take the same messages.
  serialized(connectionId, fn) {
    const previous = this.locks.get(connectionId) || Promise.resolve()
    const next = previous.catch(() => {}).then(fn)
    this.locks.set(connectionId, next)
    next.finally(() => {
      if (this.locks.get(connectionId) === next) this.locks.delete(connectionId)
    }).catch(() => {})
    return next
  }

  async stored(connectionId) {
    const query = connectionId === undefined ? {} : { connectionId }
    const records = await this.storage.findByQuery(this.context, MessageRecord, query)
    return records.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  pending(records) {
    const now = Date.now()
    return records.filter((r) => !(this.leases.get(r.id) > now))
  }

  async getAvailableMessageCount({ connectionId }) {
    return this.pending(await this.stored(connectionId)).length
  }

  takeFromQueue({ connectionId, limit, deleteMessages }) {
    return this.serialized(connectionId, async () => {
      const records = this.pending(await this.stored(connectionId)).slice(0, limit ?? undefined)
      if (deleteMessages) {
        await this.remove(connectionId, records.map((r) => r.id))
      } else {
        const until = Date.now() + this.leaseMs
        for (const r of records) this.leases.set(r.id, until)
      }
      return records.map((r) => ({ id: r.id, receivedAt: r.createdAt, encryptedMessage: r.message }))
    })
  }

  async addMessage({ connectionId, payload }) {
    const now = Math.max(Date.now(), this.lastCreated + 1)
    this.lastCreated = now
    const record = new MessageRecord({ connectionId, message: payload, createdAt: new Date(now) })
    await this.storage.save(this.context, record)
    emit({ event: 'queued', id: record.id, connectionId })
    return record.id
  }

  removeMessages({ connectionId, messageIds }) {
    return this.serialized(connectionId, () => this.remove(connectionId, messageIds))
  }

  // Only the connection's own messages: an id another connection names is left alone.
  async remove(connectionId, messageIds) {
    const removed = []
    for (const id of messageIds) {
      this.leases.delete(id)
      let record
      try {
        record = await this.storage.getById(this.context, MessageRecord, id)
      } catch (e) {
        if (e instanceof RecordNotFoundError) continue
        throw e
      }
      if (record.connectionId !== connectionId) continue
      await this.storage.deleteById(this.context, MessageRecord, id)
      removed.push(id)
    }
    if (removed.length) emit({ event: 'removed', ids: removed })
  }
}


function endpoints(port) {
  return options.endpoints || [`http://127.0.0.1:${port}`, `ws://127.0.0.1:${port}`]
}

function walletConfig() {
  const storage = options.storage || {}
  if (!storage.path || !path.isAbsolute(storage.path)) throw new Error('storage.path: an absolute folder')
  if (!storage.key) throw new Error('storage.key is needed')
  const id = storage.id || 'mediator'
  const method = storage.keyDerivationMethod || 'kdf:argon2i:mod'
  if (!(method in KEY_METHODS)) throw new Error(`storage.keyDerivationMethod ${method}: ${Object.keys(KEY_METHODS)}`)
  const file = path.join(storage.path, 'wallet', id, 'sqlite.db')
  return {
    config: {
      id,
      key: storage.key,
      keyDerivationMethod: KEY_METHODS[method],
      storage: { type: 'sqlite', config: { path: file } },
    },
    store: { uri: `sqlite://${file}`, path: file, id, profile: id, keyMethod: method },
  }
}

async function mediatorInvitation(agent) {
  const create = () =>
    agent.oob.createInvitation({
      multiUseInvitation: true,
      goalCode: options.goalCode || 'mediator',
      goal: 'Mediator Invitation',
    })
  if (options.createNewInvitation) return { record: await create(), reused: false }
  // As didcomm-mediator-credo: the newest reusable invitation we sent that still awaits
  // answers, else a new one.
  const records = await agent.dependencyManager
    .resolve(OutOfBandRepository)
    .findByQuery(agent.context, { state: OutOfBandState.AwaitResponse, role: OutOfBandRole.Sender })
  const newest = records.filter((r) => r.reusable).sort((a, b) => b.createdAt - a.createdAt)[0]
  return newest ? { record: newest, reused: true } : { record: await create(), reused: false }
}

async function main() {
  const port = options.port
  if (!port) throw new Error('port is needed')
  const wallet = walletConfig()
  const queue = new AskarMessageQueue(options.leaseMs || 30000)
  const strategy = options.forwardingStrategy || 'QueueAndLiveModeDelivery'
  if (!STRATEGIES.includes(strategy)) throw new Error(`forwardingStrategy ${strategy}: ${STRATEGIES}`)

  const agent = new Agent({
    config: {
      label: options.label || 'Credo Mediator',
      endpoints: endpoints(port),
      walletConfig: wallet.config,
      useDidSovPrefixWhereAllowed: true,
      autoUpdateStorageOnStartup: true,
      backupBeforeStorageUpdate: false,
      didCommMimeType: DidCommMimeType.V0,
      logger: new StderrLogger(LogLevel[options.logLevel || 'info']),
    },
    dependencies: agentDependencies,
    modules: {
      askar: new AskarModule({
        ariesAskar,
        multiWalletDatabaseScheme: AskarMultiWalletDatabaseScheme.ProfilePerWallet,
      }),
      connections: new ConnectionsModule({ autoAcceptConnections: true }),
      mediator: new MediatorModule({
        autoAcceptMediationRequests: true,
        messageForwardingStrategy: strategy,
      }),
      messagePickup: new MessagePickupModule({ messagePickupRepository: queue }),
    },
  })
  queue.agent = agent

  // HTTP and WebSocket on one port: the WebSocket server has no port of its own and takes
  // the upgrade requests of the HTTP inbound transport's server.
  const socketServer = new WebSocket.Server({ noServer: true })
  const http = new HttpInboundTransport({ port })
  agent.registerInboundTransport(http)
  agent.registerInboundTransport(new WsInboundTransport({ server: socketServer }))
  agent.registerOutboundTransport(new HttpOutboundTransport())
  agent.registerOutboundTransport(new WsOutboundTransport())
  http.app.get('/health', (req, res) => res.sendStatus(202))
  http.app.get('/invite', async (req, res) => {
    const record = typeof req.query._oobid === 'string' && (await agent.oob.findById(req.query._oobid))
    if (!record || record.role !== OutOfBandRole.Sender || record.state !== OutOfBandState.AwaitResponse) {
      return res.status(400).send('No invitation found')
    }
    return res.send(record.outOfBandInvitation.toJSON())
  })

  const started = Date.now()
  await agent.initialize()
  http.server.on('upgrade', (request, socket, head) => {
    socketServer.handleUpgrade(request, socket, head, (ws) => socketServer.emit('connection', ws, request))
  })

  const { record, reused } = await mediatorInvitation(agent)
  const httpEndpoint = endpoints(port).find((e) => e.startsWith('http'))
  const invitationUrl = record.outOfBandInvitation.toUrl({ domain: options.invitationUrl || `${httpEndpoint}/invite` })
  log(`Out of band invitation url:\n\n\t${invitationUrl}\n`)
  emit({
    event: 'ready',
    ms: Date.now() - started,
    port,
    endpoints: endpoints(port),
    invitationUrl,
    invitationId: record.outOfBandInvitation.id,
    outOfBandId: record.id,
    invitationReused: reused,
    store: wallet.store,
    forwardingStrategy: strategy,
  })

  const handlers = {
    queue: async () => ({
      messages: (await queue.stored()).map((r) => ({
        id: r.id,
        connectionId: r.connectionId,
        createdAt: r.createdAt,
        message: r.message,
      })),
    }),
    connections: async () => ({
      connections: (await agent.connections.getAll()).map((r) => ({
        id: r.id,
        state: r.state,
        role: r.role,
        did: r.did,
        theirDid: r.theirDid,
        theirLabel: r.theirLabel,
        outOfBandId: r.outOfBandId,
      })),
    }),
    mediations: async () => ({
      mediations: (
        await agent.dependencyManager
          .resolve(MediationRepository)
          .findByQuery(agent.context, { role: MediationRole.Mediator })
      ).map((m) => ({
        id: m.id,
        connectionId: m.connectionId,
        state: m.state,
        recipientKeys: m.recipientKeys,
      })),
    }),
    invitation: async () => ({ url: invitationUrl, invitation: record.outOfBandInvitation.toJSON() }),
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

main().catch((e) => fail('mediator failed to start', e))
