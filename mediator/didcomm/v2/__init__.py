"""DIDComm Messaging v2.1: envelopes (jwk.py, content.py, jwe.py)."""
