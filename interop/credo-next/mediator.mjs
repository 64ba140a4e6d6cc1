// An old Credo 0.6/0.7 mediator, set up the way didcomm-mediator-credo (0.6 era, Askar
// storage, MESSAGE_PICKUP__STORAGE__TYPE=credo) runs one, so that the interop tests have a
// real store to import: the mediator module of @credo-ts/didcomm on an Askar SQLite store,
// HTTP and WebSocket inbound on ONE port (the WebSocket server takes the HTTP server's
// upgrades), mediation granted automatically, a reusable out-of-band invitation made at the
// first start and reused at every later one, and forwards for recipients queued as Askar
// records of category `MessageRecord` (docs/import-sources.md §2.2-2.4), so that they
// survive a restart. The same options, commands and events as ../credo/mediator.js (0.5).
//
//   node mediator.mjs '{"port": 3110, "label": "Credo Mediator",
//                       "storage": {"path": "/abs/data", "id": "mediator", "key": "...",
//                                   "keyDerivationMethod": "kdf:argon2i:mod"},
//                       "endpoints": ["http://127.0.0.1:3110", "ws://127.0.0.1:3110"],
//                       "forwardingStrategy": "QueueAndLiveModeDelivery", "leaseMs": 30000}'
//
// The store is <path>/wallet/<id>/sqlite.db (Credo's default place under its data path),
// default profile <id>. Run with CREDO_HOME = an install of interop/install-credo.sh 0.6.3 or
// 0.7.0.
//
// With "queue": {"postgres": {"host", "user", "password", "database"}} (0.6.3 only) the
// queue is didcomm-mediator-credo's MESSAGE_PICKUP__STORAGE__TYPE=postgres instead: the
// published @credo-ts/didcomm-transport-queue-postgres, which makes its database (table
// `queued_message`) on the server at `host` (port 5432: the package fixes it) as `user`.
import crypto from 'node:crypto'
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

import driver from '../driver.cjs'

const { emit, fail, log, safeJson, serve } = driver

const home = process.env.CREDO_HOME
const resolveInHome = home ? createRequire(path.join(home, 'package.json')).resolve : null
const load = (name) => import(resolveInHome ? pathToFileURL(resolveInHome(name)).href : name)

// askar-nodejs registers the native binding when loaded: before @credo-ts/askar.
async function loadCredo() {
  const { askarNodeJS } = await load('@openwallet-foundation/askar-nodejs')
  const { AskarModule } = await load('@credo-ts/askar')
  const ws = await load('ws')
  return {
    askarNodeJS,
    AskarModule,
    WebSocketServer: ws.WebSocketServer ?? ws.default.WebSocketServer ?? ws.default.Server,
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
  BaseRecord,
  ConsoleLogger,
  DidCommHttpInboundTransport,
  DidCommHttpOutboundTransport,
  DidCommMediationRepository,
  DidCommMediationRole,
  DidCommMessageForwardingStrategy,
  DidCommMimeType,
  DidCommModule,
  DidCommOutOfBandRepository,
  DidCommOutOfBandRole,
  DidCommOutOfBandState,
  DidCommWsInboundTransport,
  DidCommWsOutboundTransport,
  InjectionSymbols,
  LogLevel,
  RecordNotFoundError,
  WebSocketServer,
} = await loadCredo().catch((e) => fail('mediator failed to load Credo', e))

const options = JSON.parse(process.argv[2] || '{}')
let stopping = false

const KEY_METHODS = ['kdf:argon2i:mod', 'kdf:argon2i:int', 'raw']


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


// Credo 0.6's DidCommQueueTransportRepository, kept in the agent's Askar store. Messages are
// handed out oldest first (createdAt, made strictly increasing in this process so that the
// order is never a tie). A message taken without being deleted (Pickup 2.0 delivery, live
// mode) is leased for `leaseMs`: not handed out again until then unless acknowledged
// (removed); the lease lives in memory, so after a restart every stored message is pending
// again.
class AskarMessageQueue {
  constructor(leaseMs) {
    this.leaseMs = leaseMs
    this.leases = new Map()
    this.lastCreated = 0
    this.locks = new Map()
  }

  // Runs `fn` after every earlier call for the same connection has finished: two deliveries
  // racing (live mode delivers on every forward) must not both take the same messages.
  serialized(connectionId, fn) {
    const previous = this.locks.get(connectionId) || Promise.resolve()
    const next = previous.catch(() => {}).then(fn)
    this.locks.set(connectionId, next)
    next
      .finally(() => {
        if (this.locks.get(connectionId) === next) this.locks.delete(connectionId)
      })
      .catch(() => {})
    return next
  }

  async stored(agentContext, connectionId) {
    const storage = agentContext.resolve(InjectionSymbols.StorageService)
    const query = connectionId === undefined ? {} : { connectionId }
    const records = await storage.findByQuery(agentContext, MessageRecord, query)
    return records.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  pending(records) {
    const now = Date.now()
    return records.filter((r) => !(this.leases.get(r.id) > now))
  }

  async getAvailableMessageCount(agentContext, { connectionId }) {
    return this.pending(await this.stored(agentContext, connectionId)).length
  }

  takeFromQueue(agentContext, { connectionId, limit, deleteMessages }) {
    return this.serialized(connectionId, async () => {
      const records = this.pending(await this.stored(agentContext, connectionId)).slice(0, limit ?? undefined)
      if (deleteMessages) {
        await this.remove(agentContext, connectionId, records.map((r) => r.id))
      } else {
        const until = Date.now() + this.leaseMs
        for (const r of records) this.leases.set(r.id, until)
      }
      return records.map((r) => ({ id: r.id, receivedAt: r.createdAt, encryptedMessage: r.message }))
    })
  }

  async addMessage(agentContext, { connectionId, payload, receivedAt }) {
    const now = Math.max(receivedAt ? receivedAt.getTime() : Date.now(), this.lastCreated + 1)
    this.lastCreated = now
    const record = new MessageRecord({ connectionId, message: payload, createdAt: new Date(now) })
    await agentContext.resolve(InjectionSymbols.StorageService).save(agentContext, record)
    emit({ event: 'queued', id: record.id, connectionId })
    return record.id
  }

  removeMessages(agentContext, { connectionId, messageIds }) {
    return this.serialized(connectionId, () => this.remove(agentContext, connectionId, messageIds))
  }

  // Only the connection's own messages: an id another connection names is left alone.
  async remove(agentContext, connectionId, messageIds) {
    const storage = agentContext.resolve(InjectionSymbols.StorageService)
    const removed = []
    for (const id of messageIds) {
      this.leases.delete(id)
      let record
      try {
        record = await storage.getById(agentContext, MessageRecord, id)
      } catch (e) {
        if (e instanceof RecordNotFoundError) continue
        throw e
      }
      if (record.connectionId !== connectionId) continue
      await storage.deleteById(agentContext, MessageRecord, id)
      removed.push(id)
    }
    if (removed.length) emit({ event: 'removed', ids: removed })
  }
}


function endpoints(port) {
  return options.endpoints || [`http://127.0.0.1:${port}`, `ws://127.0.0.1:${port}`]
}

function storeConfig() {
  const storage = options.storage || {}
  if (!storage.path || !path.isAbsolute(storage.path)) throw new Error('storage.path: an absolute folder')
  if (!storage.key) throw new Error('storage.key is needed')
  const id = storage.id || 'mediator'
  const method = storage.keyDerivationMethod || 'kdf:argon2i:mod'
  if (!KEY_METHODS.includes(method)) throw new Error(`storage.keyDerivationMethod ${method}: ${KEY_METHODS}`)
  const file = path.join(storage.path, 'wallet', id, 'sqlite.db')
  return {
    config: { id, key: storage.key, keyDerivationMethod: method, database: { type: 'sqlite', config: { path: file } } },
    store: { uri: `sqlite://${file}`, path: file, id, profile: id, keyMethod: method },
  }
}

async function mediatorInvitation(agent) {
  const create = () =>
    agent.didcomm.oob.createInvitation({
      label: options.label || 'Credo Mediator',
      multiUseInvitation: true,
      goalCode: options.goalCode || 'mediator',
      goal: 'Mediator Invitation',
    })
  if (options.createNewInvitation) return { record: await create(), reused: false }
  // As didcomm-mediator-credo: the newest reusable invitation we sent that still awaits
  // answers, else a new one.
  const records = await agent.dependencyManager
    .resolve(DidCommOutOfBandRepository)
    .findByQuery(agent.context, { state: DidCommOutOfBandState.AwaitResponse, role: DidCommOutOfBandRole.Sender })
  const newest = records.filter((r) => r.reusable).sort((a, b) => b.createdAt - a.createdAt)[0]
  return newest ? { record: newest, reused: true } : { record: await create(), reused: false }
}

// didcomm-mediator-credo's Postgres queue, and a reader of its table for the "queue" command
// (the same listing AskarMessageQueue.stored gives of the store).
async function postgresQueue(config) {
  for (const name of ['host', 'user', 'password', 'database']) {
    if (!config[name]) throw new Error(`queue.postgres.${name} is needed`)
  }
  const { DidCommTransportQueuePostgres } = await load('@credo-ts/didcomm-transport-queue-postgres')
  const pg = await load('pg')
  const queue = new DidCommTransportQueuePostgres({
    postgresHost: config.host,
    postgresUser: config.user,
    postgresPassword: config.password,
    postgresDatabaseName: config.database,
  })
  const Pool = pg.Pool ?? pg.default.Pool
  const reader = new Pool({ ...config, port: 5432, max: 1 })
  const table = {
    async stored() {
      const { rows } = await reader.query(
        'SELECT id, connection_id, created_at, encrypted_message FROM queued_message ORDER BY created_at, id'
      )
      return rows.map((r) => ({
        id: r.id,
        connectionId: r.connection_id,
        createdAt: r.created_at,
        message: r.encrypted_message,
      }))
    },
    close: () => reader.end(),
  }
  return { queue, table }
}

async function main() {
  const port = options.port
  if (!port) throw new Error('port is needed')
  const store = storeConfig()
  const inPostgres = options.queue && options.queue.postgres
  const postgres = inPostgres ? await postgresQueue(inPostgres) : null
  const queue = postgres ? postgres.queue : new AskarMessageQueue(options.leaseMs || 30000)
  const strategy = DidCommMessageForwardingStrategy[options.forwardingStrategy || 'QueueAndLiveModeDelivery']
  if (!strategy) throw new Error(`forwardingStrategy ${options.forwardingStrategy}`)

  // HTTP and WebSocket on one port: the WebSocket server has no port of its own and takes
  // the upgrade requests of the HTTP inbound transport's server.
  const socketServer = new WebSocketServer({ noServer: true })
  const http = new DidCommHttpInboundTransport({ port })
  const agent = new Agent({
    config: { logger: new StderrLogger(logLevel(options.logLevel || 'info')), autoUpdateStorageOnStartup: true },
    dependencies: agentDependencies,
    modules: {
      askar: new AskarModule({ askar: askarNodeJS, store: store.config }),
      didcomm: new DidCommModule({
        endpoints: endpoints(port),
        useDidSovPrefixWhereAllowed: true,
        didCommMimeType: DidCommMimeType.V0,
        queueTransportRepository: queue,
        transports: {
          inbound: [http, new DidCommWsInboundTransport({ server: socketServer })],
          outbound: [new DidCommHttpOutboundTransport(), new DidCommWsOutboundTransport()],
        },
        connections: { autoAcceptConnections: true },
        mediator: { autoAcceptMediationRequests: true, messageForwardingStrategy: strategy },
        basicMessages: false,
        credentials: false,
        proofs: false,
      }),
    },
  })
  http.app.get('/health', (req, res) => res.sendStatus(202))
  http.app.get('/invite', async (req, res) => {
    const record = typeof req.query._oobid === 'string' && (await agent.didcomm.oob.findById(req.query._oobid))
    if (!record || record.role !== DidCommOutOfBandRole.Sender || record.state !== DidCommOutOfBandState.AwaitResponse) {
      return res.status(400).send('No invitation found')
    }
    return res.send(record.outOfBandInvitation.toJSON())
  })

  const started = Date.now()
  if (inPostgres) await queue.initialize(agent)  // as its README: before the agent's
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
    store: store.store,
    queue: inPostgres ? 'postgres' : 'askar',
    forwardingStrategy: strategy,
  })

  const handlers = {
    queue: async () => ({
      messages: (await (postgres ? postgres.table.stored() : queue.stored(agent.context))).map((r) => ({
        id: r.id,
        connectionId: r.connectionId,
        createdAt: r.createdAt,
        message: r.message,
      })),
    }),
    connections: async () => ({
      connections: (await agent.didcomm.connections.getAll()).map((r) => ({
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
          .resolve(DidCommMediationRepository)
          .findByQuery(agent.context, { role: DidCommMediationRole.Mediator })
      ).map((m) => ({ id: m.id, connectionId: m.connectionId, state: m.state, recipientKeys: m.recipientKeys })),
    }),
    invitation: async () => ({ url: invitationUrl, invitation: record.outOfBandInvitation.toJSON() }),
    shutdown: async () => {
      stopping = true
      if (postgres) await postgres.table.close()
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
