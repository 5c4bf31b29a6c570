# The control plane's one image: the web process (gunicorn, the default command), the Celery worker and beat,
# and the migration Job all run it (deploy/base). Build from the repository root:
#   docker build -t osmo-pools:0.1.0 .
ARG PYTHON_IMAGE=python:3.12-slim

# The dependencies, from pyproject.toml, into a virtualenv the runtime stage copies whole.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /venv
WORKDIR /src
COPY pyproject.toml ./
COPY osmo_site ./osmo_site
COPY pools ./pools
COPY scheduling ./scheduling
# The code itself runs from /app, where templates/ and static/ sit beside the packages as the settings expect
# (BASE_DIR), so the copy pip installed is removed again and only its dependencies stay.
RUN /venv/bin/pip install . && /venv/bin/pip uninstall --yes osmo-pools

FROM ${PYTHON_IMAGE}
# OSMO_DATA_DIR holds the collected static files (read-only at run time); OSMO_ENV_FILE empty: settings come
# from the environment only (deploy/base's ConfigMap and Secret), never from a file.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/venv/bin:$PATH \
    PYTHONPATH=/app \
    OSMO_DATA_DIR=/data \
    OSMO_ENV_FILE=
RUN groupadd --system --gid 10001 osmo \
 && useradd --system --uid 10001 --gid osmo --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin osmo
COPY --from=build /venv /venv
WORKDIR /app
COPY manage.py ./
COPY deploy/gunicorn.conf.py ./deploy/gunicorn.conf.py
COPY templates ./templates
COPY static ./static
COPY osmo_site ./osmo_site
COPY pools ./pools
COPY scheduling ./scheduling
# Static files collected (and compressed by whitenoise) at build time, with a key and broker that exist only
# for this step; bytecode compiled now, since the running containers' filesystem is read-only.
RUN SECRET_KEY=collectstatic-only DEBUG=0 CELERY_BROKER_URL=memory:// python manage.py collectstatic --noinput \
 && python -m compileall -q /app
USER 10001:10001
EXPOSE 8000
CMD ["gunicorn", "osmo_site.wsgi:application", "-c", "deploy/gunicorn.conf.py"]
