// Package toolcache names the per-machine folder where `make deps` keeps the third-party
// programs the tests run (SeaweedFS, the OpenID Provider): outside the checkout, so a clean
// clone does not build them again.
package toolcache

import (
	"os"
	"path/filepath"
)

// Dir is $PLAYHEAD_TOOLS_CACHE, or playhead/ in the user's cache folder (~/.cache/playhead),
// the folder scripts/weed.sh and scripts/oidc-provider.sh build into.
func Dir() string {
	if dir := os.Getenv("PLAYHEAD_TOOLS_CACHE"); dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.Getenv("HOME"), ".cache")
	}
	return filepath.Join(base, "playhead")
}
