//go:build !linux

package encoder

import "os/exec"

// dieWithParent has no portable equivalent outside Linux; there a killed worker's ffmpeg runs
// until its own timeout.
func dieWithParent(*exec.Cmd) {}
