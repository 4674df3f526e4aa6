package storage_test

import (
	"testing"

	"github.com/playhead/playhead/storage"
)

func TestCheckEndpoint(t *testing.T) {
	for endpoint, ok := range map[string]bool{
		"https://s3.eu-west-1.amazonaws.com": true,
		"http://127.0.0.1:8333":              true,
		"http://127.0.0.1:8333/":             true,
		"ftp://127.0.0.1":                    false,
		"127.0.0.1:8333":                     false,
		"http://":                            false,
		"http://host/bucket":                 false,
		"http://key:secret@host":             false,
		"http://host?x=1":                    false,
		"http://host:port":                   false,
	} {
		if err := storage.CheckEndpoint(endpoint); (err == nil) != ok {
			t.Errorf("CheckEndpoint(%q) = %v, want ok %v", endpoint, err, ok)
		}
	}
}
