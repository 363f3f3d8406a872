# fleetgrade worker image for Dataflow (--sdk_container_image), portable runners and Dask workers
# (`docker run --entrypoint dask IMAGE worker tcp://SCHEDULER:8786`, docs/dask.md).
#
# Based on the Beam Python SDK image of the exact Beam version fleetgrade pins, plus the system
# tools the operational-value grader needs: bash (evaluators), bubblewrap (their sandbox), jq (most
# evaluators parse their JSON request with it) and util-linux (prlimit).
#
# Not built in this repository's CI: the development machines have no Docker engine. Build with
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/fleetgrade-worker:0.1.0 .
# bubblewrap needs user namespaces in the worker's container runtime; if the runtime forbids them
# the operational-value grader fails closed ("operational-value sandbox unavailable: …") and every
# other grader keeps working.
FROM apache/beam_python3.11_sdk:2.77.0

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash bubblewrap jq util-linux \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/fleetgrade
COPY pyproject.toml setup.py README.md* ./
COPY schemas ./schemas
COPY graders ./graders
COPY transforms ./transforms
COPY pipeline ./pipeline
RUN pip install --no-cache-dir '.[dask]' \
 && python -c "import graders.families.opvalue.sandbox, pipeline.cli"

# The SDK image's entrypoint (/opt/apache/beam/boot) is kept: Beam starts the worker harness.
