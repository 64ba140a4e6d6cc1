// How Credo's release builds each package (REAL-PEERS.md, "Credo 0.6.3 and 0.7.0"), for the
// packages the registry here lacks: unbundled ESM from src/index.ts into build/, with
// oxc's helpers inlined. Run by interop/install-credo.sh in the package's folder of the
// unpacked release source; with these options @credo-ts/didcomm 0.6.3 comes out
// byte-identical to the published package. Declarations are not needed to run, so skipped.
export default {
  cwd: process.cwd(),
  entry: ['src/index.ts'],
  outDir: 'build',
  unbundle: true,
  format: 'esm',
  fixedExtension: true,
  target: 'es2020',
  platform: 'neutral',
  tsconfig: '../../tsconfig.build.json',
  noExternal: [/^@oxc-project\/runtime/],
  sourcemap: true,
  dts: false,
}
