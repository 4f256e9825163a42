package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestPrintInstanceLinesGroups(t *testing.T) {
	lines := []instanceLine{
		{"eu-west-1/1", "OPERATION_FAILED", "exit status 2"},
		{"eu-west-1/2", "rolled back to the previous revision", ""},
	}
	for i := range 20 {
		lines = append(lines, instanceLine{fmt.Sprintf("us-east-1/%02d", i), "CANCEL_COMPLETE", "rollout stopped: batch 1 failed"})
	}
	lines = append(lines, instanceLine{"eu-west-1/3", "OPERATION_FAILED", "exit status 3"})
	var b strings.Builder
	printInstanceLines(&b, lines)
	want := `  eu-west-1/1 OPERATION_FAILED exit status 2
  eu-west-1/2 rolled back to the previous revision
  20 instances CANCEL_COMPLETE rollout stopped: batch 1 failed
    us-east-1/00, us-east-1/01, us-east-1/02, us-east-1/03, us-east-1/04, us-east-1/05, us-east-1/06, us-east-1/07, us-east-1/08, us-east-1/09, us-east-1/10, us-east-1/11 and 8 more
  eu-west-1/3 OPERATION_FAILED exit status 3
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
