// Dispatch to one of the two drivers; each lives next to its own node_modules.
export async function load(name) {
  if (name === 'veramo') {
    const V = await import('./veramo/veramo-lib.mjs')
    const ctx = V.makeAgent()
    return {
      createPeer: (uri) => V.createPeer(ctx, uri),
      importPeer: (s) => V.importPeer(ctx, s),
      pack: (mode, from, to, plain, opts = {}) => V.pack(ctx, mode, from, to, plain, opts.enc ? { enc: opts.enc } : undefined),
      unpack: (jwe) => V.unpack(ctx, jwe),
    }
  }
  if (name === 'identus') {
    const I = await import('./identus/identus-lib.mjs')
    const ctx = I.makeCtx()
    return {
      createPeer: (uri) => I.createPeer(ctx, uri),
      importPeer: (s) => I.importPeer(ctx, s),
      pack: (mode, from, to, plain, opts = {}) => I.pack(ctx, mode, from, to, plain, opts),
      unpack: (jwe) => I.unpack(ctx, jwe),
    }
  }
  throw new Error(`unknown library ${name} (veramo|identus)`)
}
export function die(msg) { process.stderr.write(msg + '\n'); process.exit(2) }
