"""DIDComm over HTTP `POST /` and over a WebSocket at `/`, sharing one inbound pipeline."""
