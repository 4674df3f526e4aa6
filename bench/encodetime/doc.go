// Package encodetime is the measurement of "watch while it encodes": its test
// TestEncodeTime uploads one generated 1080p source with audio through the real binary, in
// alternating rounds, to the setups -setups picks, each on a fresh database and storage
// directory. The default four: the encode as a group of jobs (PLAYHEAD_ENCODE_MODE=renditions,
// the default two rendition jobs) with one worker process, the same with two worker processes,
// the one-job encode (PLAYHEAD_ENCODE_MODE=single) with one worker, and the group
// with a job per rung (PLAYHEAD_ENCODE_RENDITION_JOBS=5) with two worker processes. Three more
// model one-core worker machines: the default group with two worker processes on a CPU each
// (taskset), the one-job encode on one CPU, and the default group with one worker on one CPU.
// It prints, per round and as medians, the time from the upload's commit to playable and to
// READY (from the database's timestamps), the CPU the worker processes and their ffmpeg
// children used, and their ratios. `make bench-encode` runs it (docs/benchmarks/README.md, "Encode
// times").
package encodetime
