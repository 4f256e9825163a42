package engine

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

// caller is the Caller of the instance's provider Target.
func (in *Instance) caller() string {
	if in.StackSet != nil {
		return CallerAccount(in.StackSet)
	}
	return in.Caller
}
