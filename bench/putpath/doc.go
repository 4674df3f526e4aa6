// Package putpath is the PUT-path half of the side-by-side benchmark: its test
// TestPutPathSideBySide drives a bare Fiber server (bench/cmd/barefiber) and Playhead with the
// same wrk load (putpath.lua), alternating, and prints both rates and Playhead's share.
// `make bench-put` builds both binaries and runs it (docs/benchmarks/README.md).
package putpath
