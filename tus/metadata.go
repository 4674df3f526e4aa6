package tus

import (
	"encoding/base64"
	"strings"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// Upload-Metadata (the creation extension) is a comma-separated list of "key base64(value)" or
// "key". tusd's parser skips what it cannot read (a value that is not base64, a pair of three
// words), so an upload with a broken title would start under another one. Playhead reads it
// itself, strictly, before tusd: a list it cannot read is refused with 400, a value that cannot
// be stored as text with 422.

// The metadata a member may give. filename and title are as for POST /v1/media (the title is
// made from the file name when not given); Uppy sends the file name as name, and both send the
// file's type, which is kept and echoed but not used (the file is probed).
const (
	maxMetadataKeys  = 16
	maxMetadataKey   = 64
	maxMetadataValue = 2048 // as a form field of POST /v1/media
)

// parseMetadata reads an Upload-Metadata header.
func parseMetadata(header string) (map[string]string, error) {
	meta := map[string]string{}
	if strings.TrimSpace(header) == "" {
		return meta, nil
	}
	for pair := range strings.SplitSeq(header, ",") {
		key, encoded, hasValue := strings.Cut(strings.TrimSpace(pair), " ")
		if !validMetadataKey(key) {
			return nil, apperr.Errorf(apperr.Invalid, "Upload-Metadata: %.80q is not a key (1 to %d letters, digits, '-', '_' or '.')", key, maxMetadataKey)
		}
		if _, dup := meta[key]; dup {
			return nil, apperr.Errorf(apperr.Invalid, "Upload-Metadata: %s is given twice", key)
		}
		if len(meta) == maxMetadataKeys {
			return nil, apperr.Errorf(apperr.Invalid, "Upload-Metadata: more than %d keys", maxMetadataKeys)
		}
		value := ""
		if hasValue {
			b, err := base64.StdEncoding.Strict().DecodeString(encoded)
			if err != nil {
				return nil, apperr.Errorf(apperr.Invalid, "Upload-Metadata: the value of %s is not base64", key)
			}
			if len(b) > maxMetadataValue {
				return nil, apperr.Errorf(apperr.Unprocessable, "Upload-Metadata: %s is longer than %d bytes", key, maxMetadataValue)
			}
			value = string(b)
		}
		if err := httpserver.CheckText("Upload-Metadata "+key, value); err != nil {
			return nil, err
		}
		meta[key] = value
	}
	return meta, nil
}

func validMetadataKey(key string) bool {
	if key == "" || len(key) > maxMetadataKey {
		return false
	}
	for _, r := range key {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// uploadDetails makes the media's title and visibility of the metadata, as POST /v1/media
// does of its form.
func uploadDetails(meta map[string]string) (media.UploadDetails, error) {
	fileName := meta["filename"]
	if fileName == "" {
		fileName = meta["name"]
	}
	return media.ParseUploadDetails(meta["title"], fileName, meta["visibility"])
}
