package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// setting is one environment variable of the configuration, described once: loadConfig reads
// it through env, which refuses a name that is not registered here, and `playhead config` and
// docs/operations/configuration.md describe it from here.
type setting struct {
	name string
	typ  settingType
	// def is the value the variable takes when it is unset or empty, written as an operator
	// would write it ("10000", "5s"); "" for none, which is the type's zero value unless
	// loadConfig computes one (shown says how).
	def string
	// shown is the default as the docs show it when def does not say it: computed from other
	// settings, or given by the component the value goes to.
	shown string
	// fallbacks are read in order when the variable is unset: the standard AWS_* variables.
	fallbacks []string
	// required settings have no default; secret ones belong in a file only the service reads.
	required, secret bool
	// doc is the one-paragraph description, in Markdown.
	doc string
}

// settingType is how a setting's text is parsed, and what the docs call it.
type settingType string

const (
	typeString   settingType = "string"
	typeInt      settingType = "integer"
	typeNumber   settingType = "number"
	typeBool     settingType = "boolean"
	typeDuration settingType = "duration"
	typeBytes    settingType = "bytes"
)

// settingGroup is a heading of the settings' docs.
type settingGroup struct {
	name     string
	settings []setting
}

// settingGroups are every setting, in the order the docs list them.
var settingGroups = []settingGroup{
	{name: "Node", settings: []setting{
		{name: "PLAYHEAD_ROLE", typ: typeString, def: roleAll,
			doc: "What this process runs: `all` (migrates at start-up, serves the API and runs the encode and import workers, the rescuer and retention), `api` (the API only) or `worker` (the workers, the rescuer and retention: no public port, metrics and health only, a small pool). Run `playhead migrate` before starting `api` or `worker` nodes. The flag `--role` of `playhead serve` overrides it."},
		{name: "PLAYHEAD_NODE_ID", typ: typeString, shown: "`hostname-pid`",
			doc: "This process's name in job claims (`claimed_by`)."},
		{name: "PLAYHEAD_LOG_LEVEL", typ: typeString, def: "info",
			doc: "`debug`, `info`, `warn` or `error`. Logs are JSON lines on stderr."},
		{name: "PLAYHEAD_SHUTDOWN_TIMEOUT", typ: typeDuration, def: "30s",
			doc: "The whole budget of a graceful stop (SIGTERM or SIGINT): in-flight requests get at most half of it (then their database calls are cancelled and they answer 503), the playback buffer flushes or spills in the rest, and the process exits at the end of it even if database connections are still closing."},
		{name: "PLAYHEAD_SHUTDOWN_DRAIN_DELAY", typ: typeDuration, def: "0s",
			doc: "On `api` and `all` nodes behind a load balancer: after SIGTERM, `/readyz` answers 503 at once but the node keeps accepting and serving for this long, so that the balancer's health checks take it out of rotation before its port closes. Set it above the balancer's detection time (check interval × failures to mark down, plus one interval). It comes out of `PLAYHEAD_SHUTDOWN_TIMEOUT`, of which it may take at most half."},
	}},
	{name: "Database", settings: []setting{
		{name: "DATABASE_URL", typ: typeString, required: true, secret: true,
			doc: "The PostgreSQL connection string of the request pool and the playback flusher's pool. It may point at a pooler in transaction mode such as PgBouncer (`PLAYHEAD_DB_POOLER`). `make run` starts a local cluster and sets it."},
		{name: "PLAYHEAD_DATABASE_DIRECT_URL", typ: typeString, shown: "`DATABASE_URL`", secret: true,
			doc: "A connection string with sessions of its own, for what cannot go through a transaction pooler: `LISTEN`, the orphan sweep's session advisory lock, the migrations (`playhead migrate` too) and the progress reads' `plan_cache_mode`. Required, and different from `DATABASE_URL`, when `PLAYHEAD_DB_POOLER` is `transaction`."},
		{name: "PLAYHEAD_DB_POOLER", typ: typeString, def: poolerNone,
			doc: "What `DATABASE_URL` points at: `none` (PostgreSQL, or a pooler in session mode) or `transaction` (a pooler in transaction mode, such as PgBouncer's `pool_mode = transaction`). With `transaction` the pools keep no state between transactions: pgx's `cache_describe` exec mode, no named prepared statements (a `default_query_exec_mode` in the URL other than pgx's default wins)."},
		{name: "PLAYHEAD_DB_MAX_CONNS", typ: typeInt, def: "0",
			doc: "The request pool's size. `0`: 10 on `api` and `all` nodes; on `worker` nodes the encode, import and webhook concurrency plus 5 (heartbeats, claims, the orphan sweep, the webhook relay). The playback flusher has 2 connections of its own, and the progress reads (continue watching, collections) 4 more on `api` and `all` nodes."},
	}},
	{name: "HTTP", settings: []setting{
		{name: "PLAYHEAD_HTTP_ADDR", typ: typeString, def: ":8080",
			doc: "The public API's listen address (`api` and `all` nodes)."},
		{name: "PLAYHEAD_METRICS_ADDR", typ: typeString, def: "127.0.0.1:9464",
			doc: "Serves `/metrics` (only here, never on the public port), `/healthz`, `/readyz` and Go's `/debug/pprof`. `/readyz` answers 503 until every part of the node has started (spilled positions replayed, workers running) and from the first moment of a stop. Keep it private."},
		{name: "PLAYHEAD_MAX_BODY_BYTES", typ: typeBytes, def: strconv.Itoa(64 << 10),
			doc: "The largest request body read into memory; a bigger one is answered 413 before it is read, and the connection is closed. Uploads have their own limit."},
		{name: "PLAYHEAD_HTTP_READ_TIMEOUT", typ: typeDuration, def: "10s",
			doc: "How long reading one request's headers and body may take: a client that trickles them (slow loris) is cut. Uploads get `PLAYHEAD_UPLOAD_IDLE_TIMEOUT` and `PLAYHEAD_UPLOAD_TIMEOUT` instead once their handler runs, which is when the body's first bytes have arrived."},
		{name: "PLAYHEAD_HTTP_IDLE_TIMEOUT", typ: typeDuration, def: "60s",
			doc: "Keep-alive connections idle this long are closed."},
		{name: "PLAYHEAD_CORS_ORIGINS", typ: typeString, shown: "none",
			doc: "The other origins whose pages may call the API and fetch the encoded files served from local storage (CORS), comma-separated, each exactly as a browser sends it in `Origin`: `scheme://host[:port]`, such as `https://www.school.example,https://lms.school.example:8443` (no path, no wildcard, no default port; an international host in its `xn--` form). A listed origin's preflight is answered 204 without a token (`Authorization`, `Content-Type`, `Last-Event-ID`, `Range` and the tus headers allowed; `Retry-After`, `Location` and the tus headers exposed; kept 2 hours), and its requests carry `Access-Control-Allow-Origin` with that origin; cookies are never allowed. Any other origin gets no CORS header. Unset: no answer carries one. With S3 storage, players fetch segments from the store: set its own CORS rules for the same origins. See docs/api/player-sdk.md."},
	}},
	{name: "Identity", settings: []setting{
		{name: "PLAYHEAD_JWT_SECRET", typ: typeString, shown: "none; required without `PLAYHEAD_OIDC_ISSUER`", secret: true,
			doc: "The HS256 secret that signs and verifies tokens whose subject is the member id, at least 32 bytes. `make run` generates one; `playhead token` mints tokens with it. Optional when `PLAYHEAD_OIDC_ISSUER` is set (then unset refuses every HS256 token); both set accept both kinds. See docs/operations/identity.md."},
		{name: "PLAYHEAD_OIDC_ISSUER", typ: typeString,
			doc: "The identity provider whose tokens are accepted (RS256, PS256, ES256, EdDSA), exactly as its tokens' `iss` says it (`https://tenant.auth0.com/`, `https://keycloak.example.com/realms/main`). Alone, its keys are found by OIDC discovery (`/.well-known/openid-configuration` → `jwks_uri`; the document's `issuer` must equal it, and an https issuer's `jwks_uri` must be https). A provider token's string subject becomes a member on first sight."},
		{name: "PLAYHEAD_OIDC_AUDIENCE", typ: typeString,
			doc: "Required with `PLAYHEAD_OIDC_ISSUER`: a provider token's `aud` must contain it (the API's identifier at the provider, or the client id when ID tokens are sent)."},
		{name: "PLAYHEAD_JWKS_URL", typ: typeString, shown: "discovered from `PLAYHEAD_OIDC_ISSUER`",
			doc: "The provider's JWKS URL, instead of discovering it. Read again on its `Cache-Control: max-age` (or `Expires`; 5m without either), clamped to 1m–1h, and on a token with an unknown `kid` at most once per 30s for the node."},
		{name: "PLAYHEAD_JWKS_FILE", typ: typeString,
			doc: "A JWKS file of the public keys of a backend that mints its own tokens, instead of a URL. Read again when its modification time or size changes (checked every 2s): replace it by rename to rotate. Set this or `PLAYHEAD_JWKS_URL`, not both."},
		{name: "PLAYHEAD_OIDC_ADMIN_CLAIM", typ: typeString,
			doc: "The claim of a provider token that gives the admin role when it holds `PLAYHEAD_OIDC_ADMIN_VALUE`: a top-level claim of this exact name first (`https://example.com/roles`), else a dotted path into nested objects (`realm_access.roles`). Holds it: a string equal to it, an array with it, or for a claim named `scope` or `scp` a space-separated string with it. Unset: no provider token is admin."},
		{name: "PLAYHEAD_OIDC_ADMIN_VALUE", typ: typeString,
			doc: "The value of `PLAYHEAD_OIDC_ADMIN_CLAIM` that gives the admin role (`playhead-admin`, or a subject with the claim `sub`)."},
		{name: "PLAYHEAD_OIDC_CLIENT_ID", typ: typeString,
			doc: "The pages' public client at `PLAYHEAD_OIDC_ISSUER` (authorization code flow with PKCE, no secret; register `https://<this host>/signin/callback` as its redirect URI). Set, the pages show \"Sign in\" beside pasting a token, and the policy lets them call the provider's origin. They send the provider's access token when it is a JWT whose `aud` holds `PLAYHEAD_OIDC_AUDIENCE`, the ID token otherwise (then set the audience to this client id). Unset: no sign-in button."},
		{name: "PLAYHEAD_TOKEN_LEEWAY", typ: typeDuration, def: "30s",
			doc: "The clock skew allowed on a provider token's `exp`, `nbf` and `iat`, from `1s` to `5m`."},
	}},
	{name: "Security", settings: []setting{
		{name: "PLAYHEAD_URL_SIGNING_SECRET", typ: typeString, shown: "derived from `PLAYHEAD_JWT_SECRET`", secret: true,
			doc: "The legacy HMAC key of Playhead's own links to encoded files (links without a `kid`), at least 32 bytes, the same on every API node. Required when `PLAYHEAD_JWT_SECRET` is unset and `PLAYHEAD_URL_SIGNING_KEYS` uses it. Changing it (or the JWT secret it is derived from) ends every link it signed; rotate with `PLAYHEAD_URL_SIGNING_KEYS` instead (docs/operations/identity.md)."},
		{name: "PLAYHEAD_URL_SIGNING_KEYS", typ: typeString, shown: "`legacy`", secret: true,
			doc: "The keys of Playhead's own links to encoded files, comma-separated: `id:secret` (an id of 1 to 32 characters of `A-Z a-z 0-9 _ -`, a secret of at least 32 bytes, no comma) or `legacy`, the key of `PLAYHEAD_URL_SIGNING_SECRET`. The first signs new links (with its id in their `kid`), every one verifies, so two keys overlap during a rotation; a link of a key no longer listed is refused. The same list on every API node."},
		{name: "PLAYHEAD_SIGNED_URL_TTL", typ: typeDuration, def: "10m",
			doc: "How long the links players get stay valid beyond the point of the video they are for: a playlist's link for this plus the video's duration, a segment's for this plus its start time, a thumbnail's for this. From `1s` to `24h`."},
		{name: "PLAYHEAD_ERASURE_FRESH_TOKEN", typ: typeDuration, def: "5m",
			doc: "`DELETE /v1/me` (a member erasing their account) needs a token issued (`iat`) at most this long ago (or ahead of the node's clock by at most this); an older one, one further ahead, or one without `iat`, is answered 401 asking to sign in again. At least `1s`."},
	}},
	{name: "Playback", settings: []setting{
		{name: "PLAYHEAD_PUT_RATE", typ: typeNumber, def: "1",
			doc: "Each member's sustained rate of position reports and marks watched or unwatched (one token each), per second; beyond it and the burst a `PUT` or a mark is answered 429 with `Retry-After`. `0` turns the limit off. A player sends one report every 5 s."},
		{name: "PLAYHEAD_PUT_BURST", typ: typeInt, def: "10",
			doc: "The burst of position reports a member may send above `PLAYHEAD_PUT_RATE`."},
		{name: "PLAYHEAD_COMPLETION_RATIO", typ: typeNumber, def: strconv.FormatFloat(media.DefaultCompletion.Ratio, 'g', -1, 64),
			doc: "A position at this fraction of the duration marks the media watched (from 0.5 to 1), unless `PLAYHEAD_COMPLETION_TAIL` comes first."},
		{name: "PLAYHEAD_COMPLETION_TAIL", typ: typeDuration, def: durationText(media.DefaultCompletion.Tail),
			doc: "A position this close to the end marks the media watched, if that comes before `PLAYHEAD_COMPLETION_RATIO` (never before the middle). With the ratio, the resume maximum: a position there, or past the media's credits start, counts the media finished."},
		{name: "PLAYHEAD_RESUME_MIN_RATIO", typ: typeNumber, def: strconv.FormatFloat(media.DefaultCompletion.MinRatio, 'g', -1, 64),
			doc: "A position below this fraction of the duration (from 0 to 0.5) keeps no resume point: the media is not listed in continue watching and plays from the start, unless `PLAYHEAD_RESUME_MIN` comes first. Jellyfin's default is 0.05 too."},
		{name: "PLAYHEAD_RESUME_MIN", typ: typeDuration, def: durationText(media.DefaultCompletion.Min),
			doc: "A position from this far in keeps a resume point whatever the duration, if that comes before `PLAYHEAD_RESUME_MIN_RATIO` (a film stopped after 4 minutes is under 5 % of 2 h and still resumes); the only minimum when the duration is unknown. A position of 0, an open alone, never does."},
		{name: "PLAYHEAD_RESUME_MIN_DURATION", typ: typeDuration, def: durationText(media.DefaultCompletion.MinDuration),
			doc: "Media shorter than this keep no resume point (they still count finished past the maximum). Jellyfin's `5m` is for films; lessons are often a few minutes long, and a clip under 2 minutes is quicker to restart than to find one's place in."},
		{name: "PLAYHEAD_WATCHED_RANGES", typ: typeBool, def: "true",
			doc: "Whether the flush records the parts of videos members play (a 100-bucket bitmap per member and media, kept with the playback row) for the audience figures. `false` records none and keeps what was recorded; the figures then count views and completions only."},
		{name: "PLAYHEAD_AUDIENCE_INTERVAL", typ: typeDuration, def: "10m",
			doc: "How often the audience rollup (the periodic job kind `audience`) runs: whole seconds, at least `1s`, aligned to the clock (`10m` runs at :00, :10, …)."},
		{name: "PLAYHEAD_QUALITY_INTERVAL", typ: typeDuration, def: "10s",
			doc: "How often an API node writes the playback quality its position reports carried (added up per media in memory) into `media_quality`, for the audience rollup; a graceful stop writes what is held. Positive."},
		{name: "PLAYHEAD_QUALITY_MAX_MEDIA", typ: typeInt, def: "100000",
			doc: "The most media an API node holds playback-quality sums for between two writes: its memory bound (about 500 bytes a media; at most some 10 KB for one whose reports carry every startup time and many renditions, so 1 GB at the default under attack). A report's quality for another media past it is dropped and counted (`playhead_quality_dropped_total`); its position is kept. Positive."},
		{name: "PLAYHEAD_HISTORY_RETENTION", typ: typeDuration, def: "0s",
			doc: "How long a member's viewing history is kept after their last report of a media (`540d`, `36h`; whole days with `d`): the hourly job kind `history_retention` removes the playback rows not watched for longer (to the hour), their collection progress and their watched ranges, in batches of 5 000. `0` keeps it for ever. At least `1h` otherwise. See docs/operations/personal-data.md."},
	}},
	{name: "Playback buffer", settings: []setting{
		{name: "PLAYHEAD_PLAYBACK_WRITE_MODE", typ: typeString, def: string(playback.ModeWriteBehind),
			doc: "`writebehind` buffers positions and writes them in batches. `sync` validates with a query and writes with a statement inside every `PUT`: the design before write-behind, kept only as a benchmark baseline."},
		{name: "PLAYHEAD_BUFFER_CAPACITY", typ: typeInt, def: "10000",
			doc: "The size of the playback buffer's channel of new (member, media) keys on their way to the flusher; a position for a new key that finds it full is dropped (counted)."},
		{name: "PLAYHEAD_BUFFER_MAX_KEYS", typ: typeInt, shown: "20 × `PLAYHEAD_BUFFER_CAPACITY`",
			doc: "The most distinct (member, media) keys the buffer holds, those held for retry during a database outage included: the buffer's memory bound. Beyond it positions for new keys are dropped (counted); held keys are still updated in place. At least `PLAYHEAD_BUFFER_CAPACITY`."},
		{name: "PLAYHEAD_FLUSH_BATCH", typ: typeInt, def: "1000",
			doc: "The most rows in one flush statement; a flush of more held keys writes them in several."},
		{name: "PLAYHEAD_FLUSH_AT_KEYS", typ: typeInt, shown: "`PLAYHEAD_FLUSH_BATCH` (`PLAYHEAD_BUFFER_MAX_KEYS` if smaller)",
			doc: "Flush before the interval as soon as this many distinct keys are held, from 1 to `PLAYHEAD_BUFFER_MAX_KEYS`. Raise it with the interval to coalesce a player's reports for the whole interval."},
		{name: "PLAYHEAD_FLUSH_INTERVAL", typ: typeDuration, def: "5s",
			doc: "Flush at least this often; also what a `kill -9` may lose."},
		{name: "PLAYHEAD_SPILL_DIR", typ: typeString, def: "./data/spill",
			doc: "Where a graceful stop writes the positions it could not get into the database before its deadline; the next start replays them before it serves. Keep it on a disk that survives the restart (a volume, not a container's scratch layer). Created at start (mode 0750); the start fails if it cannot write there, or if the directory is writable by its group or others or owned by another user than the process's (root excepted)."},
	}},
	{name: "Media cache", settings: []setting{
		{name: "PLAYHEAD_CACHE_TTL", typ: typeDuration, def: "60s",
			doc: "How long a found media item is trusted; a change evicts it at once on every node (`NOTIFY`)."},
		{name: "PLAYHEAD_CACHE_NEGATIVE_TTL", typ: typeDuration, def: "5s",
			doc: "How long an unknown media id is remembered."},
		{name: "PLAYHEAD_CACHE_MAX_ITEMS", typ: typeInt, def: "100000",
			doc: "The most media ids the cache holds."},
		{name: "PLAYHEAD_CACHE_MAX_STALE", typ: typeDuration, def: "10m",
			doc: "How long past its TTL a media entry still answers while the database cannot be read (stale-if-error): position reports for media known before an outage keep being accepted that long; a media with nothing known is answered 503 with `Retry-After`."},
		{name: "PLAYHEAD_CACHE_LOAD_TIMEOUT", typ: typeDuration, def: "2s",
			doc: "The longest wait for one media lookup, or one lookup of a provider token's subject, in the database: past it a request is answered 503 with `Retry-After` (or from the stale entry), so a database that does not answer cannot hold requests."},
	}},
	{name: "Storage", settings: []setting{
		{name: "PLAYHEAD_STORAGE", typ: typeString, def: storageLocal,
			doc: "Where uploads, HLS outputs and thumbnails live: `local` (`PLAYHEAD_STORAGE_DIR`: one machine, or a disk every node shares) or `s3` (a bucket of any S3-compatible store: the nodes then share nothing but the database and the bucket)."},
		{name: "PLAYHEAD_STORAGE_DIR", typ: typeString, def: "./data/objects",
			doc: "The local object store, with `PLAYHEAD_STORAGE=local`. Every node of a deployment must see the same directory."},
		{name: "PLAYHEAD_ORPHAN_GRACE", typ: typeDuration, def: "24h",
			doc: "The orphan sweep removes objects nothing references only once they are this old, and aborts unfinished S3 uploads this old. Longer than `PLAYHEAD_UPLOAD_TIMEOUT` and `PLAYHEAD_JOB_LEASE`."},
		{name: "PLAYHEAD_ORPHAN_SWEEP_INTERVAL", typ: typeDuration, def: "10m",
			doc: "A sweep pass runs this often on `worker` and `all` nodes, one node at a time (an advisory lock)."},
		{name: "PLAYHEAD_ORPHAN_SWEEP_BATCH", typ: typeInt, def: "10000",
			doc: "The most objects one sweep pass lists per folder; the next pass resumes there."},
	}},
	{name: "S3", settings: []setting{
		{name: "PLAYHEAD_S3_ENDPOINT", typ: typeString, shown: "`https://s3.amazonaws.com`", fallbacks: []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"},
			doc: "The store's URL, `http(s)://host[:port]`: `https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:8333`. Players fetch segments from this address too, through presigned links."},
		{name: "PLAYHEAD_S3_REGION", typ: typeString, shown: "`us-east-1`", fallbacks: []string{"AWS_REGION", "AWS_DEFAULT_REGION"},
			doc: "The bucket's region, which signatures name."},
		{name: "PLAYHEAD_S3_BUCKET", typ: typeString,
			doc: "The bucket, required with `PLAYHEAD_STORAGE=s3`. It must exist: Playhead never creates buckets, and the start stops with \"bucket … does not exist\" otherwise."},
		{name: "PLAYHEAD_S3_ACCESS_KEY_ID", typ: typeString, fallbacks: []string{"AWS_ACCESS_KEY_ID"},
			doc: "The access key's id, required with `PLAYHEAD_STORAGE=s3`."},
		{name: "PLAYHEAD_S3_SECRET_ACCESS_KEY", typ: typeString, fallbacks: []string{"AWS_SECRET_ACCESS_KEY"}, secret: true,
			doc: "The secret access key, required with `PLAYHEAD_STORAGE=s3`. Never logged, shown in an error or exported as a metric."},
		{name: "PLAYHEAD_S3_PATH_STYLE", typ: typeBool, def: "false",
			doc: "`true`: `endpoint/bucket/key` (MinIO, SeaweedFS, Ceph and most self-hosted stores); `false`: `bucket.endpoint/key` (AWS)."},
		{name: "PLAYHEAD_S3_PREFIX", typ: typeString,
			doc: "A folder of the bucket for this deployment, such as `prod/`: every key is stored under it."},
	}},
	{name: "Uploads", settings: []setting{
		{name: "PLAYHEAD_MAX_UPLOAD_BYTES", typ: typeBytes, def: strconv.Itoa(2 << 30),
			doc: "The largest upload; a bigger one is answered 413, by its `Content-Length` (or `Upload-Length`) before it is read."},
		{name: "PLAYHEAD_UPLOAD_TIMEOUT", typ: typeDuration, def: "1h",
			doc: "How long one whole upload request may take to arrive (408 beyond)."},
		{name: "PLAYHEAD_UPLOAD_IDLE_TIMEOUT", typ: typeDuration, def: "30s",
			doc: "An upload that sends nothing for this long is cut (408); a slow but steady one is not."},
		{name: "PLAYHEAD_UPLOADS_PER_MEMBER", typ: typeInt, def: "2",
			doc: "Uploads of one member in progress on one node, counted from the body's first bytes (an upload that trickles its body counts too); one more is answered 429 with `Retry-After`."},
		{name: "PLAYHEAD_UPLOADS_TOTAL", typ: typeInt, def: "32",
			doc: "Uploads of everyone in progress on one node, at least `PLAYHEAD_UPLOADS_PER_MEMBER`; one more is answered 429 with `Retry-After`."},
		{name: "PLAYHEAD_UPLOAD_EXPIRY", typ: typeDuration, def: "24h",
			doc: "A resumable upload nothing is stored to for this long expires (410) and its bytes are removed (by `worker` and `all` nodes, every `PLAYHEAD_ORPHAN_SWEEP_INTERVAL`); each request that stores bytes starts it again (`Upload-Expires`)."},
		{name: "PLAYHEAD_UPLOADS_UNFINISHED", typ: typeInt, def: "10",
			doc: "The most unfinished resumable uploads of one member; one more creation is answered 429."},
		{name: "PLAYHEAD_UPLOAD_RATE", typ: typeNumber, def: "20",
			doc: "Each member's sustained rate, per second, of resumable-upload requests that change an upload (`POST`, `PATCH`, `DELETE` of `/v1/uploads`); beyond it and the burst they are answered 429 with `Retry-After`. `0` turns the limit off. A client sends one `PATCH` a chunk (the upload page's are 8 MiB) and retries after a broken connection."},
		{name: "PLAYHEAD_UPLOAD_BURST", typ: typeInt, def: "100",
			doc: "The burst of resumable-upload requests a member may send above `PLAYHEAD_UPLOAD_RATE`."},
	}},
	{name: "Encoding", settings: []setting{
		{name: "PLAYHEAD_ENCODE_MODE", typ: typeString, def: "renditions",
			doc: "How an upload is encoded. `renditions`: a group of jobs, the lowest rendition first and alone, the media playable when it is done. `single`: one job, one ffmpeg run for the whole ladder: the least CPU, nothing playable before the media is READY."},
		{name: "PLAYHEAD_ENCODE_RENDITION_JOBS", typ: typeInt, def: "2",
			doc: "The most rendition jobs an encode group splits its ladder into, at least 2: the lowest rung alone first, the other rungs over the rest, a job per rung at most. Each job decodes the source again: more jobs cost more CPU and let more worker machines share one upload."},
		{name: "PLAYHEAD_ENCODE_CONCURRENCY", typ: typeInt, def: "1",
			doc: "Jobs of each encode kind (`encode`, `encode_rendition`, `encode_finish`) one node runs at once: with the default, one rendition job of any upload at a time, beside a probe and a finish."},
		{name: "PLAYHEAD_ENCODE_MAX_RUNNING", typ: typeInt, def: "0",
			doc: "The most jobs of each encode kind running at once across the whole cluster, whatever the number of worker nodes (each still runs at most `PLAYHEAD_ENCODE_CONCURRENCY`); a node lost with its jobs gives their slots back when their leases expire. `0`: no limit beyond the nodes' own."},
		{name: "PLAYHEAD_ENCODE_TIMEOUT", typ: typeDuration, def: "30m",
			doc: "The limit of one ffmpeg HLS encode (ffprobe and the thumbnail have 1 min each)."},
		{name: "PLAYHEAD_ENCODE_PRESET", typ: typeString, def: "veryfast",
			doc: "The x264 preset."},
		{name: "PLAYHEAD_HLS_FORMAT", typ: typeString, def: string(encoder.FormatFMP4),
			doc: "How new encodes package their segments: `fmp4` (fragmented MP4, CMAF: byte ranges into one file per rendition, one AAC audio group, I-frame playlists) or `ts` (MPEG-TS files with the audio muxed, for players before iOS 10). Media encoded before keep theirs."},
		{name: "PLAYHEAD_ENCODE_MEMORY_LIMIT", typ: typeBytes, def: strconv.Itoa(4 << 30),
			doc: "The address-space limit of every ffprobe and ffmpeg process, set by util-linux's `prlimit` before it starts; `0` for none, else at least 256 MiB. A 4K upload's encode needed 1.0–1.2 GiB on 2 cores."},
		{name: "PLAYHEAD_MAX_VIDEO_WIDTH", typ: typeInt, def: strconv.Itoa(encoder.DefaultLimits.MaxWidth),
			doc: "The widest frame of an upload, in pixels, checked after probing: over it the media is FAILED (\"too large: …\")."},
		{name: "PLAYHEAD_MAX_VIDEO_HEIGHT", typ: typeInt, def: strconv.Itoa(encoder.DefaultLimits.MaxHeight),
			doc: "The tallest frame of an upload, in pixels, checked like the width."},
		{name: "PLAYHEAD_MAX_VIDEO_PIXELS", typ: typeInt, def: strconv.FormatInt(encoder.DefaultLimits.MaxPixels, 10),
			doc: "The largest frame, width × height (the default is 4096 × 2304: 4K and DCI 4K pass, landscape or portrait). Also ffmpeg's `-max_pixels` while decoding."},
		{name: "PLAYHEAD_MAX_VIDEO_FPS", typ: typeNumber, def: strconv.FormatFloat(encoder.DefaultLimits.MaxFrameRate, 'g', -1, 64),
			doc: "The highest frame rate of an upload."},
		{name: "PLAYHEAD_MAX_VIDEO_DURATION", typ: typeDuration, def: durationText(encoder.DefaultLimits.MaxDuration),
			doc: "The longest upload."},
	}},
	{name: "Job queue", settings: []setting{
		{name: "PLAYHEAD_JOB_LEASE", typ: typeDuration, def: "60s",
			doc: "A claimed job's lease, the one value the queue, its heartbeats (every third of it, retried within a twentieth) and the run's local deadline use: a `kill -9`ed worker's job is taken over within about one lease."},
		{name: "PLAYHEAD_JOB_POLL_INTERVAL", typ: typeDuration, def: "1s",
			doc: "The workers' fallback poll; a `NOTIFY` on enqueue wakes them at once. Also how often the completion mover looks for finishes to announce (`playback.completed`, `collection.completed`)."},
		{name: "PLAYHEAD_JOB_MAX_ATTEMPTS", typ: typeInt, def: "3",
			doc: "Attempts of each encode job before it is DEAD (also a CHECK constraint)."},
		{name: "PLAYHEAD_JOB_RETRY_BASE", typ: typeDuration, def: "5s",
			doc: "The base of the full-jitter backoff between a job's attempts: uniform in [0, min(cap, base·2^(attempt−1)))."},
		{name: "PLAYHEAD_JOB_RETRY_CAP", typ: typeDuration, def: "5m",
			doc: "The cap of that backoff, at least `PLAYHEAD_JOB_RETRY_BASE` (webhook deliveries have their own)."},
		{name: "PLAYHEAD_JOBS_FAIR", typ: typeBool, def: "true",
			doc: "Whether the media kinds (`ingest` and the encode kinds) take turns by member: each job's fairness partition is its media's owner, so one member's backlog (an import of 500 rows) delays another member's upload by about one job of each busy member, not by the whole backlog. `false` puts every job in one partition: first in, first out. See docs/internals/job-queue.md."},
		{name: "PLAYHEAD_RETENTION_COMPLETED", typ: typeDuration, def: "168h",
			doc: "Completed jobs are deleted after this long (7 days)."},
		{name: "PLAYHEAD_RETENTION_DEAD", typ: typeDuration, def: "720h",
			doc: "DEAD jobs are deleted after this long (30 days)."},
		{name: "PLAYHEAD_RETENTION_INTERVAL", typ: typeDuration, def: "10m",
			doc: "How often a node prunes the jobs and the event history (one node at a time, an advisory lock, batches of 1 000)."},
	}},
	{name: "Imports", settings: []setting{
		{name: "PLAYHEAD_INGEST_CONCURRENCY", typ: typeInt, def: "2",
			doc: "Imported videos downloading at once on one node; the remote end's limits are unknown, so start narrow."},
		{name: "PLAYHEAD_INGEST_MAX_RUNNING", typ: typeInt, def: "0",
			doc: "Imported videos downloading at once across the whole cluster (each node still runs at most `PLAYHEAD_INGEST_CONCURRENCY`): the remote end sees this many downloads however many worker nodes there are. `0`: no limit beyond the nodes' own."},
		{name: "PLAYHEAD_INGEST_ATTEMPTS", typ: typeInt, def: "5",
			doc: "Attempts of an import's download job. Each attempt is one request; after a 429, a 5xx, a connection error or a timeout the job goes back to the queue (the job backoff, or the server's `Retry-After` up to `PLAYHEAD_JOB_RETRY_CAP`) and holds no download slot while it waits."},
		{name: "PLAYHEAD_INGEST_ALLOW_PRIVATE", typ: typeBool, def: "false",
			doc: "Let the importer fetch loopback, private and link-local addresses. For tests only: never in production."},
		{name: "PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE", typ: typeString, def: ingest.DefaultLinks.Download,
			doc: "Where a share link's file id (`{id}`) is downloaded from."},
		{name: "PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE", typ: typeString, def: ingest.DefaultLinks.Fallback,
			doc: "Tried once when the first address answers an HTML confirmation page; must contain `{id}`. Empty means this default: the fallback cannot be turned off."},
		{name: "PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE", typ: typeString, def: ingest.DefaultSheetExport,
			doc: "Where a Google Sheets link's spreadsheet (`{id}`) is downloaded as .xlsx for an import (`{\"sheet_url\": …}`), with the same address checks as the videos, at most 10 MiB."},
		{name: "PLAYHEAD_INGEST_CONNECT_TIMEOUT", typ: typeDuration, def: "10s",
			doc: "A download's connect limit; with the response timeout, how long one attempt on a dead server holds a download slot."},
		{name: "PLAYHEAD_INGEST_RESPONSE_TIMEOUT", typ: typeDuration, def: "30s",
			doc: "A download's wait for its response headers."},
		{name: "PLAYHEAD_INGEST_IDLE_TIMEOUT", typ: typeDuration, def: "5m",
			doc: "How long a download's body may send nothing; a slow but steady download is never cut by it."},
		{name: "PLAYHEAD_INGEST_TIMEOUT", typ: typeDuration, def: "1h",
			doc: "One whole download attempt, fallback address included: a body that trickles just inside the idle timeout is cut here and the job retried later, so it cannot hold a download slot for good."},
		{name: "PLAYHEAD_INGEST_MAX_BYTES", typ: typeBytes, def: strconv.Itoa(5 << 30),
			doc: "The largest download."},
	}},
	{name: "Webhooks", settings: []setting{
		{name: "PLAYHEAD_WEBHOOK_CONCURRENCY", typ: typeInt, def: "4",
			doc: "Webhook deliveries in flight at once on one worker node."},
		{name: "PLAYHEAD_WEBHOOK_MAX_RUNNING", typ: typeInt, def: "0",
			doc: "Webhook deliveries in flight at once across the whole cluster (each node still sends at most `PLAYHEAD_WEBHOOK_CONCURRENCY`). `0`: no limit beyond the nodes' own."},
		{name: "PLAYHEAD_WEBHOOK_TIMEOUT", typ: typeDuration, def: "15s",
			doc: "One delivery attempt, connect to answer; a slower receiver's attempt fails and is retried."},
		{name: "PLAYHEAD_WEBHOOK_MAX_ATTEMPTS", typ: typeInt, def: "12",
			doc: "Attempts of a delivery before it is DEAD."},
		{name: "PLAYHEAD_WEBHOOK_RETRY_CAP", typ: typeDuration, def: "1h",
			doc: "The cap of the full-jitter backoff between a delivery's attempts, which starts from `PLAYHEAD_JOB_RETRY_BASE`. With the defaults a receiver that keeps failing gets 12 attempts over about 75 minutes on average (at most about 2.5 hours) before the delivery is DEAD."},
		{name: "PLAYHEAD_WEBHOOK_ALLOW_PRIVATE", typ: typeBool, def: "false",
			doc: "Let webhook endpoints be on loopback, private and link-local addresses, at registration and at delivery. For tests only: never in production."},
	}},
	{name: "xAPI", settings: []setting{
		{name: "PLAYHEAD_XAPI_ENDPOINT", typ: typeString, shown: "none: xAPI off",
			doc: "A Learning Record Store's xAPI base URL (`https://lrs.example/xapi`): every `playback.completed` and `collection.completed` becomes an xAPI 1.0.3 statement POSTed to its `/statements`, from worker nodes, with the webhooks' address checks. Unset: no statement is made. See docs/api/xapi.md."},
		{name: "PLAYHEAD_XAPI_USERNAME", typ: typeString, shown: "none: no `Authorization`",
			doc: "The LRS's HTTP Basic user name (its key)."},
		{name: "PLAYHEAD_XAPI_PASSWORD", typ: typeString, secret: true,
			doc: "The LRS's HTTP Basic password (its secret)."},
		{name: "PLAYHEAD_XAPI_ACTIVITY_BASE", typ: typeString, shown: "none; required with `PLAYHEAD_XAPI_ENDPOINT`",
			doc: "The IRI the statements' activities are under, usually the site's public URL: a media is `{base}/media/{id}`, a collection `{base}/collections/{name}`. It is also in every statement's id, so two deployments sending to one LRS need different ones."},
		{name: "PLAYHEAD_XAPI_ACTOR_HOMEPAGE", typ: typeString, shown: "`PLAYHEAD_XAPI_ACTIVITY_BASE`",
			doc: "The `homePage` of the actors' accounts, whose `name` is the member id: no e-mail address or name is ever sent."},
		{name: "PLAYHEAD_XAPI_MAX_ATTEMPTS", typ: typeInt, def: "12",
			doc: "Attempts to send a statement before it is DEAD (a refusal other than 409 or 429 is DEAD at once); the backoff between them is the job queue's, up to `PLAYHEAD_JOB_RETRY_CAP`."},
		{name: "PLAYHEAD_XAPI_TIMEOUT", typ: typeDuration, def: "15s",
			doc: "One attempt to send a statement, connect to answer."},
		{name: "PLAYHEAD_XAPI_ALLOW_PRIVATE", typ: typeBool, def: "false",
			doc: "Let the LRS be on loopback, private and link-local addresses. For an LRS inside the operator's own network, or tests."},
	}},
	{name: "Events", settings: []setting{
		{name: "PLAYHEAD_EVENTS_PER_MEMBER", typ: typeInt, def: "4",
			doc: "Open `GET /v1/events` streams of one member on one node (a few tabs); one more is answered 429 with `Retry-After`."},
		{name: "PLAYHEAD_EVENTS_MAX_STREAMS", typ: typeInt, def: "1000",
			doc: "Open event streams on one node; one more is answered 503 with `Retry-After`."},
		{name: "PLAYHEAD_EVENTS_HEARTBEAT", typ: typeDuration, def: "15s",
			doc: "How often an idle event stream sends a comment line: it keeps proxies (whose idle limit is commonly 30 s) from closing the stream and finds a client that vanished without closing its connection (a closed one is found within 1 s)."},
		{name: "PLAYHEAD_OUTBOX_RETENTION", typ: typeDuration, def: "168h",
			doc: "How long the event history is kept: webhook deliveries after they ended (DELIVERED or DEAD), and outbox rows (what `GET /v1/events` resumes from) once relayed and without a delivery left."},
	}},
}

// settingIndex finds a registered setting by its variable's name.
var settingIndex = func() map[string]*setting {
	index := map[string]*setting{}
	for gi := range settingGroups {
		for si := range settingGroups[gi].settings {
			s := &settingGroups[gi].settings[si]
			index[s.name] = s
		}
	}
	return index
}()

// durationText writes d as an operator would: 4h rather than Go's 4h0m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// defaultText is the setting's default as the docs show it, in Markdown.
func (s setting) defaultText() string {
	var text string
	switch {
	case s.shown != "":
		text = s.shown
	case s.def != "" && s.typ == typeBytes:
		n, _ := strconv.ParseInt(s.def, 10, 64) // a default that does not parse fails every start
		text = "`" + s.def + "`" + bytesText(n)
	case s.def != "":
		text = "`" + s.def + "`"
	case s.required:
		text = "required"
	default:
		text = "—"
	}
	if len(s.fallbacks) > 0 {
		text += " (or `" + strings.Join(s.fallbacks, "`, then `") + "`)"
	}
	return text
}

// typeText is the setting's type as the docs show it.
func (s setting) typeText() string {
	if s.secret {
		return string(s.typ) + ", secret"
	}
	return string(s.typ)
}

// bytesText is n in the largest binary unit that divides it, " (2 GiB)", or "" for none.
func bytesText(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf(" (%d %s)", n/u.size, u.name)
		}
	}
	return ""
}

// runConfig is `playhead config`: every setting for a terminal, or with --markdown the
// reference table of docs/operations/configuration.md.
func runConfig(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	markdown := fs.Bool("markdown", false, "print the Markdown reference of docs/operations/configuration.md")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("config takes no arguments, only --markdown")
	}
	if *markdown {
		return writeSettingsMarkdown(w)
	}
	return writeSettingsText(w)
}

// writeSettingsMarkdown writes the settings' reference: a table per group. It is the generated
// part of docs/operations/configuration.md and what `playhead config --markdown` prints.
func writeSettingsMarkdown(w io.Writer) error {
	var b strings.Builder
	for i, g := range settingGroups {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n| variable | type | default | description |\n| --- | --- | --- | --- |\n", g.name)
		for _, s := range g.settings {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.name, s.typeText(), markdownCell(s.defaultText()), markdownCell(s.doc))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// markdownCell makes text safe in a table cell.
func markdownCell(text string) string { return strings.ReplaceAll(text, "|", `\|`) }

// writeSettingsText writes the settings for a terminal: by group, each variable with its type
// and default, and its description wrapped under it.
func writeSettingsText(w io.Writer) error {
	const width, indent = 80, "      "
	plain := strings.NewReplacer("`", "").Replace
	var b strings.Builder
	b.WriteString("Playhead reads these environment variables once at start-up; an invalid value stops it\n" +
		"with an error naming the variable. Durations are Go durations (250ms, 5s, 1h30m).\n")
	for _, g := range settingGroups {
		fmt.Fprintf(&b, "\n%s\n", g.name)
		for _, s := range g.settings {
			head := s.typeText() + ", default " + plain(s.defaultText())
			if s.required {
				head = s.typeText() + ", required"
			}
			fmt.Fprintf(&b, "\n  %s  (%s)\n", s.name, head)
			for _, line := range wrap(plain(s.doc), width-len(indent)) {
				fmt.Fprintf(&b, "%s%s\n", indent, line)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrap breaks text into lines of at most width characters, between words (a longer word gets a
// line of its own).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
