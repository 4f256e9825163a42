package changeset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// MarkdownOptions tunes RenderMarkdown. The zero value is ready to use.
type MarkdownOptions struct {
	// MaxBytes bounds the whole document. Default DefaultMarkdownMaxBytes,
	// under GitHub's limit of 65,536 characters per comment with room for a
	// marker line. The title, diagnostics (at most 20), summary table and
	// truncation note are always written, so a limit below a few kilobytes
	// may be exceeded.
	MaxBytes int
	// MaxNames is how many instance names a group lists before "and N
	// more". Default 10.
	MaxNames int
	// Branch is the branch the change set was planned for. When set, the
	// document points to the full change set,
	// changesets/<Branch>/<stack set>.json on StatusBranch.
	Branch string
	// StatusBranch is the branch stackd writes status to. Default
	// "stackd/status".
	StatusBranch string
}

// DefaultMarkdownMaxBytes is the default MarkdownOptions.MaxBytes.
const DefaultMarkdownMaxBytes = 60000

const (
	mdMaxDiagnostics = 20  // diagnostics listed; the rest are counted
	mdMaxRows        = 50  // resources listed in a group's summary
	mdMaxInline      = 200 // bytes of an inline value
	mdMaxBlockLines  = 60  // lines of a fenced value or diff
	mdPrettyJSON     = 80  // non-string values longer than this as compact JSON are indented and diffed
)

func (o *MarkdownOptions) fill() {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMarkdownMaxBytes
	}
	if o.MaxNames <= 0 {
		o.MaxNames = 10
	}
	if o.StatusBranch == "" {
		o.StatusBranch = "stackd/status"
	}
}

// RenderMarkdown writes a change set as Markdown for a pull-request comment:
// a title, the diagnostics (as a failing check) if there are any, a summary
// table, then the instances grouped by identical changes (see
// InstanceSignature), each group with its instances, a one-line-per-resource
// list and, folded in <details>, the properties' values of one
// representative instance. Multi-line values are shown as line diffs.
//
// The output never exceeds opts.MaxBytes: when it would, the details of
// groups are left out from the last group backwards, then whole groups, and a
// note points to the full JSON change set. Values are escaped (they only
// appear in code spans and fenced blocks); a sensitive value only ever
// appears as "<sensitive>", the placeholder the change set holds.
func RenderMarkdown(w io.Writer, cs *StackSetChangeSet, opts MarkdownOptions) error {
	opts.fill()
	groups := groupInstances(cs)
	sections := make([]mdSection, len(groups))
	for i, g := range groups {
		sections[i] = mdGroup(cs, g, opts)
	}
	head := mdHead(cs, opts)
	foot := ""
	if opts.Branch != "" {
		foot = "<sub>Full change set: " + mdCode(fullChangeSetPath(cs, opts)) + " on branch " + mdCode(opts.StatusBranch) + ".</sub>\n"
	}
	var b strings.Builder
	b.WriteString(head)
	note, sections := fitSections(cs, len(head)+len(foot), sections, opts)
	b.WriteString(note)
	for _, s := range sections {
		b.WriteString(s.head)
		b.WriteString(s.details)
	}
	b.WriteString(foot)
	_, err := io.WriteString(w, b.String())
	return err
}

func fullChangeSetPath(cs *StackSetChangeSet, opts MarkdownOptions) string {
	return "changesets/" + opts.Branch + "/" + cs.StackSetName + ".json"
}

// mdSection is the Markdown of one group of instances: its head (always
// shown unless the group is left out entirely) and its details.
type mdSection struct {
	head, details string
	instances     int
}

const mdDetailsOmitted = "<sub>Details left out to keep this comment under the size limit.</sub>\n\n"

// fitSections leaves out details, then whole sections from the end, until
// the document fits opts.MaxBytes, and returns the note that says so ("" when
// everything fits) with the sections to write.
func fitSections(cs *StackSetChangeSet, fixed int, secs []mdSection, opts MarkdownOptions) (string, []mdSection) {
	size := fixed
	for _, s := range secs {
		size += len(s.head) + len(s.details)
	}
	if size <= opts.MaxBytes {
		return "", secs
	}
	total := len(cs.Instances)
	// The note's length with the largest numbers it can hold bounds it.
	size += len(truncationNote(cs, opts, len(secs), len(secs), total))
	omittedDetails := 0
	for i := len(secs) - 1; i >= 0 && size > opts.MaxBytes; i-- {
		if secs[i].details == "" {
			continue
		}
		size += len(mdDetailsOmitted) - len(secs[i].details)
		secs[i].details = mdDetailsOmitted
		omittedDetails++
	}
	leftOut, leftOutInstances := 0, 0
	if size > opts.MaxBytes {
		size += len(leftOutLine(len(secs), total))
		for len(secs) > 0 && size > opts.MaxBytes {
			last := secs[len(secs)-1]
			size -= len(last.head) + len(last.details)
			if last.details == mdDetailsOmitted {
				omittedDetails--
			}
			leftOut++
			leftOutInstances += last.instances
			secs = secs[:len(secs)-1]
		}
		if leftOut > 0 {
			secs = append(secs, mdSection{head: leftOutLine(leftOut, leftOutInstances)})
		}
	}
	return truncationNote(cs, opts, omittedDetails, leftOut, leftOutInstances), secs
}

func truncationNote(cs *StackSetChangeSet, opts MarkdownOptions, omittedDetails, leftOut, leftOutInstances int) string {
	var parts []string
	if omittedDetails > 0 {
		parts = append(parts, fmt.Sprintf("the details of %s were left out", mdPlural(omittedDetails, "group")))
	}
	if leftOut > 0 {
		parts = append(parts, fmt.Sprintf("%s (%s in all) %s not listed", mdPlural(leftOut, "group"), mdPlural(leftOutInstances, "instance"), mdIsAre(leftOut)))
	}
	where := "in the JSON change set (`stackd plan -o json`)"
	if opts.Branch != "" {
		where = "in " + mdCode(fullChangeSetPath(cs, opts)) + " on branch " + mdCode(opts.StatusBranch)
	}
	return "> [!NOTE]\n> This comment was shortened to stay under the size limit of a comment: " +
		strings.Join(parts, " and ") + ". The full change set is " + where + ".\n\n"
}

func leftOutLine(groups, instances int) string {
	noun := "groups"
	if groups == 1 {
		noun = "group"
	}
	return fmt.Sprintf("*… and %d more %s (%s in all), left out to keep this comment under the size limit.*\n\n",
		groups, noun, mdPlural(instances, "instance"))
}

func mdIsAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// mdHead writes the title, diagnostics and summary table.
func mdHead(cs *StackSetChangeSet, opts MarkdownOptions) string {
	var b strings.Builder
	b.WriteString("### stackd plan for stack set " + mdCode(cs.StackSetName) + "\n\n")
	id := "new stack set"
	if cs.StackSetId != "" {
		id = "ID " + mdCode(cs.StackSetId)
	}
	b.WriteString(id + " · revision " + mdCode(shortRev(cs.Revision)))
	if opts.Branch != "" {
		b.WriteString(" · branch " + mdCode(opts.Branch))
	}
	b.WriteString("\n\n")
	mdDiagnostics(&b, cs.Diagnostics)
	s := cs.Summary
	if !cs.HasChanges() && len(cs.Diagnostics) == 0 {
		switch n := len(cs.Instances); n {
		case 0:
			b.WriteString("**No changes.** The stack set has no instances.\n\n")
		case 1:
			b.WriteString("**No changes.** Its instance is up to date.\n\n")
		default:
			fmt.Fprintf(&b, "**No changes.** All %d instances are up to date.\n\n", n)
		}
	}
	b.WriteString("| Instances | | Resources | |\n|:--|--:|:--|--:|\n")
	fmt.Fprintf(&b, "| to create | %d | `+` to add | %d |\n", s.InstancesToCreate, s.ResourcesToAdd)
	fmt.Fprintf(&b, "| to update | %d | `~` to change | %d |\n", s.InstancesToUpdate, s.ResourcesToModify)
	fmt.Fprintf(&b, "| to delete | %d | `-/+` to replace | %d |\n", s.InstancesToDelete, s.ResourcesToReplace)
	fmt.Fprintf(&b, "| unchanged | %d | `-` to destroy | %d |\n", s.InstancesUnchanged, s.ResourcesToRemove)
	if s.ResourcesToRetain > 0 {
		fmt.Fprintf(&b, "| | | `.` to retain (removed, not destroyed) | %d |\n", s.ResourcesToRetain)
	}
	b.WriteString("\n")
	if cs.Rollout != nil {
		fmt.Fprintf(&b, "**Rollout:** %s.\n\n", cs.Rollout)
	}
	return b.String()
}

// mdDiagnostics writes diagnostics as a GitHub alert: CAUTION (a failed
// check) when there is an error, WARNING otherwise.
func mdDiagnostics(b *strings.Builder, diags []Diagnostic) {
	if len(diags) == 0 {
		return
	}
	errs := 0
	for _, d := range diags {
		if d.Severity != SeverityWarning {
			errs++
		}
	}
	counts := mdPlural(errs, "error")
	if w := len(diags) - errs; w > 0 {
		counts += ", " + mdPlural(w, "warning")
	}
	if errs > 0 {
		b.WriteString("> [!CAUTION]\n> **Check failed: the definitions do not validate** (" + counts +
			"). Nothing can be deployed from this revision until they are fixed.\n>\n")
	} else {
		b.WriteString("> [!WARNING]\n> **The definitions validate with " + counts + ".**\n>\n")
	}
	for i, d := range diags {
		if i == mdMaxDiagnostics {
			fmt.Fprintf(b, "> - … and %d more\n", len(diags)-i)
			break
		}
		sev := SeverityError
		if d.Severity == SeverityWarning {
			sev = SeverityWarning
		}
		b.WriteString("> - **" + string(sev) + "**")
		if d.File != "" {
			b.WriteString(" " + mdCode(fmt.Sprintf("%s:%d,%d", d.File, d.Line, d.Column)))
		}
		b.WriteString(" **" + mdText(d.Summary) + "**")
		if d.Detail != "" {
			b.WriteString(" — " + mdText(d.Detail))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// WriteDiagnosticsMarkdown writes the Markdown a pull request gets when its
// head does not validate: the revision and every diagnostic, each in a
// code span.
func WriteDiagnosticsMarkdown(w io.Writer, revision string, diags []Diagnostic) {
	fmt.Fprintf(w, "### stackd: %s does not validate\n\nNothing in this branch can be deployed until these are fixed:\n\n", shortRev(revision))
	for _, d := range diags {
		// Printable: a file name from the branch may hold a newline,
		// which would end the code span and start Markdown of its own.
		s := Printable(d.String())
		fence := strings.Repeat("`", longestRun(s, '`')+1)
		fmt.Fprintf(w, "- %s %s %s\n", fence, s, fence)
	}
}

// instanceGroup is a set of instances whose changes are equal, values
// included (physical ids aside).
type instanceGroup struct {
	action  InstanceAction
	members []int // indexes into StackSetChangeSet.Instances, in order
}

// valuesKey identifies an instance's changes with their values, physical
// ids aside, in any order.
func valuesKey(ic InstanceChangeSet) string {
	keys := make([]string, len(ic.Changes))
	for i, c := range ic.Changes {
		c.ResourceChange.PhysicalResourceId = ""
		b, err := json.Marshal(c)
		if err != nil {
			b = []byte(fmt.Sprintf("%p", &ic.Changes[i])) // unique: never equal
		}
		keys[i] = string(b)
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}

func actionRank(a InstanceAction) int {
	switch a {
	case InstanceCreate:
		return 0
	case InstanceUpdate:
		return 1
	case InstanceDelete:
		return 2
	default:
		return 3
	}
}

// groupInstances groups instances whose changes are equal including their
// values, causes and targets (valuesKey: only physical ids, which name each
// instance's own objects, are set aside), so a group never hides a
// difference. Groups are ordered by action (create, update, delete,
// unchanged), then largest first, then first appearance.
func groupInstances(cs *StackSetChangeSet) []*instanceGroup {
	byKey := map[string]*instanceGroup{}
	var groups []*instanceGroup
	for i, ic := range cs.Instances {
		action := ic.Action
		if action != InstanceCreate && action != InstanceUpdate && action != InstanceDelete {
			action = InstanceNoChange
		}
		k := string(action)
		if action != InstanceNoChange {
			k += "\x1e" + valuesKey(ic)
		}
		g := byKey[k]
		if g == nil {
			g = &instanceGroup{action: action}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.members = append(g.members, i)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if ra, rb := actionRank(a.action), actionRank(b.action); ra != rb {
			return ra < rb
		}
		if len(a.members) != len(b.members) {
			return len(a.members) > len(b.members)
		}
		return a.members[0] < b.members[0]
	})
	return groups
}

func instanceName(ic InstanceChangeSet) string { return ic.Region + "/" + ic.Account }

// groupRegions says which instances a group holds, region by region in
// order of appearance: "eu-west-1: all 250; us-east-1: 12 of 250".
func groupRegions(cs *StackSetChangeSet, g *instanceGroup) string {
	total, in := map[string]int{}, map[string]int{}
	var order []string
	for _, ic := range cs.Instances {
		total[ic.Region]++
	}
	for _, m := range g.members {
		r := cs.Instances[m].Region
		if in[r] == 0 {
			order = append(order, r)
		}
		in[r]++
	}
	parts := make([]string, len(order))
	for i, r := range order {
		if in[r] == total[r] {
			parts[i] = fmt.Sprintf("%s: all %d", r, total[r])
		} else {
			parts[i] = fmt.Sprintf("%s: %d of %d", r, in[r], total[r])
		}
	}
	return strings.Join(parts, "; ")
}

// mdGroup renders one group of instances.
func mdGroup(cs *StackSetChangeSet, g *instanceGroup, opts MarkdownOptions) mdSection {
	var b strings.Builder
	n, total := len(g.members), len(cs.Instances)
	names := make([]string, 0, min(n, opts.MaxNames))
	for _, m := range g.members[:min(n, opts.MaxNames)] {
		names = append(names, mdCode(instanceName(cs.Instances[m])))
	}
	list := strings.Join(names, ", ")
	if n > opts.MaxNames {
		list += fmt.Sprintf(" and %d more", n-opts.MaxNames)
		list += " (" + mdText(groupRegions(cs, g)) + ")"
	}
	of := fmt.Sprintf("%d of %s", n, mdPlural(total, "instance")) // "950 of 1000 instances"
	if g.action == InstanceNoChange {
		b.WriteString("**" + of + " unchanged:** " + list + "\n\n")
		return mdSection{head: b.String(), instances: n}
	}
	sym, verb := "~", "will be updated"
	switch g.action {
	case InstanceCreate:
		sym, verb = "+", "will be created"
	case InstanceDelete:
		sym, verb = "-", "will be deleted"
	}
	b.WriteString("#### `" + sym + "` " + of + " " + verb + "\n\n" + list + "\n\n")
	rep := cs.Instances[g.members[0]]
	if len(rep.Changes) == 0 {
		b.WriteString("No resource changes.\n\n")
		return mdSection{head: b.String(), instances: n}
	}
	for i, c := range rep.Changes {
		if i == mdMaxRows {
			fmt.Fprintf(&b, "- … and %d more resources (see the details)\n", len(rep.Changes)-i)
			break
		}
		b.WriteString("- " + mdResourceLine(c.ResourceChange) + "\n")
	}
	b.WriteString("\n")
	return mdSection{head: b.String(), details: mdDetails(rep, g, opts), instances: n}
}

// mdResourceLine is "`~` `file.config` (content, mode) — must be replaced".
func mdResourceLine(rc ResourceChange) string {
	sym, _ := symbol(rc)
	s := "`" + sym + "` " + mdCode(rc.FullAddress())
	if rc.Retained() {
		return s + " — **retained**: removed from the stack, not destroyed (`deletion_policy = \"Retain\"`)"
	}
	s += strings.ReplaceAll(driftNote(rc), " # ", " — ")
	if rc.MovedFrom != "" {
		s += " — moved from " + mdCode(rc.MovedFrom)
	}
	if rc.Action != Modify {
		return s
	}
	if what := mdChangedNames(rc); len(what) > 0 {
		for i, w := range what {
			what[i] = mdText(w)
		}
		s += " (" + strings.Join(what, ", ") + ")"
	}
	switch rc.Replacement {
	case ReplacementTrue:
		s += " — **must be replaced**"
	case ReplacementConditional:
		s += " — may be replaced"
	}
	if rc.RepeatsInterruptedUpdate {
		s += " —" + repeatNote(rc)
		if resent := resentNames(rc); len(resent) > 0 {
			for i, n := range resent {
				resent[i] = mdText(n)
			}
			s += " (sends " + strings.Join(resent, ", ") + " again unchanged)"
		}
	}
	return s
}

// changedNames lists what a Modify changes: its changed properties, the
// properties its details name, then its other scopes (Metadata,
// DeletionPolicy).
func mdChangedNames(rc ResourceChange) []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, pc := range rc.PropertyChanges {
		add(pc.Name)
	}
	for _, d := range rc.Details {
		if d.Target.Attribute == "Properties" && !resent(rc, d) {
			add(d.Target.Name)
		}
	}
	for _, d := range rc.Details {
		if d.Target.Attribute != "Properties" {
			add(d.Target.Attribute)
		}
	}
	for _, sc := range rc.Scope {
		if sc != "Properties" {
			add(sc)
		}
	}
	return out
}

// mdDetails renders the representative instance's changes in full, folded.
// They are cut at a resource boundary at half of opts.MaxBytes, so one
// group cannot crowd out all the others.
func mdDetails(rep InstanceChangeSet, g *instanceGroup, opts MarkdownOptions) string {
	n := len(g.members)
	who := "<code>" + html.EscapeString(instanceName(rep)) + "</code>"
	summary := "Details"
	if n > 1 {
		summary = fmt.Sprintf("Details: the same for all %d instances apart from physical IDs (shown for %s)", n, who)
	}
	var b strings.Builder
	b.WriteString("<details><summary>" + summary + "</summary>\n\n")
	const closing = "</details>\n\n"
	limit := opts.MaxBytes / 2
	for i, c := range rep.Changes {
		part := mdChangeDetails(c.ResourceChange)
		if b.Len()+len(part)+len(closing)+200 > limit {
			fmt.Fprintf(&b, "*… %s more, left out for size: see the full change set.*\n\n", mdPlural(len(rep.Changes)-i, "resource"))
			break
		}
		b.WriteString(part)
	}
	b.WriteString(closing)
	return b.String()
}

func mdChangeDetails(rc ResourceChange) string {
	var b strings.Builder
	sym, _ := symbol(rc)
	b.WriteString("**`" + sym + "` " + mdCode(rc.FullAddress()) + "** · type " + mdCode(rc.ResourceType))
	if rc.PhysicalResourceId != "" {
		b.WriteString(" · physical ID " + mdCode(rc.PhysicalResourceId))
	}
	if rc.Replacement != "" {
		b.WriteString(" · Replacement " + mdText(rc.Replacement))
	}
	if len(rc.Scope) > 0 {
		sc := make([]string, len(rc.Scope))
		for i, s := range rc.Scope {
			sc[i] = mdText(s)
		}
		b.WriteString(" · Scope " + strings.Join(sc, ", "))
	}
	if m := rc.ModuleInfo; m != nil {
		b.WriteString(" · module " + mdCode(m.LogicalIdHierarchy) + " (" + mdCode(m.TypeHierarchy) + ")")
	}
	if rc.Retained() {
		b.WriteString(" · **retained**, not destroyed (DeletionPolicy Retain)")
	}
	if rc.RepeatsInterruptedUpdate {
		b.WriteString(" · **updated again**: its last update was interrupted")
	}
	b.WriteString("\n\n")
	if len(rc.Details) > 0 {
		b.WriteString("| Target | ChangeSource | CausingEntity | Evaluation | RequiresRecreation |\n|:--|:--|:--|:--|:--|\n")
		for _, d := range rc.Details {
			target := mdText(d.Target.Attribute)
			if d.Target.Name != "" {
				target += " " + mdCodeCell(d.Target.Name)
			}
			entity := "null"
			if d.CausingEntity != nil {
				entity = mdCodeCell(*d.CausingEntity)
			}
			rr := mdText(d.Target.RequiresRecreation)
			if d.Target.RequiresRecreation == "Always" && rc.Replacement == ReplacementTrue {
				rr += " (forces replacement)"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", target, mdText(d.ChangeSource), entity, mdText(d.Evaluation), rr)
		}
		b.WriteString("\n")
	}
	for _, pc := range rc.PropertyChanges {
		b.WriteString(mdProperty(pc, rc.Action == Add))
	}
	if len(rc.PropertyChanges) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// mdProperty renders one property's values as a list item: inline values in
// code spans, multi-line strings and long lists or objects in fenced blocks,
// diffed line by line when both sides can be.
func mdProperty(pc ResourcePropertyChange, add bool) string {
	name := "- " + mdCode(pc.Name)
	if add {
		if t, ok := mdBlockText(pc.AfterValue, false); ok && strings.Contains(t, "\n") {
			return name + " =\n" + mdFence("", plainOps(t), "  ")
		}
		return name + " = " + mdInline(pc.AfterValue) + "\n"
	}
	// A long list or object is indented, and so is the other side then, so
	// that the two diff line by line.
	_, long1 := mdBlockText(pc.BeforeValue, false)
	_, long2 := mdBlockText(pc.AfterValue, false)
	bt, bok := mdBlockText(pc.BeforeValue, long1 || long2)
	at, aok := mdBlockText(pc.AfterValue, long1 || long2)
	bmulti, amulti := bok && strings.Contains(bt, "\n"), aok && strings.Contains(at, "\n")
	switch {
	case bok && aok && (bmulti || amulti):
		return name + ":\n" + mdFence("diff", textDiff(bt, at, mdMaxBlockLines), "  ")
	case amulti:
		return name + ": " + mdInline(pc.BeforeValue) + " → new value:\n" + mdFence("", plainOps(at), "  ")
	case bmulti:
		return name + ": old value → " + mdInline(pc.AfterValue) + ":\n" + mdFence("", plainOps(bt), "  ")
	}
	return name + ": " + mdInline(pc.BeforeValue) + " → " + mdInline(pc.AfterValue) + "\n"
}

// mdBlockText is a value's text for a fenced block: a real string as it is,
// a list or object as indented JSON if its compact JSON is long or indent is
// set.
func mdBlockText(v any, indent bool) (string, bool) {
	if s, ok := diffableString(v); ok {
		return s, true
	}
	switch v.(type) {
	case []any, map[string]any:
	default:
		return "", false
	}
	if c := compactValueJSON(v); !indent && len(c) <= mdPrettyJSON {
		return "", false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", false
	}
	return buf.String(), true
}

func compactValueJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// mdInline is a value in a code span: placeholders as they are, strings
// JSON-quoted (so "" and "3" are told from null and 3, and control
// characters are escaped), other values as compact JSON, cut at mdMaxInline
// bytes.
func mdInline(v any) string {
	if s, ok := v.(string); ok && (s == SensitivePlaceholder || s == KnownAfterApplyPlaceholder) {
		return mdCode(s)
	}
	return mdCode(mdCut(compactValueJSON(v), mdMaxInline))
}

// plainOps shows every line of s (bounded), for a value without a diff.
func plainOps(s string) []diffOp {
	lines := splitValueLines(s)
	ops := make([]diffOp, 0, min(len(lines), mdMaxBlockLines)+1)
	for i, l := range lines {
		if i == mdMaxBlockLines {
			ops = append(ops, diffOp{'#', fmt.Sprintf("%d more lines not shown", len(lines)-i)})
			break
		}
		ops = append(ops, diffOp{' ', printableLine(l)})
	}
	return ops
}

// mdFence renders diff operations in a fenced block indented by indent
// (inside a list item). A "diff" block prefixes lines with "- ", "+ ", "  "
// and notes with "@@"; a plain block shows lines as they are and notes as
// "# (…)". The fence is longer than any run of backticks in the text.
func mdFence(lang string, ops []diffOp, indent string) string {
	lines := make([]string, len(ops))
	longest := 0
	for i, op := range ops {
		var l string
		switch {
		case op.Kind == '#' && lang == "diff":
			l = "@@ " + op.Text + " @@"
		case op.Kind == '#':
			l = "# (" + op.Text + ")"
		case lang == "diff":
			l = string(op.Kind) + " " + op.Text
		default:
			l = op.Text
		}
		lines[i] = l
		longest = max(longest, longestRun(l, '`'))
	}
	fence := strings.Repeat("`", max(3, longest+1))
	var b strings.Builder
	b.WriteString(indent + fence + lang + "\n")
	for _, l := range lines {
		b.WriteString(indent + l + "\n")
	}
	b.WriteString(indent + fence + "\n")
	return b.String()
}

func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// mdCode puts s in a code span that shows it verbatim: the delimiter is
// longer than any run of backticks in s, line breaks become spaces, control
// characters are escaped.
func mdCode(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	s = printableLine(s)
	if s == "" {
		return "` `"
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if s[0] == '`' || s[len(s)-1] == '`' || s[0] == ' ' && s[len(s)-1] == ' ' {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// mdCodeCell is mdCode for a table cell, where a pipe must be escaped even
// inside a code span.
func mdCodeCell(s string) string { return strings.ReplaceAll(mdCode(s), "|", `\|`) }

var mdTextEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "|", `\|`,
	"#", `\#`, "~", `\~`, "!", `\!`, "<", "&lt;", ">", "&gt;", "&", "&amp;",
)

// mdText escapes s for Markdown text (also inside a table cell): it shows
// verbatim, on one line, cut at diffMaxLineLen bytes.
func mdText(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	return mdTextEscaper.Replace(printableLine(s))
}

// cut shortens s to at most n bytes at a rune boundary, marking the cut.
func mdCut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func mdPlural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
