// node unpack.mjs <veramo|identus> <recipient-secrets.json> <jwe-file>   -> plaintext JSON on stdout, metadata on stderr
import { readFileSync } from 'node:fs'
import { load, die } from './lib.mjs'
const [lib, secretsFile, jweFile] = process.argv.slice(2)
if (!lib || !secretsFile || !jweFile) die('usage: node unpack.mjs <veramo|identus> <recipient-secrets.json> <jwe-file>')
try {
  const L = await load(lib)
  await L.importPeer(JSON.parse(readFileSync(secretsFile, 'utf8')))
  const { message, metaData } = await L.unpack(JSON.parse(readFileSync(jweFile, 'utf8')))
  process.stderr.write(`meta=${JSON.stringify(metaData)}\n`)
  process.stdout.write(JSON.stringify(message) + '\n')
} catch (e) {
  die(`unpack failed: ${e?.stack ?? e}`)
}
