package main

import (
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestSettings_LoadConfigReadsEveryRegisteredSetting: loading the default configuration reads
// every registered setting (a setting loadConfig does not read is documented for nothing) and
// only those, their fallbacks aside (reading anything else panics, see the next test). Every
// registered default parses, or the load fails naming it.
func TestSettings_LoadConfigReadsEveryRegisteredSetting(t *testing.T) {
	read := map[string]bool{}
	e := env{lookup: func(name string) (string, bool) {
		read[name] = true
		switch name {
		case "DATABASE_URL":
			return "postgres://playhead@127.0.0.1:5432/playhead", true
		case "PLAYHEAD_JWT_SECRET":
			return binarytest.Secret, true
		}
		return "", false
	}}
	if _, err := e.config(nil); err != nil {
		t.Fatalf("the default configuration: %v", err)
	}
	fallbacks := map[string]bool{}
	for _, g := range settingGroups {
		for _, s := range g.settings {
			if !read[s.name] {
				t.Errorf("%s is registered (group %s) but loadConfig never reads it", s.name, g.name)
			}
			for _, f := range s.fallbacks {
				fallbacks[f] = true
			}
		}
	}
	for name := range read {
		if settingIndex[name] == nil && !fallbacks[name] {
			t.Errorf("loadConfig read %s, which is neither a setting nor a setting's fallback", name)
		}
	}
}

// TestSettings_UnregisteredVariablePanics: env refuses to read a variable that is not
// registered, or as another type than registered, so a setting cannot exist without its entry
// (its description, default and group).
func TestSettings_UnregisteredVariablePanics(t *testing.T) {
	e := env{lookup: func(string) (string, bool) { return "", false }}
	for _, tc := range []struct {
		name string
		read func()
		want string
	}{
		{"unregistered", func() { e.str("PLAYHEAD_NOT_A_SETTING") }, "PLAYHEAD_NOT_A_SETTING is read but not registered"},
		{"another type", func() { e.int("PLAYHEAD_FLUSH_INTERVAL") }, "PLAYHEAD_FLUSH_INTERVAL is registered as duration and read as integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), tc.want) {
					t.Errorf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			tc.read()
		})
	}
}

// TestSettings_Registry: every setting is registered once, under a group, with a description
// and a default the docs can show.
func TestSettings_Registry(t *testing.T) {
	count := 0
	for _, g := range settingGroups {
		if g.name == "" || len(g.settings) == 0 {
			t.Errorf("group %q: needs a name and settings", g.name)
		}
		for _, s := range g.settings {
			count++
			switch {
			case !strings.HasPrefix(s.name, "PLAYHEAD_") && s.name != "DATABASE_URL":
				t.Errorf("%s: settings are PLAYHEAD_* (DATABASE_URL excepted)", s.name)
			case !strings.HasSuffix(s.doc, "."):
				t.Errorf("%s: the description must be a sentence (ending with a period): %q", s.name, s.doc)
			case s.required && (s.def != "" || s.shown != ""):
				t.Errorf("%s: a required setting has no default", s.name)
			case s.def != "" && s.shown != "":
				t.Errorf("%s: a default (%q) and a shown default (%q)", s.name, s.def, s.shown)
			}
		}
	}
	if count != len(settingIndex) {
		t.Errorf("%d settings registered, %d distinct names: a name is registered twice", count, len(settingIndex))
	}
}

// TestConfigCommand: `playhead config` lists every setting under its group, with its type and
// default; --markdown writes the reference of docs/operations/configuration.md.
func TestConfigCommand(t *testing.T) {
	var text strings.Builder
	if err := runConfig(nil, &text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nPlayback buffer\n",
		"\n  PLAYHEAD_BUFFER_CAPACITY  (integer, default 10000)\n",
		"\n  PLAYHEAD_BUFFER_MAX_KEYS  (integer, default 20 × PLAYHEAD_BUFFER_CAPACITY)\n",
		"\nIdentity\n\n  PLAYHEAD_JWT_SECRET  (string, secret, default none; required without PLAYHEAD_OIDC_ISSUER)\n",
		"\n  PLAYHEAD_MAX_UPLOAD_BYTES  (bytes, default 2147483648 (2 GiB))\n",
		"\n  PLAYHEAD_S3_REGION  (string, default us-east-1 (or AWS_REGION, then AWS_DEFAULT_REGION))\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("playhead config does not print %q", want)
		}
	}
	for line := range strings.Lines(text.String()) {
		if len([]rune(strings.TrimSuffix(line, "\n"))) > 80 && strings.HasPrefix(line, "      ") {
			t.Errorf("a description line over 80 columns: %q", line)
		}
	}
	for name := range settingIndex {
		if !strings.Contains(text.String(), "\n  "+name+"  (") {
			t.Errorf("playhead config does not list %s", name)
		}
	}

	var markdown, want strings.Builder
	if err := runConfig([]string{"--markdown"}, &markdown); err != nil {
		t.Fatal(err)
	}
	if err := writeSettingsMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	if markdown.String() != want.String() {
		t.Error("playhead config --markdown is not the settings' reference")
	}
	if err := runConfig([]string{"extra"}, &markdown); err == nil {
		t.Error("playhead config extra: no error")
	}
}

// TestUsage_ListsEveryCommand: playhead --help names the config command beside the others.
func TestUsage_ListsEveryCommand(t *testing.T) {
	for _, command := range []string{"serve", "migrate", "config", "token"} {
		if !strings.Contains(usage, "\n  "+command+" ") {
			t.Errorf("the usage does not list %s", command)
		}
	}
}
