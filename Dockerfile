# iqmesh images: `runtime` (instances and gateway: `iqmesh`) and `analytics` (the Spark snapshot
# job: Java 17 + PySpark). Only the wheel is installed: no sources, tests or dev tools.
#   docker build --target runtime -t iqmesh:0.1.0 .
#   docker build --target analytics -t iqmesh-analytics:0.1.0 .
# Pin the base by digest in your registry mirror (python:3.11.14-slim-bookworm@sha256:...).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY iqmesh ./iqmesh
COPY kernel ./kernel
COPY instance ./instance
COPY router ./router
COPY analytics ./analytics
COPY examples ./examples
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/iqmesh/venv PATH=/opt/iqmesh/venv/bin:$PATH
RUN groupadd --gid 10001 iqmesh && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin iqmesh
COPY --from=build /wheels /wheels
RUN python -m venv /opt/iqmesh/venv \
    && /opt/iqmesh/venv/bin/pip install --no-cache-dir /wheels/iqmesh-*.whl \
    && /opt/iqmesh/venv/bin/pip uninstall -y pip \
    && rm -rf /wheels
USER 10001:10001
WORKDIR /var/lib/iqmesh
EXPOSE 50051 8080
ENTRYPOINT ["iqmesh"]
CMD ["--help"]

FROM runtime AS analytics
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN python -m ensurepip \
    && python -m pip install --no-cache-dir "$(ls /wheels/iqmesh-*.whl)[analytics]" \
    && python -m pip uninstall -y pip \
    && rm -rf /wheels \
    && ln -s "$(python -c 'import analytics.snapshot.job as j; print(j.__file__)')" /opt/iqmesh/snapshot_job.py
ENV PYSPARK_PYTHON=/opt/iqmesh/venv/bin/python
USER 10001:10001
ENTRYPOINT ["spark-submit"]
CMD ["--help"]
