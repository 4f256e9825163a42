package changeset

import (
	"fmt"
	"strconv"
	"strings"
)

// RolloutPlan is how an operation's instances will roll out: a reviewer
// sees the batches before the change merges.
type RolloutPlan struct {
	Pattern string `json:"Pattern"`
	// Batches are the batch sizes, in order (region then account).
	Batches []int `json:"Batches"`
	// Pause is a duration ("30s"), "until_promoted", or empty.
	Pause       string `json:"Pause,omitempty"`
	HealthCheck bool   `json:"HealthCheck"`
	OnFailure   string `json:"OnFailure"`
}

// String is the plan in a sentence: "canary in 3 batches (1, 2, 3),
// health-checked, pause 30s, on failure rollback".
func (p *RolloutPlan) String() string {
	sizes := make([]string, len(p.Batches))
	for i, n := range p.Batches {
		sizes[i] = strconv.Itoa(n)
	}
	batches := "1 batch"
	if len(p.Batches) != 1 {
		batches = fmt.Sprintf("%d batches", len(p.Batches))
	}
	s := fmt.Sprintf("%s in %s (%s)", p.Pattern, batches, strings.Join(sizes, ", "))
	if p.HealthCheck {
		s += ", each health-checked"
	}
	switch p.Pause {
	case "":
	case "until_promoted":
		s += ", held between batches until stackd promote"
	default:
		s += ", pause " + p.Pause
	}
	return s + ", on failure " + p.OnFailure
}
