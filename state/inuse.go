package state

import "encoding/json"

// customType is the Type of the custom provider's resources; their "type"
// input names the registered resource type they use.
const customType = "custom"

// ResourceTypeInUse reports whether a deployed template uses the
// registered resource type name: whether any recorded custom resource
// (Type "custom") has a "type" input naming it. It is the check
// DeleteResourceType leaves to its caller. Inputs that are not a JSON
// object are skipped. It reads stack set by stack set, not in one
// transaction.
//
// Errors: ErrInvalidKey, ErrCorrupt, ErrClosed (wrapped).
func (s *Store) ResourceTypeInUse(name string) (bool, error) {
	sets, err := s.ListStackSets()
	if err != nil {
		return false, err
	}
	for _, ss := range sets {
		ins, err := s.Instances(ss.ID)
		if err != nil {
			return false, err
		}
		for _, in := range ins {
			res, err := s.Resources(ss.ID, in.Region, in.Account)
			if err != nil {
				return false, err
			}
			for _, r := range res {
				if r.Type != customType {
					continue
				}
				var props struct {
					Type string `json:"type"`
				}
				if json.Unmarshal(r.Inputs, &props) == nil && props.Type == name {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
