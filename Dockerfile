# The trajforge image for Kubernetes (dagster-k8s run/step pods) and KubeRay (head and
# workers, deploy/kuberay/raycluster.yaml): Debian Chromium + driver, the CJK fonts the
# sandbox's Chinese pages need, Node with the Appium pinned in package.json, the project.
#   docker build -t trajforge:0.1.0 .                      # a crawl worker: no trainer
#   docker build --build-arg EXTRAS=all -t trajforge:0.1.0-all .
FROM python:3.11-slim-bookworm

ARG EXTRAS=ray,storage,k8s
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      chromium chromium-driver fonts-noto-cjk nodejs npm ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/trajforge
# Appium 3 and its Chromium driver at the versions package.json / package-lock.json pin.
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund --loglevel=error && npm cache clean --force
ENV PATH=/opt/trajforge/node_modules/.bin:$PATH

COPY pyproject.toml README.md workspace.yaml ./
COPY schemas schemas
COPY crawlers crawlers
COPY sandbox sandbox
COPY filters filters
COPY synthesis synthesis
COPY training training
COPY trajforge trajforge
COPY dagster_project dagster_project
COPY environments environments
RUN pip install ".[${EXTRAS}]"

RUN useradd --create-home trajforge
USER trajforge
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["dagster", "api", "grpc", "-m", "dagster_project.definitions", "-h", "0.0.0.0", "-p", "4000"]
