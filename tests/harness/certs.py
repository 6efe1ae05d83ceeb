"""Throwaway certificates for the local control plane, webhooks and registry.

The tests need a real certificate authority: kube-apiserver authenticates users by
client certificate (CN = user, O = groups), clients verify its serving certificate,
and it verifies the webhook servers it calls. Every run makes a fresh authority, so no
key ever outlives the directory it was written to.

This module refuses to be a PKI: keys are ECDSA P-256 (fast to make, accepted by every
component here), certificates last a day (a webhook's serving set: the days asked),
and nothing is revoked or renewed.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_LIFETIME = datetime.timedelta(days=1)
# Clocks of the processes started here and of this one agree; the margin covers
# the rounding of notBefore to whole seconds.
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class Pem:
    """A certificate and its private key, PEM-encoded."""

    cert: bytes
    key: bytes

    def write(self, *, cert_path: Path, key_path: Path) -> None:
        cert_path.write_bytes(self.cert)
        key_path.write_bytes(self.key)
        key_path.chmod(0o600)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


@dataclass(frozen=True)
class Authority:
    """A self-signed CA that issues serving and client certificates."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(
        cls, common_name: str = "ichor-test-ca", *, lifetime: datetime.timedelta = _LIFETIME
    ) -> Authority:
        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        name = _name(common_name)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + lifetime)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(key=key, cert=cert)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def pem(self) -> Pem:
        return Pem(cert=self.cert_pem, key=_key_pem(self.key))

    def issue_server(
        self,
        *,
        hosts: Sequence[str],
        common_name: str | None = None,
        lifetime: datetime.timedelta = _LIFETIME,
    ) -> Pem:
        """A serving certificate for ``hosts`` (DNS names or IP addresses)."""
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        return self._issue(
            subject=_name(common_name or hosts[0]),
            usage=ExtendedKeyUsageOID.SERVER_AUTH,
            sans=names,
            lifetime=lifetime,
        )

    def issue_client(
        self,
        *,
        user: str,
        groups: Sequence[str] = (),
        not_after: datetime.datetime | None = None,
    ) -> Pem:
        """A client certificate kube-apiserver reads as ``user`` in ``groups``; valid
        until ``not_after`` when given (a past one makes an expired certificate)."""
        return self._issue(
            subject=_name(user, groups),
            usage=ExtendedKeyUsageOID.CLIENT_AUTH,
            sans=[],
            not_after=not_after,
        )

    def _issue(
        self,
        *,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: Sequence[x509.GeneralName],
        lifetime: datetime.timedelta = _LIFETIME,
        not_after: datetime.datetime | None = None,
    ) -> Pem:
        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        end = not_after if not_after is not None else now + lifetime
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(min(now - _BACKDATE, end - lifetime))
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Pem(cert=cert.public_bytes(serialization.Encoding.PEM), key=_key_pem(key))


@dataclass(frozen=True)
class SigningKey:
    """A bare key pair that signs tokens: kube-apiserver's service-account tokens, and the
    test registry's token server (whose registry trusts the key through a self-signed
    certificate, ``self_signed``)."""

    private: bytes
    public: bytes

    @classmethod
    def create(cls) -> SigningKey:
        key = _new_key()
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls(private=_key_pem(key), public=public)

    def public_key(self) -> ec.EllipticCurvePublicKey:
        key = serialization.load_pem_public_key(self.public)
        assert isinstance(key, ec.EllipticCurvePublicKey)
        return key

    def self_signed(
        self, common_name: str, *, lifetime: datetime.timedelta = datetime.timedelta(days=2)
    ) -> bytes:
        """A self-signed CA certificate of this key (PEM), valid from five minutes ago."""
        key = serialization.load_pem_private_key(self.private, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        name = _name(common_name)
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + lifetime)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class ServingFiles:
    """Where a webhook's CA and serving certificate were written."""

    ca: Path
    cert: Path
    key: Path


def write_serving_certificate(
    directory: Path, *, hosts: Sequence[str] = ("127.0.0.1", "localhost"), days: int = 7
) -> ServingFiles:
    """A fresh CA and a serving certificate for ``hosts``, written as ``ca.crt``,
    ``tls.crt`` and ``tls.key``: the webhook's TLS where no cert-manager runs (the tests,
    the demo and the bench; a real install gets them from cert-manager or the chart)."""
    directory.mkdir(parents=True, exist_ok=True)
    lifetime = datetime.timedelta(days=days)
    authority = Authority.create("ichor-webhook-ca", lifetime=lifetime)
    serving = authority.issue_server(hosts=hosts, lifetime=lifetime)
    files = ServingFiles(
        ca=directory / "ca.crt", cert=directory / "tls.crt", key=directory / "tls.key"
    )
    files.ca.write_bytes(authority.cert_pem)
    serving.write(cert_path=files.cert, key_path=files.key)
    return files
