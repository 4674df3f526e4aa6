package buffer_test

import (
	"cmp"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
)

// New refuses each kind of bad configuration and accepts the boundary values next to it (the
// mutation tool found these checks untested: docs/internals/reliability.md, "General mutation testing").
func TestNew_RefusesEachBadSetting(t *testing.T) {
	rec := &recorder{}
	valid := func() buffer.Config[int, val] {
		return buffer.Config[int, val]{Capacity: 1, MaxKeys: 1, FlushBatch: 1, FlushInterval: time.Millisecond,
			FlushTimeout: time.Millisecond, RetryBase: time.Millisecond, RetryCap: time.Millisecond,
			Flush: rec.flush, Compare: cmp.Compare[int], Newer: newer}
	}
	for _, tc := range []struct {
		name  string
		edit  func(c *buffer.Config[int, val])
		valid bool
	}{
		{"the smallest valid settings", func(*buffer.Config[int, val]) {}, true},
		{"negative capacity", func(c *buffer.Config[int, val]) { c.Capacity = -1 }, false},
		{"MaxKeys below Capacity", func(c *buffer.Config[int, val]) { c.Capacity, c.MaxKeys = 2, 1 }, false},
		{"MaxKeys equal to Capacity", func(c *buffer.Config[int, val]) { c.Capacity, c.MaxKeys = 2, 2 }, true},
		{"negative batch", func(c *buffer.Config[int, val]) { c.FlushBatch = -1 }, false},
		{"negative FlushAt", func(c *buffer.Config[int, val]) { c.FlushAt = -1 }, false},
		{"FlushAt above MaxKeys", func(c *buffer.Config[int, val]) { c.Capacity, c.MaxKeys, c.FlushAt = 2, 2, 3 }, false},
		{"FlushAt equal to MaxKeys", func(c *buffer.Config[int, val]) { c.Capacity, c.MaxKeys, c.FlushAt = 2, 2, 2 }, true},
		{"FlushBatch above MaxKeys, FlushAt by default", func(c *buffer.Config[int, val]) { c.FlushBatch = 5 }, true},
		{"negative interval", func(c *buffer.Config[int, val]) { c.FlushInterval = -1 }, false},
		{"negative flush timeout", func(c *buffer.Config[int, val]) { c.FlushTimeout = -1 }, false},
		{"negative retry base", func(c *buffer.Config[int, val]) { c.RetryBase = -1 }, false},
		{"retry cap below its base", func(c *buffer.Config[int, val]) { c.RetryBase, c.RetryCap = 2, 1 }, false},
		{"retry cap equal to its base", func(c *buffer.Config[int, val]) { c.RetryBase, c.RetryCap = 2, 2 }, true},
		{"no flush function", func(c *buffer.Config[int, val]) { c.Flush = nil }, false},
		{"no compare", func(c *buffer.Config[int, val]) { c.Compare = nil }, false},
		{"no newer", func(c *buffer.Config[int, val]) { c.Newer = nil }, false},
	} {
		cfg := valid()
		tc.edit(&cfg)
		_, err := buffer.New(cfg)
		if (err == nil) != tc.valid {
			t.Errorf("%s: New = %v, want valid %v", tc.name, err, tc.valid)
		}
	}
}
