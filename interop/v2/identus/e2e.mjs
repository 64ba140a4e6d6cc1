// End-to-end check: two real Identus agents (agent.mjs processes) A and B on one mediator.
//   node e2e.mjs [mediator base URL, default http://127.0.0.1:18470] [--poll] [--poll-ms N] [--offline]
// --offline: A is mediated and routed but does not fetch until B's message to it is queued; then
//   A starts fetching (live or --poll): the message must come out of A's mailbox.
// B -> A and A -> B basic messages, each must arrive through the mediator (forward -> queue ->
// live delivery over the WebSocket, or Pickup 3.0 delivery-request when --poll).
// Prints one JSON summary line on stdout; exit 0 only if both directions worked.
// Agent stderr goes to $E2E_LOG_DIR/{A,B}.err (default: a temp dir, path printed).
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { mkdtempSync, openSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const args = process.argv.slice(2)
const base = args.find((a) => !a.startsWith('--') && !/^\d+$/.test(a)) ?? 'http://127.0.0.1:18470'
const live = !args.includes('--poll')
const pollIdx = args.indexOf('--poll-ms')
const offline = args.includes('--offline')
const pollMs = pollIdx >= 0 ? Number(args[pollIdx + 1]) : undefined
const waitMs = Number(process.env.E2E_WAIT_MS ?? 30000)
const logDir = process.env.E2E_LOG_DIR ?? mkdtempSync(join(tmpdir(), 'identus-e2e-'))
const here = dirname(fileURLToPath(import.meta.url))

function agentProc(name) {
  const err = openSync(join(logDir, `${name}.err`), 'w')
  const p = spawn(process.execPath, [join(here, 'agent.mjs')], {
    stdio: ['pipe', 'pipe', err],
    env: { ...process.env, AGENT_NAME: name },
  })
  const pending = []
  createInterface({ input: p.stdout }).on('line', (l) => {
    const w = pending.shift()
    if (w) w(JSON.parse(l))
  })
  p.on('exit', (code) => { for (const w of pending.splice(0)) w({ ok: false, error: `agent ${name} exited ${code}` }) })
  const call = (req) => new Promise((resolve) => { pending.push(resolve); p.stdin.write(JSON.stringify(req) + '\n') })
  return { name, p, call }
}

const t0 = Date.now()
const log = (...a) => console.error(`[e2e +${Date.now() - t0}ms]`, ...a)
const inv = await (await fetch(`${base}/v2/invitation`)).json()
const mediatorDID = inv.did
log('mediator DID', mediatorDID.slice(0, 40) + '…', 'live', live, 'logs in', logDir)

const A = agentProc('A')
const B = agentProc('B')
const result = { live, offline, log_dir: logDir }
try {
  const start = { op: 'start', mediator_did: mediatorDID, live, ...(pollMs ? { poll_ms: pollMs } : {}) }
  const [a, b] = await Promise.all([A.call({ ...start, name: 'A', ...(offline ? { fetch: false } : {}) }), B.call({ ...start, name: 'B' })])
  log('A start', JSON.stringify(a).slice(0, 300))
  log('B start', JSON.stringify(b).slice(0, 300))
  if (!a.ok || !b.ok) throw new Error(`start failed: A ${a.error ?? 'ok'} / B ${b.error ?? 'ok'}`)
  result.a_did = a.did
  result.b_did = b.did

  const text1 = `hello A from B ${Date.now()}`
  let t = Date.now()
  const s1 = await B.call({ op: 'send', to: a.did, content: text1 })
  log('B send', JSON.stringify(s1))
  if (offline) {
    await new Promise((r) => setTimeout(r, 1000))
    const f = await A.call({ op: 'fetch', live, ...(pollMs ? { poll_ms: pollMs } : {}) })
    log('A fetch (was offline)', JSON.stringify(f).slice(0, 200))
  }
  const w1 = await A.call({ op: 'wait', count: 1, timeout_ms: waitMs })
  result.b_to_a = { sent: s1, ms: Date.now() - t, received: w1.messages, timed_out: w1.timed_out,
    ok: !!s1.ok && !w1.timed_out && w1.messages.some((m) => m.content === text1 && m.id === s1.id) }
  log('A got', JSON.stringify(w1).slice(0, 400))

  const text2 = `hello B from A ${Date.now()}`
  t = Date.now()
  const s2 = await A.call({ op: 'send', to: b.did, content: text2 })
  log('A send', JSON.stringify(s2))
  const w2 = await B.call({ op: 'wait', count: 1, timeout_ms: waitMs })
  result.a_to_b = { sent: s2, ms: Date.now() - t, received: w2.messages, timed_out: w2.timed_out,
    ok: !!s2.ok && !w2.timed_out && w2.messages.some((m) => m.content === text2 && m.id === s2.id) }
  log('B got', JSON.stringify(w2).slice(0, 400))

  result.a_status = await A.call({ op: 'status' })
  result.b_status = await B.call({ op: 'status' })
} catch (e) {
  result.error = String(e?.message ?? e)
} finally {
  await Promise.all([A.call({ op: 'stop' }), B.call({ op: 'stop' })])
}
result.ok = !!(result.b_to_a?.ok && result.a_to_b?.ok)
process.stdout.write(JSON.stringify(result) + '\n')
process.exit(result.ok ? 0 : 1)
