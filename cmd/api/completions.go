package main

import "github.com/playhead/playhead/completion"

// addCompletionMover lists the mover of completions into the outbox (playback.completed,
// collection.completed), which polls: the flush that records a finish sends no notification.
func (n *node) addCompletionMover() {
	n.add("completion mover", completion.NewMover(n.pool, completion.Config{Interval: n.cfg.JobPollInterval, Logger: n.logger}))
}
