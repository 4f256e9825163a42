package changeset

import "testing"

// TestReplacementOf: the seed's rule, the strongest target winning
// (Always > Conditional > Never).
func TestReplacementOf(t *testing.T) {
	d := func(eval, recreation string) ResourceChangeDetail {
		return changeDetail(SourceDirectModification, nil, eval, "Properties", "p", recreation)
	}
	for _, tc := range []struct {
		name    string
		details []ResourceChangeDetail
		want    string
	}{
		{"none", nil, ReplacementFalse},
		{"never", []ResourceChangeDetail{d("Static", "Never"), d("Dynamic", "Never")}, ReplacementFalse},
		{"always static", []ResourceChangeDetail{d("Static", "Always")}, ReplacementTrue},
		{"always dynamic", []ResourceChangeDetail{d("Dynamic", "Always")}, ReplacementConditional},
		{"conditionally", []ResourceChangeDetail{d("Static", "Conditionally")}, ReplacementConditional},
		{"conditionally dynamic", []ResourceChangeDetail{d("Dynamic", "Conditionally")}, ReplacementConditional},
		{"always static wins after", []ResourceChangeDetail{d("Dynamic", "Always"), d("Static", "Conditionally"), d("Static", "Always")}, ReplacementTrue},
		{"conditional beats never", []ResourceChangeDetail{d("Static", "Never"), d("Dynamic", "Always"), d("Static", "Never")}, ReplacementConditional},
		{"metadata", []ResourceChangeDetail{changeDetail(SourceDirectModification, nil, "Static", "Metadata", "", "Never")}, ReplacementFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplacementOf(tc.details); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFixturesFollowTheSeed: the golden fixtures are change sets the
// engine could make: every Modify's Replacement follows from its details.
func TestFixturesFollowTheSeed(t *testing.T) {
	for _, cs := range []*StackSetChangeSet{fixtureChangeSet(), fixtureRepeated(), manyInstances(20, 5)} {
		for _, ic := range cs.Instances {
			for _, c := range ic.Changes {
				rc := c.ResourceChange
				if rc.Action != Modify || len(rc.Details) == 0 {
					continue
				}
				if want := ReplacementOf(rc.Details); rc.Replacement != want {
					t.Errorf("%s %s/%s %s: Replacement %s, its details say %s", cs.StackSetName, ic.Region, ic.Account, rc.FullAddress(), rc.Replacement, want)
				}
			}
		}
	}
}
