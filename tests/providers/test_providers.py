"""The local provider servers behave as the real providers do, seen from a real HTTP client
(httpx; HTTP/2 over TLS for APNs, trusting the test CA)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.providers import jws
from tests.providers.apns import ApnsServer
from tests.providers.credentials import (
    CLOUD_PLATFORM_SCOPE,
    JWT_BEARER,
    ApnsKey,
    write_apns_key,
    write_service_account,
    write_tls_cert,
)
from tests.providers.fcm import FcmServer
from tests.providers.fixtures import ApnsServers
from tests.providers.webhook import SIGNATURE_HEADER, WebhookServer, sign, verify_signature

DEVICE = "a1" * 32
TOPIC = "org.example.mediator"

# -- helpers ---------------------------------------------------------------------------------


async def token_response(fcm: FcmServer, assertion: str, **form: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        data = {"grant_type": JWT_BEARER, "assertion": assertion, **form}
        return await client.post(fcm.token_uri, data=data)


async def access_token(fcm: FcmServer, **claims: Any) -> str:
    response = await token_response(fcm, fcm.service_account.assertion(**claims))
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


async def send(
    fcm: FcmServer, body: Any, token: str | None, project: str | None = None
) -> httpx.Response:
    url = f"{fcm.api_url}/v1/projects/{project or fcm.project_id}/messages:send"
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=body, headers=headers)


def message(token: str = "fcm-token:APA91b-x_y", **fields: Any) -> dict[str, Any]:
    return {"message": {"token": token, "data": {"kind": "wake"}, **fields}}


_provider_tokens: dict[str, str] = {}


def apns_headers(key: ApnsKey, **extra: str) -> dict[str, str]:
    """Headers of a correct alert notification; one provider token per key, reused as Apple
    asks (a new token each second would soon meet TooManyProviderTokenUpdates)."""
    token = _provider_tokens.setdefault(key.key_id, key.provider_token())
    headers = {
        "authorization": f"bearer {token}",
        "apns-topic": TOPIC,
        "apns-push-type": "alert",
    }
    headers.update({k.replace("_", "-"): v for k, v in extra.items()})
    return headers


async def push(
    server: ApnsServer,
    headers: dict[str, str],
    payload: Any = None,
    device: str = DEVICE,
    content: bytes | None = None,
) -> httpx.Response:
    body = (
        content
        if content is not None
        else json.dumps(payload if payload is not None else {"aps": {"alert": "hello"}}).encode()
    )
    async with httpx.AsyncClient(http2=True, verify=server.tls.client_context()) as client:
        response = await client.post(
            f"{server.url}/3/device/{device}", headers=headers, content=body
        )
    assert response.http_version == "HTTP/2"
    return response


def other_key_token(key: ApnsKey, tmp_path: Path) -> str:
    """A well-formed provider token for the right kid and team, signed by another key."""
    stranger = write_apns_key(tmp_path / "stranger")
    claims = {"iss": key.team_id, "iat": int(time.time())}
    return jws.sign_es256(claims, stranger.private_key, key.key_id)


# -- credential files ------------------------------------------------------------------------


def test_service_account_file_is_shaped_like_googles(fcm_server: FcmServer) -> None:
    info = json.loads(fcm_server.credentials_file.read_text())
    assert set(info) == {
        "type",
        "project_id",
        "private_key_id",
        "private_key",
        "client_email",
        "client_id",
        "auth_uri",
        "token_uri",
        "auth_provider_x509_cert_url",
        "client_x509_cert_url",
        "universe_domain",
    }
    assert info["type"] == "service_account"
    assert info["token_uri"] == fcm_server.token_uri == f"{fcm_server.url}/token"
    assert re.fullmatch(r"[0-9a-f]{40}", info["private_key_id"])
    assert info["client_email"].endswith(f"@{info['project_id']}.iam.gserviceaccount.com")
    assert info["private_key"].startswith("-----BEGIN PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(info["private_key"].encode(), None)
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
    assert (
        key.public_key().public_numbers() == fcm_server.service_account.public_key.public_numbers()
    )
    assert fcm_server.env() == {
        "MEDIATOR_FCM_CREDENTIALS_FILE": str(fcm_server.credentials_file),
        "MEDIATOR_FCM_API_URL": fcm_server.url,
    }


def test_apns_key_file_is_shaped_like_apples(apns_key: ApnsKey) -> None:
    assert apns_key.path.name == f"AuthKey_{apns_key.key_id}.p8"
    assert re.fullmatch(r"[A-Z0-9]{10}", apns_key.key_id)
    assert re.fullmatch(r"[A-Z0-9]{10}", apns_key.team_id)
    pem = apns_key.path.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(pem, None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"


def test_es256_signature_is_raw_r_s(apns_key: ApnsKey) -> None:
    token = jws.parse(apns_key.provider_token())
    assert token.header == {"alg": "ES256", "kid": apns_key.key_id}
    assert set(token.claims) == {"iss", "iat"}
    assert len(token.signature) == 64
    assert jws.verify_es256(token, apns_key.public_key)


def test_servers_answer_once_started_and_stop(tmp_path: Path) -> None:
    with FcmServer(tmp_path) as fcm, WebhookServer() as hook:
        assert httpx.post(fcm.token_uri, data={}).status_code == 400
        assert httpx.post(hook.url + "/x", content=b"{}").status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.post(fcm.token_uri, data={})


# -- Google's token endpoint -----------------------------------------------------------------


async def test_token_grant_with_a_good_assertion(fcm_server: FcmServer) -> None:
    response = await token_response(fcm_server, fcm_server.service_account.assertion())
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"access_token", "expires_in", "token_type"}
    assert body["expires_in"] == 3599 and body["token_type"] == "Bearer"
    grants = await fcm_server.wait_for_grants(1)
    assert grants[0].access_token == body["access_token"]
    assert grants[0].header["kid"] == fcm_server.service_account.private_key_id
    assert grants[0].claims["iss"] == fcm_server.service_account.client_email


@pytest.mark.parametrize(
    ("case", "error", "description"),
    [
        ("wrong key", "invalid_grant", "Invalid JWT Signature."),
        ("wrong kid", "invalid_grant", "Invalid JWT Signature."),
        ("no kid", "invalid_grant", "Invalid JWT Signature."),
        ("wrong aud", "invalid_grant", "Failed audience check"),
        ("wrong iss", "invalid_grant", "account not found"),
        ("expired", "invalid_grant", "short-lived token"),
        ("too long", "invalid_grant", "short-lived token"),
        ("issued in the future", "invalid_grant", "short-lived token"),
        ("missing scope", "invalid_scope", "Invalid OAuth scope"),
        ("not a JWT", "invalid_grant", "Invalid JWT"),
    ],
)
async def test_token_grant_refusals(
    fcm_server: FcmServer, tmp_path: Path, case: str, error: str, description: str
) -> None:
    account = fcm_server.service_account
    now = int(time.time())
    claims = {
        "iss": account.client_email,
        "aud": account.token_uri,
        "iat": now,
        "exp": now + 3600,
        "scope": "https://www.googleapis.com/auth/firebase.messaging",
    }
    key, kid = account.private_key, account.private_key_id
    if case == "wrong key":
        key = write_service_account(tmp_path / "other", account.token_uri).private_key
    elif case == "wrong kid":
        kid = "0" * 40
    elif case == "no kid":
        kid = None  # type: ignore[assignment]
    elif case == "wrong aud":
        claims["aud"] = "https://oauth2.googleapis.com/token"
    elif case == "wrong iss":
        claims["iss"] = "someone@else.iam.gserviceaccount.com"
    elif case == "expired":
        claims.update(iat=now - 7200, exp=now - 3600)
    elif case == "too long":
        claims.update(exp=now + 7200)
    elif case == "issued in the future":
        claims.update(iat=now + 600, exp=now + 1200)
    elif case == "missing scope":
        del claims["scope"]
    assertion = "not.a.jwt" if case == "not a JWT" else jws.sign_rs256(claims, key, kid)
    response = await token_response(fcm_server, assertion)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == error
    assert description in body["error_description"]
    assert fcm_server.grants == []
    assert fcm_server.rejected[error] == 1


async def test_token_grant_wrong_grant_type(fcm_server: FcmServer) -> None:
    response = await token_response(
        fcm_server, fcm_server.service_account.assertion(), grant_type="client_credentials"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


async def test_token_endpoint_scripted_outage(fcm_server: FcmServer) -> None:
    fcm_server.fail_grants_next(1, status=503)
    assert (
        await token_response(fcm_server, fcm_server.service_account.assertion())
    ).status_code == 503
    assert (
        await token_response(fcm_server, fcm_server.service_account.assertion())
    ).status_code == 200


# -- FCM HTTP v1 -----------------------------------------------------------------------------


async def test_fcm_send_accepted(fcm_server: FcmServer) -> None:
    token = await access_token(fcm_server)
    body = message(
        android={"priority": "high", "collapseKey": "wake", "ttl": "60s"},
        apns={"headers": {"apns-priority": "10"}, "payload": {"aps": {}}},
    )
    response = await send(fcm_server, body, token)
    assert response.status_code == 200
    name = response.json()["name"]
    assert re.fullmatch(rf"projects/{fcm_server.project_id}/messages/0:\d+%[0-9a-f]{{16}}", name)
    [sent] = await fcm_server.wait_for(1)
    assert sent.token == "fcm-token:APA91b-x_y"
    assert sent.message["data"] == {"kind": "wake"}
    assert sent.access_token == token and sent.name == name
    assert sent.body == body


def test_fcm_from_sync_code(fcm_server: FcmServer) -> None:
    grant = httpx.post(
        fcm_server.token_uri,
        data={"grant_type": JWT_BEARER, "assertion": fcm_server.service_account.assertion()},
    ).json()
    url = f"{fcm_server.api_url}/v1/projects/{fcm_server.project_id}/messages:send"
    headers = {"Authorization": f"Bearer {grant['access_token']}"}
    assert httpx.post(url, json=message(), headers=headers).status_code == 200
    assert fcm_server.wait_for_sync(1)[0].token == "fcm-token:APA91b-x_y"


async def test_fcm_send_unauthenticated(fcm_server: FcmServer) -> None:
    for token in (None, "ya29.not-issued-here"):
        response = await send(fcm_server, message(), token)
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
        assert "authentication credential" in error["message"]
        assert response.headers["www-authenticate"].startswith("Bearer")
    token = await access_token(fcm_server)
    fcm_server.expire_tokens()
    assert (await send(fcm_server, message(), token)).status_code == 401
    token = await access_token(fcm_server)
    fcm_server.clock = lambda: time.time() + 3600  # an hour later, the token has expired
    assert (await send(fcm_server, message(), token)).status_code == 401
    assert fcm_server.rejected["UNAUTHENTICATED"] == 4
    assert fcm_server.sends == []


async def test_fcm_send_forbidden(fcm_server: FcmServer) -> None:
    token = await access_token(fcm_server)
    response = await send(fcm_server, message(), token, project="someone-else")
    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    narrow = await access_token(fcm_server, scope="https://www.googleapis.com/auth/userinfo.email")
    response = await send(fcm_server, message(), narrow)
    assert response.status_code == 403
    assert "insufficient authentication scopes" in response.json()["error"]["message"]
    broad = await access_token(fcm_server, scope=CLOUD_PLATFORM_SCOPE)
    assert (await send(fcm_server, message(), broad)).status_code == 200


@pytest.mark.parametrize(
    ("body", "text", "detail_type"),
    [
        (
            message(data={"n": 1}),
            "Invalid value at 'message.data[0].value' (TYPE_STRING), 1",
            "type.googleapis.com/google.rpc.BadRequest",
        ),
        (
            {"message": {"data": {"a": "b"}}},
            "Recipient of the message is not set.",
            "type.googleapis.com/google.firebase.fcm.v1.FcmError",
        ),
        (
            message(token="not a token!"),
            "not a valid FCM registration token",
            "type.googleapis.com/google.firebase.fcm.v1.FcmError",
        ),
        (
            message(bogus=1),
            "Unknown name \"bogus\" at 'message'",
            "type.googleapis.com/google.rpc.BadRequest",
        ),
        (
            message(topic="news"),
            "Oneof field 'target' is already set",
            "type.googleapis.com/google.rpc.BadRequest",
        ),
        (
            message(android={"priority": "urgent"}),
            "message.android.priority",
            "type.googleapis.com/google.rpc.BadRequest",
        ),
        (
            message(data={"google.x": "y"}),
            "Invalid data payload key",
            "type.googleapis.com/google.firebase.fcm.v1.FcmError",
        ),
    ],
)
async def test_fcm_send_invalid_argument(
    fcm_server: FcmServer, body: dict[str, Any], text: str, detail_type: str
) -> None:
    response = await send(fcm_server, body, await access_token(fcm_server))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert text in error["message"]
    assert detail_type in [d["@type"] for d in error["details"]]
    assert fcm_server.sends == [] and fcm_server.rejected["INVALID_ARGUMENT"] == 1


async def test_fcm_validate_only_is_not_sent(fcm_server: FcmServer) -> None:
    response = await send(
        fcm_server, {"validate_only": True, **message()}, await access_token(fcm_server)
    )
    assert response.json() == {"name": f"projects/{fcm_server.project_id}/messages/fake_message_id"}
    assert fcm_server.sends == [] and len(fcm_server.validated) == 1


async def test_fcm_scripted_unregistered(fcm_server: FcmServer) -> None:
    fcm_server.fail("gone-token", "UNREGISTERED")
    token = await access_token(fcm_server)
    for _ in range(2):
        response = await send(fcm_server, message("gone-token"), token)
        assert response.status_code == 404
        assert response.json() == {
            "error": {
                "code": 404,
                "message": "Requested entity was not found.",
                "status": "NOT_FOUND",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                        "errorCode": "UNREGISTERED",
                    }
                ],
            }
        }
    assert (await send(fcm_server, message("live-token"), token)).status_code == 200
    assert fcm_server.rejected["UNREGISTERED"] == 2


async def test_fcm_scripted_quota_and_outage(fcm_server: FcmServer) -> None:
    token = await access_token(fcm_server)
    fcm_server.fail("busy", "QUOTA_EXCEEDED", retry_after=7, times=1)
    response = await send(fcm_server, message("busy"), token)
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    error = response.json()["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert error["details"][0]["errorCode"] == "QUOTA_EXCEEDED"
    assert (await send(fcm_server, message("busy"), token)).status_code == 200

    fcm_server.fail_next(2, "UNAVAILABLE", retry_after=1)
    fcm_server.fail_next(1, "INTERNAL")
    statuses = [(await send(fcm_server, message(), token)).status_code for _ in range(4)]
    assert statuses == [503, 503, 500, 200]
    assert len(await fcm_server.wait_for(2)) == 2


# -- APNs ------------------------------------------------------------------------------------


async def test_apns_accepts_a_correct_notification(apns_servers: ApnsServers) -> None:
    sandbox = apns_servers.sandbox
    apns_id = "123e4567-e89b-12d3-a456-426614174000"
    headers = apns_headers(
        apns_servers.key,
        apns_id=apns_id,
        apns_priority="10",
        apns_collapse_id="c" * 64,
        apns_expiration="0",
    )
    response = await push(sandbox, headers, {"aps": {"alert": {"title": "t"}}, "x": 1})
    assert response.status_code == 200
    assert response.headers["apns-id"] == apns_id
    assert response.content == b""
    [note] = await sandbox.wait_for(1)
    assert note.device_token == DEVICE and note.environment == "sandbox"
    assert note.payload == {"aps": {"alert": {"title": "t"}}, "x": 1}
    assert note.topic == TOPIC and note.push_type == "alert" and note.priority == 10
    assert note.collapse_id == "c" * 64
    assert "authorization" not in note.headers
    assert apns_servers.production.notifications == []


async def test_apns_provider_token_refusals(apns_servers: ApnsServers, tmp_path: Path) -> None:
    server, key = apns_servers.sandbox, apns_servers.key
    now = time.time()
    cases = {
        "MissingProviderToken": None,
        "InvalidProviderToken": f"bearer {other_key_token(key, tmp_path)}",
        "ExpiredProviderToken": f"bearer {key.provider_token(iat=now - 3700)}",
    }
    for reason, authorization in cases.items():
        headers = apns_headers(key)
        if authorization is None:
            del headers["authorization"]
        else:
            headers["authorization"] = authorization
        response = await push(server, headers)
        assert response.status_code == 403, reason
        assert response.json() == {"reason": reason}
        assert "apns-id" in response.headers
    for bad in (
        key.provider_token(iat=now + 600),  # issued in the future
        key.provider_token(iss="OTHERTEAM1"),
        jws.sign_es256({"iss": key.team_id, "iat": int(now)}, key.private_key, "OTHERKEY01"),
    ):
        response = await push(server, {**apns_headers(key), "authorization": f"bearer {bad}"})
        assert response.json() == {"reason": "InvalidProviderToken"}
    assert server.notifications == []


async def test_apns_refuses_a_der_encoded_es256_signature(apns_servers: ApnsServers) -> None:
    from cryptography.hazmat.primitives import hashes

    key = apns_servers.key
    head = jws.b64url(json.dumps({"alg": "ES256", "kid": key.key_id}).encode())
    body = jws.b64url(json.dumps({"iss": key.team_id, "iat": int(time.time())}).encode())
    der = key.private_key.sign(f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    token = f"{head}.{body}.{jws.b64url(der)}"
    response = await push(
        apns_servers.sandbox, {**apns_headers(key), "authorization": f"bearer {token}"}
    )
    assert response.status_code == 403
    assert response.json() == {"reason": "InvalidProviderToken"}


async def test_apns_too_many_provider_token_updates(apns_servers: ApnsServers) -> None:
    server, key = apns_servers.sandbox, apns_servers.key
    now = int(time.time())
    tokens = [key.provider_token(iat=now - i) for i in range(4)]
    for token in tokens[:3]:
        response = await push(server, {**apns_headers(key), "authorization": f"bearer {token}"})
        assert response.status_code == 200
    response = await push(server, {**apns_headers(key), "authorization": f"bearer {tokens[3]}"})
    assert response.status_code == 429
    assert response.json() == {"reason": "TooManyProviderTokenUpdates"}
    response = await push(server, {**apns_headers(key), "authorization": f"bearer {tokens[0]}"})
    assert response.status_code == 200  # reusing a token is what Apple wants


async def test_apns_refuses_http_1_1(apns_servers: ApnsServers) -> None:
    server = apns_servers.production
    async with httpx.AsyncClient(http2=False, verify=server.tls.client_context()) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(
                f"{server.url}/3/device/{DEVICE}",
                headers=apns_headers(apns_servers.key),
                json={"aps": {"alert": "hi"}},
            )
    assert server.rejected["HTTP/1.1"] == 1 and server.notifications == []


async def test_apns_refuses_an_untrusting_client(apns_servers: ApnsServers) -> None:
    async with httpx.AsyncClient(http2=True) as client:  # the system CAs: not ours
        with pytest.raises(httpx.ConnectError):
            await client.post(f"{apns_servers.sandbox.url}/3/device/{DEVICE}")


@pytest.mark.parametrize(
    ("change", "status", "reason"),
    [
        ({"device": "not-hex"}, 400, "BadDeviceToken"),
        ({"device": "ab" * 31}, 400, "BadDeviceToken"),
        ({"apns-collapse-id": "c" * 65}, 400, "BadCollapseId"),
        ({"apns-topic": "org.example.other"}, 400, "TopicDisallowed"),
        ({"apns-topic": None}, 400, "MissingTopic"),
        ({"apns-push-type": "shout"}, 400, "InvalidPushType"),
        ({"apns-priority": "7"}, 400, "BadPriority"),
        ({"apns-expiration": "tomorrow"}, 400, "BadExpirationDate"),
        ({"apns-id": "not-a-uuid"}, 400, "BadMessageId"),
        ({"content": b""}, 400, "PayloadEmpty"),
        ({"content": b"{not json"}, 400, "BadPayload"),
        ({"payload": {"alert": "no aps"}}, 400, "BadPayload"),
        ({"payload": {"aps": {"badge": 1}}}, 400, "BadPayload"),  # alert without aps.alert
        ({"payload": {"aps": {"alert": "x" * 4100}}}, 413, "PayloadTooLarge"),
        (
            {"apns-push-type": "background", "payload": {"aps": {"content-available": 1}}},
            400,
            "BadPriority",
        ),
        (
            {"apns-push-type": "background", "apns-priority": "5", "payload": {"aps": {}}},
            400,
            "BadPayload",
        ),
    ],
)
async def test_apns_request_refusals(
    apns_servers: ApnsServers, change: dict[str, Any], status: int, reason: str
) -> None:
    headers = apns_headers(apns_servers.key)
    for name, value in change.items():
        if name.startswith("apns-"):
            if value is None:
                del headers[name]
            else:
                headers[name] = value
    response = await push(
        apns_servers.sandbox,
        headers,
        change.get("payload"),
        change.get("device", DEVICE),
        change.get("content"),
    )
    assert response.status_code == status
    assert response.json() == {"reason": reason}
    assert apns_servers.sandbox.rejected[reason] == 1


async def test_apns_background_push(apns_servers: ApnsServers) -> None:
    headers = apns_headers(apns_servers.key, apns_push_type="background", apns_priority="5")
    response = await push(apns_servers.sandbox, headers, {"aps": {"content-available": 1}})
    assert response.status_code == 200
    assert (await apns_servers.sandbox.wait_for(1))[0].priority == 5


async def test_apns_scripted_unregistered(apns_servers: ApnsServers) -> None:
    server = apns_servers.production
    server.fail(DEVICE, "Unregistered")
    before = int(time.time() * 1000)
    response = await push(server, apns_headers(apns_servers.key))
    assert response.status_code == 410
    body = response.json()
    assert body["reason"] == "Unregistered"
    assert isinstance(body["timestamp"], int) and body["timestamp"] >= before
    assert "apns-unique-id" not in response.headers  # production does not send it
    server.clear_failures()
    assert (await push(server, apns_headers(apns_servers.key))).status_code == 200


async def test_apns_scripted_throttling_and_outage(apns_servers: ApnsServers) -> None:
    server, key = apns_servers.sandbox, apns_servers.key
    server.fail(DEVICE, "TooManyRequests", retry_after=30, times=1)
    response = await push(server, apns_headers(key))
    assert response.status_code == 429 and response.headers["retry-after"] == "30"
    assert response.json() == {"reason": "TooManyRequests"}
    server.fail_next(2, "ServiceUnavailable")
    server.fail_next(1, "InternalServerError")
    statuses = [(await push(server, apns_headers(key))).status_code for _ in range(4)]
    assert statuses == [503, 503, 500, 200]
    assert len(server.notifications) == 1


async def test_apns_environment_mismatch(apns_servers: ApnsServers) -> None:
    sandbox_device = "5b" * 32
    apns_servers.production.accept_only([DEVICE])
    response = await push(
        apns_servers.production, apns_headers(apns_servers.key), device=sandbox_device
    )
    assert response.json() == {"reason": "BadDeviceToken"}
    response = await push(
        apns_servers.sandbox, apns_headers(apns_servers.key), device=sandbox_device
    )
    assert response.status_code == 200
    assert apns_servers.sandbox.notifications[0].environment == "sandbox"


async def test_apns_many_notifications_on_one_connection(apns_servers: ApnsServers) -> None:
    server, key = apns_servers.sandbox, apns_servers.key
    headers = apns_headers(key)
    async with httpx.AsyncClient(http2=True, verify=server.tls.client_context()) as client:
        for i in range(5):
            response = await client.post(
                f"{server.url}/3/device/{DEVICE}", headers=headers, json={"aps": {"alert": str(i)}}
            )
            assert response.status_code == 200
    assert server.connections == 1
    assert [n.payload["aps"]["alert"] for n in await server.wait_for(5)] == list("01234")


# -- webhook ---------------------------------------------------------------------------------


def test_verify_signature() -> None:
    body = b'{"event":"message"}'
    header = sign("s3cret", body, timestamp=1_700_000_000)
    t, v1 = header.split(",")
    assert t == "t=1700000000" and re.fullmatch(r"v1=[0-9a-f]{64}", v1)
    assert verify_signature("s3cret", body, header, now=1_700_000_100)
    assert verify_signature(b"s3cret", body, f"{header},v1={'0' * 64}", now=1_700_000_000)
    assert not verify_signature("s3cret", body + b" ", header, now=1_700_000_000)
    assert not verify_signature("other", body, header, now=1_700_000_000)
    assert not verify_signature("s3cret", body, header, now=1_700_001_000)  # too old
    assert verify_signature("s3cret", body, header, tolerance=None, now=1_800_000_000)
    assert not verify_signature("s3cret", body, None)
    assert not verify_signature("s3cret", body, v1)
    assert not verify_signature("s3cret", body, "t=abc," + v1)


async def test_webhook_records_signed_posts(webhook_server: WebhookServer) -> None:
    body = b'{"did":"did:peer:2...","count":1}'
    headers = {
        SIGNATURE_HEADER: sign(webhook_server.secret or "", body),
        "Content-Type": "application/json",
    }
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{webhook_server.url}/hook", content=body, headers=headers)
        assert response.status_code == 200
        [delivery] = await webhook_server.wait_for(1)
        assert delivery.path == "/hook" and delivery.body == body
        assert delivery.headers["content-type"] == "application/json"
        assert verify_signature(webhook_server.secret or "", delivery.body, delivery.signature)

        bad = {SIGNATURE_HEADER: sign("wrong", body)}
        assert (
            await client.post(webhook_server.url + "/hook", content=body, headers=bad)
        ).status_code == 400
        stale = {SIGNATURE_HEADER: sign(webhook_server.secret or "", body, int(time.time()) - 3600)}
        assert (
            await client.post(webhook_server.url + "/hook", content=body, headers=stale)
        ).status_code == 400
        assert (await client.post(webhook_server.url + "/hook", content=body)).status_code == 400
    assert webhook_server.rejected["bad signature"] == 3
    assert len(webhook_server.attempts) == 4 and len(webhook_server.deliveries) == 1


async def test_webhook_scripted_failures() -> None:
    with WebhookServer() as server:
        server.fail_next(2, 503, retry_after=3)
        server.fail("/dead", 410)
        async with httpx.AsyncClient() as client:
            first = await client.post(server.url + "/hook", content=b"1")
            assert first.status_code == 503 and first.headers["retry-after"] == "3"
            assert (await client.post(server.url + "/hook", content=b"2")).status_code == 503
            assert (await client.post(server.url + "/hook", content=b"3")).status_code == 200
            assert (await client.post(server.url + "/dead", content=b"4")).status_code == 410
        assert [d.body for d in server.deliveries] == [b"3"]
        assert server.rejected == {"503": 2, "410": 1}


def test_https_variants(tmp_path: Path) -> None:
    tls = write_tls_cert(tmp_path / "tls")
    with FcmServer(tmp_path / "fcm", tls=tls) as fcm, WebhookServer(tls=tls) as hook:
        assert fcm.api_url.startswith("https://") and hook.url.startswith("https://")
        with httpx.Client(verify=tls.client_context()) as client:
            assert client.post(hook.url + "/h", content=b"x").status_code == 200
            form = {"grant_type": JWT_BEARER, "assertion": fcm.service_account.assertion()}
            assert client.post(fcm.token_uri, data=form).status_code == 200
