# Samsa in a container: `docker compose up` (see docker-compose.yml).
FROM python:3.11-slim
WORKDIR /opt/samsa
COPY pyproject.toml README.md ./
COPY . .
RUN pip install --no-cache-dir .
EXPOSE 9092
VOLUME ["/var/lib/samsa"]
ENTRYPOINT ["samsa", "serve"]
CMD ["--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "log.dirs=/var/lib/samsa"]
