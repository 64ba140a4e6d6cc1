"""The benchmarks (bench/README.md): `harness/` (servers, pinning, blocks, statistics,
reports, shared arguments), `support/` (bulk loading, topologies, recipients, live sockets),
`workloads/` (one module per family) and the entry scripts beside this file."""
