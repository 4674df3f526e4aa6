package encoder

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A storyboard is what a player shows above its seek bar: small frames of the video every
// interval, tiled into sprite JPEGs, and a WebVTT file whose cues give each interval's tile as
// "sprite_000.jpg#xywh=x,y,w,h" (the form Mux, JW Player and Video.js thumbnails read).
const (
	// storyboardTileBox bounds a tile's sides in pixels; the frame keeps its aspect ratio.
	storyboardTileBox = 160
	// storyboardColumns × storyboardRows tiles make one sprite.
	storyboardColumns, storyboardRows = 10, 10
	// storyboardMaxFrames bounds the frames of one video: the interval grows with the duration
	// (1 s up to about 8 minutes, 8 s for an hour, 29 s for four hours), so a long lecture
	// costs at most five sprites.
	storyboardMaxFrames = 500
)

// storyboard is the plan of one video's storyboard.
type storyboard struct {
	interval int // seconds between frames
}

func planStoryboard(p Probe) storyboard {
	secs := (p.DurationMS + 999) / 1000
	return storyboard{interval: int(max(1, (secs+storyboardMaxFrames-1)/storyboardMaxFrames))}
}

// writeStoryboard tiles the frames the encode wrote into frames (00000.jpg, …) into dir's
// sprites and writes its WebVTT. A video too short to give a frame has no storyboard (false).
func (e *Encoder) writeStoryboard(ctx context.Context, frames, dir string, b storyboard, p Probe) (bool, error) {
	entries, err := os.ReadDir(frames)
	if err != nil {
		return false, err
	}
	n := 0
	for _, entry := range entries {
		if strings.HasSuffix(entry.Name(), ".jpg") {
			n++
		}
	}
	if n == 0 {
		return false, nil
	}
	first := filepath.Join(frames, "00000.jpg")
	out, err := e.run(ctx, e.cfg.ProbeTimeout, e.cfg.FFprobe, "-v", "error", "-show_entries", "stream=width,height", "-of", "json", first)
	if err != nil {
		return false, err
	}
	var doc struct {
		Streams []struct{ Width, Height int } `json:"streams"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Streams) != 1 || doc.Streams[0].Width <= 0 || doc.Streams[0].Height <= 0 {
		return false, fmt.Errorf("unreadable frame size: %v", err)
	}
	w, h := doc.Streams[0].Width, doc.Streams[0].Height
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	// The frames are the encode's own JPEGs, so image2 reads them here (never an upload).
	if _, err := e.run(ctx, e.cfg.ThumbnailTimeout, e.cfg.FFmpeg, "-nostdin", "-v", "error", "-y",
		"-f", "image2", "-framerate", "1", "-start_number", "0", "-i", filepath.Join(frames, "%05d.jpg"),
		"-vf", fmt.Sprintf("tile=%dx%d", storyboardColumns, storyboardRows), "-q:v", "4",
		"-f", "image2", "-start_number", "0", filepath.Join(dir, "sprite_%03d.jpg")); err != nil {
		return false, err
	}
	duration := time.Duration(p.DurationMS) * time.Millisecond
	interval := time.Duration(b.interval) * time.Second
	var vtt strings.Builder
	vtt.WriteString("WEBVTT\n")
	perSprite := storyboardColumns * storyboardRows
	for i := range n {
		start := time.Duration(i) * interval
		if start >= duration {
			break
		}
		tile := i % perSprite
		fmt.Fprintf(&vtt, "\n%s --> %s\nsprite_%03d.jpg#xywh=%d,%d,%d,%d\n", vttTime(start), vttTime(min(start+interval, duration)),
			i/perSprite, tile%storyboardColumns*w, tile/storyboardColumns*h, w, h)
	}
	return true, os.WriteFile(filepath.Join(dir, storyboardName), []byte(vtt.String()), 0o644)
}

// vttTime writes a WebVTT timestamp, hh:mm:ss.ttt.
func vttTime(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d.%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}
