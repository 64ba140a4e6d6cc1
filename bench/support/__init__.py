"""Shared set-up of the workloads: the bulk loader and its plan of recipients, where the
servers stand (the nodes on a loaded plan, more nodes, a Redis Cluster), DIDComm recipients
and the forwards to them, live sockets and fleets of idle ones, and what is read from Redis
itself."""
