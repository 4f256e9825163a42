package config

import (
	"fmt"
	"io/fs"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

var targetsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "regions", Required: true}, {Name: "accounts"}, {Name: "accounts_file"},
		{Name: "organizational_units"}, {Name: "account_filter_type"},
	},
}

func (ss *StackSet) loadTargets(fsys fs.FS, b *hcl.Block, org *Organization) hcl.Diagnostics {
	content, diags := b.Body.Content(targetsSchema)
	a := content.Attributes
	diags = append(diags, stringListAttr(a["regions"], &ss.Regions)...)
	var listed []string
	diags = append(diags, stringListAttr(a["accounts"], &listed)...)
	service := ss.PermissionModel == ServiceManaged
	if !service {
		for _, n := range []string{"organizational_units", "account_filter_type"} {
			if a[n] != nil {
				diags = diags.Append(Errorf(a[n].NameRange, n+" needs SERVICE_MANAGED",
					"Stack set %q: %s is only allowed when permission_model = \"SERVICE_MANAGED\"; SELF_MANAGED stack sets list accounts directly.", ss.Name, n))
			}
		}
	}
	switch {
	case a["accounts"] != nil && a["accounts_file"] != nil:
		diags = diags.Append(Errorf(a["accounts_file"].NameRange, "Conflicting account lists",
			"Stack set %q sets both accounts and accounts_file; set exactly one of them.", ss.Name))
	case a["accounts"] == nil && a["accounts_file"] == nil && !service:
		diags = diags.Append(Errorf(b.DefRange, "Missing accounts",
			"Stack set %q: deployment_targets needs accounts = [...] or accounts_file = \"./accounts.csv\".", ss.Name))
	case a["accounts_file"] != nil:
		var rel string
		diags = append(diags, stringAttr(a["accounts_file"], &rel)...)
		rng := a["accounts_file"].Expr.Range()
		p, d := relPath(rng.Filename, rel, rng, "accounts_file")
		if d != nil {
			return diags.Append(d)
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return diags.Append(Errorf(rng, "Cannot read accounts_file", "Stack set %q: accounts_file %s: %s.", ss.Name, p, trimFSError(err)))
		}
		accts, err := ParseAccountsCSV(src)
		if err != nil {
			return diags.Append(Errorf(rng, "Invalid accounts_file", "Stack set %q: accounts_file %s: %s.", ss.Name, p, err))
		}
		listed = accts
	}
	if diags.HasErrors() {
		return diags
	}
	diags = append(diags, checkIDs(ss.Name, "regions", ss.Regions, a["regions"].Expr.Range())...)
	rngAccounts := b.DefRange
	if a["accounts"] != nil {
		rngAccounts = a["accounts"].Expr.Range()
	} else if a["accounts_file"] != nil {
		rngAccounts = a["accounts_file"].Expr.Range()
	}
	haveAccounts := a["accounts"] != nil || a["accounts_file"] != nil
	if !service || haveAccounts {
		diags = append(diags, checkIDs(ss.Name, "accounts", listed, rngAccounts)...)
	}
	if diags.HasErrors() || !service {
		ss.Accounts = listed
		return diags
	}
	ss.AccountFilterType = "NONE"
	diags = append(diags, stringListAttr(a["organizational_units"], &ss.OrganizationalUnits)...)
	diags = append(diags, stringAttr(a["account_filter_type"], &ss.AccountFilterType)...)
	rngOUs, rngFilter := b.DefRange, b.DefRange
	if x := a["organizational_units"]; x != nil {
		rngOUs = x.Expr.Range()
	}
	if x := a["account_filter_type"]; x != nil {
		rngFilter = x.Expr.Range()
	}
	if diags.HasErrors() {
		return diags
	}
	return append(diags, ss.resolveServiceManaged(org, ss.OrganizationalUnits, ss.AccountFilterType, listed, rngOUs, rngAccounts, rngFilter, haveAccounts)...)
}

// OU returns the organizational unit of a target account ("" when the
// stack set is SELF_MANAGED).
func (ss *StackSet) OU(account string) string { return ss.AccountOU[account] }

func checkIDs(ssName, what string, ids []string, rng hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if len(ids) == 0 {
		return diags.Append(Errorf(rng, "Empty "+what, "Stack set %q: %s must list at least one entry.", ssName, what))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !targetIDRe.MatchString(id) {
			diags = diags.Append(Errorf(rng, "Invalid "+what+" entry",
				"Stack set %q: %q is not a valid entry of %s: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.", ssName, id, what))
		}
		if seen[id] {
			diags = diags.Append(Errorf(rng, "Duplicate "+what+" entry", "Stack set %q lists %q twice in %s.", ssName, id, what))
		}
		seen[id] = true
	}
	return diags
}

// ParseAccountsCSV parses an accounts_file: UTF-8, ids separated by commas
// and/or newlines, at most 100 KB. Blank entries are skipped; a UTF-8 byte
// order mark at the start is tolerated.
func ParseAccountsCSV(src []byte) ([]string, error) {
	if len(src) > MaxAccountsFileSize {
		return nil, fmt.Errorf("the file is %d bytes; at most %d bytes (100 KB) are allowed", len(src), MaxAccountsFileSize)
	}
	if !utf8.Valid(src) {
		return nil, fmt.Errorf("the file is not valid UTF-8")
	}
	s := strings.TrimPrefix(string(src), "\ufeff")
	var out []string
	seen := map[string]bool{}
	for lineNo, line := range strings.Split(s, "\n") {
		for _, f := range strings.Split(line, ",") {
			id := strings.TrimSpace(f)
			// Spreadsheets export fields quoted: "111111111111".
			if len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' {
				id = strings.TrimSpace(id[1 : len(id)-1])
			}
			if id == "" {
				continue
			}
			if len(out) == 0 && isAccountsHeader(id) {
				return nil, fmt.Errorf("line %d: %q looks like a column header; an accounts file lists account ids only, so remove the header line", lineNo+1, id)
			}
			if !targetIDRe.MatchString(id) {
				return nil, fmt.Errorf("line %d: %q is not an account id (1-64 letters, digits, '.', '_' or '-')", lineNo+1, id)
			}
			if seen[id] {
				return nil, fmt.Errorf("line %d: account %q is listed twice", lineNo+1, id)
			}
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the file lists no accounts")
	}
	return out, nil
}

// isAccountsHeader reports whether the first field of an accounts file is
// a column header ("Account ID", "account_id", "AccountId", "accounts",
// "id") rather than an account: deploying to an account named
// "account_id" is never what was meant.
func isAccountsHeader(field string) bool {
	norm := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '_', '-', '.':
			return -1
		}
		return unicode.ToLower(r)
	}, field)
	switch norm {
	case "id", "ids", "account", "accounts", "accountid", "accountids", "accountno", "accountnumber", "memberaccount", "memberaccountid", "targetaccount", "targetaccountid":
		return true
	}
	return false
}
