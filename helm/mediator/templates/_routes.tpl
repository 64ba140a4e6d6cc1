{{/*
The public paths: DIDComm only (`/` for POST and the WebSocket, `/invitation`), and with
exposeMqs the mqs API too. /healthz, /readyz and /metrics never leave the cluster.
A list of (dict "path" "type"), as YAML.
*/}}
{{- define "mediator.publicPaths" -}}
- {path: /, type: Exact}
- {path: /invitation, type: Exact}
{{- if .exposeMqs }}
- {path: /queues, type: Prefix}
- {path: /messages, type: Prefix}
- {path: /openapi.json, type: Exact}
{{- end }}
{{- end -}}
