package main

import (
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/ratelimit"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
)

// The resumable uploads (tus 1.0 under /v1/uploads/): the routes on api nodes, the expiry of
// abandoned uploads on worker nodes, one set of metrics on a node that is both.

// uploadObjects is store as the resumable uploads need it: one that can build objects from
// parts (both of Playhead's stores can).
func uploadObjects(store storage.Store) (tus.Objects, error) {
	objects, ok := store.(tus.Objects)
	if !ok {
		return nil, fmt.Errorf("storage %T cannot write objects in parts", store)
	}
	return objects, nil
}

// tusMetrics returns the node's resumable-upload metrics, registered once.
func (n *node) tusMetrics() *tus.Metrics {
	if n.uploadMetrics == nil {
		n.uploadMetrics = tus.NewMetrics(n.reg)
	}
	return n.uploadMetrics
}

// buildResumable registers the tus routes on app behind authenticate, with the node's upload
// limits, the members' rate limit of upload requests and the same end as POST /v1/media's,
// and lists the upload locks' session, which stops after the public server (no request holds
// a lock then), and the rate limit's sweeper.
func (n *node) buildResumable(app *fiber.App, store storage.Store, limits *media.UploadLimits, commit media.Committer,
	authenticate fiber.Handler, listener *notify.Listener) error {
	objects, err := uploadObjects(store)
	if err != nil {
		return err
	}
	locker := tus.NewLocker(n.sessionPool, n.logger)
	listener.Handle(tus.ChannelRelease, locker.Release, nil)
	n.add("upload locks", locker)
	var rate *ratelimit.Limiter
	if n.cfg.UploadRate > 0 {
		rate = ratelimit.New(n.cfg.UploadRate, n.cfg.UploadBurst)
		n.add("upload rate-limit sweeper", ratelimit.NewSweeper(rate, time.Minute))
	}
	h, err := tus.New(tus.Config{
		Pool: n.pool, Objects: objects, Locker: locker, Limits: limits, Commit: commit,
		MaxBytes: n.cfg.MaxUploadBytes, Expiry: n.cfg.UploadExpiry, UnfinishedPerMember: n.cfg.UploadsUnfinished,
		RateLimit: rate, Metrics: n.tusMetrics(),
	})
	if err != nil {
		return err
	}
	h.Register(app, authenticate)
	return nil
}

// buildUploadExpiry lists the expirer of abandoned uploads; it runs as often as the orphan
// sweep, which removes what it could not.
func (n *node) buildUploadExpiry(store storage.Store) error {
	objects, err := uploadObjects(store)
	if err != nil {
		return err
	}
	expirer, err := tus.NewExpirer(tus.ExpirerConfig{Pool: n.pool, Objects: objects, Interval: n.cfg.OrphanSweepInterval,
		Metrics: n.tusMetrics(), Logger: n.logger})
	if err != nil {
		return err
	}
	n.add("upload expiry", expirer)
	return nil
}
