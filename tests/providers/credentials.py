"""Credential files as the providers hand them out, generated into a folder:

- a Google service-account key file (the JSON that the Firebase console's "Generate new private
  key" downloads), whose `token_uri` points at the local OAuth token endpoint;
- an APNs auth key (`AuthKey_<KEYID>.p8`, a PKCS#8 PEM EC P-256 key), with its 10-character key
  id and the 10-character team id that Apple's developer portal shows;
- a TLS server certificate for 127.0.0.1/localhost, issued by a local CA whose PEM file serves as
  a client's trust bundle (`verify=`).

Each keeps its public key so that the local servers can check signatures; the `assertion` and
`provider_token` helpers make tokens exactly as a correct client does, for tests."""

from __future__ import annotations

import datetime
import ipaddress
import json
import secrets
import ssl
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.providers import jws

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def _pkcs8_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _apple_id() -> str:
    """Ten upper-case letters and digits, as Apple's key ids and team ids are."""
    alphabet = string.ascii_uppercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(10))


@dataclass(frozen=True)
class ServiceAccount:
    """A Google service-account key file and its key pair."""

    path: Path
    info: dict[str, str]
    private_key: rsa.RSAPrivateKey

    @property
    def public_key(self) -> rsa.RSAPublicKey:
        return self.private_key.public_key()

    @property
    def project_id(self) -> str:
        return self.info["project_id"]

    @property
    def client_email(self) -> str:
        return self.info["client_email"]

    @property
    def private_key_id(self) -> str:
        return self.info["private_key_id"]

    @property
    def token_uri(self) -> str:
        return self.info["token_uri"]

    def assertion(
        self,
        *,
        now: float | None = None,
        lifetime: int = 3600,
        scope: str | None = FCM_SCOPE,
        **overrides: Any,
    ) -> str:
        """The signed JWT that a client posts to `token_uri` (Google's "JWT bearer" flow).
        `overrides` replace claims (iss, aud, iat, exp...); `scope=None` leaves it out."""
        iat = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "iss": self.client_email,
            "aud": self.token_uri,
            "iat": iat,
            "exp": iat + lifetime,
        }
        if scope is not None:
            claims["scope"] = scope
        claims.update(overrides)
        return jws.sign_rs256(claims, self.private_key, self.private_key_id)


def write_service_account(
    folder: Path, token_uri: str, project_id: str = "mediator-push-test"
) -> ServiceAccount:
    """Write `service-account.json` into `folder`, shaped like the console's download."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    account = f"firebase-adminsdk-{secrets.token_hex(3)[:5]}"
    email = f"{account}@{project_id}.iam.gserviceaccount.com"
    info = {
        "type": "service_account",
        "project_id": project_id,
        "private_key_id": secrets.token_hex(20),
        "private_key": _pkcs8_pem(key).decode(),
        "client_email": email,
        "client_id": str(secrets.randbelow(9 * 10**20) + 10**20),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/"
        + email.replace("@", "%40"),
        "universe_domain": "googleapis.com",
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "service-account.json"
    path.write_text(json.dumps(info, indent=2) + "\n")
    return ServiceAccount(path, info, key)


@dataclass(frozen=True)
class ApnsKey:
    """An APNs token-signing key (`.p8`) with its key id and the team id it belongs to."""

    path: Path
    key_id: str
    team_id: str
    private_key: ec.EllipticCurvePrivateKey

    @property
    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self.private_key.public_key()

    def provider_token(self, *, iat: float | None = None, **overrides: Any) -> str:
        """An APNs provider token as Apple specifies it: ES256, header {alg, kid}, claims
        {iss: team id, iat}. `overrides` replace or add claims."""
        claims: dict[str, Any] = {
            "iss": self.team_id,
            "iat": int(time.time() if iat is None else iat),
        }
        claims.update(overrides)
        return jws.sign_es256(claims, self.private_key, self.key_id)


def write_apns_key(folder: Path) -> ApnsKey:
    """Write `AuthKey_<KEYID>.p8` into `folder`, as Apple's portal names the download."""
    key = ec.generate_private_key(ec.SECP256R1())
    key_id = _apple_id()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"AuthKey_{key_id}.p8"
    path.write_bytes(_pkcs8_pem(key))
    return ApnsKey(path, key_id, _apple_id(), key)


@dataclass(frozen=True)
class TlsCert:
    """A server certificate for 127.0.0.1 and localhost and the CA that issued it.
    `ca_path` is the bundle a client trusts (`verify=`); `cert_path` holds leaf then CA."""

    ca_path: Path
    cert_path: Path
    key_path: Path

    def server_context(self, alpn: list[str] | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert_path, self.key_path)
        if alpn:
            ctx.set_alpn_protocols(alpn)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A fresh context trusting the CA (fresh because httpx sets ALPN on the one it gets)."""
        return ssl.create_default_context(cafile=str(self.ca_path))


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mediator push tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def write_tls_cert(folder: Path, names: tuple[str, ...] = ()) -> TlsCert:
    """Write `ca.pem`, `server.pem` (leaf + CA) and `server.key` into `folder`. With `names`
    the certificate is for those host names only (no address, not localhost)."""
    now = datetime.datetime.now(datetime.UTC)
    validity = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=7))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("mediator push tests CA"))
        .issuer_name(_name("mediator push tests CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in names]
                or [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    tls = TlsCert(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    tls.ca_path.write_bytes(ca.public_bytes(pem))
    tls.cert_path.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    tls.key_path.write_bytes(_pkcs8_pem(key))
    return tls
