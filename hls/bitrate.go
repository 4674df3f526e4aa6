package hls

import (
	"math/big"
	"time"
)

// Rates are exact: a rate is bits over microseconds as a rational number, so that the rates of a
// variant's renditions (video and its audio group) add up exactly and are rounded once, up, into
// the integer a playlist carries. BANDWIDTH is then never below the peak it must cover, by even
// one bit per second (RFC 8216 4.3.4.2: "MUST be" at least the peak).

// PeakRate is the peak segment bit rate of segs as RFC 8216 4.3.4.2 defines it: the largest
// bit rate of any contiguous set of segments whose total duration is between 0.5 and 1.5 times
// the target duration, a set's bit rate being its bytes over its duration. When no set qualifies
// (segments far from the target duration), the largest single segment's rate stands in, which
// is never lower than any set's.
func PeakRate(segs []Segment, target time.Duration) *big.Rat {
	peak, found := new(big.Rat), false
	lo, hi := target/2, target+target/2
	for i := range segs {
		var bytes int64
		var d time.Duration
		for j := i; j < len(segs) && d+segs[j].Duration <= hi; j++ {
			bytes, d = bytes+segs[j].Size, d+segs[j].Duration
			if d >= lo {
				if r := rate(bytes, d); !found || r.Cmp(peak) > 0 {
					peak, found = r, true
				}
			}
		}
	}
	if found {
		return peak
	}
	for _, s := range segs {
		if r := rate(s.Size, s.Duration); r.Cmp(peak) > 0 {
			peak = r
		}
	}
	return peak
}

// AverageRate is the average segment bit rate of segs: their bytes over their duration.
func AverageRate(segs []Segment) *big.Rat {
	var bytes int64
	var d time.Duration
	for _, s := range segs {
		bytes, d = bytes+s.Size, d+s.Duration
	}
	return rate(bytes, d)
}

// rate is bytes over d in bits per second; 0 for no duration.
func rate(bytes int64, d time.Duration) *big.Rat {
	us := d.Microseconds()
	if us <= 0 {
		return new(big.Rat)
	}
	return new(big.Rat).SetFrac(big.NewInt(bytes*8*1e6), big.NewInt(us))
}

// BitsPerSecond adds rates and rounds the sum up to an integer, as BANDWIDTH and
// AVERAGE-BANDWIDTH are written.
func BitsPerSecond(rates ...*big.Rat) int64 {
	sum := new(big.Rat)
	for _, r := range rates {
		sum.Add(sum, r)
	}
	q, m := new(big.Int).QuoRem(sum.Num(), sum.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}
