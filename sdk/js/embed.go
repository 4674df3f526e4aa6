// Package js holds the player SDK, the npm package @playhead/player (index.js, typed by
// index.d.ts), and embeds its module so that Playhead's own watch page serves the very file
// integrators install (web.PlayerSDKAsset): one source, no copy step.
package js

import _ "embed"

// Module is index.js, the SDK's whole ES module.
//
//go:embed index.js
var Module []byte
