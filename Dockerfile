# coffeebot on CPU: `docker compose up -d` (see compose.yaml and README.md, "Running it as a service").
# Models, the index, chat history and the WeChat ledger live in the /data volume; the knowledge base is mounted at /kb.
FROM python:3.11-slim-bookworm

# torch first and pinned, from the CPU wheel index: an unpinned torch pulls a multi-GB CUDA build (as the Makefile).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COFFEEBOT_CONFIG=/app/deploy/config.docker.toml \
    HF_HOME=/data/huggingface \
    MPLCONFIGDIR=/data/matplotlib \
    ANONYMIZED_TELEMETRY=False

RUN pip install --index-url "${TORCH_INDEX_URL}" torch==2.13.0

WORKDIR /app
COPY pyproject.toml README.md ./
COPY rag_core ./rag_core
COPY bot ./bot
RUN pip install .
COPY deploy/config.docker.toml ./deploy/config.docker.toml
COPY kb /kb

RUN groupadd --system --gid 10001 coffeebot \
    && useradd --system --uid 10001 --gid coffeebot --home-dir /data --shell /usr/sbin/nologin coffeebot \
    && mkdir -p /data \
    && chown coffeebot:coffeebot /data
USER 10001:10001
VOLUME ["/data"]

# 8080: the WeChat callback (and /healthz, /metrics when WeChat runs); 9810: /healthz and /metrics otherwise.
EXPOSE 8080 9810
# The first start builds the index of /kb before it answers: give it time.
HEALTHCHECK --interval=30s --timeout=10s --start-period=900s --retries=3 CMD ["coffeebot", "health", "--timeout", "8"]
STOPSIGNAL SIGTERM
CMD ["coffeebot", "serve"]
