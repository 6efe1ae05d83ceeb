# syntax=docker/dockerfile:1
# The operator image: `make image` builds it, with a Docker engine or with buildah
# (hack/image.sh), and `make test` builds and runs it (tests/component/image). Two stages:
# the first installs the package and its dependencies into a virtual environment, the
# second copies only that environment onto the same slim base and runs as a numeric
# non-root user, so the chart's runAsNonRoot and read-only root filesystem hold.
#
# The base is pinned by digest. To move it: docker buildx imagetools inspect
# python:3.11-slim-bookworm, then pass --build-arg PYTHON_IMAGE=...@sha256:<digest>.
# Where it cannot be pulled, hack/image.sh passes a base made from Debian's packages.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY ichor ./ichor
RUN python -m venv /opt/ichor \
 && /opt/ichor/bin/pip install --no-compile . \
 && /opt/ichor/bin/python -m compileall -q /opt/ichor/lib \
 && /opt/ichor/bin/python -c "import ichor.operator"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="ichor-operator" \
      org.opencontainers.image.description="Ichor's upgrade operator for Talos Linux clusters" \
      org.opencontainers.image.source="https://github.com/ichor-dev/ichor" \
      org.opencontainers.image.licenses="Apache-2.0"
# The user has a name: kopf names the operator after it (getpass) when POD_ID is unset,
# as in a plain `docker run`, and a uid without a passwd entry would end the process.
RUN echo 'ichor:x:65532:65532:ichor:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'ichor:x:65532:' >> /etc/group
COPY --from=build /opt/ichor /opt/ichor
ENV PATH=/opt/ichor/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
USER 65532:65532
# 9443 admission webhook (HTTPS), 8080 kopf's liveness endpoint, 8081 Prometheus metrics.
EXPOSE 9443 8080 8081
ENTRYPOINT []
CMD ["python", "-m", "ichor.operator"]
