package state

import (
	"bytes"
	"fmt"
	"strings"
)

// Check verifies the state's invariants on one consistent snapshot and
// returns one error (wrapping ErrInconsistent) per problem found, or none:
//
//   - every ssname/ entry points at an existing stack set of that name, and
//     every stack set's name points back at it;
//   - every instance and resource belongs to an existing stack set, and
//     every resource to an existing instance;
//   - the opid/ index matches the op/ records both ways, and every opkey/
//     and event belongs to an existing operation;
//   - no resource is in a Pending* status unless an operation of its stack
//     set is RUNNING;
//   - no instance is OPERATION_IN_PROGRESS or WAIT_IN_PROGRESS unless an
//     operation of its stack set is RUNNING or QUEUED;
//   - every record decodes, agrees with its key, and every key has a known
//     prefix.
//
// If the state cannot be read at all, the only error returned says so.
func (s *Store) Check() []error {
	c := &checker{
		stackSets: map[string]string{},
		opOwner:   map[string]string{},
		running:   map[string]bool{},
		active:    map[string]bool{},
		instances: map[string]bool{},
	}
	err := s.view(func(txn kvTxn) error {
		steps := []checkStep{
			{prefixStackSet, c.checkStackSet},
			{prefixStackSetName, c.checkStackSetName},
			{prefixOperation, c.checkOperation},
			{prefixOperationID, c.checkOperationID},
			{prefixOperationKey, c.checkOperationKey},
			{prefixEvent, c.checkEvent},
			{prefixInstance, c.checkInstance},
			{prefixResource, c.checkResource},
			{prefixResourceType, c.checkResourceType},
			{prefixIdem, c.checkOpaque},
			{prefixMeta, c.checkOpaque},
		}
		for _, st := range steps {
			err := scan(txn, []byte(st.prefix), func(key, val []byte) error {
				st.fn(txn, key, val)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return c.unknownKeys(txn, steps)
	})
	if err != nil {
		return []error{fmt.Errorf("check state: %w", err)}
	}
	return c.problems
}

// checkStep checks every record with one prefix.
type checkStep struct {
	prefix string
	fn     func(txn kvTxn, key, val []byte)
}

// checker accumulates what Check has seen and the problems it found.
type checker struct {
	problems  []error
	stackSets map[string]string // id → name
	opOwner   map[string]string // op id → stack set id, from op/ keys
	running   map[string]bool   // stack set id → an operation is RUNNING
	active    map[string]bool   // stack set id → an operation is RUNNING or QUEUED
	instances map[string]bool   // "<ss>/<region>/<account>"
}

func (c *checker) add(key []byte, format string, args ...any) {
	c.problems = append(c.problems, fmt.Errorf("%w: %q: %s", ErrInconsistent, key, fmt.Sprintf(format, args...)))
}

func (c *checker) malformed(key []byte) { c.add(key, "malformed key") }

// record decodes val into v, recording a problem if it cannot.
func (c *checker) record(key, val []byte, v any) bool {
	if err := decode(val, v); err != nil {
		c.add(key, "%v", err)
		return false
	}
	return true
}

func (c *checker) checkStackSet(txn kvTxn, key, val []byte) {
	id := string(key[len(prefixStackSet):])
	var ss StackSet
	if !c.record(key, val, &ss) {
		c.stackSets[id] = ""
		return
	}
	c.stackSets[id] = ss.Name
	if ss.ID != id {
		c.add(key, "record has id %q", ss.ID)
	}
	owner, err := getRaw(txn, stackSetNameKey(ss.Name))
	switch {
	case err != nil:
		c.add(key, "name %q has no ssname/ entry", ss.Name)
	case string(owner) != id:
		c.add(key, "name %q is indexed to stack set %s", ss.Name, owner)
	}
}

func (c *checker) checkStackSetName(_ kvTxn, key, val []byte) {
	name := string(key[len(prefixStackSetName):])
	id := string(val)
	got, ok := c.stackSets[id]
	switch {
	case !ok:
		c.add(key, "points at missing stack set %s", id)
	case got != name:
		c.add(key, "points at stack set %s named %q", id, got)
	}
}

func (c *checker) checkOperation(txn kvTxn, key, val []byte) {
	p, ok := splitKey(key, prefixOperation, 2)
	if !ok {
		c.malformed(key)
		return
	}
	ssID, opID := p[0], p[1]
	c.opOwner[opID] = ssID
	var op Operation
	if c.record(key, val, &op) {
		if op.ID != opID || op.StackSetID != ssID {
			c.add(key, "record has stack set %q and id %q", op.StackSetID, op.ID)
		}
		switch op.Status {
		case OperationRunning:
			c.running[ssID] = true
			c.active[ssID] = true
		case OperationQueued:
			c.active[ssID] = true
		}
	}
	owner, err := getRaw(txn, operationIDKey(opID))
	switch {
	case err != nil:
		c.add(key, "no opid/ index entry")
	case string(owner) != ssID:
		c.add(key, "opid/ index points at stack set %s", owner)
	}
}

func (c *checker) checkOperationID(_ kvTxn, key, val []byte) {
	opID := string(key[len(prefixOperationID):])
	if owner, ok := c.opOwner[opID]; !ok || owner != string(val) {
		c.add(key, "points at missing operation op/%s/%s", val, opID)
	}
}

func (c *checker) checkOperationKey(txn kvTxn, key, val []byte) {
	p, ok := splitKey(key, prefixOperationKey, 2)
	if !ok {
		c.malformed(key)
		return
	}
	if owner, ok := c.opOwner[string(val)]; !ok || owner != p[0] {
		c.add(key, "points at missing operation op/%s/%s", p[0], val)
		return
	}
	op, err := getRecord[Operation](txn, operationKey(p[0], string(val)))
	if err == nil && op.Revision != p[1] && op.Claim != p[1] {
		c.add(key, "points at operation %s of revision %q", val, op.Revision)
	}
}

func (c *checker) checkEvent(_ kvTxn, key, val []byte) {
	opID, seq, ok := parseEventKey(key)
	if !ok || strings.Contains(opID, "/") {
		c.malformed(key)
		return
	}
	if _, ok := c.opOwner[opID]; !ok {
		c.add(key, "event of missing operation %s", opID)
	}
	var ev Event
	if c.record(key, val, &ev) && (ev.OperationID != opID || ev.Seq != seq) {
		c.add(key, "record has operation %q and seq %d", ev.OperationID, ev.Seq)
	}
}

func (c *checker) checkInstance(_ kvTxn, key, val []byte) {
	p, ok := splitKey(key, prefixInstance, 3)
	if !ok || strings.Contains(p[2], "/") {
		c.malformed(key)
		return
	}
	ssID, region, account := p[0], p[1], p[2]
	c.instances[ssID+"/"+region+"/"+account] = true
	if _, ok := c.stackSets[ssID]; !ok {
		c.add(key, "instance of missing stack set %s", ssID)
	}
	var in Instance
	if !c.record(key, val, &in) {
		return
	}
	if in.StackSetID != ssID || in.Region != region || in.Account != account {
		c.add(key, "record has stack set %q, region %q, account %q", in.StackSetID, in.Region, in.Account)
	}
	if (in.Status == InstanceOperationInProgress || in.Status == InstanceWaitInProgress) && !c.active[ssID] {
		c.add(key, "instance is %s but no operation of stack set %s is RUNNING or QUEUED", in.Status, ssID)
	}
}

func (c *checker) checkResource(_ kvTxn, key, val []byte) {
	p, ok := splitKey(key, prefixResource, 4)
	if !ok {
		c.malformed(key)
		return
	}
	ssID, region, account, addr := p[0], p[1], p[2], p[3]
	if _, ok := c.stackSets[ssID]; !ok {
		c.add(key, "resource of missing stack set %s", ssID)
	}
	if !c.instances[ssID+"/"+region+"/"+account] {
		c.add(key, "resource of missing instance %s/%s", region, account)
	}
	var r Resource
	if !c.record(key, val, &r) {
		return
	}
	if r.Address != addr {
		c.add(key, "record has address %q", r.Address)
	}
	pending := r.Status == ResourcePendingCreate || r.Status == ResourcePendingUpdate || r.Status == ResourcePendingDelete
	if pending && !c.running[ssID] {
		c.add(key, "resource is %s but no operation of stack set %s is RUNNING", r.Status, ssID)
	}
}

func (c *checker) checkResourceType(_ kvTxn, key, val []byte) {
	var rt ResourceType
	if c.record(key, val, &rt) && rt.Name != string(key[len(prefixResourceType):]) {
		c.add(key, "record has name %q", rt.Name)
	}
}

func (c *checker) checkOpaque(_ kvTxn, key, val []byte) {
	if _, err := decodeRaw(val); err != nil {
		c.add(key, "%v", err)
	}
}

// unknownKeys records every key that has none of the known prefixes.
func (c *checker) unknownKeys(txn kvTxn, steps []checkStep) error {
	return txn.Scan(nil, true, func(k, _ []byte) error {
		for _, st := range steps {
			if bytes.HasPrefix(k, []byte(st.prefix)) {
				return nil
			}
		}
		c.add(k, "unknown key prefix")
		return nil
	})
}
