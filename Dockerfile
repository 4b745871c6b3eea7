# Samsa in a container: `docker compose up` (see docker-compose.yml).
# Two stages: the C codec (wire/_speedups.c) is compiled where gcc is, into wheels; the image that
# runs installs those wheels and has no compiler. Both stages check that the C codec is the one in use
# (wire/codec.py's SPEEDUPS_MISSING says why not, when it is not).

FROM python:3.11-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Samsa's wheel and one for each dependency, so the final stage installs without an index or compiler.
RUN pip wheel --no-cache-dir --wheel-dir /wheels . \
 && python -c "import zipfile, glob; (w,) = glob.glob('/wheels/samsa-*.whl'); \
assert any('_speedups' in n for n in zipfile.ZipFile(w).namelist()), 'the C codec was not built'"

FROM python:3.11-slim
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-cache-dir --no-index --find-links /tmp/wheels samsa \
 && rm -rf /tmp/wheels \
 && python -c "from samsa.wire import codec; assert codec.ACCELERATED, codec.SPEEDUPS_MISSING"
EXPOSE 9092
VOLUME ["/var/lib/samsa"]
ENTRYPOINT ["samsa", "serve"]
CMD ["--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "log.dirs=/var/lib/samsa"]
