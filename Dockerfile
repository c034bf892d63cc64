# streamops image: Airflow 3 components, the Spark standalone master/workers and the
# PySpark driver all run from this one image (see docker-compose.yaml).
#
# Everything the containers need is fetched at BUILD time; nothing is downloaded at run
# time (no `spark.jars.packages`, no Ivy resolution): the Kafka connector jars are placed
# in pyspark's own jars/ directory, which is on the classpath of every Spark JVM.

FROM python:3.11-slim-bookworm

# ---- versions -------------------------------------------------------------------------
ARG UV_VERSION=0.13.9
ARG SPARK_VERSION=4.2.0
ARG SCALA_BINARY_VERSION=2.13
# kafka-clients: the version Apache Spark's pom.xml pins (`kafka.version`). Spark master
# was moved to 3.9.2 by SPARK-55940 (2026-03), i.e. during the 4.2 development cycle.
# This could not be checked against the released v4.2.0 tag from this machine: if the
# released pom says otherwise, override with --build-arg KAFKA_CLIENTS_VERSION=...
# (any 3.9.x client works against the 4.1 broker in docker-compose.yaml).
ARG KAFKA_CLIENTS_VERSION=3.9.2
# commons-pool2: Spark's `commons-pool2.version` (SPARK-54912 moved master to 2.13.1 in
# 2026-01; same caveat as above - 2.12.x is API compatible).
ARG COMMONS_POOL2_VERSION=2.13.1
# Maven repository the connector jars are downloaded from (build time only). Point it
# at an internal mirror/proxy with --build-arg MAVEN_REPO=... when the build host
# cannot reach the public one.
ARG MAVEN_REPO=https://repo1.maven.org/maven2
# Optional SHA-256 pins, one per jar. Every jar is always checked against the .sha1
# file published next to it in MAVEN_REPO (catches truncated/corrupt downloads); that
# check does not protect against a compromised repository, so for supply-chain pinning
# record the SHA-256 of each jar once from a trusted download and pass it here (or set
# the default). An empty value skips only the SHA-256 comparison.
ARG SPARK_SQL_KAFKA_SHA256=
ARG SPARK_TOKEN_PROVIDER_KAFKA_SHA256=
ARG KAFKA_CLIENTS_SHA256=
ARG COMMONS_POOL2_SHA256=
ARG STREAMOPS_UID=10001
ARG STREAMOPS_GID=10001

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_NO_CACHE=1 \
    JAVA_HOME=/usr/lib/jvm/java-17 \
    STREAMOPS_REPO=/opt/streamops \
    STREAMOPS_HOME=/opt/streamops/state \
    AIRFLOW_HOME=/opt/streamops/state/airflow \
    AIRFLOW_CONFIG=/opt/streamops/airflow.cfg \
    PYSPARK_PYTHON=python3 \
    PYSPARK_DRIVER_PYTHON=python3

# ---- OS packages ----------------------------------------------------------------------
# /usr/share/man/man1 must exist for the openjdk postinst on slim images.
# curl + ca-certificates: jar download below and the compose healthchecks.
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless procps tini curl ca-certificates; \
    rm -rf /var/lib/apt/lists/*; \
    ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" "${JAVA_HOME}"; \
    "${JAVA_HOME}/bin/java" -version

RUN pip install "uv==${UV_VERSION}"

WORKDIR /opt/streamops

# ---- Python dependencies (hash-locked), then the project itself -------------------------
# Copy only the lock + metadata first so the dependency layer is cached across code edits.
COPY requirements.lock pyproject.toml ./
# --compile-bytecode: PYTHONDONTWRITEBYTECODE (above) stops Python writing .pyc at run time, so
# without it every driver, Spark Python worker and Airflow task compiles its imports from source
# (about 4 s per driver start, docs/benchmarks.md)
RUN uv pip install --system --compile-bytecode --require-hashes -r requirements.lock

COPY . .
RUN uv pip install --system --compile-bytecode --no-deps . \
    && python -c "import streamops, pyspark, airflow; print('streamops', streamops.__version__, 'pyspark', pyspark.__version__, 'airflow', airflow.__version__)"

# ---- Spark's Kafka connector (build-time download into pyspark/jars) --------------------
RUN set -eux; \
    jars_dir="$(python -c 'import pyspark,os;print(os.path.join(os.path.dirname(pyspark.__file__),"jars"))')"; \
    test -d "${jars_dir}"; \
    fetch() { \
        group_path="$1"; artifact="$2"; version="$3"; sha256="$4"; \
        file="${artifact}-${version}.jar"; \
        url="${MAVEN_REPO}/${group_path}/${artifact}/${version}/${file}"; \
        curl -fsSL --retry 5 --retry-delay 2 -o "/tmp/${file}" "${url}"; \
        sha1="$(curl -fsSL --retry 5 --retry-delay 2 "${url}.sha1" | cut -c1-40)"; \
        echo "${sha1}  /tmp/${file}" | sha1sum -c -; \
        if [ -n "${sha256}" ]; then echo "${sha256}  /tmp/${file}" | sha256sum -c -; fi; \
        mv "/tmp/${file}" "${jars_dir}/${file}"; \
    }; \
    fetch org/apache/spark "spark-sql-kafka-0-10_${SCALA_BINARY_VERSION}" "${SPARK_VERSION}" "${SPARK_SQL_KAFKA_SHA256}"; \
    fetch org/apache/spark "spark-token-provider-kafka-0-10_${SCALA_BINARY_VERSION}" "${SPARK_VERSION}" "${SPARK_TOKEN_PROVIDER_KAFKA_SHA256}"; \
    fetch org/apache/kafka kafka-clients "${KAFKA_CLIENTS_VERSION}" "${KAFKA_CLIENTS_SHA256}"; \
    fetch org/apache/commons commons-pool2 "${COMMONS_POOL2_VERSION}" "${COMMONS_POOL2_SHA256}"; \
    test -f "${jars_dir}/spark-core_${SCALA_BINARY_VERSION}-${SPARK_VERSION}.jar"; \
    ls -l "${jars_dir}" | grep -E 'kafka|commons-pool2'

# ---- non-root runtime user + state directory ----------------------------------------------
# The state dir is pre-created (and owned by streamops) so that a fresh named volume mounted
# there inherits the ownership; /opt/streamops itself is writable so Airflow can write a
# default $AIRFLOW_CONFIG when the project does not ship one.
RUN set -eux; \
    groupadd --system --gid "${STREAMOPS_GID}" streamops; \
    useradd --system --uid "${STREAMOPS_UID}" --gid streamops --home-dir /opt/streamops \
        --shell /bin/bash streamops; \
    mkdir -p "${STREAMOPS_HOME}" "${AIRFLOW_HOME}" \
        "${STREAMOPS_HOME}/spark/work" "${STREAMOPS_HOME}/spark/local" \
        /opt/streamops/dags /opt/streamops/plugins /opt/streamops/include /opt/streamops/jobs; \
    chown streamops:streamops /opt/streamops; \
    chown -R streamops:streamops "${STREAMOPS_HOME}"

USER streamops

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["airflow", "version"]
