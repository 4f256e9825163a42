package backoff

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := Policy{Min: time.Second, Max: 30 * time.Second}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 60: 30 * time.Second, 1000: 30 * time.Second} {
		if got := p.Delay(n); got != want {
			t.Errorf("Delay(%d) = %s, want %s", n, got, want)
		}
	}
	if got := (Policy{Min: time.Second}).Delay(200); got <= 0 {
		t.Errorf("uncapped Delay(200) = %s, want a positive duration (no overflow)", got)
	}
}

func TestJitterStaysInHalfToFull(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	for n := 1; n <= 6; n++ {
		full := Policy{Min: p.Min, Max: p.Max}.Delay(n)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.Delay(n)
			if d < full/2 || d > full {
				t.Fatalf("Delay(%d) = %s, want within [%s, %s]", n, d, full/2, full)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("Delay(%d) drew one value in 200 tries: no jitter", n)
		}
	}
}
