// Helpers of interop/install-credo.sh for the Credo versions whose packages the registry here
// lacks (REAL-PEERS.md, "Credo 0.6.3 and 0.7.0"). Three commands:
//
//   node release.mjs local <package.json>
//       Lists the dependencies the install folder gets from its own vendor/ folder
//       ("file:vendor/<name>.tgz"), one "<name> <tarball>" a line: what must be built first.
//   node release.mjs rewrite <pnpm-workspace.yaml> <version>
//       Rewrites ./package.json (a package of Credo's release source) the way pnpm publishes
//       it: publishConfig applied, workspace: ranges by the version, catalog: ranges by the
//       workspace's catalog, no scripts or devDependencies, only build/ packed.
//   node release.mjs integrity <package-lock.json>
//       Sets the integrity of each tarball the lockfile takes from vendor/ to the digest of
//       the one just built. Their contents are fixed by the release source and the tools'
//       lockfile, but gzip's bytes are not (zlib versions differ between Node builds), so
//       the committed lockfile cannot hold their digests.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

const [command, ...args] = process.argv.slice(2)

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'))
}

function writeJson(file, value) {
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`)
}

// The `catalog:` mapping of a pnpm-workspace.yaml: "  name: range" lines under "catalog:",
// names and ranges optionally quoted. Enough for Credo's file; not a YAML parser.
function readCatalog(file) {
  const catalog = {}
  let inside = false
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (/^\S/.test(line)) inside = line.trim() === 'catalog:'
    else if (inside && line.trim()) {
      const match = /^\s+(['"]?)(.+?)\1:\s*(['"]?)(.+?)\3\s*$/.exec(line)
      if (match) catalog[match[2]] = match[4]
    }
  }
  return catalog
}

function resolveRange(name, range, version, catalog) {
  if (range.startsWith('workspace:')) {
    const spec = range.slice('workspace:'.length)
    if (spec === '*') return version
    if (spec === '^' || spec === '~') return spec + version
    return spec
  }
  if (range === 'catalog:' || range === 'catalog:default') {
    if (!(name in catalog)) throw new Error(`${name} is not in the workspace catalog`)
    return catalog[name]
  }
  return range
}

const commands = {
  local([manifest]) {
    const { dependencies = {} } = readJson(manifest)
    for (const [name, spec] of Object.entries(dependencies)) {
      if (spec.startsWith('file:vendor/')) console.log(`${name} ${spec.slice('file:'.length)}`)
    }
  },

  rewrite([workspace, version]) {
    const catalog = readCatalog(workspace)
    const pkg = readJson('package.json')
    const { access, registry, tag, directory, ...published } = pkg.publishConfig || {}
    Object.assign(pkg, published)
    pkg.publishConfig = Object.fromEntries(
      Object.entries({ access, registry, tag, directory }).filter(([, v]) => v !== undefined)
    )
    for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
      for (const [name, range] of Object.entries(pkg[field] || {})) {
        pkg[field][name] = resolveRange(name, range, version, catalog)
      }
    }
    delete pkg.scripts
    delete pkg.devDependencies
    pkg.files = ['build']
    writeJson('package.json', pkg)
  },

  integrity([lockfile]) {
    const lock = readJson(lockfile)
    const base = path.dirname(path.resolve(lockfile))
    for (const entry of Object.values(lock.packages || {})) {
      if (!entry.resolved || !entry.resolved.startsWith('file:')) continue
      const tarball = path.join(base, entry.resolved.slice('file:'.length))
      const digest = crypto.createHash('sha512').update(fs.readFileSync(tarball)).digest('base64')
      entry.integrity = `sha512-${digest}`
    }
    writeJson(lockfile, lock)
  },
}

if (!commands[command]) {
  console.error('usage: release.mjs local <package.json> | rewrite <workspace.yaml> <version> | integrity <lockfile>')
  process.exit(2)
}
commands[command](args)
