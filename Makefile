# Two commands on a fresh machine: `make run` and `make test`; `make help` lists every target. See README.md and CONTRIBUTING.md.
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: run test build help docs deps system-deps lint fuzz chaos chaos-queue mutants loadtest bench-put screenshots clean

build: web ## Build bin/playhead (the player page's scripts first)
	$(GO) build -o bin/playhead ./cmd/api

# Every target with the description beside it (a `## ` comment on the target's line, which
# make lint requires of every target).
help: ## List the targets
	@awk -F':.*## ' '/^[a-zA-Z0-9_-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(firstword $(MAKEFILE_LIST))

# The reference tables of docs/ generated from the code: the settings, the metrics, the routes,
# the job kinds (cmd/api/docs_test.go; make test fails when one is out of date). Only the
# sections between the GENERATED markers are written.
docs: ## Regenerate the reference tables of docs/ from the code
	$(GO) test -count=1 -run '^TestDocs_' ./cmd/api -update

# The links of the Markdown docs (scripts/linkcheck.sh): every relative link and anchor of
# README.md, CONTRIBUTING.md, SECURITY.md, CHANGELOG.md and docs/**/*.md must lead somewhere in
# the repository, and none may leave it by a relative path. markdown-link-check from npm
# (.markdown-link-check.json: links to public sites are not fetched) and scripts/linkcheck.mjs
# for the anchors into other files; make test runs it (scripts/test.sh).
.PHONY: linkcheck api-html
linkcheck: node_modules/.package-lock.json ## Check every relative link and anchor of the Markdown docs
	@scripts/linkcheck.sh

# The OpenAPI reference as one HTML page (Redocly CLI's build-docs, pinned in package.json), its
# scripts inlined so that it opens without a network, into docs/api/reference.html, which git
# ignores: generated from api/openapi.yaml each time.
api-html: node_modules/.package-lock.json ## Render api/openapi.yaml into docs/api/reference.html
	npx --no-install redocly build-docs api/openapi.yaml --inlineBundle -o docs/api/reference.html

# System packages (scripts/deps.sh), and for the tests the S3 server they run against:
# SeaweedFS, built once per machine into ~/.cache/playhead (scripts/weed.sh; about 6 minutes
# the first time, skipped afterwards), and the OpenID Provider they sign in with
# (scripts/oidc-provider.sh; about a minute). `make run` needs only the system packages.
deps: system-deps ## Install the system packages and build the tests' S3 server and OpenID Provider
	@GO="$(GO)" scripts/weed.sh >/dev/null
	@GO="$(GO)" scripts/oidc-provider.sh >/dev/null

system-deps: ## Install the system packages (scripts/deps.sh)
	@scripts/deps.sh

run: system-deps build ## Build and run one node on a throwaway PostgreSQL (scripts/run.sh)
	@scripts/run.sh

# The multi-node topology on loopback (scripts/cluster.sh; docs/operations/clusters.md): HAProxy in
# front of 3 api nodes, 2 worker nodes, PgBouncer in transaction mode in front of PostgreSQL.
# Installs haproxy and pgbouncer when missing. make cluster-down stops it.
.PHONY: cluster cluster-down
cluster: system-deps build ## Start HAProxy, 3 api nodes, 2 workers and PgBouncer on loopback
	@scripts/cluster.sh up

cluster-down: ## Stop what make cluster started
	@scripts/cluster.sh down

# The ceiling of one PostgreSQL (scripts/ceiling.sh, docs/internals/scaling.md): the cluster
# above under load through HAProxy; prints positions written a second and the database's CPU
# per row, per core and the players one core serves, for the whole run and after the ramp. About 2 minutes; CEILING_PLAYERS,
# CEILING_RAMP, CEILING_HOLD change the load.
.PHONY: ceiling
ceiling: system-deps build ## Measure what one PostgreSQL takes through the cluster (about 2 minutes)
	@scripts/ceiling.sh

# The end-to-end suite with every playhead serve behind PgBouncer in transaction mode
# (internal/pgtest starts it: PLAYHEAD_TEST_PGBOUNCER=1; docs/operations/clusters.md): playback
# under load and its graceful stop, upload to READY, import, the lists, cache invalidation
# across nodes, metrics, completion events (the mover's transaction-scoped advisory lock).
# PGBOUNCER_TESTS=. runs every test of cmd/api that way.
PGBOUNCER_TESTS ?= ^(TestServe_MetricsExposed|TestServe_SIGTERMDrainsEveryAcceptedPosition|TestPipeline_UploadBecomesPlayable|TestPipeline_SIGTERMReleasesForAnotherWorker|TestImport_SheetBecomesPlayable|TestLists_ThroughTheBinary|TestCache_PrivateThroughOneNodeRefusedByAnother|TestServe_OrphanSweepWaitsForTheLock|TestWebhooks_DeliveredSignedRetriedDead|TestEvents_StreamFollowsAnEncodeOnAnotherNodeEndsOnStopAndResumes|TestErasure_FindsNothingAfterwards|TestCompletions_DeliveredOncePerFinishUnderChaos|TestCompletions_StreamedToTheMemberOnly)$$
.PHONY: test-pgbouncer
test-pgbouncer: system-deps ## Run the end-to-end tests behind PgBouncer in transaction mode
	@out=$$(mktemp); PLAYHEAD_TEST_PGBOUNCER=1 $(GO) test -count=1 -timeout 30m -run '$(PGBOUNCER_TESTS)' -v ./cmd/api >$$out 2>&1; status=$$?; \
		grep -E '^(--- |ok |FAIL|panic)' $$out; [ $$status -eq 0 ] || cat $$out; rm -f $$out; exit $$status

lint: ## gofmt, go vet, staticcheck, the Go client's module, and a description for every target
	@awk '/^[a-zA-Z0-9_-]+:([^=]|$$)/ && !/## / { sub(/:.*/, ""); print "Makefile: target " $$0 " has no ## description"; bad = 1 } END { exit bad }' $(firstword $(MAKEFILE_LIST))
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	@# The generated Go client's module: its client.gen.go (gitignored) is generated first from
	@# api/openapi.yaml, since its flow test and go.mod's requirements need it.
	cd api/clients/go && $(GO) generate ./... && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) mod tidy -diff

# Tests start their own PostgreSQL (internal/pgtest) unless PLAYHEAD_TEST_DATABASE_URL is set.
# The reliability suite (cmd/api/chaos_test.go) runs 3 rounds of each fault here; the fuzz
# targets run FUZZTIME each (crashers land in testdata/fuzz/ as regression seeds). The
# hostile-input suite (cmd/api/hostile_test.go, docs/internals/security.md) runs on its own (make hostile)
# so that its number of cases per class is printed, and so does one round of the rolling
# restart (make rolling-restart ROLLING_ROUNDS=1) so that its counts are. The docs' links are
# checked first (make linkcheck). scripts/test.sh ends a failing run with the list of what failed.
test: deps web lint ## Check the docs' links, run every test, the hostile-input suite, a rolling restart, node loss and fuzzing
	@GO="$(GO)" MAKE="$(MAKE)" FUZZTIME=$(TEST_FUZZTIME) scripts/test.sh

.PHONY: hostile
hostile: ## Run the hostile-input suite and print its cases per class
	@out=$$(mktemp); $(GO) test -count=1 -timeout 15m -run '^TestHostileInput$$' -v ./cmd/api >$$out 2>&1; status=$$?; \
		grep -E '^(--- |ok |FAIL)|hostile input:|^contract:' $$out; [ $$status -eq 0 ] || cat $$out; rm -f $$out; exit $$status

# The rolling restart under load (cmd/api/cluster_rolling_test.go, docs/internals/reliability.md):
# HAProxy in front of 3 api nodes, 2 worker nodes; each node stopped with SIGTERM and started
# again in turn, ROLLING_ROUNDS times, while players report through HAProxy and uploads encode.
# Prints the counts (failed requests, lost positions, jobs lost or run twice). make test runs it
# with 1 round.
ROLLING_ROUNDS ?= 5
.PHONY: rolling-restart
rolling-restart: system-deps ## Restart every node of a cluster under load, ROLLING_ROUNDS times
	@out=$$(mktemp); PLAYHEAD_ROLLING_ROUNDS=$(ROLLING_ROUNDS) $(GO) test -count=1 -timeout 30m -run '^TestCluster_RollingRestart$$' -v ./cmd/api >$$out 2>&1; status=$$?; \
		grep -E '^(--- |ok |FAIL|panic)|cluster_rolling_test.go' $$out; [ $$status -eq 0 ] || cat $$out; rm -f $$out; exit $$status

# Node loss (cmd/api/cluster_loss_test.go, docs/internals/reliability.md): the same cluster;
# kill -9 of a worker mid-encode (the other takes the job over after the lease) and of an api
# node under load (only its last flush interval's positions lost). Prints the counts; make test
# runs it.
.PHONY: node-loss
node-loss: system-deps ## Kill -9 a worker mid-encode and an api node under load
	@out=$$(mktemp); $(GO) test -count=1 -timeout 15m -run '^TestCluster_NodeLoss$$' -v ./cmd/api >$$out 2>&1; status=$$?; \
		grep -E '^(--- |ok |FAIL|panic)|cluster_loss_test.go' $$out; [ $$status -eq 0 ] || cat $$out; rm -f $$out; exit $$status

TEST_FUZZTIME ?= 5s

# One target at a time: go test -fuzz takes a single target and package.
FUZZ_TARGETS := FuzzParsePosition:./playback FuzzVerify:./auth FuzzParseCSV:./ingest FuzzShareID:./ingest FuzzParse:./captions FuzzQuotedAttribute:./hls
FUZZTIME ?= 60s
fuzz: ## Run each fuzz target for FUZZTIME
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) $${t#*:} || exit 1; \
	done

# The whole reliability suite, 20 rounds of each fault, the job queue's chaos test with ten
# seeds, and longer fuzzing (docs/internals/reliability.md).
chaos: deps ## The reliability suite with 20 rounds per fault, the queue's chaos and longer fuzzing
	PLAYHEAD_CHAOS_ROUNDS=20 $(GO) test -count=1 -timeout 60m -run 'TestChaos' -v ./cmd/api
	@$(MAKE) --no-print-directory chaos-queue
	@$(MAKE) --no-print-directory fuzz FUZZTIME=2m

# The job queue's chaos tests, once per seed: jobs on their own (jobqueue/chaos_test.go), in
# groups of 4 that wait for one another (jobqueue/chaos_groups_test.go), and 300 jobs of a kind
# limited to 3 running on three worker processes (jobqueue/process_chaos_test.go); make test
# runs each once with 2 000 jobs (500 groups) and a random seed.
QUEUE_CHAOS_JOBS ?= 5000
QUEUE_CHAOS_GROUPS ?= 1250
QUEUE_CHAOS_SEEDS ?= 1 2 3 4 5 6 7 8 9 10
chaos-queue: ## The job queue's chaos tests, once per seed of QUEUE_CHAOS_SEEDS
	@for seed in $(QUEUE_CHAOS_SEEDS); do \
		echo "queue chaos: seed $$seed, $(QUEUE_CHAOS_JOBS) jobs, $(QUEUE_CHAOS_GROUPS) groups"; \
		PLAYHEAD_QUEUE_CHAOS_SEED=$$seed PLAYHEAD_QUEUE_CHAOS_JOBS=$(QUEUE_CHAOS_JOBS) PLAYHEAD_QUEUE_CHAOS_GROUPS=$(QUEUE_CHAOS_GROUPS) \
			$(GO) test -count=1 -timeout 30m -run '^TestChaos_(Queue|QueueGroups|WorkerProcesses)$$' -v ./jobqueue || exit 1; \
	done

# Every promise of the reliability suite is checked by breaking it: each mutants/*.patch is a
# small named breakage of production code, headed by the tests that must catch it (see
# scripts/mutants.sh). Each is applied to a scratch copy of the working tree (never the tree
# itself), only its tests run, and a breakage the tests miss fails the target. It prints the
# table of docs/internals/reliability.md. About 30 minutes on 2 cores, so not part of make test; a few:
# make mutants MUTANTS="mutants/01-*.patch mutants/17-*.patch".
MUTANTS ?=
mutants: deps web ## Check that the tests catch each breakage of mutants/ (about 30 minutes)
	@GO="$(GO)" scripts/mutants.sh $(MUTANTS)

# The screenshots of the player, the watch page, the course page and the import page of docs/operations/pages.md (docs/img),
# taken by the browser tests, which otherwise save them to a temporary folder so that make test
# leaves the tree as it was.
screenshots: deps web ## Take the screenshots of docs/img with the browser tests
	PLAYHEAD_TEST_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run '^(TestPlayer_UploadWatchLeaveResumeInChromium|TestImportPage_CheckConfirmWatchInChromium|TestCoursePage_UpNextAndProgressInChromium|TestWatchPage_StoryboardCaptionsAndPlaybackInChromium|TestJobsPage_DeadJobRetriedAndDiscardedInChromium|TestInsightsPage_RetentionAndFunnelInChromium|TestWatchPage_ChaptersAndMarkersInChromium)$$' ./cmd/api

# The side-by-side benchmarks of docs/benchmarks/README.md, in their own Go module (bench/), so
# that River never enters the main go.mod. bench-queue: Playhead's job queue beside River v0.51.2
# on a PostgreSQL cluster of its own with the default settings (fsync on), alternating, at each
# worker count, with the media kinds' hooks as a third system; about 2 minutes on 2 cores.
BENCH_QUEUE_FLAGS ?= -jobs 2000 -workers 1,4,16,100 -rounds 5 -systems playhead,river,playhead-media
.PHONY: bench bench-queue
bench: bench-queue bench-put ## Both side-by-side benchmarks of docs/benchmarks/README.md

bench-queue: ## The job queue beside River, at each worker count (about 2 minutes)
	cd bench && $(GO) run ./cmd/benchqueue $(BENCH_QUEUE_FLAGS)

# The load report of docs/benchmarks/README.md (about 12 minutes; loopback only).
loadtest: deps ## The load report of docs/benchmarks/README.md (about 12 minutes)
	scripts/loadtest.sh

# The PUT path beside a bare Fiber server: the same wrk load on both, alternating for
# BENCH_ROUNDS rounds of BENCH_DURATION each, then the check that Playhead stored every
# position it accepted (about 3 minutes with the defaults; loopback only).
BENCH_ROUNDS ?= 3
BENCH_DURATION ?= 10s
# More flags for bench/putpath, e.g. BENCH_PUT_FLAGS=-cpuprofile=/tmp/playhead.prof, or
# BENCH_PUT_FLAGS=-compare-watched-ranges (a second Playhead with PLAYHEAD_WATCHED_RANGES=false),
# or BENCH_PUT_FLAGS=-compare-jwks (Playhead in the JWKS file mode with RS256 tokens, and the same
# binary beside it with the shared secret's HS256 tokens), or BENCH_PUT_FLAGS=-compare-quality
# (reports with the optional playback-quality fields, and the same binary's reports without them)
BENCH_PUT_FLAGS ?=
bench-put: system-deps build ## The PUT path beside a bare Fiber server (about 3 minutes)
	cd bench && $(GO) build -o ../bin/barefiber ./cmd/barefiber
	cd bench && PLAYHEAD_TEST_BINARY=$(CURDIR)/bin/playhead PLAYHEAD_BENCH_BAREFIBER=$(CURDIR)/bin/barefiber \
		$(GO) test -count=1 -timeout 30m -run '^TestPutPathSideBySide$$' -v ./putpath \
		-args -rounds=$(BENCH_ROUNDS) -duration=$(BENCH_DURATION) $(BENCH_PUT_FLAGS)

# Time to playable and to READY of one 1080p 60 s upload: groups of 2 rendition jobs on 1 and 2 workers, one job, a job per rung on 2 workers (bench/encodetime; about 25 minutes).
# BENCH_ENCODE_SETUPS=renditions-2-pinned,single-pinned,renditions-1-pinned: the same on workers of one CPU each, a model of one-core machines (about 15 minutes).
BENCH_ENCODE_SETUPS ?= renditions-1,renditions-2,single,per-rung-2
.PHONY: bench-encode
bench-encode: system-deps build ## Time to playable and to READY of a 1080p upload (about 25 minutes)
	cd bench && PLAYHEAD_TEST_BINARY=$(CURDIR)/bin/playhead PLAYHEAD_BENCH_ENCODE=1 \
		$(GO) test -count=1 -timeout 120m -run '^TestEncodeTime$$' -v ./encodetime -args -rounds=$(BENCH_ROUNDS) -setups=$(BENCH_ENCODE_SETUPS)

# The container images (Dockerfile, container/; docs/operations/container.md): podman builds them on
# a Debian bookworm base that debootstrap makes from this machine's mirror (its root file system
# cached in ~/.cache/playhead, skipped when the image exists; about 30 s the first time). BASE and
# GO_IMAGE pick registry images instead. make test-image runs compose.yaml's topology and checks
# it (scripts/test-image.sh).
.PHONY: image test-image
image: web ## Build the container images with podman
	@GO="$(GO)" BASE="$(BASE)" GO_IMAGE="$(GO_IMAGE)" scripts/image.sh

test-image: image ## Run compose.yaml's topology from the images and check it
	@scripts/test-image.sh

# The player page (web/): hls.js, tus-js-client (the upload form), chart.js and oidc-client-ts (the sign-in) from npm, pinned in
# package-lock.json, copied into the folder the binary embeds; `npm ci` also installs playwright-core for the browser test (which drives
# Debian's /usr/bin/chromium, installed by `make deps`: never `npx playwright install`).
NPM ?= npm
WEB_VENDOR := web/static/vendor
HLS_DIST := node_modules/hls.js/dist

.PHONY: web
web: node_modules/.package-lock.json ## Check the page scripts and copy their npm dependencies into web/static/vendor
	@for f in web/static/js/*.mjs web/e2e/*.mjs; do node --check "$$f" || exit 1; done
	@mkdir -p $(WEB_VENDOR)
	cp $(HLS_DIST)/hls.min.js $(HLS_DIST)/hls.worker.js $(WEB_VENDOR)/
	cp node_modules/hls.js/LICENSE $(WEB_VENDOR)/hls.js.LICENSE.txt
	cp node_modules/tus-js-client/dist/tus.min.js $(WEB_VENDOR)/
	cp node_modules/tus-js-client/LICENSE $(WEB_VENDOR)/tus-js-client.LICENSE.txt
	cp node_modules/chart.js/dist/chart.umd.min.js $(WEB_VENDOR)/chart.min.js
	cp node_modules/chart.js/LICENSE.md $(WEB_VENDOR)/chart.js.LICENSE.txt
	cp node_modules/oidc-client-ts/dist/browser/oidc-client-ts.min.js $(WEB_VENDOR)/
	cp node_modules/oidc-client-ts/LICENSE $(WEB_VENDOR)/oidc-client-ts.LICENSE.txt

node_modules/.package-lock.json: package.json package-lock.json
	@command -v $(NPM) >/dev/null 2>&1 || { echo "npm is missing: run make deps (as root) or apt-get install nodejs npm" >&2; exit 1; }
	$(NPM) ci --no-audit --no-fund
	@touch $@

clean: ## Stop make run's PostgreSQL and remove bin/ and .data/
	@if [ -d .data/pg/data ]; then \
		if [ "$$(id -u)" -eq 0 ]; then runuser -u postgres -- pg_ctl -D .data/pg/data stop -m fast || true; \
		else pg_ctl -D .data/pg/data stop -m fast || true; fi; \
	fi
	rm -rf bin .data
