package main

import (
	"fmt"
	"time"

	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/webhooks"
)

// jobKind is one kind of job the node knows, and all that the node makes of it: the queue's
// hooks on every role (an api node needs them for the admin retry), a runner with its
// concurrency and retry cap on the nodes that run jobs, a connection per running job in the
// worker pool's size (poolConns), and the wake-up of its runner by the job channel's
// notifications. Adding a kind is adding an entry to jobKinds.
type jobKind struct {
	name string
	// hooks returns the kind without Run, for a node that runs no jobs.
	hooks func(cfg Config) jobqueue.Kind
	// worker returns the kind with its Run, built on what a worker node opened.
	worker func(w workerParts) (jobqueue.Kind, error)
	// concurrency is how many of its jobs one node runs at once; retryCap caps the backoff
	// between attempts.
	concurrency func(cfg Config) int
	retryCap    func(cfg Config) time.Duration
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
	},
	{
		name:  webhooks.KindDeliver,
		hooks: func(cfg Config) jobqueue.Kind { return webhooks.JobKind(cfg.WebhookMaxAttempts) },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			return newWebhookSender(w.node.cfg, w.node.pool, w.node.reg).Kind(), nil
		},
		concurrency: func(cfg Config) int { return cfg.WebhookConcurrency },
		retryCap:    func(cfg Config) time.Duration { return cfg.WebhookRetryCap },
	},
	{
		// Periodic: the worker nodes' scheduler enqueues one run per PLAYHEAD_AUDIENCE_INTERVAL.
		name:  audience.KindRollup,
		hooks: func(cfg Config) jobqueue.Kind { return audience.Kind(cfg.AudienceSchedule, nil) },
		worker: func(w workerParts) (jobqueue.Kind, error) {
			return audience.Kind(w.node.cfg.AudienceSchedule, w.node.pool), nil
		},
		concurrency: func(Config) int { return 1 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
	},
}

// encodeKind is one of the encode kinds (encodejobs.Kinds), each with PLAYHEAD_ENCODE_CONCURRENCY
// jobs at a time: a node runs that many renditions of any uploads at once, beside their
// (short) probes and finishes.
func encodeKind(name string) jobKind {
	return jobKind{
		name:  name,
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
	}
}

// kindHooks returns every kind's hooks, for a node that runs no jobs.
func kindHooks(cfg Config) []jobqueue.Kind {
	hooks := make([]jobqueue.Kind, len(jobKinds))
	for i, k := range jobKinds {
		hooks[i] = k.hooks(cfg)
	}
	return hooks
}

// jobConcurrency is how many jobs of every kind one worker node runs at once.
func jobConcurrency(cfg Config) int {
	total := 0
	for _, k := range jobKinds {
		total += k.concurrency(cfg)
	}
	return total
}
