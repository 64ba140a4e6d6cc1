// What both Credo drivers (credo/agent.js for 0.5, credo-next/agent.mjs for 0.6+) share: JSON
// lines out (answers and events on stdout, logs on stderr) and the command loop on stdin.
'use strict'

const readline = require('readline')

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function log(...args) {
  process.stderr.write(args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ') + '\n')
}

function safeJson(data) {
  try {
    return JSON.stringify(data, (k, v) => (v instanceof Error ? { message: v.message, stack: v.stack } : v))
  } catch (e) {
    return String(data)
  }
}

function describe(e) {
  return { stack: e && e.stack ? e.stack : String(e), message: e && e.message ? e.message : String(e) }
}

// Reports a start-up failure as the `failed` event the Python side waits for, and exits.
function fail(what, e) {
  log(what, describe(e).stack)
  emit({ event: 'failed', error: describe(e).message })
  process.exit(1)
}

// Answers each command line {"id", "cmd", ...} with {"id", "ok": true, ...the handler's
// result} or {"id", "ok": false, "error"}; when stdin closes, `onClose` runs and the process
// exits.
function serve(handlers, onClose) {
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', async (line) => {
    let command
    try {
      command = JSON.parse(line)
    } catch (e) {
      emit({ ok: false, error: `not JSON: ${line.slice(0, 80)}` })
      return
    }
    const handler = handlers[command.cmd]
    if (!handler) {
      emit({ id: command.id, ok: false, error: `unknown command ${command.cmd}` })
      return
    }
    try {
      emit({ id: command.id, ok: true, ...(await handler(command)) })
    } catch (e) {
      log('command failed', command.cmd, describe(e).stack)
      emit({ id: command.id, ok: false, error: describe(e).message })
    }
  })
  lines.on('close', async () => {
    await onClose().catch(() => {})
    process.exit(0)
  })
  process.on('unhandledRejection', (e) => log('unhandled rejection', describe(e).stack))
}

module.exports = { emit, log, safeJson, fail, serve }
