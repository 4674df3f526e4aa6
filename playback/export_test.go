package playback

// ParsePositionJSON exposes the encoding/json reader, the reference the plain reader must agree
// with.
var ParsePositionJSON = parsePositionJSON
