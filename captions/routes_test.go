package captions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/captions"
)

// TestCaptions_AddedServedAndDeleted: an SRT and a WebVTT file added to an fMP4 encode reach
// its master playlist as a SUBTITLES group that hls-parser (strict) reads, every variant
// naming it and no I-frame playlist; each track's playlist follows the video's segment grid
// and its segments carry the cues as plain text at their times, mapped to the video's start;
// deleting a track takes it out of the master and removes its files.
func TestCaptions_AddedServedAndDeleted(t *testing.T) {
	f := setup(t)
	english := f.mustAdd(t, f.fmp4, "en-us", " English ", srtFile)
	if english.Language != "en-US" || english.Label != "English" || english.Cues != 3 || english.MediaID != f.fmp4 {
		t.Errorf("POST answered %+v, want en-US, English, 3 cues", english)
	}
	vtt := []byte("WEBVTT\n\nNOTE by hand\n\n00:00:00.500 --> 00:00:01.500 align:start\n<v Ana>Bonjour</v>\n")
	sdh := f.mustAdd(t, f.fmp4, "en-US", "English (SDH)", vtt)
	french := f.mustAdd(t, f.fmp4, "fr", "Français", vtt)

	status, out := f.do(t, http.MethodGet, fmt.Sprintf("/v1/media/%d/captions", f.fmp4), f.owner, "", nil)
	var list struct{ Items []captions.Caption }
	if status != http.StatusOK || json.Unmarshal(out, &list) != nil || len(list.Items) != 3 || list.Items[0].ID != english.ID ||
		list.Items[2].Label != "Français" || list.Items[0].CreatedAt.IsZero() {
		t.Fatalf("GET captions: %d %s", status, out)
	}

	master := f.master(t, f.fmp4)
	parsed := hlsStrict(t, master)[0]
	if !parsed.Master || len(parsed.Variants) != 3 {
		t.Fatalf("hls-parser read %+v of\n%s", parsed, master)
	}
	for _, v := range parsed.Variants {
		if v.IFrame {
			if len(v.Subtitles) != 0 {
				t.Errorf("the I-frame variant %s has subtitles", v.URI)
			}
			continue
		}
		var got []string
		for _, s := range v.Subtitles {
			got = append(got, fmt.Sprintf("%s/%s/%s/default=%v/autoselect=%v", s.Group, s.Name, s.Language, s.Default, s.Autoselect))
		}
		want := []string{"subs/English/en-US/default=false/autoselect=true", "subs/English (SDH)/en-US/default=false/autoselect=false",
			"subs/Français/fr/default=false/autoselect=true"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("variant %s subtitles:\n%s\nwant:\n%s", v.URI, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if n := strings.Count(master, `,SUBTITLES="subs"`); n != 2 || strings.Contains(master, `I-FRAME-STREAM-INF:BANDWIDTH=90000,CODECS="avc1.64001f",RESOLUTION=640x360,URI="/objects/`) == false {
		t.Errorf("SUBTITLES on %d lines (want the 2 EXT-X-STREAM-INF):\n%s", n, master)
	}

	// English's playlist and segments, through the signed links the master gives.
	uri := regexp.MustCompile(`NAME="English",LANGUAGE="en-US",DEFAULT=NO,AUTOSELECT=YES,URI="([^"]+)"`).FindStringSubmatch(master)
	if uri == nil {
		t.Fatalf("no English EXT-X-MEDIA line in\n%s", master)
	}
	playlist := string(f.get(t, uri[1]))
	p := hlsStrict(t, playlist)[0]
	if p.Master || p.TargetDuration != 6 || !p.Endlist || len(p.Segments) != 3 || p.Segments[2].Duration != 3.5 {
		t.Fatalf("caption playlist read as %+v:\n%s", p, playlist)
	}
	header := "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:7200,LOCAL:00:00:00.000\n\n" // 0.08 s at 90 kHz
	want := []string{
		header + "00:00:01.000 --> 00:00:02.500\nHello there\n\n00:00:05.000 --> 00:00:07.000\nalert(1) &amp; spans\n\n",
		header + "00:00:05.000 --> 00:00:07.000\nalert(1) &amp; spans\n\n",
		header + "00:00:14.000 --> 00:00:15.500\nthe end\n\n", // cut at the video's end
	}
	for i, s := range p.Segments {
		if got := string(f.get(t, s.URI)); got != want[i] {
			t.Errorf("segment %d:\n%q\nwant:\n%q", i, got, want[i])
		}
	}

	// Deleted: out of the master, its files gone; the others stay.
	if status, out := f.do(t, http.MethodDelete, fmt.Sprintf("/v1/media/%d/captions/%d", f.fmp4, english.ID), f.owner, "", nil); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, out)
	}
	master = f.master(t, f.fmp4)
	if strings.Contains(master, `NAME="English"`) || !strings.Contains(master, `NAME="English (SDH)",LANGUAGE="en-US",DEFAULT=NO,AUTOSELECT=YES`) {
		t.Errorf("after deleting English:\n%s", master)
	}
	if status, _ := f.do(t, http.MethodGet, strings.TrimPrefix(uri[1], f.url), "", "", nil); status != http.StatusNotFound {
		t.Errorf("the deleted track's playlist: %d, want 404", status)
	}
	if folders := f.captionFolders(t, f.fmp4); len(folders) != 2 {
		t.Errorf("caption folders after a deletion: %v, want 2", folders)
	}
	for _, c := range []captions.Caption{sdh, french} {
		if status, out := f.do(t, http.MethodDelete, fmt.Sprintf("/v1/media/%d/captions/%d", f.fmp4, c.ID), f.admin, "", nil); status != http.StatusNoContent {
			t.Fatalf("DELETE as an admin: %d %s", status, out)
		}
	}
	if master := f.master(t, f.fmp4); strings.Contains(master, "SUBTITLES") || signedLike(master, fmp4Master) != fmp4Master {
		t.Errorf("with no captions left the master is not the stored one:\n%s", master)
	}
	if folders := f.captionFolders(t, f.fmp4); len(folders) != 0 {
		t.Errorf("caption folders left: %v", folders)
	}
}

// signedLike returns stored if served is stored with its URIs signed (each URI line and URI="…"
// of served starts with /objects/ where stored has a relative path), and served otherwise.
func signedLike(served, stored string) string {
	unsigned := regexp.MustCompile(`/objects/hls/\d+/[^/]+/([^?"\n]+)\?[^"\n]*`).ReplaceAllString(served, "$1")
	if unsigned == stored {
		return stored
	}
	return served
}

// TestCaptions_OldTSMedia: media of an older encode (MPEG-TS, 4 s segments, its start not
// recorded) gets its captions on its own 4 s grid, mapped to the 1.4 s at which ffmpeg's
// MPEG-TS outputs start.
func TestCaptions_OldTSMedia(t *testing.T) {
	f := setup(t)
	f.mustAdd(t, f.ts, "ko", "한국어", []byte("1\n00:00:03,500 --> 00:00:04,500\n안녕하세요\n"))
	master := f.master(t, f.ts)
	parsed := hlsStrict(t, master)[0]
	if len(parsed.Variants) != 1 || len(parsed.Variants[0].Subtitles) != 1 || parsed.Variants[0].Subtitles[0].Language != "ko" {
		t.Fatalf("hls-parser read %+v of\n%s", parsed, master)
	}
	playlist := string(f.get(t, parsed.Variants[0].Subtitles[0].URI))
	p := hlsStrict(t, playlist)[0]
	if p.TargetDuration != 4 || len(p.Segments) != 3 {
		t.Fatalf("caption playlist: %+v\n%s", p, playlist)
	}
	header := "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:126000,LOCAL:00:00:00.000\n\n"
	for i, want := range []string{header + "00:00:03.500 --> 00:00:04.500\n안녕하세요\n\n", header + "00:00:03.500 --> 00:00:04.500\n안녕하세요\n\n", header} {
		if got := string(f.get(t, p.Segments[i].URI)); got != want {
			t.Errorf("segment %d: %q, want %q", i, got, want)
		}
	}
	// Another member sees public media's captions, but may not change them.
	if status, out := f.do(t, http.MethodGet, fmt.Sprintf("/v1/media/%d/captions", f.ts), f.other, "", nil); status != http.StatusOK || !strings.Contains(string(out), "한국어") {
		t.Errorf("another member lists public media's captions: %d %s", status, out)
	}
	if status, _ := f.post(t, f.ts, f.other, "en", "Mine", srtFile); status != http.StatusNotFound {
		t.Errorf("another member adds captions to public media: %d, want 404", status)
	}
}

// TestCaptions_Refused: every refusal is a 4xx with a JSON error, and leaves neither a row nor
// a file behind.
func TestCaptions_Refused(t *testing.T) {
	f := setup(t)
	f.mustAdd(t, f.fmp4, "en", "English", srtFile)
	path := fmt.Sprintf("/v1/media/%d/captions", f.fmp4)
	good, goodType := form([][2]string{{"language", "en"}, {"label", "Another"}}, srtFile)
	cases := []struct {
		name            string
		token, ct, path string
		body            []byte
		want            int
		wantMessagePart string
		fields          [][2]string
		file            []byte
		overrideTheForm bool
	}{
		{name: "anonymous", ct: goodType, body: good, want: 401},
		{name: "another member, private media", token: f.other, ct: goodType, body: good, want: 404},
		{name: "no such media", token: f.owner, path: "/v1/media/999999/captions", ct: goodType, body: good, want: 404},
		{name: "not READY", token: f.owner, path: fmt.Sprintf("/v1/media/%d/captions", f.processing), ct: goodType, body: good, want: 409, wantMessagePart: "once it is READY"},
		{name: "JSON", token: f.owner, ct: "application/json", body: []byte(`{"language":"en"}`), want: 415},
		{name: "no boundary", token: f.owner, ct: "multipart/form-data", body: good, want: 400},
		{name: "truncated", token: f.owner, ct: goodType, body: good[:len(good)/2], want: 400},
	}
	// Over the body limit by its Content-Length: refused before a byte of it is read.
	if status := f.announce(t, path, f.owner, goodType, captions.MaxBodyBytes+1, 70<<10); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body of %d bytes announced: %d, want 413", captions.MaxBodyBytes+1, status)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := path
			if c.path != "" {
				p = c.path
			}
			status, out := f.do(t, http.MethodPost, p, c.token, c.ct, c.body)
			if status != c.want || !strings.Contains(string(out), c.wantMessagePart) {
				t.Errorf("%d %s, want %d %q", status, out, c.want, c.wantMessagePart)
			}
		})
	}
	forms := []struct {
		name    string
		fields  [][2]string
		file    []byte
		want    int
		message string
	}{
		{"no file", [][2]string{{"language", "en"}, {"label", "X"}}, nil, 422, "file is required"},
		{"no language", [][2]string{{"label", "X"}}, srtFile, 422, "language is required"},
		{"not a language", [][2]string{{"language", "english"}, {"label", "X"}}, srtFile, 422, "not a BCP 47 tag"},
		{"language with NUL", [][2]string{{"language", "en\x00"}, {"label", "X"}}, srtFile, 422, "BCP 47"},
		// 34 bytes as sent, 39 once canonical ("sr-Latn-u-ca-gregory-co-phonebk-nu-latn"): the
		// stored form is what the limit is for (the table's CHECK refused it: a 500).
		{"language that grows when made canonical", [][2]string{{"language", "sh-u-ca-gregory-nu-latn-co-phonebk"}, {"label", "X"}}, srtFile, 422, "BCP 47"},
		{"no label", [][2]string{{"language", "en"}}, srtFile, 422, "label is required"},
		{"label with a quote", [][2]string{{"language", "en"}, {"label", `En" ,URI="http://evil`}}, srtFile, 422, "cannot contain"},
		{"label with a line break", [][2]string{{"language", "en"}, {"label", "En\n#EXT-X-ENDLIST"}}, srtFile, 422, "control characters"},
		{"label with invalid UTF-8", [][2]string{{"language", "en"}, {"label", "\xff\xfe"}}, srtFile, 422, "UTF-8"},
		// hls.js ends a line at U+2028 and U+2029: this label would add a default track whose
		// playlist the uploader chose (TestCaptions_StoredLabelLeftOut).
		{"label with U+2028 and a tag", [][2]string{{"language", "en"}, {"label", injectedLabel}}, srtFile, 422, "label cannot contain U+2028 (a line separator) (at byte 7)"},
		{"label with U+2029", [][2]string{{"language", "en"}, {"label", "English\u2029#EXT-X-ENDLIST"}}, srtFile, 422, "label cannot contain U+2029"},
		{"label with NEL", [][2]string{{"language", "en"}, {"label", "English\u0085#EXT-X-ENDLIST"}}, srtFile, 422, "label cannot contain control character U+0085"},
		{"label with a vertical tab", [][2]string{{"language", "en"}, {"label", "English\v#EXT-X-ENDLIST"}}, srtFile, 422, "label cannot contain control character U+000B"},
		{"label with DEL", [][2]string{{"language", "en"}, {"label", "English\x7f"}}, srtFile, 422, "label cannot contain control character U+007F"},
		{"language with U+2028", [][2]string{{"language", "en\u2028-US"}, {"label", "X"}}, srtFile, 422, "language cannot contain U+2028"},
		{"label too long", [][2]string{{"language", "en"}, {"label", strings.Repeat("l", 101)}}, srtFile, 422, "longer than 100"},
		{"label taken", [][2]string{{"language", "fr"}, {"label", "English"}}, srtFile, 409, "already has captions labelled"},
		{"unknown field", [][2]string{{"language", "en"}, {"label", "X"}, {"colour", "red"}}, srtFile, 400, "unknown form field"},
		{"field twice", [][2]string{{"language", "en"}, {"label", "X"}, {"label", "Y"}}, srtFile, 400, "given twice"},
		{"file over the limit", [][2]string{{"language", "en"}, {"label", "X"}}, make([]byte, captions.MaxFileBytes+1), 413, "limit"},
		{"not UTF-8", [][2]string{{"language", "en"}, {"label", "X"}}, []byte("1\n00:00:01,000 --> 00:00:02,000\ncaf\xe9\n"), 422, "line 3: not UTF-8"},
		{"NUL", [][2]string{{"language", "en"}, {"label", "X"}}, []byte("WEBVTT\n\n00:01.000 --> 00:02.000\na\x00b\n"), 422, "NUL"},
		{"past the end", [][2]string{{"language", "en"}, {"label", "X"}}, []byte("WEBVTT\n\n00:16.000 --> 00:17.000\nlate\n"), 422, "starts after the video ends (00:00:15.500)"},
		{"out of order and backwards", [][2]string{{"language", "en"}, {"label", "X"}}, []byte("WEBVTT\n\n00:05.000 --> 00:04.000\nx\n"), 422, "is not after its start"},
	}
	for _, c := range forms {
		t.Run(c.name, func(t *testing.T) {
			body, ct := form(c.fields, c.file)
			status, out := f.do(t, http.MethodPost, path, f.owner, ct, body)
			if status != c.want || !strings.Contains(string(out), c.message) {
				t.Errorf("%d %s, want %d %q", status, out, c.want, c.message)
			}
		})
	}
	var rows int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM captions`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("%d caption rows, want the first only (%v)", rows, err)
	}
	if folders := f.captionFolders(t, f.fmp4); len(folders) != 1 {
		t.Errorf("caption folders: %v, want the first track's only (the refused label's files were written, then removed)", folders)
	}
}

// injectedLabel is a label that ends its line for hls.js (U+2028), adds a default subtitle
// track of the uploader's choosing, and ends that line too, so that what remains of the real
// EXT-X-MEDIA line is not read as part of it: 96 characters, under the label's limit.
const injectedLabel = "English\u2028#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=subs,NAME=x,DEFAULT=YES,URI=https://evil.example/\u2028#"

// lineBreaks splits s at every character some client takes as the end of a line: CR, LF, VT,
// FF, NEL, U+2028 and U+2029.
func lineBreaks(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("\r\n\v\f\u0085\u2028\u2029", r) })
}

// TestCaptions_StoredLabelLeftOut: a track whose stored label or language the master playlist
// cannot hold (rows written before the upload refused them: the table's CHECK refuses only
// '"') is left out of the master, which still plays with the other tracks: hls-parser
// (strict) and hls.js read exactly those, no line of the master holds a line break of any
// kind, and the API still lists the track for its owner to delete. Media whose only track is
// such a one gets its master as stored.
func TestCaptions_StoredLabelLeftOut(t *testing.T) {
	f := setup(t)
	f.mustAdd(t, f.fmp4, "en", "English", srtFile)
	injected := f.mustAdd(t, f.fmp4, "en", "Injected", srtFile)
	badLanguage := f.mustAdd(t, f.fmp4, "fr", "Français", srtFile)
	only := f.mustAdd(t, f.ts, "en", "Only", []byte("1\n00:00:01,000 --> 00:00:02,000\nOnly\n"))
	ctx := context.Background()
	for _, u := range []struct {
		id            int64
		column, value string
	}{
		{injected.ID, "label", injectedLabel},
		{badLanguage.ID, "language", "fr\u2028#EXT-X-ENDLIST"},
		{only.ID, "label", injectedLabel},
	} {
		if _, err := f.pool.Exec(ctx, `UPDATE captions SET `+u.column+` = $2 WHERE id = $1`, u.id, u.value); err != nil {
			t.Fatal(err)
		}
	}

	master := f.master(t, f.fmp4)
	wantMedia := 2 // the audio rendition and English
	var media []string
	for _, line := range lineBreaks(master) {
		if strings.HasPrefix(line, "#EXT-X-MEDIA:") {
			media = append(media, line)
		}
	}
	if len(media) != wantMedia || strings.Contains(master, "evil.example") || strings.Contains(master, "Injected") {
		t.Errorf("%d EXT-X-MEDIA lines counting every line break, want %d (the audio and English):\n%q", len(media), wantMedia, master)
	}
	parsed := hlsStrict(t, master)[0]
	for _, v := range parsed.Variants {
		if v.IFrame {
			continue
		}
		if len(v.Subtitles) != 1 || v.Subtitles[0].Name != "English" || v.Subtitles[0].Language != "en" || v.Subtitles[0].Default {
			t.Errorf("hls-parser: variant %s has subtitles %+v, want English only", v.URI, v.Subtitles)
		}
	}
	tracks := hlsJSSubtitles(t, master)[0]
	if len(tracks) != 1 || tracks[0].Name != "English" || tracks[0].Group != "subs" || tracks[0].Default ||
		!strings.HasPrefix(tracks[0].URI, "https://playhead.invalid/objects/") {
		t.Errorf("hls.js reads the subtitle tracks %+v, want English only, on Playhead's own link", tracks)
	}

	if master := f.master(t, f.ts); signedLike(master, tsMaster) != tsMaster {
		t.Errorf("media whose one track cannot be written: the master is not the stored one:\n%q", master)
	}
	status, out := f.do(t, http.MethodGet, fmt.Sprintf("/v1/media/%d/captions", f.fmp4), f.owner, "", nil)
	if status != http.StatusOK || strings.Count(string(out), `"id":`) != 3 {
		t.Errorf("GET captions: %d %s, want the 3 tracks", status, out)
	}
}

// TestCaptions_NeverPartial: a store that breaks off in the middle of a track's files answers
// 503 and leaves neither files nor a row; the track limit holds, and the refused track's files
// (written before the row is refused) are removed.
func TestCaptions_NeverPartial(t *testing.T) {
	f := setup(t)
	f.objects.failPuts.Store(3) // the third Put fails
	if status, out := f.post(t, f.fmp4, f.owner, "en", "English", srtFile); status != http.StatusServiceUnavailable {
		t.Fatalf("a store that breaks off: %d %s, want 503", status, out)
	}
	if folders := f.captionFolders(t, f.fmp4); len(folders) != 0 {
		t.Errorf("files left by the broken upload: %v", folders)
	}
	for i := range captions.MaxTracks {
		f.mustAdd(t, f.fmp4, "en", fmt.Sprintf("Track %d", i), srtFile)
	}
	if status, out := f.post(t, f.fmp4, f.owner, "en", "One too many", srtFile); status != http.StatusConflict || !strings.Contains(string(out), "the most it may have") {
		t.Errorf("track %d: %d %s, want 409", captions.MaxTracks+1, status, out)
	}
	var rows int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM captions WHERE media_id = $1`, f.fmp4).Scan(&rows); err != nil || rows != captions.MaxTracks {
		t.Errorf("%d rows, want %d (%v)", rows, captions.MaxTracks, err)
	}
	if folders := f.captionFolders(t, f.fmp4); len(folders) != captions.MaxTracks {
		t.Errorf("%d caption folders, want %d", len(folders), captions.MaxTracks)
	}
	parsed := hlsStrict(t, f.master(t, f.fmp4))[0]
	if n := len(parsed.Variants[0].Subtitles); n != captions.MaxTracks {
		t.Errorf("the master lists %d tracks, want %d", n, captions.MaxTracks)
	}
}

// TestCaptions_BodyReadOnlyForTheOwnerWithinTheLimits: a caption's body (up to MaxBodyBytes,
// read into memory) is read only for the media's owner or an admin, and only while the member
// has an upload place. Another member announcing a whole body and sending only what fasthttp
// reads before the handler is answered 404 without the rest; an owner whose place is held by
// an upload still arriving is answered 429 with Retry-After, while another member (an admin)
// is not, and the place comes back when that upload's client goes.
func TestCaptions_BodyReadOnlyForTheOwnerWithinTheLimits(t *testing.T) {
	f := setup(t)
	path := fmt.Sprintf("/v1/media/%d/captions", f.fmp4)
	_, goodType := form([][2]string{{"language", "en"}, {"label", "English"}}, srtFile)
	// 70 KiB is past the server's 64 KiB limit, after which fasthttp calls the handler.
	for _, c := range []struct {
		name  string
		token string
		path  string
	}{
		{"another member, private media", f.other, path},
		{"another member, public media", f.other, fmt.Sprintf("/v1/media/%d/captions", f.ts)},
		{"no such media", f.owner, "/v1/media/999999/captions"},
	} {
		if status := f.announce(t, c.path, c.token, goodType, captions.MaxBodyBytes, 70<<10); status != http.StatusNotFound {
			t.Errorf("%s, a whole body announced and 70 KiB sent: %d, want 404 before the rest is read", c.name, status)
		}
	}

	// The owner's one place, held by an upload whose body is still arriving.
	held, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	fmt.Fprintf(held, "POST %s HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		path, f.owner, goodType, captions.MaxBodyBytes)
	if _, err := held.Write(make([]byte, 70<<10)); err != nil {
		t.Fatal(err)
	}
	// An empty file is refused (422) after the place is taken: 429 says the held upload has it.
	empty, emptyType := form([][2]string{{"language", "en"}, {"label", "Empty"}}, []byte{})
	probe := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, f.url+path, bytes.NewReader(empty))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", emptyType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	waitFor := func(what string, done func(status int) bool) int {
		t.Helper()
		for range 3000 { // each probe is a request; the server answers it at once
			status, _ := probe(f.owner)
			if done(status) {
				return status
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("the owner's caption uploads never %s", what)
		return 0
	}
	waitFor("found their place held (429)", func(status int) bool { return status == http.StatusTooManyRequests })
	if status, retry := probe(f.owner); status != http.StatusTooManyRequests || retry == "" {
		t.Errorf("the owner's second upload: %d with Retry-After %q, want 429 with Retry-After", status, retry)
	}
	if status, _ := probe(f.admin); status != http.StatusUnprocessableEntity {
		t.Errorf("an admin's upload while the owner's place is held: %d, want 422 (the empty file)", status)
	}
	held.Close()
	waitFor("got their place back after the held upload's client went", func(status int) bool { return status != http.StatusTooManyRequests })
}
