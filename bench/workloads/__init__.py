"""One module per workload family (mqs, DIDComm, scale, capacity, sender bytes), each
composing the harness with the support it needs; the entry scripts in bench/ run their
`main`."""
