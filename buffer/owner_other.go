//go:build !unix

package buffer

import "os"

// owner is unknown off Unix: only the mode is checked there.
func owner(os.FileInfo) (uid int, ok bool) { return 0, false }
