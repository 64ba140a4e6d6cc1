// Thin driver around Hyperledger Identus TS SDK 7.0.0 (DIDCommWrapper -> bundled sicpa didcomm-rust wasm).
// No Agent, no mediator, no WebSocket, no store: DIDCommWrapper only needs pluto.getAllPeerDIDs(),
// so an in-memory stub is passed instead of Pluto(+@trust0/identus-store).
import SDK from '@hyperledger/identus-sdk'
const { Domain } = SDK

const b64u = (bytes) => Buffer.from(bytes).toString('base64url')
const unb64u = (s) => new Uint8Array(Buffer.from(s, 'base64url'))

export function makeCtx() {
  const apollo = new SDK.Apollo()
  const castor = new SDK.Castor(apollo) // default resolvers: did:peer (numalgo 2) + did:prism
  const peers = [] // SDK.PeerDID[]  (did + raw private keys)
  const pluto = { getAllPeerDIDs: async () => peers }
  const wrapper = new SDK.DIDCommWrapper(apollo, castor, pluto)
  return { apollo, castor, peers, pluto, wrapper }
}

function remember(ctx, did, xPriv, edPriv) {
  // SDK.PeerDID validates the DID with a regex: each key 46-47 base58 chars, service part [0-9a-zA-Z=]* only
  ctx.peers.push(
    new SDK.PeerDID(did, [
      { keyCurve: { curve: Domain.Curve.X25519 }, value: xPriv.raw },
      { keyCurve: { curve: Domain.Curve.ED25519 }, value: edPriv.raw },
    ]),
  )
}

/** did:peer:2.E<x25519>.V<ed25519>.S<{"t":"dm","s":{"uri":..,"r":[],"a":["didcomm/v2"]}}> ; #key-1 = X25519, #key-2 = Ed25519 */
export async function createPeer(ctx, serviceUri = 'https://example.com/didcomm') {
  const { apollo, castor } = ctx
  const x = apollo.createPrivateKey({ type: Domain.KeyTypes.Curve25519, curve: Domain.Curve.X25519 })
  const ed = apollo.createPrivateKey({ type: Domain.KeyTypes.EC, curve: Domain.Curve.ED25519 })
  const svc = new Domain.DIDDocument.Service(
    'didcomm', // id is ignored by the encoder
    ['DIDCommMessaging'],
    new Domain.DIDDocument.ServiceEndpoint(serviceUri, ['didcomm/v2'], []),
  )
  const did = await castor.createPeerDID([x.publicKey(), ed.publicKey()], [svc])
  remember(ctx, did, x, ed)
  const s = did.toString()
  return {
    did: s,
    keys: [
      { kid: `${s}#key-1`, kty: 'OKP', crv: 'X25519', x: b64u(x.publicKey().raw), d: b64u(x.raw) },
      { kid: `${s}#key-2`, kty: 'OKP', crv: 'Ed25519', x: b64u(ed.publicKey().raw), d: b64u(ed.raw) },
    ],
  }
}

export async function importPeer(ctx, secrets) {
  const xj = secrets.keys.find((k) => k.crv === 'X25519')
  const ej = secrets.keys.find((k) => k.crv === 'Ed25519')
  const x = new SDK.X25519PrivateKey(unb64u(xj.d))
  const ed = ej ? new SDK.Ed25519PrivateKey(unb64u(ej.d)) : x
  remember(ctx, Domain.DID.fromString(secrets.did), x, ed)
}

function toDomainMessage(plain, from, to) {
  return Domain.Message.fromJson({
    ...plain,
    piuri: plain.type,
    from,
    to,
    created_time: plain.created_time,
    attachments: plain.attachments ?? [],
  })
}

const ANON_ALGS = { 'XC20P': 'Xc20pEcdhEsA256kw', 'A256CBC-HS512': 'A256cbcHs512EcdhEsA256kw', 'A256GCM': 'A256gcmEcdhEsA256kw' }

/**
 * mode 'anon' | 'auth'. Default path is the SDK's own DIDCommWrapper.packEncrypted (what an Identus edge agent sends:
 * it rebuilds the plaintext from Domain.Message: id,typ,type,body,to,from,created_time,thid,pthid,attachments,from_prior;
 * other headers such as expires_time / custom headers are dropped).
 * opts.raw = true packs the given plaintext verbatim through the same wasm + resolvers; opts.enc picks the anon enc.
 */
export async function pack(ctx, mode, from, to, plain, opts = {}) {
  const fromDid = mode === 'auth' ? from : undefined
  if (!opts.raw && !opts.enc) {
    const msg = toDomainMessage(plain, fromDid, to)
    return JSON.parse(await ctx.wrapper.packEncrypted(msg, Domain.DID.fromString(to), fromDid && Domain.DID.fromString(fromDid)))
  }
  const didcomm = await SDK.DIDCommWrapper.getDIDComm()
  const m = new didcomm.Message({ typ: 'application/didcomm-plain+json', ...plain, to: [to], ...(fromDid ? { from: fromDid } : {}) })
  const [packed] = await m.pack_encrypted(to, fromDid ?? null, null, ctx.wrapper.didResolver, ctx.wrapper.secretsResolver, {
    enc_alg_anon: ANON_ALGS[opts.enc ?? 'XC20P'],
    enc_alg_auth: 'A256cbcHs512Ecdh1puA256kw', // the only authcrypt alg didcomm-rust offers
    forward: false,
    protect_sender: false,
  })
  return JSON.parse(packed)
}

/** returns { message: <plaintext JSON exactly as decrypted>, metaData: <didcomm-rust UnpackMetadata> } */
export async function unpack(ctx, jwe) {
  const didcomm = await SDK.DIDCommWrapper.getDIDComm()
  const [msg, meta] = await didcomm.Message.unpack(JSON.stringify(jwe), ctx.wrapper.didResolver, ctx.wrapper.secretsResolver, {
    expect_decrypt_by_all_keys: false,
    unwrap_re_wrapping_forward: false,
  })
  return { message: msg.as_value(), metaData: meta }
}
