"""The DIDComm v1 core: keys, envelopes, messages and threading, problem reports."""
