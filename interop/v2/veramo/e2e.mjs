#!/usr/bin/env node
// Two real Veramo agents (agent.mjs) mediated by our mediator: B sends to A, A picks up; then
// A sends to B, B picks up. Usage: node e2e.mjs [http://127.0.0.1:18480]
// Environment: ROUTING=did|keys (default did), MEDIATION=3.0|2.0 (default 3.0),
// RETURN_ROUTE=veramo|all (default veramo: the mediate-request exactly as Veramo builds it),
// PACKING=authcrypt|anoncrypt (default authcrypt), NORMALISE=0 (let Veramo's pickup handler see the
// mediator's base64 attachments as they are: it cannot open them), VERBOSE=1 (print every answer).
// Prints one JSON line per step on stdout and a final {"ok":...}; exit code 0 when both directions work.
import { spawn } from 'node:child_process'
import readline from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const base = process.argv[2] ?? 'http://127.0.0.1:18480'
const here = path.dirname(fileURLToPath(import.meta.url))
const opts = {
  routing: process.env.ROUTING ?? 'did',
  mediation: process.env.MEDIATION ?? '3.0',
  return_route: process.env.RETURN_ROUTE ?? 'veramo',
}
const packing = process.env.PACKING ?? 'authcrypt'
const verbose = !!process.env.VERBOSE
const normalise = process.env.NORMALISE !== '0'

function startAgent(name) {
  const child = spawn(process.execPath, [path.join(here, 'agent.mjs')], { stdio: ['pipe', 'pipe', 'pipe'] })
  const waiting = []
  readline.createInterface({ input: child.stdout }).on('line', (l) => waiting.shift()?.(JSON.parse(l)))
  child.stderr.on('data', (d) => process.stderr.write(d.toString().replace(/^\[veramo-agent \d+\]/gm, `[${name}]`)))
  const call = (req) => new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${name}: no answer to ${req.op} in 60 s`)), 60000)
    waiting.push((a) => { clearTimeout(t); resolve(a) })
    child.stdin.write(JSON.stringify(req) + '\n')
  })
  return { name, child, call }
}

const step = (o) => process.stdout.write(JSON.stringify(o) + '\n')
const guard = setTimeout(() => { step({ ok: false, error: 'e2e took over 110 s' }); process.exit(2) }, 110000)

const inv = await (await fetch(`${base}/v2/invitation`)).json()
const A = startAgent('A')
const B = startAgent('B')
let ok = true
try {
  const [a, b] = await Promise.all([A.call({ op: 'start', mediator_did: inv.did, ...opts }), B.call({ op: 'start', mediator_did: inv.did, ...opts })])
  for (const [n, r] of [['A', a], ['B', b]]) {
    step({ step: `start ${n}`, ok: r.ok, error: r.error, did: r.did?.slice(0, 60), granted_over_http: r.mediate?.granted_over_http, registered: r.update?.registered })
    if (verbose) step(r)
    if (!r.ok) throw new Error(`start ${n} failed`)
  }
  for (const [from, fromR, to, toR] of [[B, b, A, a], [A, a, B, b]]) {
    const content = `hello ${to.name} from ${from.name} ${new Date().toISOString()}`
    const s = await from.call({ op: 'send', to: toR.did, content, packing })
    step({ step: `${from.name} send to ${to.name}`, ok: s.ok, error: s.error, delivered_to_mediator: s.delivered_to_mediator, forwards: s.forwards?.length, posts: s.posts?.map((p) => `${p.uri} ${p.error ?? p.result}`) })
    if (verbose) step(s)
    const p = await to.call({ op: 'pickup', normalise })
    const got = p.contents?.includes(content)
    step({ step: `${to.name} pickup`, ok: p.ok && got, error: p.error, contents: p.contents, other_types: p.other_types, veramo_native: p.veramo_native, status_count: p.status?.body?.message_count })
    if (verbose) step(p)
    if (!(p.ok && got)) ok = false
    // The queue must be empty after the acknowledgement.
    const again = await to.call({ op: 'pickup', normalise })
    step({ step: `${to.name} pickup again`, ok: again.ok, status_count: again.status?.body?.message_count, contents: again.contents })
    if (!again.ok || again.status?.body?.message_count !== 0) ok = false
  }
} catch (e) {
  ok = false
  step({ ok: false, error: String(e.message || e) })
} finally {
  await Promise.allSettled([A.call({ op: 'stop' }), B.call({ op: 'stop' })])
  clearTimeout(guard)
}
step({ ok, options: { ...opts, packing, normalise } })
process.exit(ok ? 0 : 1)
