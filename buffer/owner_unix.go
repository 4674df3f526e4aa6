//go:build unix

package buffer

import (
	"os"
	"syscall"
)

// owner returns the user id that owns the file info describes.
func owner(info os.FileInfo) (uid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
