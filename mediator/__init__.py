"""A Redis-backed, horizontally scaled DIDComm mediator node and its queue engine."""

__version__ = "0.1.0"
