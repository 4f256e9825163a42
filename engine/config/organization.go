package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// Organization is the target inventory of SERVICE_MANAGED stack sets: a
// tree of organizational units holding accounts.
type Organization struct {
	ManagementAccount string
	DelegatedAdmins   []string
	OUs               map[string]*OU
	Roots             []*OU
	Accounts          map[string]*Account
	DeclRange         hcl.Range
}

// OU is one organizational unit.
type OU struct {
	ID        string
	Parent    *OU
	Children  []*OU
	Accounts  []string // direct member accounts, in declaration order
	DeclRange hcl.Range
}

// Account is one member account of the organization.
type Account struct {
	ID        string
	OU        string
	Suspended bool
	DeclRange hcl.Range
}

var organizationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "management_account", Required: true}, {Name: "delegated_admins"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "organizational_unit", LabelNames: []string{"id"}}},
}

var ouSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "accounts"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "organizational_unit", LabelNames: []string{"id"}},
		{Type: "account", LabelNames: []string{"id"}},
	},
}

var accountSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "suspended"}}}

func loadOrganization(b *hcl.Block) (*Organization, hcl.Diagnostics) {
	org := &Organization{OUs: map[string]*OU{}, Accounts: map[string]*Account{}, DeclRange: b.DefRange}
	content, diags := b.Body.Content(organizationSchema)
	diags = append(diags, stringAttr(content.Attributes["management_account"], &org.ManagementAccount)...)
	diags = append(diags, stringListAttr(content.Attributes["delegated_admins"], &org.DelegatedAdmins)...)
	if a := content.Attributes["management_account"]; a != nil && org.ManagementAccount != "" && !targetIDRe.MatchString(org.ManagementAccount) {
		diags = diags.Append(Errorf(a.Expr.Range(), "Invalid management_account", "%q is not an account id (1-64 letters, digits, '.', '_' or '-').", org.ManagementAccount))
	}
	for _, ob := range content.Blocks {
		ou, d := org.loadOU(ob, nil)
		diags = append(diags, d...)
		if ou != nil {
			org.Roots = append(org.Roots, ou)
		}
	}
	for _, adm := range org.DelegatedAdmins {
		if _, ok := org.Accounts[adm]; !ok && adm != org.ManagementAccount {
			diags = diags.Append(Errorf(content.Attributes["delegated_admins"].Expr.Range(), "Unknown delegated admin",
				"Delegated admin %q is not an account of the organization; delegated admins must be member accounts.", adm))
		}
	}
	return org, diags
}

func (org *Organization) loadOU(b *hcl.Block, parent *OU) (*OU, hcl.Diagnostics) {
	id := b.Labels[0]
	var diags hcl.Diagnostics
	if prev, ok := org.OUs[id]; ok {
		return nil, diags.Append(duplicate("organizational_unit", id, prev.DeclRange, b.DefRange))
	}
	if !targetIDRe.MatchString(id) {
		diags = diags.Append(Errorf(b.LabelRanges[0], "Invalid organizational unit id", "%q is not a valid OU id (1-64 letters, digits, '.', '_' or '-').", id))
	}
	ou := &OU{ID: id, Parent: parent, DeclRange: b.DefRange}
	org.OUs[id] = ou
	content, cdiags := b.Body.Content(ouSchema)
	diags = append(diags, cdiags...)
	addAccount := func(acct string, rng hcl.Range, suspended bool) {
		if !targetIDRe.MatchString(acct) {
			diags = diags.Append(Errorf(rng, "Invalid account id", "%q is not an account id (1-64 letters, digits, '.', '_' or '-').", acct))
			return
		}
		if prev, ok := org.Accounts[acct]; ok {
			diags = diags.Append(Errorf(rng, "Account in two organizational units",
				"Account %q is listed in organizational unit %q and again in %q (at %s); an account belongs to one OU.", acct, prev.OU, id, prev.DeclRange))
			return
		}
		org.Accounts[acct] = &Account{ID: acct, OU: id, Suspended: suspended, DeclRange: rng}
		ou.Accounts = append(ou.Accounts, acct)
	}
	if a := content.Attributes["accounts"]; a != nil {
		var accts []string
		diags = append(diags, stringListAttr(a, &accts)...)
		for _, acct := range accts {
			addAccount(acct, a.Expr.Range(), false)
		}
	}
	for _, cb := range content.Blocks {
		switch cb.Type {
		case "account":
			ac, adiags := cb.Body.Content(accountSchema)
			diags = append(diags, adiags...)
			suspended := false
			diags = append(diags, boolAttr(ac.Attributes["suspended"], &suspended)...)
			addAccount(cb.Labels[0], cb.LabelRanges[0], suspended)
		case "organizational_unit":
			child, d := org.loadOU(cb, ou)
			diags = append(diags, d...)
			if child != nil {
				ou.Children = append(ou.Children, child)
			}
		}
	}
	return ou, diags
}

// accountsUnder lists the accounts of the OUs and all their child OUs, in
// declaration order, each once.
func (org *Organization) accountsUnder(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(ou *OU)
	walk = func(ou *OU) {
		for _, a := range ou.Accounts {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
		for _, c := range ou.Children {
			walk(c)
		}
	}
	for _, id := range ids {
		if ou, ok := org.OUs[id]; ok {
			walk(ou)
		}
	}
	return out
}

// resolveServiceManaged computes the accounts of a SERVICE_MANAGED stack set
// from its OUs, filter type and account list (the RFS seed's rules).
func (ss *StackSet) resolveServiceManaged(org *Organization, ous []string, filter string, listed []string, rngOUs, rngAccounts, rngFilter hcl.Range, haveAccounts bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if org == nil {
		return diags.Append(Errorf(rngOUs, "Missing organization",
			"Stack set %q is SERVICE_MANAGED, but no organization block is defined; add one (organization { management_account = ..., organizational_unit \"ou-...\" { ... } }) to a definitions file.", ss.Name))
	}
	if len(ous) == 0 {
		return diags.Append(Errorf(rngOUs, "Missing organizational_units", "Stack set %q is SERVICE_MANAGED: deployment_targets needs organizational_units = [\"ou-...\"].", ss.Name))
	}
	for _, id := range ous {
		if _, ok := org.OUs[id]; !ok {
			diags = diags.Append(Errorf(rngOUs, "Unknown organizational unit",
				"Stack set %q targets organizational unit %q, which the organization does not define. Defined OUs: %s.", ss.Name, id, joinSorted(org.OUs)))
		}
	}
	switch filter {
	case "NONE":
		if haveAccounts {
			diags = diags.Append(Errorf(rngAccounts, "Accounts not allowed with account_filter_type NONE",
				"Stack set %q: with account_filter_type = \"NONE\" (the default) the OUs' accounts are the targets, so leave accounts and accounts_file out; set account_filter_type to INTERSECTION, DIFFERENCE or UNION to use them.", ss.Name))
		}
	case "INTERSECTION", "DIFFERENCE", "UNION":
		if !haveAccounts {
			diags = diags.Append(Errorf(rngFilter, "Missing accounts",
				"Stack set %q: account_filter_type = %q needs exactly one of accounts or accounts_file.", ss.Name, filter))
		}
	default:
		diags = diags.Append(Errorf(rngFilter, "Invalid account_filter_type",
			"Stack set %q: account_filter_type is %q; it must be \"NONE\", \"INTERSECTION\", \"DIFFERENCE\" or \"UNION\".", ss.Name, filter))
	}
	if diags.HasErrors() {
		return diags
	}
	inOUs := map[string]bool{}
	var fromOUs []string
	for _, a := range org.accountsUnder(ous) {
		if a == org.ManagementAccount {
			continue // never a deployment target
		}
		inOUs[a] = true
		fromOUs = append(fromOUs, a)
	}
	listedSet := map[string]bool{}
	for _, a := range listed {
		listedSet[a] = true
		switch {
		case a == org.ManagementAccount:
			diags = diags.Append(Errorf(rngAccounts, "Management account is never a target",
				"Stack set %q lists the management account %q; stack sets never deploy to the organization's management account.", ss.Name, a))
		case org.Accounts[a] == nil:
			diags = diags.Append(Errorf(rngAccounts, "Unknown account",
				"Stack set %q lists account %q, which is not a member of the organization.", ss.Name, a))
		case filter != "UNION" && !inOUs[a]:
			diags = diags.Append(Errorf(rngAccounts, "Account outside the organizational units",
				"Stack set %q: account %q is in organizational unit %q, not in %v; with account_filter_type = %q the listed accounts must belong to the targeted OUs (use UNION to add accounts from elsewhere).",
				ss.Name, a, org.Accounts[a].OU, ous, filter))
		}
	}
	if diags.HasErrors() {
		return diags
	}
	var accts []string
	switch filter {
	case "NONE":
		accts = fromOUs
	case "INTERSECTION":
		for _, a := range fromOUs {
			if listedSet[a] {
				accts = append(accts, a)
			}
		}
	case "DIFFERENCE":
		for _, a := range fromOUs {
			if !listedSet[a] {
				accts = append(accts, a)
			}
		}
	case "UNION":
		accts = fromOUs
		for _, a := range listed {
			if !inOUs[a] {
				accts = append(accts, a)
			}
		}
	}
	ss.Accounts = accts
	ss.org = org
	ss.AccountOU = map[string]string{}
	ss.SuspendedAccounts = map[string]bool{}
	for _, a := range accts {
		ss.AccountOU[a] = org.Accounts[a].OU
		if org.Accounts[a].Suspended {
			ss.SuspendedAccounts[a] = true
		}
	}
	if len(accts) == 0 {
		diags = diags.Append(Errorf(rngOUs, "No target accounts",
			"Stack set %q: organizational units %v with account_filter_type %q select no account (the management account is never a target).", ss.Name, ous, filter))
	}
	return diags
}

func joinSorted[V any](m map[string]V) string {
	keys := SortedKeys(m)
	if len(keys) == 0 {
		return "none"
	}
	return fmt.Sprint(keys)
}

// CallerAccount is the account a stack set's provider calls are made as:
// with call_identity = "DELEGATED_ADMIN" the organization's delegated
// admin (the first of delegated_admins, in declaration order), otherwise ""
// — the target account itself (SELF). A nil stack set (one whose block was
// removed) has no call identity left: "".
func CallerAccount(ss *StackSet) string {
	if ss == nil || ss.CallIdentity != "DELEGATED_ADMIN" || ss.org == nil || len(ss.org.DelegatedAdmins) == 0 {
		return ""
	}
	return ss.org.DelegatedAdmins[0]
}
