"""The harness every benchmark composes: the servers of a run (Redis, nodes, the anchor
app) and where they run, the load generator, blocks and paired blocks, what the machine and
Redis were doing meanwhile, the floors, py-spy profiles, the report and the command-line
arguments the benchmarks share. It knows no workload."""
