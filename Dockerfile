# The rayquota operator image: `rayquota run` (the Helm chart passes the flags).
#   docker build -t <registry>/rayquota:0.1.0 .
# Dependencies are installed at the exact versions of requirements.lock when it is present (the
# lock also pins the test tools; only what the package needs at run time is installed).
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md requirements.lock* ./
COPY rayquota ./rayquota
RUN python -m venv /opt/rayquota \
 && if [ -f requirements.lock ]; then \
      grep -E '^[A-Za-z0-9_.-]+==' requirements.lock | sed 's/[ ;].*//' > /tmp/constraints.txt; \
      /opt/rayquota/bin/pip install --no-cache-dir --constraint /tmp/constraints.txt . ; \
    else \
      /opt/rayquota/bin/pip install --no-cache-dir . ; \
    fi \
 && /opt/rayquota/bin/rayquota --help > /dev/null

FROM python:${PYTHON_VERSION}-slim
COPY --from=build /opt/rayquota /opt/rayquota
ENV PATH=/opt/rayquota/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The chart's securityContext runs as this user with a read-only root filesystem (/tmp is an
# emptyDir there).
USER 65532:65532
ENTRYPOINT ["rayquota"]
CMD ["run"]
