"""`helm lint` and `helm template` of the chart with the default values and each option,
asserting on the rendered objects."""

from __future__ import annotations

import base64
import re
import tomllib
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from ichor.webhook.configuration import render_configuration, render_mutating_configuration
from tests.component.chart import helm
from tests.component.chart.helm import Object

pytestmark = pytest.mark.component

ROOT = helm.CHART.parents[1]
SERVICE = "ichor-webhook"
OPTIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "replicas-3": {"replicas": 3},
    "cert-manager": {"webhook": {"certificate": {"source": "cert-manager"}}},
    "cert-manager-issuer": {
        "webhook": {
            "certificate": {
                "source": "cert-manager",
                "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
            }
        }
    },
    "existing-secret": {
        "webhook": {
            "certificate": {"source": "secret", "existingSecret": "mine", "caBundle": "PEM"}
        }
    },
    "webhook-url": {"webhook": {"url": "https://127.0.0.1:9555"}},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"a": "b"}}}},
    "no-metrics": {"metrics": {"enabled": False}},
    "release-check-off": {"releaseCheck": {"enabled": False}},
    "network-policy-forced": {
        "releaseCheck": {"enabled": False},
        "networkPolicy": {"enabled": True},
    },
    "network-policy-off": {"networkPolicy": {"enabled": False}},
    "cilium-policy": {"networkPolicy": {"cilium": {"enabled": True}}},
    "override-to-admin": {"override": {"aggregateToAdmin": True}},
    "no-installation": {"installation": {"create": False}},
    "mirror": {
        "releaseCheck": {
            "registryHost": "mirror.example.com",
            "talosRepository": "mirror.example.com/siderolabs/installer-base",
            "pullSecretRef": {"namespace": "ichor-system", "name": "mirror-creds"},
        },
        "networkPolicy": {"cilium": {"enabled": True}},
    },
    "digest": {"image": {"digest": "sha256:" + "a" * 64}},
    "existing-account": {"serviceAccount": {"create": False, "name": "ops"}},
    "mutual-tls": {
        "webhook": {
            "clientAuth": {
                "enabled": True,
                "caBundle": "-----BEGIN CERTIFICATE-----\nCLIENT-CA\n-----END CERTIFICATE-----\n",
                "commonNames": ["kube-apiserver-webhook-client", "apiserver-2"],
            }
        }
    },
    "webhook-ingress": {"networkPolicy": {"webhook": {"cidrs": ["10.5.0.0/24", "fd00::/64"]}}},
    "webhook-ingress-policy-off": {
        "networkPolicy": {"enabled": False, "webhook": {"cidrs": ["10.5.0.0/24"]}}
    },
    "webhook-ingress-no-metrics": {
        "metrics": {"enabled": False},
        "releaseCheck": {"enabled": False},
        "networkPolicy": {"webhook": {"cidrs": ["10.5.0.0/24"]}},
    },
}


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Object]]:
    return {name: helm.template(values) for name, values in OPTIONS.items()}


@pytest.mark.parametrize("option", OPTIONS)
def test_lint_passes(option: str) -> None:
    result = helm.lint(OPTIONS[option])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"replica": 2}, "additional properties 'replica' not allowed"),
        ({"webhook": {"certificate": {"source": "vault"}}}, "/webhook/certificate/source"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"replicas": 0}, "/replicas"),
        ({"releaseCheck": {"interval": "daily"}}, "/releaseCheck/interval"),
        ({"webhook": {"url": "http://127.0.0.1:9443"}}, "/webhook/url"),
        ({"webhook": {"timeoutSeconds": 31}}, "/webhook/timeoutSeconds"),
        ({"releaseCheck": {"pullSecretRef": {"name": "x"}}}, "/releaseCheck/pullSecretRef"),
        ({"networkPolicy": {"webhook": {"cidrs": ["apiserver"]}}}, "/networkPolicy/webhook/cidrs"),
        ({"webhook": {"clientAuth": {"commonNames": ["a,b"]}}}, "/webhook/clientAuth/commonNames"),
        ({"webhook": {"clientAuth": {"ca": "PEM"}}}, "additional properties 'ca' not allowed"),
        ({"autoPatchHealthCheckResources": ["v1/secrets"]}, "/autoPatchHealthCheckResources/0"),
        ({"autoPatchHealthCheckResources": ["pods"]}, "/autoPatchHealthCheckResources/0"),
        (
            {
                "autoPatch": {
                    "healthChecks": [
                        {
                            "name": "o",
                            "apiVersion": "v1",
                            "resource": "secrets",
                            "expression": "true",
                        }
                    ]
                }
            },
            "/autoPatch/healthChecks/0/resource",
        ),
    ],
    ids=[
        "typo",
        "cert-source",
        "pull-policy",
        "no-replicas",
        "interval",
        "plain-http",
        "timeout",
        "secret-without-namespace",
        "cidr-not-a-cidr",
        "common-name-with-comma",
        "client-auth-typo",
        "health-check-secrets-allowed",
        "health-check-resource-without-version",
        "fleet-health-check-over-secrets",
    ],
)
def test_a_wrong_value_fails_the_schema(values: dict[str, Any], words: str) -> None:
    result = helm.run("template", "x", str(helm.CHART), values=values, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert words in result.stderr


def test_crds_are_the_repository_crds(rendered: dict[str, list[Object]]) -> None:
    crds = {
        o["metadata"]["name"] for o in helm.find(rendered["defaults"], "CustomResourceDefinition")
    }
    assert crds == {
        "talosclusters.ichor.dev",
        "ichorinstallations.ichor.dev",
        "talosoperations.ichor.dev",
    }


def test_default_objects(rendered: dict[str, list[Object]]) -> None:
    assert helm.kinds(rendered["defaults"]) == {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Secret",
        "Service",
        "Deployment",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "NetworkPolicy",
        "IchorInstallation",
    }


def test_default_image_is_what_make_image_tags(rendered: dict[str, list[Object]]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    makefile = (ROOT / "Makefile").read_text()
    repository = re.search(r"^IMAGE_REPOSITORY := (\S+)$", makefile, re.MULTILINE)
    assert repository is not None
    assert helm.container(rendered["defaults"])["image"] == f"{repository[1]}:{version}"
    digest = helm.container(rendered["digest"])["image"]
    assert digest == f"{repository[1]}@sha256:{'a' * 64}"


def test_deployment_is_hardened(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["defaults"]
    pod = helm.one(objects, "Deployment")["spec"]["template"]["spec"]
    operator = helm.container(objects)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = operator["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert operator["resources"]["requests"]
    assert operator["resources"]["limits"]["memory"]
    assert pod["serviceAccountName"] == helm.one(objects, "ServiceAccount")["metadata"]["name"]


@pytest.mark.parametrize("option", OPTIONS)
def test_each_replica_is_known_to_kopf_by_its_pods_name(
    rendered: dict[str, list[Object]], option: str
) -> None:
    """kopf's identity is POD_ID, else the user's name, which a numeric user may lack."""
    sources = helm.env_sources(rendered[option])
    assert sources["POD_ID"] == {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert helm.env(rendered[option], pod="ichor-5f7d9-abcde")["POD_ID"] == "ichor-5f7d9-abcde"


def test_probes_are_kopfs_liveness_endpoint(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["defaults"]
    operator = helm.container(objects)
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    endpoint = helm.env(objects)["ICHOR_LIVENESS_ENDPOINT"]
    assert endpoint == f"http://0.0.0.0:{ports['healthz']}/healthz"
    for probe in ("startupProbe", "livenessProbe"):
        assert operator[probe]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    # readiness is the webhook's own (test_values.py): kopf's answered before it served
    assert operator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "readyz"}


def test_operator_serves_webhook_and_metrics_with_the_mounted_files(
    rendered: dict[str, list[Object]],
) -> None:
    objects = rendered["defaults"]
    env = helm.env(objects)
    operator = helm.container(objects)
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert env["ICHOR_WEBHOOK_ADDR"] == "0.0.0.0"
    assert int(env["ICHOR_WEBHOOK_PORT"]) == ports["webhook"]
    assert int(env["ICHOR_METRICS_PORT"]) == ports["metrics"]
    mount = next(m for m in operator["volumeMounts"] if m["name"] == "webhook-tls")
    assert env["ICHOR_WEBHOOK_CERT"] == mount["mountPath"] + "/tls.crt"
    assert env["ICHOR_WEBHOOK_KEY"] == mount["mountPath"] + "/tls.key"
    pod = helm.one(objects, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    secret = helm.one(objects, "Secret")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert "ICHOR_PEERING" not in env
    assert "ICHOR_METRICS_PORT" not in helm.env(rendered["no-metrics"])


def _webhooks(objects: list[Object]) -> list[dict[str, Any]]:
    """Every webhook of both configurations (validating and mutating)."""
    hooks: list[dict[str, Any]] = []
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        hooks += helm.one(objects, kind)["webhooks"]
    return hooks


def test_webhook_configuration_is_the_webhooks_own(rendered: dict[str, list[Object]]) -> None:
    """Everything but the client configuration is what render_configuration gives."""
    own: list[Any] = [
        *render_configuration(url="https://x", ca_bundle=b"x")["webhooks"],
        *render_mutating_configuration(url="https://x", ca_bundle=b"x")["webhooks"],
    ]
    chart = _webhooks(rendered["defaults"])

    def without_client(hooks: Any) -> list[dict[str, Any]]:
        return [{k: v for k, v in dict(h).items() if k != "clientConfig"} for h in hooks]

    assert without_client(chart) == without_client(own)
    for hook in chart:
        assert hook["sideEffects"] == "NoneOnDryRun"
        assert hook["failurePolicy"] == "Fail"
        assert hook["timeoutSeconds"] <= 10


def test_webhook_calls_the_service_that_selects_the_operator(
    rendered: dict[str, list[Object]],
) -> None:
    objects = rendered["defaults"]
    service = helm.one(objects, "Service")
    deployment = helm.one(objects, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    assert {"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"} in service[
        "spec"
    ]["ports"]
    for hook in _webhooks(objects):
        handler = hook["name"].split(".")[0]
        assert hook["clientConfig"]["service"] == {
            "name": service["metadata"]["name"],
            "namespace": helm.NAMESPACE,
            "path": f"/{handler}",
            "port": 443,
        }


def _certificates(objects: list[Object]) -> tuple[x509.Certificate, x509.Certificate]:
    secret = helm.one(objects, "Secret")
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    return ca, leaf


def _signed_by(leaf: x509.Certificate, ca: x509.Certificate) -> bool:
    key = ca.public_key()
    assert leaf.signature_hash_algorithm is not None
    if isinstance(key, rsa.RSAPublicKey):
        key.verify(
            leaf.signature,
            leaf.tbs_certificate_bytes,
            padding.PKCS1v15(),
            leaf.signature_hash_algorithm,
        )
    else:
        assert isinstance(key, ec.EllipticCurvePublicKey)
        key.verify(
            leaf.signature, leaf.tbs_certificate_bytes, ec.ECDSA(leaf.signature_hash_algorithm)
        )
    return True


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("defaults", f"{SERVICE}.{helm.NAMESPACE}.svc"),
        ("webhook-url", "127.0.0.1"),
    ],
)
def test_generated_certificate_is_signed_by_the_ca_bundle_and_names_the_endpoint(
    rendered: dict[str, list[Object]], option: str, name: str
) -> None:
    objects = rendered[option]
    ca, leaf = _certificates(objects)
    assert _signed_by(leaf, ca)
    for hook in _webhooks(objects):
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca.public_bytes(
            serialization.Encoding.PEM
        )
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    found = [str(n) for n in names.get_values_for_type(x509.DNSName)] + [
        str(ip) for ip in names.get_values_for_type(x509.IPAddress)
    ]
    assert name in found


def test_webhook_url_replaces_the_service(rendered: dict[str, list[Object]]) -> None:
    for hook in _webhooks(rendered["webhook-url"]):
        handler = hook["name"].split(".")[0]
        assert hook["clientConfig"]["url"] == f"https://127.0.0.1:9555/{handler}"
        assert "service" not in hook["clientConfig"]


def test_cert_manager_issues_and_injects(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["cert-manager"]
    assert not helm.find(objects, "Secret")
    certificate = helm.one(objects, "Certificate", "ichor-webhook")
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        configuration = helm.one(objects, kind)
        annotation = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert annotation == f"{helm.NAMESPACE}/ichor-webhook"
        assert all("caBundle" not in hook["clientConfig"] for hook in configuration["webhooks"])
    assert f"{SERVICE}.{helm.NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    pod = helm.one(objects, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    issuers = {o["metadata"]["name"] for o in helm.find(objects, "Issuer")}
    assert certificate["spec"]["issuerRef"]["name"] in issuers

    given = rendered["cert-manager-issuer"]
    assert not helm.find(given, "Issuer")
    assert helm.one(given, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }


def test_existing_secret_is_mounted_and_its_ca_used(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["existing-secret"]
    assert not helm.find(objects, "Secret")
    pod = helm.one(objects, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "webhook-tls", "secret": {"secretName": "mine"}} in pod["volumes"]
    for hook in _webhooks(objects):
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == b"PEM"


def test_replicas_peer_and_keep_one_up(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["replicas-3"]
    assert helm.one(objects, "Deployment")["spec"]["replicas"] == 3
    pdb = helm.one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    peering = helm.one(objects, "ClusterKopfPeering")
    assert helm.env(objects)["ICHOR_PEERING"] == peering["metadata"]["name"]
    assert "post-install" in peering["metadata"]["annotations"]["helm.sh/hook"]
    assert helm.one(objects, "CustomResourceDefinition", "clusterkopfpeerings.kopf.dev")
    assert not helm.find(rendered["defaults"], "PodDisruptionBudget")
    assert not helm.find(rendered["defaults"], "ClusterKopfPeering")


def _egress_ports(policy: Object) -> list[set[int]]:
    return [{p["port"] for p in rule.get("ports", [])} for rule in policy["spec"]["egress"]]


def test_network_policy_follows_the_release_check(rendered: dict[str, list[Object]]) -> None:
    """The egress policy; the ingress one is always there (its own test) unless forced off."""
    policy = helm.one(rendered["defaults"], "NetworkPolicy", "ichor-egress")
    assert policy["spec"]["policyTypes"] == ["Egress"]
    assert _egress_ports(policy) == [{53}, {443, 6443}, {443}]
    assert not helm.find(rendered["release-check-off"], "NetworkPolicy", "ichor-egress")
    assert not helm.find(rendered["network-policy-off"], "NetworkPolicy")
    forced = helm.one(rendered["network-policy-forced"], "NetworkPolicy", "ichor-egress")
    assert _egress_ports(forced) == [{53}, {443, 6443}]
    cilium = helm.one(rendered["cilium-policy"], "CiliumNetworkPolicy")
    fqdns = [rule for rule in cilium["spec"]["egress"] if "toFQDNs" in rule]
    assert fqdns[0]["toFQDNs"] == [{"matchName": "ghcr.io"}]


def test_service_monitor_scrapes_the_metrics_port(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["service-monitor"]
    monitor = helm.one(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["a"] == "b"
    service = helm.one(objects, "Service")
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert not helm.find(rendered["defaults"], "ServiceMonitor")
    assert "metrics" not in {
        p["name"] for p in helm.one(rendered["no-metrics"], "Service")["spec"]["ports"]
    }


def test_override_role_holds_only_the_override_verb(rendered: dict[str, list[Object]]) -> None:
    role = helm.one(rendered["defaults"], "ClusterRole", "ichor-override")
    assert role["rules"] == [
        {"apiGroups": ["ichor.dev"], "resources": ["talosclusters"], "verbs": ["override"]}
    ]
    assert "rbac.authorization.k8s.io/aggregate-to-admin" not in role["metadata"]["labels"]
    aggregated = helm.one(rendered["override-to-admin"], "ClusterRole", "ichor-override")
    assert (
        aggregated["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    )


def test_installation_singleton_carries_the_release_check(
    rendered: dict[str, list[Object]],
) -> None:
    installation = helm.one(rendered["defaults"], "IchorInstallation")
    assert installation["metadata"]["name"] == "ichor"
    assert installation["spec"]["releaseCheck"]["enabled"] is True
    assert installation["spec"]["releaseCheck"]["interval"] == "6h"
    off = helm.one(rendered["release-check-off"], "IchorInstallation")
    assert off["spec"]["releaseCheck"]["enabled"] is False
    assert not helm.find(rendered["no-installation"], "IchorInstallation")
    mirror = helm.one(rendered["mirror"], "IchorInstallation")["spec"]["releaseCheck"]
    assert mirror["pullSecretRef"] == {"namespace": "ichor-system", "name": "mirror-creds"}
    assert mirror["talosRepository"] == "mirror.example.com/siderolabs/installer-base"
    cilium = helm.one(rendered["mirror"], "CiliumNetworkPolicy")
    fqdns = [rule["toFQDNs"] for rule in cilium["spec"]["egress"] if "toFQDNs" in rule]
    assert fqdns == [[{"matchName": "mirror.example.com"}]]


def test_existing_service_account_is_bound_not_created(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["existing-account"]
    assert not helm.find(objects, "ServiceAccount")
    binding = helm.one(objects, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ops", "namespace": helm.NAMESPACE}
    ]


def test_mutual_tls_mounts_the_client_ca_and_names_it(rendered: dict[str, list[Object]]) -> None:
    objects = rendered["mutual-tls"]
    env = helm.env(objects)
    configmap = helm.one(objects, "ConfigMap", "ichor-webhook-client-ca")
    assert configmap["data"]["ca.crt"] == OPTIONS["mutual-tls"]["webhook"]["clientAuth"]["caBundle"]
    operator = helm.container(objects)
    mount = next(m for m in operator["volumeMounts"] if m["name"] == "webhook-client-ca")
    assert mount["readOnly"] is True
    assert env["ICHOR_WEBHOOK_CLIENT_CA"] == mount["mountPath"] + "/ca.crt"
    assert env["ICHOR_WEBHOOK_CLIENT_NAMES"] == "kube-apiserver-webhook-client,apiserver-2"
    pod = helm.one(objects, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-client-ca")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    # off by default: no ConfigMap, no client CA, any TLS client is served
    assert not helm.find(rendered["defaults"], "ConfigMap")
    assert "ICHOR_WEBHOOK_CLIENT_CA" not in helm.env(rendered["defaults"])


def test_mutual_tls_without_a_ca_fails_the_install() -> None:
    result = helm.run(
        "template", "x", str(helm.CHART),
        values={"webhook": {"clientAuth": {"enabled": True}}}, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "webhook.clientAuth.caBundle" in result.stderr
    assert "is required when webhook.clientAuth.enabled is true" in result.stderr


def test_the_webhook_port_is_admitted_only_from_the_configured_cidrs(
    rendered: dict[str, list[Object]],
) -> None:
    ingress = helm.one(rendered["webhook-ingress"], "NetworkPolicy", "ichor-webhook-ingress")
    assert ingress["spec"]["policyTypes"] == ["Ingress"]
    webhook_port = int(helm.env(rendered["webhook-ingress"])["ICHOR_WEBHOOK_PORT"])
    first, rest = ingress["spec"]["ingress"]
    assert first["from"] == [
        {"ipBlock": {"cidr": "10.5.0.0/24"}},
        {"ipBlock": {"cidr": "fd00::/64"}},
    ]
    assert first["ports"] == [{"protocol": "TCP", "port": webhook_port}]
    assert "from" not in rest  # probes and metrics from anywhere, never the webhook port
    # 8080 liveness, 8082 readiness, 8081 metrics
    assert {p["port"] for p in rest["ports"]} == {8080, 8081, 8082}
    assert webhook_port not in {p["port"] for p in rest["ports"]}
    assert (
        ingress["spec"]["podSelector"]
        == helm.one(rendered["webhook-ingress"], "NetworkPolicy", "ichor-egress")["spec"][
            "podSelector"
        ]
    )
    no_metrics = helm.one(rendered["webhook-ingress-no-metrics"], "NetworkPolicy")
    assert {p["port"] for p in no_metrics["spec"]["ingress"][1]["ports"]} == {8080, 8082}
    assert not helm.find(rendered["webhook-ingress-policy-off"], "NetworkPolicy")


def test_an_ingress_policy_is_always_rendered_and_admits_the_webhook_from_anywhere_only_unset(
    rendered: dict[str, list[Object]],
) -> None:
    """DESIGN: a NetworkPolicy always. Without CIDRs (the default, so that the README's
    install works on any cluster, whatever address its API servers call from) the
    webhook port is open to any source, which the NOTES say; every other port but the
    probes' and the metrics' is closed either way."""
    ingress = helm.one(rendered["defaults"], "NetworkPolicy", "ichor-webhook-ingress")
    assert ingress["spec"]["policyTypes"] == ["Ingress"]
    webhook_port = int(helm.env(rendered["defaults"])["ICHOR_WEBHOOK_PORT"])
    first, rest = ingress["spec"]["ingress"]
    assert "from" not in first
    assert first["ports"] == [{"protocol": "TCP", "port": webhook_port}]
    assert {p["port"] for p in rest["ports"]} == {8080, 8081, 8082}
    # with the release check off (no egress policy), the ingress policy stays
    no_check = helm.template({"releaseCheck": {"enabled": False}})
    assert helm.one(no_check, "NetworkPolicy")["metadata"]["name"] == "ichor-webhook-ingress"


def _notes(values: dict[str, Any]) -> str:
    result = helm.run(
        "install", helm.RELEASE, str(helm.CHART), "--dry-run=client", "--namespace",
        helm.NAMESPACE, values=values,
    )  # fmt: skip
    return result.stdout[result.stdout.index("NOTES:") :]


def test_the_notes_warn_while_the_webhook_port_admits_any_caller() -> None:
    warning = "WARNING: the webhook port admits any caller"
    open_port = _notes({})
    assert warning in open_port
    assert "networkPolicy.webhook.cidrs" in open_port
    assert "webhook.clientAuth" in open_port
    assert warning not in _notes({"networkPolicy": {"webhook": {"cidrs": ["10.5.0.0/24"]}}})
    mutual = _notes(OPTIONS["mutual-tls"])
    assert warning not in mutual
    assert "networkPolicy.webhook.cidrs" in mutual  # still worth narrowing


def test_health_check_resources_reach_the_operator_and_default_to_its_own() -> None:
    """Unset, the operator's default applies (the variable is absent); set, it is the list."""
    assert "ICHOR_HEALTH_CHECK_RESOURCES" not in helm.env(helm.template({}))
    values = {"autoPatchHealthCheckResources": ["v1/pods", "example.com/v1/widgets"]}
    env = helm.env(helm.template(values))
    assert env["ICHOR_HEALTH_CHECK_RESOURCES"] == "v1/pods,example.com/v1/widgets"


def test_reads_for_a_tenant_require_a_named_account_unless_told_otherwise() -> None:
    """By default the operator reads a cluster without a kubeconfig only as an account its
    spec or the IchorInstallation names; the fleet's default reaches the installation."""
    assert helm.env(helm.template({}))["ICHOR_REQUIRE_SERVICE_ACCOUNT"] == "true"
    loose = helm.template({"tenants": {"requireServiceAccount": False}})
    assert "ICHOR_REQUIRE_SERVICE_ACCOUNT" not in helm.env(loose)
    installation = helm.one(helm.template({}), "IchorInstallation")
    assert "defaultServiceAccountName" not in installation["spec"]
    named = helm.template({"tenants": {"defaultServiceAccountName": "ichor-reader"}})
    assert helm.one(named, "IchorInstallation")["spec"]["defaultServiceAccountName"] == (
        "ichor-reader"
    )
    for wrong in ("kube-system:admin", "system:serviceaccount:a:b", "Reader"):
        values = {"tenants": {"defaultServiceAccountName": wrong}}
        result = helm.run("template", "x", str(helm.CHART), values=values, check=False)
        assert result.returncode != 0, wrong
        assert "/tenants/defaultServiceAccountName" in result.stderr


def test_the_operator_pod_survives_the_upgrades_it_drives_by_default(
    rendered: dict[str, list[Object]],
) -> None:
    """A priority class and tolerations by default, as tuppr's chart: the operator may run
    on control plane nodes and where only critical add-ons go, and is scheduled again
    first when a drain moves it; both can be turned off."""
    pod = helm.one(rendered["defaults"], "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in pod["tolerations"]
    assert {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    plain = helm.template({"priorityClassName": "", "tolerations": []})
    spec = helm.one(plain, "Deployment")["spec"]["template"]["spec"]
    assert "priorityClassName" not in spec
    assert "tolerations" not in spec
