# Two commands on a fresh machine: `make run` and `make test`. See README.md.
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: run test build deps lint clean

build:
	$(GO) build -o bin/playhead ./cmd/api

deps:
	@scripts/deps.sh

run: deps build
	@scripts/run.sh

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Tests start their own PostgreSQL (internal/pgtest) unless PLAYHEAD_TEST_DATABASE_URL is set.
test: deps lint
	$(GO) test -count=1 -timeout 25m ./...

clean:
	@if [ -d .data/pg/data ]; then \
		if [ "$$(id -u)" -eq 0 ]; then runuser -u postgres -- pg_ctl -D .data/pg/data stop -m fast || true; \
		else pg_ctl -D .data/pg/data stop -m fast || true; fi; \
	fi
	rm -rf bin .data
