#!/usr/bin/env node
// A real Veramo 7 agent (@veramo/*@7.0.1) driven by JSON lines: one request a line on stdin, one
// answer a line on stdout. Everything else (progress, Veramo's `debug` output with DEBUG=veramo:*)
// goes to stderr.
//
// It uses Veramo's own code paths wherever Veramo has them:
//   - coordinate mediation: createV3MediateRequestMessage / createV3RecipientUpdateMessage /
//     createV3RecipientQueryMessage (and the 2.0 createMediateRequestMessage on request), handled
//     by CoordinateMediationV3RecipientMessageHandler / CoordinateMediationRecipientMessageHandler;
//   - sending: agent.packDIDCommMessage + agent.sendDIDCommMessage (Veramo resolves the recipient,
//     wraps the routing 2.0 forward itself and posts with DIDCommHttpTransport);
//   - Pickup 3.0: createV3StatusRequestMessage / createV3DeliveryRequestMessage, and Veramo's
//     PickupRecipientMessageHandler opens the delivery and sends messages-received itself.
// The one place the driver steps in is documented at `normaliseDelivery` (Veramo reads only
// `data.json` attachments; Pickup 3.0 shows `data.base64`).
//
// Ops (see NOTES.md, "Veramo agent against our mediator"):
//   {"op":"start","mediator_did":"did:peer:2...", "routing":"did"|"keys", "mediation":"3.0"|"2.0",
//    "return_route":"veramo"|"all", "query":false}
//   {"op":"send","to":"did:...","content":"text", "packing":"authcrypt"|"anoncrypt"}
//   {"op":"pickup", "max_rounds":10, "normalise":true}
//   {"op":"query"}   recipient-query (3.0), with return_route "all" added
//   {"op":"stop"}   (closing stdin also ends it; so does VERAMO_AGENT_MAX_SECONDS, default 115)
// Every answer is {"ok":true|false, "op":..., ...}; a request's "id" is echoed.
import readline from 'node:readline'
import { createAgent } from '@veramo/core'
import { KeyManager, MemoryKeyStore, MemoryPrivateKeyStore } from '@veramo/key-manager'
import { KeyManagementSystem } from '@veramo/kms-local'
import { DIDManager, MemoryDIDStore } from '@veramo/did-manager'
import { DIDResolverPlugin } from '@veramo/did-resolver'
import { DataStoreJson } from '@veramo/data-store-json'
import { MessageHandler } from '@veramo/message-handler'
import { Resolver } from 'did-resolver'
import { PeerDIDProvider, getResolver as getPeerResolver } from '@veramo/did-provider-peer'
import {
  DIDComm,
  DIDCommHttpTransport,
  DIDCommMessageHandler,
  CoordinateMediationV3RecipientMessageHandler,
  CoordinateMediationRecipientMessageHandler,
  PickupRecipientMessageHandler,
  createV3MediateRequestMessage,
  createV3RecipientUpdateMessage,
  createV3RecipientQueryMessage,
  createV3StatusRequestMessage,
  createV3DeliveryRequestMessage,
  createMediateRequestMessage,
  UpdateAction,
} from '@veramo/did-comm'
import { v4 as uuidv4 } from 'uuid'

const BASIC = 'https://didcomm.org/basicmessage/2.0/message'
const log = (...a) => process.stderr.write(`[veramo-agent ${process.pid}] ${a.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join(' ')}\n`)

// ---------------------------------------------------------------------------------------------
// What the agent saw: every DIDComm v2 message Veramo unpacked, every HTTP post, every forward.
const seen = { received: [], posts: [], forwards: [], errors: [] }

const recorder = {
  eventTypes: ['DIDCommV2Message-received', 'DIDCommV2Message-forwarded', 'DIDCommV2Message-sent', 'error'],
  async onEvent({ type, data }) {
    if (type === 'DIDCommV2Message-received') {
      const m = data.message
      seen.received.push({ message: m, packing: data.metaData?.packing })
      log('received', m.type, 'from', (m.from || '-').slice(0, 40), 'packing', data.metaData?.packing)
    } else if (type === 'DIDCommV2Message-forwarded') {
      seen.forwards.push({ messageId: data.messageId, next: data.next, routingKey: data.routingKey })
      log('forward wrapped for next', String(data.next).slice(0, 40), 'routingKey', String(data.routingKey).slice(0, 60))
    } else if (type === 'error') {
      seen.errors.push(String(data?.message ?? data))
      log('agent error event:', String(data?.message ?? data))
    }
  },
}

// DIDs here are long (ours embeds the mediator's); answers abbreviate those inside envelopes.
const short = (v) => (typeof v === 'string' && v.length > 64 ? `${v.slice(0, 40)}…${v.includes('#') ? v.slice(v.lastIndexOf('#')) : ''}` : v)

function header(jwe) {
  try {
    const j = typeof jwe === 'string' ? JSON.parse(jwe) : jwe
    if (!j.protected) return { typ: j.typ, type: j.type }
    const h = JSON.parse(Buffer.from(j.protected, 'base64url').toString())
    return { alg: h.alg, enc: h.enc, skid: short(h.skid), kids: (j.recipients || []).map((r) => short(r.header?.kid)) }
  } catch (e) {
    return { unparsable: String(e) }
  }
}

// Veramo's own HTTP transport, only watched: what went where and what came back.
class WatchedHttpTransport extends DIDCommHttpTransport {
  async send(service, message) {
    const uri = typeof service.serviceEndpoint === 'string' ? service.serviceEndpoint : service.serviceEndpoint?.uri ?? service.serviceEndpoint?.[0]?.uri ?? service.serviceEndpoint?.[0]
    const r = await super.send(service, message)
    const post = { uri, envelope: header(message), bytes: message.length, result: r.result, error: r.error, returned: r.returnMessage ? header(r.returnMessage) : null }
    seen.posts.push(post)
    log('POST', uri, r.error ? `ERROR ${r.error}` : r.result, r.returnMessage ? '(DIDComm answer)' : '(no DIDComm answer)')
    return r
  }
}

// ---------------------------------------------------------------------------------------------
const privateKeyStore = new MemoryPrivateKeyStore()
const jsonStore = { notifyUpdate: async () => {} }
const agent = createAgent({
  plugins: [
    new KeyManager({ store: new MemoryKeyStore(), kms: { local: new KeyManagementSystem(privateKeyStore) } }),
    new DIDManager({
      store: new MemoryDIDStore(),
      defaultProvider: 'did:peer',
      providers: { 'did:peer': new PeerDIDProvider({ defaultKms: 'local' }) },
    }),
    new DIDResolverPlugin({ resolver: new Resolver({ ...getPeerResolver() }) }),
    new DataStoreJson(jsonStore),
    new MessageHandler({
      messageHandlers: [
        new DIDCommMessageHandler(),
        new CoordinateMediationV3RecipientMessageHandler(),
        new CoordinateMediationRecipientMessageHandler(),
        new PickupRecipientMessageHandler(),
      ],
    }),
    new DIDComm({ transports: [new WatchedHttpTransport()] }),
    recorder,
  ],
})

const state = { did: null, mediator: null }

function summary(m) {
  if (!m) return null
  return { type: m.type ?? null, id: m.id ?? null, thid: m.threadId ?? null, from: short(m.from ?? null), body: m.data ?? null, attachments: m.attachments?.length ?? 0 }
}

/** Pack (authcrypt) a message Veramo built, send it the way Veramo sends, and hand back what came back. */
async function sendVeramo(message, recipientDidUrl, packing = 'authcrypt') {
  const postsBefore = seen.posts.length
  const packedMessage = await agent.packDIDCommMessage({ packing, message })
  // Read now: with routingKeys Veramo overwrites packedMessage.message with the forward it wrapped.
  const envelope = header(packedMessage.message)
  let res
  try {
    res = await agent.sendDIDCommMessage({ packedMessage, messageId: message.id, recipientDidUrl })
  } catch (e) {
    const causes = e.cause?.errors?.map((x) => String(x.message ?? x)) ?? []
    const err = new Error(`${e.message}${causes.length ? ': ' + causes.join(' | ') : ''}`)
    err.posts = seen.posts.slice(postsBefore)
    throw err
  }
  return { res, reply: res?.returnMessage ?? null, posts: seen.posts.slice(postsBefore), envelope }
}

async function opStart(req) {
  if (state.did) throw new Error('already started')
  const mediatorDid = req.mediator_did
  if (!mediatorDid?.startsWith('did:')) throw new Error('mediator_did is required')
  const routing = req.routing ?? 'did'
  const mediation = String(req.mediation ?? '3.0')
  const returnRoute = req.return_route ?? 'veramo'
  // Veramo must be able to resolve the mediator's DID (its resolver rejects a did:peer:2 whose
  // service segment has '-' or '_').
  const med = await agent.resolveDid({ didUrl: mediatorDid })
  if (!med.didDocument) throw new Error(`Veramo cannot resolve the mediator's DID: ${JSON.stringify(med.didResolutionMetadata)}`)
  const httpService = (med.didDocument.service || []).map((s) => s.serviceEndpoint?.uri ?? s.serviceEndpoint).find((u) => typeof u === 'string' && u.startsWith('http'))

  // Our DID: a did:peer:2 whose DIDCommMessaging service routes through the mediator.
  //  routing "did":  serviceEndpoint.uri = the mediator's DID (DIDComm v2 "DID as endpoint")
  //  routing "keys": serviceEndpoint.uri = the mediator's HTTP URL, routingKeys = [its #key-1]
  const serviceEndpoint = routing === 'keys'
    ? { uri: httpService, routingKeys: [`${mediatorDid}#key-1`], accept: ['didcomm/v2'] }
    : { uri: mediatorDid, accept: ['didcomm/v2'] }
  const id = await agent.didManagerCreate({
    provider: 'did:peer',
    options: { num_algo: 2, service: { type: 'DIDCommMessaging', serviceEndpoint } },
  })
  const own = await agent.resolveDid({ didUrl: id.did })
  if (!own.didDocument) throw new Error(`Veramo cannot resolve its own new DID: ${JSON.stringify(own.didResolutionMetadata)}`)
  state.did = id.did
  state.mediator = mediatorDid
  log('created', id.did.slice(0, 60) + '...', 'routing', routing)

  // 1. mediate-request, as Veramo builds it.
  const request = mediation === '2.0' ? createMediateRequestMessage(id.did, mediatorDid) : createV3MediateRequestMessage(id.did, mediatorDid)
  if (returnRoute === 'all') request.return_route = 'all'
  // Veramo's grant handler only acts on a grant whose thid names a request it has stored.
  await agent.dataStoreSaveMessage({ message: { id: request.id, type: request.type, from: request.from, to: mediatorDid, createdAt: request.created_time, data: request.body } })
  const r1 = await sendVeramo(request, mediatorDid)
  const grantTypes = ['https://didcomm.org/coordinate-mediation/3.0/mediate-grant', 'https://didcomm.org/coordinate-mediation/2.0/mediate-grant']
  const mediate = {
    request_type: request.type,
    request_return_route: request.return_route ?? null,
    answer: summary(r1.reply),
    granted_over_http: grantTypes.includes(r1.reply?.type),
    veramo_service_added: (r1.reply?.metaData || []).some((m) => m.type === 'DIDCommMessagingServiceAdded'),
    posts: r1.posts,
  }
  if (r1.reply?.type?.endsWith('/mediate-deny')) throw Object.assign(new Error('mediation denied'), { detail: mediate })

  // 2. recipient-update (3.0; Veramo has no 2.0 keylist-update builder) registering our DID.
  const update = createV3RecipientUpdateMessage(id.did, mediatorDid, [{ recipient_did: id.did, action: UpdateAction.ADD }])
  const r2 = await sendVeramo(update, mediatorDid)
  const updated = r2.reply?.data?.updated ?? r2.reply?.data?.updates ?? null
  const registered = Array.isArray(updated) && updated.some((u) => u.recipient_did === id.did && ['success', 'no_change'].includes(u.result))
  const answer = {
    did: id.did,
    mediator_did: mediatorDid,
    routing,
    service: own.didDocument.service,
    mediate,
    update: { answer: summary(r2.reply), registered, posts: r2.posts },
  }
  if (req.query) answer.query = await opQuery()
  if (!registered) throw Object.assign(new Error('recipient-update did not register our DID'), { detail: answer })
  return answer
}

async function opQuery() {
  const q = createV3RecipientQueryMessage(state.did, state.mediator)
  q.return_route = 'all' // Veramo's builder has none; without it the answer is queued
  const r = await sendVeramo(q, state.mediator)
  return { answer: summary(r.reply) }
}

async function opSend(req) {
  if (!state.did) throw new Error('start first')
  const packing = req.packing ?? 'authcrypt'
  const message = {
    id: uuidv4(),
    type: BASIC,
    to: [req.to],
    created_time: new Date().toISOString(),
    lang: 'en',
    body: { content: String(req.content ?? '') },
  }
  if (packing === 'authcrypt') message.from = state.did
  const fwdBefore = seen.forwards.length
  const r = await sendVeramo(message, req.to, packing)
  const posts = r.posts
  return {
    message_id: message.id,
    to: req.to,
    packing,
    inner_envelope: r.envelope,
    forwards: seen.forwards.slice(fwdBefore),
    posts,
    delivered_to_mediator: posts.some((p) => !p.error),
    transport_id: r.res?.transportId ?? null,
    answer: summary(r.reply),
  }
}

// Pickup 3.0 delivery attachments carry the message as `data.base64` (the spec's example; our
// mediator always does so). Veramo's PickupRecipientMessageHandler reads only
// `attachment.data.json` (messagepickup-message-handler.js, `JSON.stringify(attachment.data.json)`),
// so it hands `undefined` to handleMessage, throws, and never sends messages-received.
// With normalise (default), the driver rewrites each base64 attachment as `data.json` and gives
// the delivery back to Veramo's own handler, which then does everything itself.
function deliveryNeedsNormalising(reply) {
  return reply?.type?.endsWith('/delivery') && (reply.attachments || []).some((a) => a?.data && a.data.json === undefined && typeof a.data.base64 === 'string')
}

async function normaliseDelivery(reply) {
  const attachments = reply.attachments.map((a) => {
    if (a?.data?.json !== undefined || typeof a?.data?.base64 !== 'string') return a
    const text = Buffer.from(a.data.base64, 'base64url').toString('utf8')
    return { ...a, data: { json: JSON.parse(text) } }
  })
  const plain = {
    typ: 'application/didcomm-plain+json',
    id: reply.id,
    type: reply.type,
    from: reply.from,
    to: [reply.to],
    thid: reply.threadId,
    body: reply.data ?? {},
    attachments,
  }
  return agent.handleMessage({ raw: JSON.stringify(plain), save: false })
}

async function opPickup(req) {
  if (!state.did) throw new Error('start first')
  const normalise = req.normalise ?? true
  const maxRounds = req.max_rounds ?? 10
  const receivedBefore = seen.received.length
  const rounds = []
  const statusReq = createV3StatusRequestMessage(state.did, state.mediator)
  const s = await sendVeramo(statusReq, state.mediator)
  const status = summary(s.reply)
  log('status', JSON.stringify(status?.body))
  let veramoNative = true
  for (let i = 0; i < maxRounds; i++) {
    const dr = createV3DeliveryRequestMessage(state.did, state.mediator)
    const recvIdx = seen.received.length
    const postsIdx = seen.posts.length
    const d = await sendVeramo(dr, state.mediator)
    const reply = d.reply
    const round = { answer: summary(reply), attachment_data: (reply?.attachments || []).map((a) => Object.keys(a?.data || {})) }
    if (reply?.type?.endsWith('/delivery')) {
      round.veramo_opened = seen.received.length - recvIdx - 1 // minus the delivery itself
      if (deliveryNeedsNormalising(reply)) {
        veramoNative = false
        if (!normalise) { rounds.push(round); break }
        await normaliseDelivery(reply)
        round.normalised = true
      }
      round.posts = seen.posts.slice(postsIdx)
      round.messages_received_sent = round.posts.length > 1
      rounds.push(round)
      continue
    }
    rounds.push(round)
    break // a status: the queue is empty
  }
  const all = seen.received.slice(receivedBefore)
  const basic = all.filter((x) => x.message.type === BASIC).map((x) => ({
    content: x.message.body?.content, from: x.message.from ?? null, id: x.message.id, packing: x.packing,
  }))
  const others = all.map((x) => x.message.type).filter((t) => t !== BASIC)
  return { status, rounds, veramo_native: veramoNative, messages: basic, contents: basic.map((b) => b.content), other_types: others }
}

// ---------------------------------------------------------------------------------------------
// A forgotten agent must not outlive its test: exit after VERAMO_AGENT_MAX_SECONDS (default 115).
const maxSeconds = Number(process.env.VERAMO_AGENT_MAX_SECONDS ?? 115)
setTimeout(() => { log(`exiting: alive for ${maxSeconds} s`); process.exit(3) }, maxSeconds * 1000).unref()

const ops = { start: opStart, send: opSend, pickup: opPickup, query: async () => opQuery() }
const rl = readline.createInterface({ input: process.stdin, terminal: false })
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n')
let queue = Promise.resolve()
rl.on('line', (line) => {
  queue = queue.then(async () => {
    if (!line.trim()) return
    let req
    try {
      req = JSON.parse(line)
    } catch (e) {
      return out({ ok: false, error: `bad JSON: ${e.message}` })
    }
    const echo = req.id !== undefined ? { id: req.id } : {}
    if (req.op === 'stop') {
      out({ ok: true, op: 'stop', ...echo })
      process.exit(0)
    }
    const fn = ops[req.op]
    if (!fn) return out({ ok: false, op: req.op, ...echo, error: `unknown op ${req.op}` })
    try {
      const r = await fn(req)
      out({ ok: true, op: req.op, ...echo, ...r })
    } catch (e) {
      log('op failed', req.op, e.stack || String(e))
      out({ ok: false, op: req.op, ...echo, error: String(e.message || e), detail: e.detail ?? undefined, posts: e.posts ?? undefined })
    }
  })
})
rl.on('close', () => queue.then(() => process.exit(0)))
