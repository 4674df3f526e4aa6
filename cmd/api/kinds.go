package main

import (
	"fmt"
	"time"

	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/history"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/mediadelete"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
	"github.com/playhead/playhead/webhooks"
	"github.com/playhead/playhead/xapi"
)

// jobKind is one kind of job the node knows, and all that the node makes of it: the queue's
// hooks on every role (an api node needs them for the admin retry), a runner with its
// concurrency and retry cap on the nodes that run jobs, a connection per running job in the
// worker pool's size (poolConns), and the wake-up of its runner by the job channel's
// notifications. Adding a kind is adding an entry to jobKinds.
type jobKind struct {
	name string
	// doc says what one job of the kind does, for the job kinds table of
	// docs/internals/job-queue.md.
	doc string
	// hooks returns the kind without Run, for a node that runs no jobs.
	hooks func(cfg Config) jobqueue.Kind
	// worker returns the kind with its Run, built on what a worker node opened.
	worker func(w workerParts) (jobqueue.Kind, error)
	// concurrency is how many of its jobs one node runs at once; retryCap caps the backoff
	// between attempts.
	concurrency func(cfg Config) int
	retryCap    func(cfg Config) time.Duration
	// maxRunning is how many of its jobs the whole cluster runs at once (0: no limit beyond
	// each node's concurrency); nil for a kind without the setting.
	maxRunning func(cfg Config) int
	// settings name the variables behind the kind's figures in that table.
	settings kindSettings
}

// kindSettings are the settings behind a kind's figures, "" where a figure is fixed (or there
// is none): concurrency, retryCap and maxRunning are what the kind's functions of the same
// names read, and schedule is what its periodic schedule is made of
// (TestJobKinds_SettingsNamed checks all four); attempts is what its jobs are enqueued with
// and timeout what bounds its run.
type kindSettings struct {
	concurrency, retryCap, maxRunning, schedule, attempts, timeout string
}

// workerParts is what a kind's worker is built on.
type workerParts struct {
	node  *node
	store storage.Store
}

// jobKinds are the kinds of jobs, in the order their runners start (and stop in reverse).
var jobKinds = []jobKind{
	encodeKind(encodejobs.KindEncode),
	encodeKind(encodejobs.KindRendition),
	encodeKind(encodejobs.KindFinish),
	{
		name:  ingest.KindIngest,
		doc:   "Downloads an imported row's video (one request per attempt), stores it as the media's source and enqueues its `encode`.",
		hooks: func(Config) jobqueue.Kind { return media.JobKind(ingest.KindIngest) },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			cfg := w.node.cfg
			fetcher := ingest.NewFetcher(ingest.FetchConfig{
				AllowPrivate:    cfg.IngestAllowPrivate,
				ConnectTimeout:  cfg.IngestConnectTimeout,
				ResponseTimeout: cfg.IngestResponseTimeout,
				IdleTimeout:     cfg.IngestIdleTimeout,
				Timeout:         cfg.IngestTimeout,
				MaxBytes:        cfg.IngestMaxBytes,
				Metrics:         ingest.NewMetrics(w.node.reg),
			})
			importer := &ingest.Ingest{
				Store: ingest.NewStore(w.node.pool, cfg.IngestAttempts), Objects: w.store, Fetcher: fetcher,
				Links:      ingest.Links{Download: cfg.IngestDownloadURL, Fallback: cfg.IngestFallbackURL},
				EncodeKind: encodejobs.KindEncode, EncodeAttempts: cfg.JobMaxAttempts,
			}
			return importer.Kind(), nil
		},
		concurrency: func(cfg Config) int { return cfg.IngestConcurrency },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
		maxRunning:  func(cfg Config) int { return cfg.IngestMaxRunning },
		settings: kindSettings{concurrency: "PLAYHEAD_INGEST_CONCURRENCY", retryCap: "PLAYHEAD_JOB_RETRY_CAP",
			maxRunning: "PLAYHEAD_INGEST_MAX_RUNNING", attempts: "PLAYHEAD_INGEST_ATTEMPTS", timeout: "PLAYHEAD_INGEST_TIMEOUT"},
	},
	{
		name:  webhooks.KindDeliver,
		doc:   "Sends one event to one endpoint, signed; the next delivery of the same media item and endpoint waits for it.",
		hooks: func(cfg Config) jobqueue.Kind { return webhooks.JobKind(cfg.WebhookMaxAttempts) },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			return newWebhookSender(w.node.cfg, w.node.pool, w.node.reg).Kind(), nil
		},
		concurrency: func(cfg Config) int { return cfg.WebhookConcurrency },
		retryCap:    func(cfg Config) time.Duration { return cfg.WebhookRetryCap },
		maxRunning:  func(cfg Config) int { return cfg.WebhookMaxRunning },
		settings: kindSettings{concurrency: "PLAYHEAD_WEBHOOK_CONCURRENCY", retryCap: "PLAYHEAD_WEBHOOK_RETRY_CAP",
			maxRunning: "PLAYHEAD_WEBHOOK_MAX_RUNNING", attempts: "PLAYHEAD_WEBHOOK_MAX_ATTEMPTS", timeout: "PLAYHEAD_WEBHOOK_TIMEOUT"},
	},
	{
		name:  xapi.KindSend,
		doc:   "Sends one completion's xAPI statement to the Learning Record Store (`PLAYHEAD_XAPI_ENDPOINT`): stored or already there (409) ends it, a refusal (another 4xx) makes it DEAD at once.",
		hooks: func(Config) jobqueue.Kind { return xapi.JobKind() },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			cfg := w.node.cfg.XAPI
			return xapi.NewSender(xapi.SenderConfig{
				Pool: w.node.pool, Endpoint: cfg.Endpoint, Username: cfg.Username, Password: cfg.Password,
				AllowPrivate: cfg.AllowPrivate, Timeout: cfg.Timeout, Metrics: xapi.NewMetrics(w.node.reg),
			}).Kind(), nil
		},
		concurrency: func(Config) int { return 2 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
		settings: kindSettings{retryCap: "PLAYHEAD_JOB_RETRY_CAP", attempts: "PLAYHEAD_XAPI_MAX_ATTEMPTS",
			timeout: "PLAYHEAD_XAPI_TIMEOUT"},
	},
	{
		// Periodic: the worker nodes' scheduler enqueues one run per PLAYHEAD_AUDIENCE_INTERVAL.
		name:  audience.KindRollup,
		doc:   "Recomputes the audience figures (views, watch time, completion, the retention curve) of every media with new positions since the last run; one run for the whole cluster.",
		hooks: func(cfg Config) jobqueue.Kind { return audience.Kind(cfg.AudienceSchedule, nil) },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			return audience.Kind(w.node.cfg.AudienceSchedule, w.node.pool), nil
		},
		concurrency: func(Config) int { return 1 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
		settings:    kindSettings{retryCap: "PLAYHEAD_JOB_RETRY_CAP", schedule: "PLAYHEAD_AUDIENCE_INTERVAL"},
	},
	{
		name:  mediadelete.KindDelete,
		doc:   "Removes a deleted media: removes its objects (every claim's folder under `hls/{media}/`, its source, its resumable uploads' bytes), waits while a job of the media still runs and removes what it wrote, its playback rows in batches, then in its completion every other row that names it and the media row.",
		hooks: func(Config) jobqueue.Kind { return mediadelete.Kind() },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			return (&mediadelete.Job{Pool: w.node.pool, Objects: w.store, Metrics: mediadelete.NewMetrics(w.node.reg)}).Kind(), nil
		},
		concurrency: func(Config) int { return 2 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
		settings:    kindSettings{retryCap: "PLAYHEAD_JOB_RETRY_CAP"},
	},
	{
		// Periodic, every hour, while PLAYHEAD_HISTORY_RETENTION is set; never scheduled without.
		name:  history.KindRetention,
		doc:   "Removes the playback rows not watched for longer than `PLAYHEAD_HISTORY_RETENTION` (with their collection progress), 5 000 a transaction, and marks their media for the next audience rollup; one run an hour for the whole cluster while the retention is set.",
		hooks: func(cfg Config) jobqueue.Kind { return history.Kind(cfg.HistoryRetention, nil, nil) },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			return history.Kind(w.node.cfg.HistoryRetention, w.node.pool, history.NewMetrics(w.node.reg)), nil
		},
		concurrency: func(Config) int { return 1 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
		settings:    kindSettings{retryCap: "PLAYHEAD_JOB_RETRY_CAP"},
	},
	eraseKind,
	{
		// Periodic: every hour, one run for the whole cluster.
		name:        erasure.KindTombstones,
		doc:         "Deletes the rows of forgotten items (`DELETE /v1/playback/{id}?forget=true`) that a flush outlasting the forget's wait for the writers in flight wrote again, then the tombstones older than 7 days, 5 000 a transaction: no report made before the forget can still be waiting in a buffer or a spill file by then.",
		hooks:       func(Config) jobqueue.Kind { return erasure.TombstoneKind(nil) },
		worker:      func(w workerParts) (jobqueue.Kind, error) { return erasure.TombstoneKind(w.node.pool), nil },
		concurrency: func(Config) int { return 1 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
		settings:    kindSettings{retryCap: "PLAYHEAD_JOB_RETRY_CAP"},
	},
}

// eraseKind is the member erasure job: it deletes through the media deletion and the upload
// expiry, built on the worker's store.
var eraseKind = jobKind{
	name:  erasure.KindErase,
	doc:   "Deletes an erased member's data: their media (through `media_delete`, waiting for those jobs), their uploads with their bytes, positions, watched ranges, course progress, events, webhook deliveries and xAPI statements not yet sent, and last the member row; their media's audience figures are recomputed at the next rollup.",
	hooks: func(Config) jobqueue.Kind { return erasure.Kind() },
	worker: func(w workerParts) (jobqueue.Kind, error) {
		objects, err := uploadObjects(w.store)
		if err != nil {
			return jobqueue.Kind{}, err
		}
		expirer, err := tus.NewExpirer(tus.ExpirerConfig{Pool: w.node.pool, Objects: objects, Metrics: w.node.tusMetrics(), Logger: w.node.logger})
		if err != nil {
			return jobqueue.Kind{}, err
		}
		return (&erasure.Job{Pool: w.node.pool, DeleteMedia: mediadelete.DeleteOwnedBy, ExpireUploads: expirer.Expire}).Kind(), nil
	},
	concurrency: func(Config) int { return 1 },
	retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
	settings:    kindSettings{retryCap: "PLAYHEAD_JOB_RETRY_CAP"},
}

// encodeKind is one of the encode kinds (encodejobs.Kinds), each with PLAYHEAD_ENCODE_CONCURRENCY
// jobs at a time: a node runs that many renditions of any uploads at once, beside their
// (short) probes and finishes.
func encodeKind(name string) jobKind {
	timeout := "PLAYHEAD_ENCODE_TIMEOUT"
	if name == encodejobs.KindFinish {
		timeout = "" // it encodes nothing
	}
	return jobKind{
		name:  name,
		doc:   encodeKindDocs[name],
		hooks: func(Config) jobqueue.Kind { return media.JobKind(name) },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			cfg := w.node.cfg
			enc, err := encoder.New(encoder.Config{EncodeTimeout: cfg.EncodeTimeout, Preset: cfg.EncodePreset, Format: cfg.HLSFormat, Limits: cfg.VideoLimits})
			if err != nil {
				return jobqueue.Kind{}, err
			}
			e := &encodejobs.Encode{Pool: w.node.pool, Store: w.store, Encoder: enc,
				Single: cfg.EncodeMode == "single", MaxAttempts: cfg.JobMaxAttempts, RenditionJobs: cfg.EncodeRenditionJobs}
			for _, k := range e.Kinds() {
				if k.Name == name {
					return k, nil
				}
			}
			return jobqueue.Kind{}, fmt.Errorf("no encode kind %q", name)
		},
		concurrency: func(cfg Config) int { return cfg.EncodeConcurrency },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
		maxRunning:  func(cfg Config) int { return cfg.EncodeMaxRunning },
		settings: kindSettings{concurrency: "PLAYHEAD_ENCODE_CONCURRENCY", retryCap: "PLAYHEAD_JOB_RETRY_CAP",
			maxRunning: "PLAYHEAD_ENCODE_MAX_RUNNING", attempts: "PLAYHEAD_JOB_MAX_ATTEMPTS", timeout: timeout},
	}
}

// encodeKindDocs say what a job of each encode kind does.
var encodeKindDocs = map[string]string{
	encodejobs.KindEncode:    "Probes an upload's (or an imported video's) source and plans its ladder, then hands on to its group: the `encode_rendition` jobs and one `encode_finish`. With `PLAYHEAD_ENCODE_MODE=single` it is the whole encode, every rendition in one ffmpeg run, the media READY at its end.",
	encodejobs.KindRendition: "Encodes its rungs of the group's ladder in one ffmpeg run and records their renditions: the media is playable once the lowest is done (that job also writes the audio, the thumbnail and the storyboard).",
	encodejobs.KindFinish:    "Makes the media READY once every rendition job of its group is done.",
}

// kindHooks returns every kind's hooks, for a node that runs no jobs.
func kindHooks(cfg Config) []jobqueue.Kind {
	hooks := make([]jobqueue.Kind, len(jobKinds))
	for i, k := range jobKinds {
		hooks[i] = k.limited(cfg, k.hooks(cfg))
	}
	return hooks
}

// limited is kind with its cluster-wide limit set, on every role: the claims of worker nodes
// enforce it, and an api node's GET /v1/admin/jobs/kinds shows it.
func (k jobKind) limited(cfg Config, kind jobqueue.Kind) jobqueue.Kind {
	if k.maxRunning != nil {
		kind.MaxRunning = k.maxRunning(cfg)
	}
	return kind
}

// jobConcurrency is how many jobs of every kind one worker node runs at once.
func jobConcurrency(cfg Config) int {
	total := 0
	for _, k := range jobKinds {
		total += k.concurrency(cfg)
	}
	return total
}
