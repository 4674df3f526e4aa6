package hls

import (
	"cmp"
	"math/big"
	"slices"
	"strings"
)

// Part is one rendition of an encode recorded on its own (an encode group's rendition job
// writes one, or two with the audio), so that a master playlist can be assembled from the
// renditions that exist so far (Assemble). Exactly one of Video and Audio is set.
type Part struct {
	// Video is a video variant; Assemble sets its Bandwidth and AverageBandwidth from Peak and
	// Average, with the audio's added when it plays with a separate audio rendition (Audio
	// names the group).
	Video *Variant `json:"video,omitempty"`
	// IFrames is the video's I-frame playlist; nil when it has none (MPEG-TS).
	IFrames *IFrameVariant `json:"iframes,omitempty"`
	// Audio is a separate audio rendition.
	Audio *Rendition `json:"audio,omitempty"`
	// Peak and Average are the part's own measured rates (PeakRate, AverageRate), exact, so
	// that a variant's sum with its audio is rounded once, as when it was measured whole.
	Peak    *big.Rat `json:"peak"`
	Average *big.Rat `json:"average"`
	// Version is the EXT-X-VERSION of the part's media playlist.
	Version int `json:"version"`
}

// Assemble returns the master playlist of parts: every video variant whose audio group is
// among the parts (or that needs none), highest first, with the audio's rates added to its
// own, and their I-frame playlists; the audio renditions those variants play with. A variant
// whose audio is not there yet is left out, so a master assembled while an encode goes on
// plays from the first variant that can play. Variants reports how many it lists.
func Assemble(parts []Part) (m Master, variants int) {
	audio := map[string]Part{}
	for _, p := range parts {
		if p.Audio != nil {
			audio[p.Audio.GroupID] = p
		}
	}
	var videos []Part
	for _, p := range parts {
		if p.Video == nil {
			continue
		}
		if _, ok := audio[p.Video.Audio]; p.Video.Audio == "" || ok {
			videos = append(videos, p)
		}
	}
	// Highest first, as the encoder always wrote them; ties (never, from one encode) by URI.
	slices.SortStableFunc(videos, func(a, b Part) int {
		return cmp.Or(b.Video.Height-a.Video.Height, strings.Compare(a.Video.URI, b.Video.URI))
	})
	m = Master{Version: 1, Independent: true}
	used := map[string]bool{}
	for _, p := range videos {
		v := *p.Video
		v.Bandwidth, v.AverageBandwidth = BitsPerSecond(p.Peak), BitsPerSecond(p.Average)
		if a, ok := audio[v.Audio]; ok {
			v.Bandwidth, v.AverageBandwidth = BitsPerSecond(p.Peak, a.Peak), BitsPerSecond(p.Average, a.Average)
			if !used[v.Audio] {
				used[v.Audio] = true
				m.Media = append(m.Media, *a.Audio)
				m.Version = max(m.Version, a.Version)
			}
		}
		m.Variants = append(m.Variants, v)
		if p.IFrames != nil {
			m.IFrames = append(m.IFrames, *p.IFrames)
		}
		m.Version = max(m.Version, p.Version)
	}
	return m, len(m.Variants)
}

// Within returns p with every URI under dir ("{claim}/v2/index.m3u8" for dir "{claim}").
func (p Part) Within(dir string) Part {
	if p.Video != nil {
		v := *p.Video
		v.URI = dir + "/" + v.URI
		p.Video = &v
	}
	if p.IFrames != nil {
		f := *p.IFrames
		f.URI = dir + "/" + f.URI
		p.IFrames = &f
	}
	if p.Audio != nil {
		a := *p.Audio
		a.URI = dir + "/" + a.URI
		p.Audio = &a
	}
	return p
}
