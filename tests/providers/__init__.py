"""Local stand-ins for the push providers (FCM HTTP v1 with Google's OAuth token endpoint, APNs
over HTTP/2, a signed webhook receiver): real servers on 127.0.0.1 that speak each provider's
published API, for tests of the mediator's push notifiers."""
