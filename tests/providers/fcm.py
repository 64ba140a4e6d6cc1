"""A local Firebase Cloud Messaging: Google's OAuth 2.0 token endpoint and the FCM HTTP v1 API.

`POST /token` imitates https://oauth2.googleapis.com/token for service accounts ("Using OAuth
2.0 for Server to Server Applications"): the form `grant_type=urn:ietf:params:oauth:grant-type:
jwt-bearer&assertion=<JWT>`, the JWT signed RS256 with the service account's key (header kid =
private_key_id), claims iss = client_email, scope (space-separated), aud = token_uri, iat and
exp at most an hour apart and current. It answers `{"access_token", "expires_in": 3599,
"token_type": "Bearer"}`, or 400 `{"error": "invalid_grant" | "invalid_scope" | ...,
"error_description"}`.

`POST /v1/projects/{project_id}/messages:send` imitates https://fcm.googleapis.com: a bearer
access token issued above and not expired (401 UNAUTHENTICATED otherwise), with the
firebase.messaging or cloud-platform scope (403 otherwise), for this project (403
PERMISSION_DENIED otherwise), a body valid for FCM (400 INVALID_ARGUMENT, see fcm_schema); it
answers `{"name": "projects/{project_id}/messages/<id>"}`. Errors have Google's shape
`{"error": {"code", "message", "status", "details"?}}`; FCM's per-message errors carry
`{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": ...}`.

Set the mediator's MEDIATOR_FCM_CREDENTIALS_FILE to `credentials_file` (its token_uri is this
server's /token) and MEDIATOR_FCM_API_URL to `api_url` (see `env()`)."""

from __future__ import annotations

import dataclasses
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.providers import jws
from tests.providers.base import Outcome, UvicornServer
from tests.providers.credentials import (
    CLOUD_PLATFORM_SCOPE,
    FCM_SCOPE,
    JWT_BEARER,
    ServiceAccount,
    TlsCert,
    write_service_account,
)
from tests.providers.fcm_schema import FCM_ERROR_TYPE, InvalidArgument, validate

ACCESS_TOKEN_SECONDS = 3599
MAX_ASSERTION_SECONDS = 3600
CLOCK_SKEW_SECONDS = 60

# errorCode -> (HTTP status, google.rpc status, message), as FCM answers them.
FCM_ERRORS: dict[str, tuple[int, str, str]] = {
    "INVALID_ARGUMENT": (400, "INVALID_ARGUMENT", "Request contains an invalid argument."),
    "UNREGISTERED": (404, "NOT_FOUND", "Requested entity was not found."),
    "SENDER_ID_MISMATCH": (403, "PERMISSION_DENIED", "SenderId mismatch"),
    "QUOTA_EXCEEDED": (
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute'.",
    ),
    "UNAVAILABLE": (503, "UNAVAILABLE", "The service is currently unavailable."),
    "INTERNAL": (500, "INTERNAL", "Internal error encountered."),
    "THIRD_PARTY_AUTH_ERROR": (401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service"),
}
_STATUS_OF_CODE = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
_CREDENTIALS_HINT = (
    "Expected OAuth 2 access token, login cookie or other valid authentication credential. "
    "See https://developers.google.com/identity/sign-in/web/devconsole-project."
)
_BAD_TIMES = (
    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
    "Check your iat and exp values in the JWT claim."
)


@dataclass(frozen=True)
class TokenGrant:
    """An access token issued by /token, with the verified assertion it was issued for."""

    access_token: str
    header: dict[str, Any]
    claims: dict[str, Any]
    scopes: tuple[str, ...]
    time: float
    expires_at: float


@dataclass(frozen=True)
class FcmSend:
    """An accepted `messages:send`: the target token ("" for topic/condition sends), the
    message and whole JSON body as posted, the name answered, and the access token used."""

    token: str
    message: dict[str, Any]
    body: dict[str, Any]
    name: str
    access_token: str
    time: float
    headers: dict[str, str] = field(repr=False)


def google_error(
    status_code: int,
    message: str,
    status: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """Google's JSON error body: {"error": {"code", "message", "status", "details"?}}."""
    error: dict[str, Any] = {
        "code": status_code,
        "message": message,
        "status": status or _STATUS_OF_CODE.get(status_code, "UNKNOWN"),
    }
    if details:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status_code, headers=headers)


def _oauth_error(error: str, description: str) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=400)


class FcmServer(UvicornServer):
    """Google's token endpoint and FCM HTTP v1 on one local port (see the module docstring)."""

    name = "fcm"

    def __init__(
        self, folder: Path, project_id: str = "mediator-push-test", tls: TlsCert | None = None
    ) -> None:
        super().__init__(tls)
        self.api_url = self.url
        self.token_uri = f"{self.url}/token"
        self.service_account: ServiceAccount = write_service_account(
            folder, self.token_uri, project_id
        )
        self.credentials_file = self.service_account.path
        self.project_id = project_id
        self.grants: list[TokenGrant] = []
        self.sends: list[FcmSend] = []
        self.validated: list[FcmSend] = []
        """Requests with validate_only: true (answered, not sent)."""
        self._tokens: dict[str, TokenGrant] = {}
        self._grant_failures: list[int] = []
        self._records = threading.Lock()

    def env(self) -> dict[str, str]:
        """The mediator's settings for this server."""
        return {
            "MEDIATOR_FCM_CREDENTIALS_FILE": str(self.credentials_file),
            "MEDIATOR_FCM_API_URL": self.api_url,
        }

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/token", self._token, methods=["POST"]),
                Route("/v1/projects/{project_id}/messages:send", self._send, methods=["POST"]),
            ]
        )

    # scripting ------------------------------------------------------------------------------

    def _outcome(
        self, error: str, status: int | None, retry_after: int | None, times: int | None
    ) -> Outcome:
        if status is None:
            status = FCM_ERRORS[error][0] if error in FCM_ERRORS else 400
        return Outcome(status, error, retry_after, times)

    def fail(
        self,
        token: str,
        error: str = "UNREGISTERED",
        *,
        status: int | None = None,
        times: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Sends to `token` fail with FCM's `errorCode` `error` (UNREGISTERED, INVALID_ARGUMENT,
        SENDER_ID_MISMATCH, QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL, THIRD_PARTY_AUTH_ERROR): its
        usual HTTP status unless `status` is given, `times` times (None: until cleared), with a
        Retry-After header if `retry_after` is given."""
        self.script.for_key(token, self._outcome(error, status, retry_after, times))

    def fail_next(
        self,
        count: int,
        error: str = "UNAVAILABLE",
        *,
        status: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        """The next `count` sends (whatever their token) fail as `fail` describes."""
        self.script.next(count, self._outcome(error, status, retry_after, 1))

    def fail_grants_next(self, count: int, status: int = 503) -> None:
        """The next `count` valid token requests get `status` (Google's 5xx body)."""
        with self._records:
            self._grant_failures.extend([status] * count)

    def expire_tokens(self) -> None:
        """Every access token issued so far stops working (401), as when they expire."""
        with self._records:
            self._tokens.clear()

    # waiting --------------------------------------------------------------------------------

    async def wait_for(
        self,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> list[FcmSend]:
        """Wait until at least `count` sends were accepted; all accepted sends so far."""
        await self.wait_until(lambda: len(self.sends) >= count, timeout, f"{count} sends")
        return list(self.sends)

    def wait_for_sync(self, count: int = 1, timeout: float = 5.0) -> list[FcmSend]:
        self.wait_until_sync(lambda: len(self.sends) >= count, timeout, f"{count} sends")
        return list(self.sends)

    async def wait_for_grants(
        self,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> list[TokenGrant]:
        """Wait until at least `count` access tokens were issued."""
        await self.wait_until(lambda: len(self.grants) >= count, timeout, f"{count} grants")
        return list(self.grants)

    # the OAuth token endpoint ---------------------------------------------------------------

    async def _token(self, request: Request) -> Response:
        self.requests += 1
        response = self._grant(parse_qs((await request.body()).decode("latin-1")))
        if response.status_code != 200:
            self._reject(json.loads(bytes(response.body))["error"])
        return response

    def _grant(self, form: dict[str, list[str]]) -> JSONResponse:
        grant_type = form.get("grant_type", [""])[0]
        if not grant_type:
            return _oauth_error("invalid_request", "Missing required parameter: grant_type")
        if grant_type != JWT_BEARER:
            return _oauth_error("unsupported_grant_type", f"Invalid grant_type: {grant_type}")
        assertion = form.get("assertion", [""])[0]
        if not assertion:
            return _oauth_error("invalid_request", "Missing required parameter: assertion")
        try:
            token = jws.parse(assertion)
        except jws.MalformedToken:
            return _oauth_error("invalid_grant", "Invalid JWT: Malformed token.")
        header, claims = token.header, token.claims
        account = self.service_account
        if header.get("alg") != "RS256":
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        if claims.get("iss") != account.client_email:
            return _oauth_error("invalid_grant", "Invalid grant: account not found")
        if header.get("kid") != account.private_key_id or not jws.verify_rs256(
            token, account.public_key
        ):
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        if claims.get("aud") != account.token_uri:
            return _oauth_error(
                "invalid_grant",
                f"Invalid JWT: Failed audience check. The right audience is {account.token_uri}",
            )
        iat, exp, now = claims.get("iat"), claims.get("exp"), self.clock()
        if (
            not isinstance(iat, int)
            or not isinstance(exp, int)
            or exp <= iat
            or exp - iat > MAX_ASSERTION_SECONDS
            or exp <= now
            or iat > now + CLOCK_SKEW_SECONDS
        ):
            return _oauth_error("invalid_grant", _BAD_TIMES)
        scope = claims.get("scope")
        scopes = tuple(scope.split()) if isinstance(scope, str) else ()
        if not scopes:
            return _oauth_error(
                "invalid_scope", "Invalid OAuth scope or ID token audience provided."
            )
        with self._records:
            if self._grant_failures:
                return _oauth_error_5xx(self._grant_failures.pop(0))
            access_token = "ya29.c." + secrets.token_urlsafe(96)
            grant = TokenGrant(
                access_token, header, claims, scopes, now, now + ACCESS_TOKEN_SECONDS
            )
            self._tokens[access_token] = grant
            self.grants.append(grant)
        return JSONResponse(
            {
                "access_token": access_token,
                "expires_in": ACCESS_TOKEN_SECONDS,
                "token_type": "Bearer",
            },
            headers={"Cache-Control": "no-cache, no-store, max-age=0, must-revalidate"},
        )

    # messages:send --------------------------------------------------------------------------

    async def _send(self, request: Request) -> Response:
        self.requests += 1
        response, error = await self._answer(request)
        if error:
            self._reject(error)
        return response

    def _authorised(self, request: Request) -> TokenGrant | JSONResponse:
        """The grant of the request's bearer token, or Google's 401."""
        authorization = request.headers.get("authorization", "")
        scheme, _, credential = authorization.partition(" ")
        challenge = {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'}
        if scheme.lower() != "bearer" or not credential.strip():
            text = f"Request is missing required authentication credential. {_CREDENTIALS_HINT}"
            return google_error(401, text, "UNAUTHENTICATED", headers=challenge)
        with self._records:
            grant = self._tokens.get(credential.strip())
        if grant is None or grant.expires_at <= self.clock():
            challenge["WWW-Authenticate"] += ', error="invalid_token"'
            text = f"Request had invalid authentication credentials. {_CREDENTIALS_HINT}"
            return google_error(401, text, "UNAUTHENTICATED", headers=challenge)
        return grant

    async def _answer(self, request: Request) -> tuple[Response, str | None]:
        grant = self._authorised(request)
        if isinstance(grant, JSONResponse):
            return grant, "UNAUTHENTICATED"
        project = request.path_params["project_id"]
        if project != self.project_id:
            text = (
                "Permission 'cloudmessaging.messages.create' denied on resource "
                f"'//cloudresourcemanager.googleapis.com/projects/{project}' (or it may not exist)."
            )
            return google_error(403, text, "PERMISSION_DENIED"), "PERMISSION_DENIED"
        if FCM_SCOPE not in grant.scopes and CLOUD_PLATFORM_SCOPE not in grant.scopes:
            text = "Request had insufficient authentication scopes."
            return google_error(403, text, "PERMISSION_DENIED"), "PERMISSION_DENIED"
        raw = await request.body()
        try:
            body = json.loads(raw)
            message, validate_only = validate(body)
        except json.JSONDecodeError as e:
            text = f"Invalid JSON payload received. {e.msg}."
            details = [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"description": text}],
                }
            ]
            return google_error(400, text, "INVALID_ARGUMENT", details), "INVALID_ARGUMENT"
        except InvalidArgument as e:
            return google_error(400, e.message, "INVALID_ARGUMENT", e.details), "INVALID_ARGUMENT"
        target = str(message.get("token", ""))
        prefix = f"projects/{self.project_id}/messages/"
        record = FcmSend(  # named once accepted
            token=target,
            message=body["message"],
            body=body,
            name="",
            access_token=grant.access_token,
            time=time.time(),
            headers=dict(request.headers),
        )
        if validate_only:
            with self._records:
                self.validated.append(record)
            return JSONResponse({"name": prefix + "fake_message_id"}), None
        outcome = self.script.take(target)
        if outcome is not None:
            return self._scripted(outcome), outcome.error
        name = f"{prefix}0:{int(time.time() * 1000)}%{secrets.token_hex(8)}"
        with self._records:
            self.sends.append(dataclasses.replace(record, name=name))
        return JSONResponse({"name": name}), None

    def _scripted(self, outcome: Outcome) -> JSONResponse:
        code, status, message = FCM_ERRORS.get(outcome.error, (0, "", outcome.error))
        if code != outcome.status:  # an unusual status scripted for that errorCode
            status = _STATUS_OF_CODE.get(outcome.status, "UNKNOWN")
        details = [{"@type": FCM_ERROR_TYPE, "errorCode": outcome.error}]
        headers = {}
        if outcome.retry_after is not None:
            headers["Retry-After"] = str(outcome.retry_after)
        return google_error(outcome.status, message, status, details, headers)


def _oauth_error_5xx(status: int) -> JSONResponse:
    return JSONResponse(
        {"error": "internal_failure", "error_description": "Backend Error"}, status_code=status
    )
