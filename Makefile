# Two commands on a fresh machine: `make run` and `make test`. See README.md.
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: run test build deps lint clean

build: web
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
test: deps web lint
	$(GO) test -count=1 -timeout 25m ./...

# The player page (web/): hls.js from npm, pinned in package-lock.json, copied into the folder the
# binary embeds; `npm ci` also installs playwright-core for the browser test (which drives
# Debian's /usr/bin/chromium, installed by `make deps`: never `npx playwright install`).
NPM ?= npm
WEB_VENDOR := web/static/vendor
HLS_DIST := node_modules/hls.js/dist

.PHONY: web
web: node_modules/.package-lock.json
	@for f in web/static/js/*.mjs web/e2e/*.mjs; do node --check "$$f" || exit 1; done
	@mkdir -p $(WEB_VENDOR)
	cp $(HLS_DIST)/hls.min.js $(HLS_DIST)/hls.worker.js $(WEB_VENDOR)/
	cp node_modules/hls.js/LICENSE $(WEB_VENDOR)/hls.js.LICENSE.txt

node_modules/.package-lock.json: package.json package-lock.json
	@command -v $(NPM) >/dev/null 2>&1 || { echo "npm is missing: run make deps (as root) or apt-get install nodejs npm" >&2; exit 1; }
	$(NPM) ci --no-audit --no-fund
	@touch $@

clean:
	@if [ -d .data/pg/data ]; then \
		if [ "$$(id -u)" -eq 0 ]; then runuser -u postgres -- pg_ctl -D .data/pg/data stop -m fast || true; \
		else pg_ctl -D .data/pg/data stop -m fast || true; fi; \
	fi
	rm -rf bin .data
