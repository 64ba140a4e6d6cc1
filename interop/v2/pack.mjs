// node pack.mjs <veramo|identus> <anon|auth> <recipient-did> <plaintext-json-file>
// env: ENC=A256CBC-HS512|A256GCM|XC20P  (veramo: any mode; identus: anon only, switches to raw wasm packing)
//      IDENTUS_RAW=1  pack the plaintext verbatim via the wasm instead of the SDK's DIDCommWrapper
//      SENDER_SECRETS=file.json  (auth) use this sender instead of creating a fresh one
import { readFileSync } from 'node:fs'
import { load, die } from './lib.mjs'
const [lib, mode, to, file] = process.argv.slice(2)
if (!lib || !['anon', 'auth'].includes(mode) || !to || !file) die('usage: node pack.mjs <veramo|identus> <anon|auth> <recipient-did> <plaintext-json-file>')
try {
  const L = await load(lib)
  const plain = JSON.parse(readFileSync(file, 'utf8'))
  let from
  if (mode === 'auth') {
    if (process.env.SENDER_SECRETS) {
      const s = JSON.parse(readFileSync(process.env.SENDER_SECRETS, 'utf8'))
      await L.importPeer(s)
      from = s.did
    } else {
      const s = await L.createPeer('https://sender.example/didcomm')
      from = s.did
      if (process.env.SENDER_OUT) (await import('node:fs')).writeFileSync(process.env.SENDER_OUT, JSON.stringify(s, null, 2))
    }
    process.stderr.write(`sender=${from}\n`)
  }
  const jwe = await L.pack(mode, from, to, plain, { enc: process.env.ENC, raw: !!process.env.IDENTUS_RAW })
  process.stdout.write(JSON.stringify(jwe) + '\n')
} catch (e) {
  die(`pack failed: ${e?.stack ?? e}`)
}
