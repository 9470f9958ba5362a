# Cosigner's container image: `docker build -t cosigner .` or `podman build -t cosigner .`
# (`Dockerfile` is this same file under Docker's default name; tests/ops/test_deploy.py
# keeps the two identical). docs/operators.md#the-container-image says how to run it.
#
# Two stages. The first makes a virtual environment with Debian's Python 3.11 and installs
# the SDK and Cosigner from this checkout, every dependency as a prebuilt wheel (no
# compiler is needed, so none is installed). The second copies that environment onto a
# fresh base that has Python and the CA bundle alone, and runs it as a non-root user whose
# only writable place is the data volume.

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/cosigner
WORKDIR /src
# The dependencies first, read from both projects' pyproject.toml, so that a change to the
# code alone reuses this layer (cosigner-sdk itself comes from this checkout below). Wheels
# only, but for http-ece (Web Push's message encryption), published as pure-Python source only.
COPY pyproject.toml ./
COPY sdk/python/pyproject.toml sdk/python/
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -c 'import sys, tomllib; print("\n".join(d for f in sys.argv[1:] for d in tomllib.load(open(f, "rb"))["project"]["dependencies"] if not d.startswith("cosigner-sdk")))' \
      sdk/python/pyproject.toml pyproject.toml >/tmp/requirements.txt \
 && /opt/cosigner/bin/pip install --disable-pip-version-check --only-binary=:all: --no-binary=http-ece \
      -r /tmp/requirements.txt
COPY README.md ./
COPY sdk/python sdk/python
COPY contracts contracts
COPY storage storage
COPY surfaces surfaces
COPY bot bot
RUN --mount=type=cache,target=/root/.cache/pip \
    /opt/cosigner/bin/pip wheel --disable-pip-version-check --no-deps --wheel-dir /tmp/wheels ./sdk/python . \
 && /opt/cosigner/bin/pip install --disable-pip-version-check --no-deps /tmp/wheels/*.whl \
 && /opt/cosigner/bin/pip check \
 && /opt/cosigner/bin/pip uninstall --disable-pip-version-check -y pip setuptools

FROM debian:bookworm-slim
LABEL org.opencontainers.image.title="Cosigner" \
      org.opencontainers.image.description="A self-hostable approval gate for AI agents" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 ca-certificates \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/debconf/*-old /var/log/apt /var/log/dpkg.log \
 && useradd --uid 10001 --user-group --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin cosigner \
 && install -d -o cosigner -g cosigner -m 0700 /data
COPY --from=build /opt/cosigner /opt/cosigner
# Configuration comes from the environment alone (README's table); these are only the
# defaults that suit a container. Bytecode was compiled at install, so nothing is written
# beside the code and the root filesystem can be mounted read-only.
ENV PATH=/opt/cosigner/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/data \
    COSIGNER_DATABASE_URL=sqlite+aiosqlite:////data/cosigner.db
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 8000
# `docker run IMAGE migrate`, `… tenants create acme` and so on run other subcommands.
ENTRYPOINT ["cosigner"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
