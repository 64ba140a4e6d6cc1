// node mkpeer.mjs <veramo|identus> [service-uri]  -> {"did":..., "keys":[X25519 #key-1, Ed25519 #key-2 private JWKs]}
import { load, die } from './lib.mjs'
const [lib, uri] = process.argv.slice(2)
if (!lib) die('usage: node mkpeer.mjs <veramo|identus> [service-uri]')
const L = await load(lib)
process.stdout.write(JSON.stringify(await L.createPeer(uri ?? 'https://example.com/didcomm'), null, 2) + '\n')
