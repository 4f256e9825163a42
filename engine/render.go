package engine

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// StackSetChangeSet is the change set of one stack set: instance-level
// actions plus each instance's resource changes.
type StackSetChangeSet struct {
	StackSetName string              `json:"StackSetName"`
	StackSetId   string              `json:"StackSetId,omitempty"`
	Revision     string              `json:"Revision"`
	Action       string              `json:"Action"` // Create | Update | Delete | NoChange
	Summary      ChangeSummary       `json:"Summary"`
	Instances    []InstanceChangeSet `json:"Instances"`
	Diagnostics  []Diagnostic        `json:"Diagnostics,omitempty"`
}

// ChangeSummary counts instance and resource actions.
type ChangeSummary struct {
	InstancesToCreate  int `json:"InstancesToCreate"`
	InstancesToUpdate  int `json:"InstancesToUpdate"`
	InstancesToDelete  int `json:"InstancesToDelete"`
	InstancesUnchanged int `json:"InstancesUnchanged"`
	ResourcesToAdd     int `json:"ResourcesToAdd"`
	ResourcesToModify  int `json:"ResourcesToModify"`
	ResourcesToReplace int `json:"ResourcesToReplace"`
	ResourcesToRemove  int `json:"ResourcesToRemove"`
}

// Instance-level actions.
const (
	InstanceCreate   = "Create"
	InstanceUpdate   = "Update"
	InstanceDelete   = "Delete"
	InstanceNoChange = "NoChange"
)

// InstanceChangeSet is one instance's part of a stack-set change set.
type InstanceChangeSet struct {
	Region  string   `json:"Region"`
	Account string   `json:"Account"`
	Action  string   `json:"Action"`
	Changes []Change `json:"Changes"`
}

// Add appends an instance and updates the summary.
func (cs *StackSetChangeSet) Add(ic InstanceChangeSet) {
	if ic.Changes == nil {
		ic.Changes = []Change{}
	}
	switch ic.Action {
	case InstanceCreate:
		cs.Summary.InstancesToCreate++
	case InstanceUpdate:
		cs.Summary.InstancesToUpdate++
	case InstanceDelete:
		cs.Summary.InstancesToDelete++
	default:
		cs.Summary.InstancesUnchanged++
	}
	for _, c := range ic.Changes {
		switch {
		case c.ResourceChange.Action == "Add":
			cs.Summary.ResourcesToAdd++
		case c.ResourceChange.Action == "Remove":
			cs.Summary.ResourcesToRemove++
		case c.ResourceChange.Replacement == ReplacementTrue:
			cs.Summary.ResourcesToReplace++
		default:
			cs.Summary.ResourcesToModify++
		}
	}
	cs.Instances = append(cs.Instances, ic)
}

// HasChanges reports whether any instance changes.
func (cs *StackSetChangeSet) HasChanges() bool {
	s := cs.Summary
	return s.InstancesToCreate+s.InstancesToUpdate+s.InstancesToDelete > 0
}

const (
	ansiReset   = "\x1b[0m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiRed     = "\x1b[31m"
	ansiMagenta = "\x1b[35m"
	ansiBold    = "\x1b[1m"
)

// symbol returns the terraform-plan symbol and colour of a resource change.
func symbol(rc ResourceChange) (string, string) {
	switch {
	case rc.Action == "Add":
		return "+", ansiGreen
	case rc.Action == "Remove":
		return "-", ansiRed
	case rc.Replacement == ReplacementTrue:
		return "-/+", ansiMagenta
	default:
		return "~", ansiYellow
	}
}

// RenderText writes a change set like `terraform plan`; colour only when
// color is true (the caller decides: a terminal, not a pipe).
func RenderText(w io.Writer, cs *StackSetChangeSet, color bool) error {
	paint := func(c, s string) string {
		if !color {
			return s
		}
		return c + s + ansiReset
	}
	var b strings.Builder
	id := cs.StackSetId
	if id == "" {
		id = "new"
	}
	fmt.Fprintf(&b, "%s (%s) at %s\n", paint(ansiBold, "Stack set "+cs.StackSetName), id, shortRev(cs.Revision))
	if len(cs.Diagnostics) > 0 {
		for _, d := range cs.Diagnostics {
			fmt.Fprintf(&b, "  %s %s\n", paint(ansiRed, "error:"), d.String())
		}
	}
	for _, ic := range cs.Instances {
		if ic.Action == InstanceNoChange {
			continue
		}
		sym, col := "~", ansiYellow
		switch ic.Action {
		case InstanceCreate:
			sym, col = "+", ansiGreen
		case InstanceDelete:
			sym, col = "-", ansiRed
		}
		fmt.Fprintf(&b, "\n  %s instance %s/%s will be %s\n", paint(col, sym), ic.Region, ic.Account, instanceVerb(ic.Action))
		for _, c := range ic.Changes {
			rc := c.ResourceChange
			sym, col := symbol(rc)
			note := ""
			if rc.Replacement == ReplacementTrue {
				note = " (must be replaced)"
			} else if rc.Replacement == ReplacementConditional {
				note = " (may be replaced)"
			}
			fmt.Fprintf(&b, "      %s %s%s\n", paint(col, sym), rc.LogicalResourceId, note)
			width := 0
			for _, pc := range rc.PropertyChanges {
				width = max(width, len(pc.Name))
			}
			for _, pc := range rc.PropertyChanges {
				if rc.Action == "Add" {
					fmt.Fprintf(&b, "          %-*s = %s\n", width, pc.Name, quoteValue(pc.AfterValue))
					continue
				}
				forces := ""
				for _, d := range rc.Details {
					if d.Target.Name == pc.Name && d.Target.RequiresRecreation == "Always" && rc.Replacement == ReplacementTrue {
						forces = paint(ansiRed, " # forces replacement")
					}
				}
				fmt.Fprintf(&b, "          %s %-*s = %s -> %s%s\n", paint(ansiYellow, "~"), width, pc.Name, quoteValue(pc.BeforeValue), quoteValue(pc.AfterValue), forces)
			}
		}
	}
	s := cs.Summary
	fmt.Fprintf(&b, "\nInstances: %d to create, %d to update, %d to delete, %d unchanged.\n",
		s.InstancesToCreate, s.InstancesToUpdate, s.InstancesToDelete, s.InstancesUnchanged)
	fmt.Fprintf(&b, "Resources: %d to add, %d to change, %d to replace, %d to destroy.\n",
		s.ResourcesToAdd, s.ResourcesToModify, s.ResourcesToReplace, s.ResourcesToRemove)
	_, err := io.WriteString(w, b.String())
	return err
}

func instanceVerb(a string) string {
	switch a {
	case InstanceCreate:
		return "created"
	case InstanceDelete:
		return "deleted"
	default:
		return "updated in place"
	}
}

func quoteValue(val any) string {
	if val == nil {
		return "null"
	}
	v, isString := val.(string)
	if v == SensitivePlaceholder || v == KnownAfterApplyPlaceholder {
		return "(" + strings.Trim(v, "<>") + ")"
	}
	if !isString {
		return ValueString(val)
	}
	const limit = 200
	q := strconv.Quote(v)
	if len(q) > limit {
		q = q[:limit] + "…\""
	}
	return q
}

func shortRev(r string) string {
	if len(r) > 7 {
		return r[:7]
	}
	return r
}
