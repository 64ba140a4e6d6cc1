// Thin driver around Veramo 7 (@veramo/did-comm 7.0.1) for DIDComm v2 pack/unpack with did:peer:2.
// Everything in memory; nothing touches the network (did:peer resolves from the string).
import { createAgent } from '@veramo/core'
import { KeyManager, MemoryKeyStore, MemoryPrivateKeyStore } from '@veramo/key-manager'
import { KeyManagementSystem } from '@veramo/kms-local'
import { DIDManager, MemoryDIDStore } from '@veramo/did-manager'
import { DIDResolverPlugin } from '@veramo/did-resolver'
import { Resolver } from 'did-resolver'
import { PeerDIDProvider, getResolver as getPeerResolver } from '@veramo/did-provider-peer'
import { DIDComm } from '@veramo/did-comm'
import { ed25519, x25519 } from '@noble/curves/ed25519'

const b64u = (bytes) => Buffer.from(bytes).toString('base64url')
const unb64u = (s) => new Uint8Array(Buffer.from(s, 'base64url'))
const hex = (bytes) => Buffer.from(bytes).toString('hex')
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'))

export function makeAgent() {
  const privateKeyStore = new MemoryPrivateKeyStore()
  const agent = createAgent({
    plugins: [
      new KeyManager({ store: new MemoryKeyStore(), kms: { local: new KeyManagementSystem(privateKeyStore) } }),
      new DIDManager({
        store: new MemoryDIDStore(),
        defaultProvider: 'did:peer',
        providers: { 'did:peer': new PeerDIDProvider({ defaultKms: 'local' }) },
      }),
      new DIDResolverPlugin({ resolver: new Resolver({ ...getPeerResolver() }) }),
      new DIDComm({ transports: [] }),
    ],
  })
  return { agent, privateKeyStore }
}

/** Create a did:peer:2 (E=X25519 -> #key-1, V=Ed25519 -> #key-2, S=DIDCommMessaging) and export its private JWKs. */
export async function createPeer(ctx, serviceUri = 'https://example.com/didcomm') {
  const { agent, privateKeyStore } = ctx
  const id = await agent.didManagerCreate({
    provider: 'did:peer',
    options: {
      num_algo: 2,
      // Veramo's encoder abbreviates the first occurrence of type/DIDCommMessaging/serviceEndpoint/routingKeys/accept
      service: { type: 'DIDCommMessaging', serviceEndpoint: { uri: serviceUri, accept: ['didcomm/v2'] } },
    },
  })
  const doc = (await agent.resolveDid({ didUrl: id.did })).didDocument
  const keys = []
  for (const k of id.keys) {
    const priv = unhex((await privateKeyStore.getKey({ alias: k.kid })).privateKeyHex)
    const crv = k.type // 'X25519' | 'Ed25519'
    const d = priv.subarray(0, 32) // Ed25519 is stored as seed||pub (64 bytes)
    // find the DID-doc verification method whose multikey matches this public key
    const vm = doc.verificationMethod.find((v) => {
      const raw = base58(v.publicKeyMultibase.slice(1)).subarray(2)
      return hex(raw) === k.publicKeyHex
    })
    keys.push({ kid: id.did + vm.id, kty: 'OKP', crv, x: b64u(unhex(k.publicKeyHex)), d: b64u(d) })
  }
  keys.sort((a, b) => a.kid.localeCompare(b.kid))
  return { did: id.did, keys }
}

/** Import a {did, keys:[JWK...]} secrets file so the agent can unpack / authcrypt as that DID. */
export async function importPeer(ctx, secrets) {
  const keys = secrets.keys.map((j) => {
    const d = unb64u(j.d)
    const privateKeyHex = j.crv === 'Ed25519' ? hex(Buffer.concat([d, ed25519.getPublicKey(d)])) : hex(d)
    return { kid: j.kid, type: j.crv, kms: 'local', privateKeyHex }
  })
  await ctx.agent.didManagerImport({ did: secrets.did, provider: 'did:peer', keys, services: [] })
}

export async function pack(ctx, mode, from, to, message, options = undefined) { // options e.g. { enc: "A256CBC-HS512" }
  const msg = { ...message, to: [to] }
  if (mode === 'auth') msg.from = from
  const packing = mode === 'auth' ? 'authcrypt' : 'anoncrypt'
  const r = await ctx.agent.packDIDCommMessage({ packing, message: msg, options })
  return JSON.parse(r.message)
}

export async function unpack(ctx, jwe) {
  const r = await ctx.agent.unpackDIDCommMessage({ message: JSON.stringify(jwe) })
  return { message: r.message, metaData: r.metaData }
}

// minimal base58btc decoder (to match multikeys); avoids extra deps
const ALPH = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'
function base58(s) {
  let n = 0n
  for (const c of s) n = n * 58n + BigInt(ALPH.indexOf(c))
  let h = n.toString(16)
  if (h.length % 2) h = '0' + h
  const lead = s.match(/^1*/)[0].length
  return new Uint8Array([...new Array(lead).fill(0), ...Buffer.from(h, 'hex')])
}
