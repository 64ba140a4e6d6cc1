{{/* Egress every component needs: the cluster DNS and Redis. */}}
{{- define "mediator.egressDnsRedis" -}}
{{- $np := .Values.networkPolicy -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ $np.dns.namespace }}
      podSelector:
        matchLabels:
          {{- toYaml $np.dns.podLabels | nindent 10 }}
  ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
- ports:
    {{- range (default (list 6379 26379) $np.redis.ports) }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
  {{- with $np.redis.peers }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* Egress of nodes and workers to agents' own endpoints (pushes). */}}
{{- define "mediator.egressPush" -}}
{{- $push := .Values.networkPolicy.pushEgress -}}
{{- if $push.enabled }}
- to:
    - ipBlock:
        cidr: {{ $push.cidr }}
        {{- with $push.except }}
        except:
          {{- toYaml . | nindent 10 }}
        {{- end }}
  ports:
    {{- range (default (list 443 80) $push.ports) }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- end }}
{{- end -}}

{{/* Ingress from Prometheus to a metrics port. */}}
{{- define "mediator.ingressMetrics" -}}
{{- $selector := .context.Values.networkPolicy.metricsNamespaceSelector -}}
- from:
    - namespaceSelector: {{ if $selector }}{matchLabels: {{ toJson $selector }}}{{ else }}{}{{ end }}
  ports:
    - {port: {{ .port }}, protocol: TCP}
{{- end -}}
