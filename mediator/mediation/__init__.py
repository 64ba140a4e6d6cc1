"""What the cluster knows about recipients: connections, mediation grants, keylists, routes
and per-connection queue limits."""
