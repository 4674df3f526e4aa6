package ingest

import (
	"net/url"
	"regexp"
	"strings"
)

// Links turns cloud-drive share links into direct-download URLs. The templates contain {id}
// where the file id goes.
type Links struct {
	// Download is tried first. Default: the seed's confirm-bypassing URL.
	Download string
	// Fallback is tried once when Download answers an HTML page (the "cannot scan for viruses"
	// confirm page) instead of the file.
	Fallback string
}

// DefaultLinks are the seed's templates for Google Drive.
var DefaultLinks = Links{
	Download: "https://drive.usercontent.google.com/download?id={id}&export=download&confirm=t",
	Fallback: "https://drive.google.com/uc?id={id}&export=download&confirm=t",
}

var (
	filePath = regexp.MustCompile(`^/file/d/([A-Za-z0-9_-]+)(/|$)`)
	fileID   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// ShareID returns the file id of a share link (…/file/d/<id>/view, …/open?id=<id>,
// …/uc?id=<id>), and false for any other URL.
func ShareID(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	if m := filePath.FindStringSubmatch(u.Path); m != nil {
		return m[1], true
	}
	switch strings.TrimSuffix(u.Path, "/") {
	case "/open", "/uc":
		if id := u.Query().Get("id"); fileID.MatchString(id) {
			return id, true
		}
	}
	return "", false
}

// Resolve returns the URL to download raw from and, for share links, the fallback to try once
// after an HTML confirm page. Other URLs are downloaded as they are, without a fallback.
func (l Links) Resolve(raw string) (primary, fallback string) {
	id, ok := ShareID(raw)
	if !ok {
		return raw, ""
	}
	fill := func(tmpl string) string {
		if tmpl == "" {
			return ""
		}
		return strings.ReplaceAll(tmpl, "{id}", url.QueryEscape(id))
	}
	return fill(l.Download), fill(l.Fallback)
}
