"""DIDComm Messaging v2.1, the parts that stand alone (not yet served by the nodes):
envelopes (jwk.py, content.py, jwe.py), signed messages (jws.py), DIDs (dids.py), reading
and writing a message layer by layer (unpack.py), routing 2.0 forwards (forward.py), v2
names in the v1 routing table (recipients.py), the Out-of-Band 2.0 invitation
(invitation.py) and problem reports (problem.py)."""
