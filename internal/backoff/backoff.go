package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is a capped exponential backoff. The wait before retry n (1-based:
// the first retry follows the first failure) is Min·2^(n-1), at most Max;
// with Jitter it is drawn uniformly from [d/2, d] instead ("equal
// jitter"), so that clients failing together do not retry together.
type Policy struct {
	Min, Max time.Duration
	Jitter   bool
}

// Delay is the wait before retry n. A zero Max means no cap.
func (p Policy) Delay(n int) time.Duration {
	d := max(p.Min, 0)
	for i := 1; i < n && d > 0 && (p.Max <= 0 || d < p.Max); i++ {
		if d > time.Duration(1<<62)/2 {
			break // doubling again would overflow
		}
		d *= 2
	}
	if p.Max > 0 {
		d = min(d, p.Max)
	}
	if p.Jitter && d > 1 {
		d = d/2 + rand.N(d/2+1)
	}
	return d
}
